"""MediaWiki's own rendering of a revision (`action=parse`), read as a reader sees it.

MediaWiki renders every template right, so an article's HTML needs no knowledge of templates:
its sections' paragraphs and list items, the bold names of the lead's first paragraph and the
infobox's rows (label -> value) come back as `Rendered` text with the links where they sit,
with the same marks the wikitext renderer leaves (`ITEM_BREAK` between the lines of a value,
`FOREIGN_OPEN`... around text in another language). What a reader does not read as text is
left out: reference marks, pronunciations, hidden spans, edit links, coordinates, tables
outside the infobox, and what a browser shows in place of something else (the fallback text of
an `<iframe>` or `<object>`, `<noscript>`). Both the current markup (`div.mw-heading`,
`infobox-label`) and the older one (`span.mw-headline`, `th scope=row`) are read, inside
`div.mw-parser-output` wherever it sits (or the elements wrapping the page without it), with
Parsoid's `<section>`s read through. A page nested deeper than any MediaWiki renders, or cut
short by the parser's limits, is `UnreadableHtml`. The only module that parses HTML (lxml).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote, urlsplit

import lxml.etree
import lxml.html

from cuqa_builder.errors import CuqaError
from cuqa_builder.wiki.rendered import (
    FOREIGN_CLOSE,
    FOREIGN_OPEN,
    ITEM_BREAK,
    Rendered,
    Section,
    TextBuilder,
    superscript,
)
from cuqa_builder.wiki.wikitext import article_title

_HEADINGS = frozenset({"h2", "h3", "h4", "h5", "h6"})
_LISTS = frozenset({"ul", "ol", "dl"})
_BLOCKS = frozenset({"p", "div", "li", "dd", "dt", "tr", "ul", "ol", "dl", "blockquote"})
# Elements whose text is never the page's: code, media, forms and what a browser shows when it
# cannot show them (an <iframe>'s or <object>'s fallback text, <noscript>).
_UNREAD_TAGS = frozenset({
    "style", "script", "link", "meta", "noscript", "img", "math", "iframe", "object", "embed",
    "applet", "frame", "frameset", "noframes", "noembed", "template", "svg", "canvas", "video",
    "audio", "map", "button", "select", "textarea", "input", "head", "title",
})
_INSIDE_UNREAD = " or ".join(f"self::{tag}" for tag in sorted(_UNREAD_TAGS))
_INFOBOXES = lxml.etree.XPath(
    f".//table[contains(@class, 'infobox')][not(ancestor::*[{_INSIDE_UNREAD}])]")
# Elements that only wrap the page when it lacks MediaWiki's `mw-parser-output`.
_WRAPPERS = frozenset({"div", "section", "article", "main", "body", "html"})
# Far deeper than MediaWiki nests a page (and below lxml's own limit, past which it drops the
# rest of the page): deeper is no rendering of an article.
_MAX_DEPTH = 128
_TOO_DEEP = lxml.etree.XPath(f"boolean({'/'.join(['*'] * _MAX_DEPTH)})")
# Classes of what a reader skips or never sees as text (pronunciations included: an aside's
# brackets then hold nothing and go too).
_UNREAD_CLASSES = frozenset({
    "reference", "mw-ref", "IPA", "noexcerpt", "noprint", "metadata", "mw-editsection",
    "haudio", "error", "mw-empty-elt", "sortkey", "mw-cite-backlink", "geo-inline-hidden",
    "geo-nondefault", "geo-multi-punct", "geo-default", "Z3988", "reflist", "navbox",
    "autonumber",
})
# Namespaces whose links are not article links; a Help: link is a pronunciation key.
_NOT_ARTICLES = frozenset({
    "file", "image", "media", "category", "special", "wikipedia", "wp", "template", "portal",
    "talk", "user", "draft", "module", "mediawiki",
})
_HIDDEN = re.compile(r"display\s*:\s*none")
_LABEL_BULLET = re.compile(r"^[\s•·‣◦-]+")


class UnreadableHtml(CuqaError, ValueError):
    """A rendering that cannot be read soundly (the message says why): read the wikitext."""


@dataclass
class HtmlArticle:
    """What an article's rendered HTML says, in page order."""

    sections: list[Section] = field(default_factory=list)  # the lead first
    bold: list[str] = field(default_factory=list)  # bold text of the lead's first paragraph
    rows: list[tuple[str, Rendered]] = field(default_factory=list)  # infobox: label -> value


def read_html(html: str) -> HtmlArticle:
    """Sections, lead bold names and infobox rows of `action=parse` HTML (`parse.text`).
    Raises UnreadableHtml when the page is nested too deep or too large for the parser."""
    article = HtmlArticle(sections=[Section("", 0)])
    infobox = None
    for element in _blocks(_content(_parse(html))):
        section = article.sections[-1]
        if section.level == 0 and infobox is None and (infobox := _infobox(element)) is not None:
            continue  # an infobox may carry a class read nowhere else ("haudio" for an album)
        if _unread(element):
            continue
        found = _heading(element)
        if found is not None:
            article.sections.append(found)
        elif element.tag == "p":
            section.lines.append(_render(element))
            if section.level == 0 and not article.bold and section.lines[-1].text:
                article.bold = _bold(element)
        elif element.tag in _LISTS:
            section.lines += [_render(item) for item in element
                              if item.tag in ("li", "dd", "dt")]
    article.rows = _rows(infobox) if infobox is not None else []
    return article


def _parse(html: str) -> lxml.html.HtmlElement:
    """The page's elements under one `<div>`, all of them: lxml reads any text as HTML, as
    browsers do, but past its limits (nesting, text size) it silently drops the rest."""
    parser = lxml.html.HTMLParser()
    page = lxml.html.fragment_fromstring(html, create_parent="div", parser=parser)
    limits = [entry.message.strip() for entry in parser.error_log
              if entry.type_name == "ERR_RESOURCE_LIMIT"]
    if limits:
        raise UnreadableHtml(f"is more than the HTML parser reads ({limits[0]})")
    if _TOO_DEEP(page):
        raise UnreadableHtml(f"nests elements more than {_MAX_DEPTH} deep")
    return page


def _render(element: lxml.html.HtmlElement) -> Rendered:
    """An element's text as a reader sees it, with its article links."""
    walker = _Walker()
    walker.element(element)
    return Rendered(walker.raw(), walker.spans)


def _content(page: lxml.html.HtmlElement) -> lxml.html.HtmlElement:
    """`div.mw-parser-output` (MediaWiki wraps the page in it since 2017), the outermost one
    wherever it sits; without it, what the elements wrapping the whole page hold."""
    for output in page.find_class("mw-parser-output"):
        if not any(_unread(element) for element in output.iterancestors()):
            return output
    while len(children := _elements(page)) == 1 and children[0].tag in _WRAPPERS \
            and _heading(children[0]) is None and not _unread(children[0]):
        page = children[0]
    return page


def _elements(parent: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """The child elements (not comments)."""
    return [child for child in parent if isinstance(child.tag, str)]


def _blocks(content: lxml.html.HtmlElement) -> Iterator[lxml.html.HtmlElement]:
    """The content's elements in page order, those inside Parsoid's `<section>`s included."""
    for element in _elements(content):
        if element.tag == "section" and not _unread(element):
            yield from _blocks(element)
        else:
            yield element


def _classes(element: lxml.html.HtmlElement) -> set[str]:
    return set((element.get("class") or "").split())


def _unread(element: lxml.html.HtmlElement) -> bool:
    if element.tag in _UNREAD_TAGS or element.get("id") == "coordinates":
        return True
    if _classes(element) & _UNREAD_CLASSES or _HIDDEN.search(element.get("style") or ""):
        return True
    return element.tag == "a" and _namespace(_href_title(element.get("href") or "")) == "help"


def _heading(element: lxml.html.HtmlElement) -> Section | None:
    """The section a heading starts (`<h2>`, or `div.mw-heading` holding it)."""
    if element.tag == "div" and "mw-heading" in _classes(element):
        element = next((child for child in element if child.tag in _HEADINGS), element)
    if element.tag not in _HEADINGS:
        return None
    headline = element.find_class("mw-headline")
    text = _render(headline[0] if headline else element).text.lower()
    return Section(text, int(element.tag[1]))


def _bold(paragraph: lxml.html.HtmlElement) -> list[str]:
    """The bold names of a paragraph (the subject's names), not those inside a foreign name."""
    names = []
    for bold in paragraph.iter("b"):
        if any(_foreign(a) or _unread(a) for a in [bold, *bold.iterancestors()]):
            continue
        text = _render(bold).text
        if any(ch.isascii() and ch.isalpha() for ch in text):
            names.append(text)
    return names


def _infobox(element: lxml.html.HtmlElement) -> lxml.html.HtmlElement | None:
    """The infobox table, if `element` is it or holds it."""
    if element.tag == "table" and "infobox" in (element.get("class") or ""):
        return element
    found = _INFOBOXES(element)
    return found[0] if found else None


def _rows(infobox: lxml.html.HtmlElement) -> list[tuple[str, Rendered]]:
    """(label, value) of each row with a header cell and a data cell."""
    rows = []
    for row in infobox.iter("tr"):
        cells = [cell for cell in row if cell.tag in ("th", "td")]
        if len(cells) < 2 or cells[0].tag != "th" or cells[1].tag != "td":
            continue
        label = _LABEL_BULLET.sub("", _render(cells[0]).text).strip().rstrip(":")
        value = _render(cells[1])
        if label and value.text:
            rows.append((label, value))
    return rows


def _foreign(element: lxml.html.HtmlElement) -> bool:
    """Text in another language than English (`lang="uk"`, `lang="es-Latn"`)."""
    language = (element.get("lang") or "").lower()
    return bool(language) and language != "en" and not language.startswith("en-")


def _namespace(title: str | None) -> str:
    return title.partition(":")[0].lower() if title and ":" in title else ""


def _href_title(href: str) -> str | None:
    """The page an internal link points to (a red link's too), as `article_title` writes it."""
    if "redlink=1" in href or href.startswith("/w/index.php"):
        titles = parse_qs(urlsplit(href).query).get("title")
        return article_title(titles[0]) if titles else None
    if href.startswith("/wiki/"):
        return article_title(unquote(href[len("/wiki/"):]))
    return None


def _link_title(anchor: lxml.html.HtmlElement) -> str | None:
    """The article an `<a>` links to; None for other namespaces, other wikis and the web."""
    if "extiw" in _classes(anchor) or "external" in _classes(anchor):
        return None
    title = _href_title(anchor.get("href") or "")
    return None if _namespace(title) in _NOT_ARTICLES else title


class _Walker(TextBuilder):
    """Emits an element's text in document order, recording where each article link sits."""

    def element(self, element: lxml.html.HtmlElement) -> None:
        """The element's own text and children (its tail is its parent's to emit)."""
        if not isinstance(element.tag, str) or _unread(element):
            return
        if element.tag == "br":
            self.emit(ITEM_BREAK)
            return
        if element.tag == "sup":
            self.emit(superscript(element.text_content()))
            return
        if element.tag in _BLOCKS:
            self.emit(ITEM_BREAK)
        start, first_part = self.length, len(self.parts)
        foreign = _foreign(element)
        if foreign:
            self.emit(FOREIGN_OPEN)
        self.emit(element.text or "")
        for child in element:
            self.element(child)
            self.emit(child.tail or "")
        if foreign:
            self.emit(FOREIGN_CLOSE)
        if element.tag == "a":
            self.record_link(_link_title(element), start, first_part)

