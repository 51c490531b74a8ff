"""Wikitext rendered to plain text the way a reader sees it: links by their label (plus the link
trail), inline templates rendered or dropped (`inline_templates.py`), citations and comments
gone. The rendering keeps where each link sits in the text, so a parser can cut a date prefix off
a line and keep only the links after it, or tell a bullet made only of links (a topic) from one
with prose (an event). An entity article renders as MediaWiki shows it (`article=True`).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from mwparserfromhell.nodes import (
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.records.events import Link
from cuqa_builder.wiki.article_templates import article_template
from cuqa_builder.wiki.inline_templates import inline_template
from cuqa_builder.wiki.rendered import (
    CITATION_MARK,
    ITEM_BREAK,
    LinkSpan,
    Rendered,
    TextBuilder,
    superscript,
)
from cuqa_builder.wiki.wikitext import (
    PARENTHETICAL,
    article_title,
    list_marker,
    positional,
    template_name,
)

# MediaWiki (English) glues lowercase letters that follow a link onto its label: [[bus]]es.
_LINK_TRAIL = re.compile(r"^[a-z]+")
_HIDDEN_NAMESPACES = frozenset({"file", "image", "media", "category"})
# Links to other wikis (`[[wikt:..]]`, inline `[[:fr:..]]`) show their label but name no English
# Wikipedia article; language codes are lower-case, so "Ys: The Vanished Omens" is not one.
_OTHER_PROJECTS = frozenset({
    "wikt", "wiktionary", "commons", "d", "wikidata", "s", "wikisource", "q", "wikiquote", "n",
    "wikinews", "b", "wikibooks", "v", "wikiversity", "voy", "wikivoyage", "species", "meta", "mw",
})
_LANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z]+)?$")
_DROPPED_TAGS = frozenset({"references", "gallery", "templatestyles", "imagemap", "timeline"})
_BREAK_TAGS = frozenset({"br", "hr"})


class NamedRefs:
    """Citation URLs of a page's `<ref name=..>..</ref>`, for its reuses `<ref name=../>`.

    Built on first use: walking every tag of a page is slow, and most pages never reuse a ref.
    """

    def __init__(self, code: Wikicode | None = None) -> None:
        self._code = code
        self._urls: dict[str, list[str]] | None = None

    def urls(self, name: str) -> list[str]:
        if self._urls is None:
            self._urls = self._collect()
        return self._urls.get(name, [])

    def _collect(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        if self._code is None:
            return found
        for tag in self._code.ifilter_tags(matches=_is_ref):
            name = _ref_name(tag)
            if name and tag.contents is not None and str(tag.contents).strip():
                found.setdefault(name, render(tag.contents).citations)
        return found


def _is_ref(node: Tag) -> bool:
    return str(node.tag).strip().lower() == "ref"


def _ref_name(tag: Tag) -> str | None:
    return str(tag.get("name").value).strip() if tag.has("name") else None


def render(
    nodes: Iterable[Node] | Wikicode, refs: NamedRefs | None = None, *, article: bool = False
) -> Rendered:
    """Plain text, links and citations; `refs` resolves reused named references. `article`
    renders an entity article's prose and infobox values as a reader sees them (see
    `_ArticleRenderer`); news lines keep the rendering their event ids were made from."""
    renderer = (_ArticleRenderer if article else _Renderer)(refs or NamedRefs())
    renderer.nodes(nodes.nodes if isinstance(nodes, Wikicode) else nodes)
    return Rendered(renderer.raw(), renderer.spans, renderer.citations)


def plain_text(nodes: Iterable[Node] | Wikicode) -> str:
    return render(nodes).text


class _Renderer(TextBuilder):
    def __init__(self, refs: NamedRefs) -> None:
        super().__init__()
        self.refs = refs
        self.citations: list[str] = []

    def nodes(self, nodes: Iterable[Node]) -> None:
        last_was_link = False
        for node in nodes:
            if last_was_link and isinstance(node, Text):
                self._text_after_link(node.value)
            else:
                self.node(node)
            last_was_link = isinstance(node, Wikilink) and bool(self.spans) and (
                self.spans[-1].end == self.length
            )

    def code(self, code: Wikicode | None) -> None:
        if code is not None:
            self.nodes(code.nodes)

    def node(self, node: Node) -> None:
        if isinstance(node, Text):
            self.emit(node.value)
        elif isinstance(node, Wikilink):
            self.wikilink(node)
        elif isinstance(node, Template):
            self.template(node)
        elif isinstance(node, Tag):
            self.tag(node)
        elif isinstance(node, HTMLEntity):
            self.emit(node.normalize())
        elif isinstance(node, ExternalLink):
            self.cite(str(node.url))
            self.emit(CITATION_MARK)
        elif isinstance(node, Heading):
            self.code(node.title)
        # Comments, template arguments ({{{1}}}) and anything else render to nothing.

    def _text_after_link(self, text: str) -> None:
        trail = _LINK_TRAIL.match(text)
        if trail:
            last = self.spans[-1]
            word = trail.group()
            linked = Link(title=last.link.title, text=last.link.text + word)
            self.spans[-1] = LinkSpan(last.start, last.end + len(word), linked)
        self.emit(text)

    def cite(self, url: str) -> None:
        url = url.strip()
        if url and url not in self.citations:
            self.citations.append(url)

    def link(self, title: str | None, label_nodes: Iterable[Node] | str) -> None:
        """Emit a label; when `title` names an article, record the link over it."""
        start, first_part = self.length, len(self.parts)
        if isinstance(label_nodes, str):
            self.emit(label_nodes)
        else:
            self.nodes(label_nodes)
        self.record_link(title, start, first_part)

    def wikilink(self, node: Wikilink) -> None:
        target = str(node.title)
        if "<!--" in target:
            target = node.title.strip_code()
        if "&" in target:
            target = html.unescape(target)
        inline = target.lstrip().startswith(":")
        target = target.strip().lstrip(":")
        title: str | None = None
        page = target
        if ":" in target:
            namespace, _, page = (part.strip() for part in target.partition(":"))
            language = bool(_LANGUAGE.match(namespace))
            if not inline and (namespace.lower() in _HIDDEN_NAMESPACES or language):
                return  # an image, a category tag or an interlanguage link: not in the sentence
            if not (namespace.lower() in _OTHER_PROJECTS or language):
                title, page = article_title(target), target
        else:
            title = article_title(target)
        label = node.text
        if label is None:
            self.link(title, target)
        elif not label.nodes:  # pipe trick: [[Paris (band)|]] shows "Paris"
            self.link(title, PARENTHETICAL.sub("", page))
        else:
            self.link(title, label.nodes)

    def tag(self, node: Tag) -> None:
        name = str(node.tag).strip().lower()
        if name == "ref":
            self._ref(node)
        elif name in _BREAK_TAGS:
            self.emit(" ")
        elif name not in _DROPPED_TAGS and node.contents is not None:
            self.code(node.contents)

    def _ref(self, node: Tag) -> None:
        """A reference adds its URLs to the citations; its text is not part of the sentence."""
        if node.contents is not None and str(node.contents).strip():
            inner = _Renderer(self.refs)
            inner.code(node.contents)
            urls = inner.citations
        else:
            urls = self.refs.urls(_ref_name(node) or "")
        for url in urls:
            self.cite(url)
        self.emit(CITATION_MARK)

    def template(self, node: Template) -> None:
        handler = inline_template(template_name(node))
        if handler is not None:
            handler(self, node)
        # Other templates (maintenance tags, flag icons, navigation) are dropped.

    def positional(self, node: Template, index: int) -> None:
        value = positional(node, index)
        if value is not None:
            self.code(value)



class _ArticleRenderer(_Renderer):
    """An entity article's prose and infobox values as MediaWiki shows them, for a passage: the
    items of list templates and `<br>` lines apart (`ITEM_BREAK`), names in other languages and
    pronunciations marked (`FOREIGN_OPEN`...; a passage drops them with their brackets), dates,
    conversions and "as of" written out, superscript notes (`Santiago<sup>a</sup>`), tables and
    magic words (`__TOC__`) left out, an external link shown by its title."""

    def node(self, node: Node) -> None:
        if isinstance(node, Text) and "__" in node.value:
            self.emit(_MAGIC_WORD.sub("", node.value))
        elif isinstance(node, ExternalLink) and node.title is not None and not (
            _BRACKETED.match(str(node.title).strip())
        ):
            self.code(node.title)  # [https://... the Act]: its title is part of the sentence
        else:
            super().node(node)

    def tag(self, node: Tag) -> None:
        name = str(node.tag).strip().lower()
        if list_marker(node) or name in _BREAK_TAGS:
            self.emit(ITEM_BREAK)
        elif name == "sup":
            self.emit(superscript(node.contents.strip_code() if node.contents else ""))
        elif name not in _ARTICLE_DROPPED_TAGS:
            super().tag(node)

    def template(self, node: Template) -> None:
        handler = article_template(template_name(node))
        if handler is not None:
            handler(self, node)
        else:
            super().template(node)


_MAGIC_WORD = re.compile(r"__[A-Z]{2,}__")
_BRACKETED = re.compile(r"^\(.*\)$", re.DOTALL)  # `[URL (Reuters)]`: a citation, not text
_ARTICLE_DROPPED_TAGS = frozenset({"table", "mapframe", "maplink", "graph", "score", "math"})
