"""An entity article as a reader sees it: the lead, its sentences and links, the subject's names
and its infobox (kind and relations).

Read from MediaWiki's own rendering of the revision when the snapshot holds it (`NAME.html`:
every template rendered right), else from the wikitext (hand-written snapshots, older runs),
rendered the way MediaWiki would for the shapes that matter: list templates, pronunciations and
foreign names (left out with their brackets), dashes, dates, "as of", conversions, notes.
Either way the page is parsed once. The rendering improves on the wikitext but is never a
condition for having the article: one that cannot be read soundly (nested past any real page,
or with no lead where the wikitext has one) is set aside with a warning naming the article, and
the wikitext read instead (`ArticleText.rendering_unread` says why). Sections whose text says
nothing about the subject (references, external links...) are left out. Sentences are split at
a full stop, question or exclamation mark followed by a capital: good enough to quote one as
evidence, not a linguistic sentence splitter.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from mwparserfromhell.nodes import Heading, Node, Tag, Wikilink

from cuqa_builder.grounding.infobox import (
    Relation,
    html_relations,
    infobox_kind,
    infobox_template,
    wikitext_relations,
)
from cuqa_builder.records.events import Link
from cuqa_builder.records.pages import Page
from cuqa_builder.text import contains_answer
from cuqa_builder.wiki.html import UnreadableHtml, read_html
from cuqa_builder.wiki.render import render
from cuqa_builder.wiki.rendered import Section, drop_asides, tidy_separators
from cuqa_builder.wiki.wikitext import PARENTHETICAL, iter_lines, parse_wikitext

log = logging.getLogger(__name__)

_SKIPPED_SECTIONS = frozenset({
    "references", "external links", "notes", "further reading", "see also", "bibliography",
    "sources", "citations", "footnotes",
})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(]?[A-Z0-9])")
_ABBREVIATION_END = re.compile(
    r"\b(?:[A-Z]|Mr|Mrs|Ms|Dr|St|Jr|Sr|Gen|Col|Lt|No|U\.S|U\.K|Mt|Ft|Prof|Rev|Hon|Sgt|Capt|Gov"
    r"|Sen|Rep|Fr|c|ca|tr|lit|approx|vs|cf|e\.g|i\.e)\.$"
)
_PASSAGE_SENTENCES = 8  # a lead longer than this is cut: a passage, not a whole article
# A line that only labels what a template should have filled in ("Population:").
_LABEL_LINE = re.compile(r"^[\w ,'’()-]{1,40}:$")
_THE_BEFORE = re.compile(r"\b[Tt]he\s+$")
_THE = re.compile(r"^the\s+", re.IGNORECASE)
_INLINE_TAGS = frozenset({"i", "span", "small", "big", "u", "s", "abbr", "font"})


@dataclass(frozen=True)
class ArticleText:
    title: str
    lead: list[str]  # sentences of the lead section
    sentences: list[str]  # every sentence, the lead's first
    lead_links: list[Link]
    links: list[Link]
    kind: str | None = None  # what its infobox says it is: "island", "country", "person"...
    relations: list[Relation] = field(default_factory=list)  # its infobox's values
    # the subject's names in bold in the lead's first paragraph ('''United Kingdom of Great
    # Britain and Northern Ireland''', '''UK'''): answer aliases
    names: list[str] = field(default_factory=list)
    # the names (case-folded) that English writes with "the", as the lead does: "The United
    # Kingdom ... is", "the Netherlands"
    definite: frozenset[str] = frozenset()
    # why MediaWiki's rendering beside the wikitext was not read (then the wikitext was)
    rendering_unread: str | None = None

    @property
    def passage(self) -> str:
        """The lead as a known passage (its first sentences)."""
        return " ".join(self.lead[:_PASSAGE_SENTENCES])

    def as_written(self, name: str) -> str:
        """`name` with "the" when the article writes it so: "the United Kingdom"."""
        return with_article(name, self.definite)

    def link_labels(self, titles: Iterable[str]) -> list[str]:
        """How the article words its links to these titles (`[[Warsaw|the capital]]`)."""
        wanted = {t.casefold() for t in titles if t}
        return list(dict.fromkeys(link.text for link in self.links
                                  if link.title.casefold() in wanted))

    def sentences_naming(self, names: Sequence[str], limit: int = 2) -> list[str]:
        """Up to `limit` sentences that name any of `names` (whole words, normalised)."""
        found = [s for s in self.sentences if any(contains_answer(s, n) for n in names if n)]
        return found[:limit]


def with_article(name: str, definite: frozenset[str]) -> str:
    """`name`, with "the" before it when it is one of the `definite` names."""
    return f"the {name}" if name.casefold() in definite else name


def split_sentences(text: str) -> list[str]:
    pieces = _SENTENCE_END.split(text)
    sentences: list[str] = []
    for piece in pieces:
        if sentences and _ABBREVIATION_END.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"  # "U.S. President" is one sentence
        else:
            sentences.append(piece)
    return [s.strip() for s in sentences if s.strip()]


def article_text(page: Page) -> ArticleText:
    """The readable text of an article page (parsed once per title and text)."""
    return _parse(page.meta.title, page.wikitext, page.html)


# The first section heading: the infobox is in the lead, above it.
_FIRST_HEADING = re.compile(r"^==[^=]", re.MULTILINE)


@lru_cache(maxsize=256)
def _parse(title: str, wikitext: str, html: str | None) -> ArticleText:
    if html is None:
        return _from_wikitext(title, wikitext)
    try:
        text = _from_html(title, wikitext, html)
    except UnreadableHtml as exc:
        return _instead_of_rendering(_from_wikitext(title, wikitext), str(exc))
    if text.lead:
        return text
    # a rendering markup this reader does not know, or not the article's
    fallback = _from_wikitext(title, wikitext)
    return _instead_of_rendering(fallback, "gives no lead, its wikitext does") if fallback.lead \
        else text


def _instead_of_rendering(text: ArticleText, why: str) -> ArticleText:
    log.warning("article %s: MediaWiki's rendering %s: read from its wikitext", text.title, why)
    return replace(text, rendering_unread=why)


def _from_html(title: str, wikitext: str, html: str) -> ArticleText:
    rendered = read_html(html)
    # The rendering takes its infobox parameters from the wikitext's lead: only it is parsed
    # (a whole article is five times the work, for nothing more).
    heading = _FIRST_HEADING.search(wikitext)
    template = infobox_template(parse_wikitext(wikitext[:heading.start()] if heading
                                              else wikitext))
    return _assemble(title, rendered.sections, rendered.bold, infobox_kind(template),
                     html_relations(rendered.rows, template))


def _from_wikitext(title: str, wikitext: str) -> ArticleText:
    code = parse_wikitext(wikitext)
    template = infobox_template(code)
    sections, bold = _rendered_sections(code.nodes)
    return _assemble(title, sections, bold, infobox_kind(template), wikitext_relations(template))


def _rendered_sections(nodes: list[Node]) -> tuple[list[Section], list[str]]:
    """The page's sections rendered line by line, and the bold names of its first paragraph."""
    sections: list[Section] = []
    bold: list[str] | None = None
    for heading, level, section_nodes in _sections(nodes):
        section = Section(heading, level)
        for line in iter_lines(section_nodes):
            section.lines.append(render(line.nodes, article=True))
            if level == 0 and bold is None and section.lines[-1].text:
                bold = _bold(line.nodes)
        sections.append(section)
    return sections, bold or []


def _assemble(title: str, sections: Sequence[Section], bold: list[str], kind: str | None,
              relations: list[Relation]) -> ArticleText:
    lead: list[str] = []
    lead_links: list[Link] = []
    sentences: list[str] = []
    links: list[Link] = []
    for section in _read_sections(sections):
        found: list[str] = []
        found_links: list[Link] = []
        for line in section.lines:
            kept = drop_asides(line)
            text = tidy_separators(kept.text)
            if text and not _LABEL_LINE.match(text):
                found += split_sentences(text)
                found_links += kept.links
        if section.level == 0:
            lead, lead_links = found, found_links
        sentences += found
        links += found_links
    names = list(dict.fromkeys(bold))
    return ArticleText(title=title, lead=lead, sentences=sentences, lead_links=lead_links,
                       links=links, kind=kind, relations=relations, names=names,
                       definite=_definite(" ".join(lead[:2]), [title, *names]))


def _read_sections(sections: Iterable[Section]) -> Iterable[Section]:
    """The sections that say something about the subject: not references, external links...
    nor the subsections of those ("Further reading" > "Articles")."""
    skipping_below: int | None = None
    for section in sections:
        if skipping_below is not None and section.level > skipping_below:
            continue
        skipping_below = section.level if section.heading in _SKIPPED_SECTIONS else None
        if skipping_below is None:
            yield section


def _sections(nodes: list[Node]) -> Iterable[tuple[str, int, list[Node]]]:
    """(heading, level, nodes) in page order; the lead has the heading "" and level 0."""
    heading, level, current = "", 0, []
    for node in nodes:
        if isinstance(node, Heading):
            yield heading, level, current
            heading, level, current = str(node.title.strip_code()).strip().lower(), node.level, []
        else:
            current.append(node)
    yield heading, level, current


def _bold(nodes: Iterable[Node]) -> list[str]:
    """The bold text of some wikitext ('''UK'''), inside links and inline formatting but not
    inside templates (a foreign name's bold is not an English name) or tables."""
    names: list[str] = []
    for node in nodes:
        if isinstance(node, Tag) and str(node.tag) == "b" and node.contents is not None:
            text = render(node.contents.nodes, article=True).text
            if any(ch.isascii() and ch.isalpha() for ch in text):
                names.append(text)
        elif isinstance(node, Tag) and str(node.tag) in _INLINE_TAGS and node.contents:
            names += _bold(node.contents.nodes)
        elif isinstance(node, Wikilink) and node.text is not None:
            names += _bold(node.text.nodes)
    return names


def _definite(lead: str, names: Sequence[str]) -> frozenset[str]:
    """The names the lead writes with "the" where it first names them ("The United Kingdom of
    Great Britain and Northern Ireland, commonly known as the United Kingdom (UK)"), with the
    abbreviations it gives them there ("UK"), case-folded."""
    definite: set[str] = set()
    bare = (_THE.sub("", PARENTHETICAL.sub("", name)) for name in names)
    for name in dict.fromkeys(n for n in bare if n):
        found = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", lead)
        if found is None or not _THE_BEFORE.search(lead[:found.start()]):
            continue
        definite.add(name.casefold())
        abbreviated = rf"\b[Tt]he\s+{re.escape(name)}\s*\(([^()\s,;]{{2,10}})\)"
        definite.update(found.group(1).casefold() for found in re.finditer(abbreviated, lead))
    return frozenset(definite)
