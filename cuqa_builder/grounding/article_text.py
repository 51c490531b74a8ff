"""An article's wikitext as a reader sees it: the lead, its sentences and its links.

Sections whose text says nothing about the subject (references, external links...) are left out.
Sentences are split at a full stop, question or exclamation mark followed by a capital: good
enough to quote one as evidence, not a linguistic sentence splitter.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from mwparserfromhell.nodes import Heading, Node

from cuqa_builder.records import Link, Page
from cuqa_builder.text import contains_answer
from cuqa_builder.wiki.wikitext import iter_lines, parse_wikitext, render

_SKIPPED_SECTIONS = frozenset({
    "references", "external links", "notes", "further reading", "see also", "bibliography",
    "sources", "citations", "footnotes",
})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(]?[A-Z0-9])")
_ABBREVIATION_END = re.compile(r"\b(?:[A-Z]|Mr|Mrs|Ms|Dr|St|Jr|Sr|Gen|Col|Lt|No|U\.S|U\.K)\.$")
_PASSAGE_SENTENCES = 8  # a lead longer than this is cut: a passage, not a whole article


@dataclass(frozen=True)
class ArticleText:
    title: str
    lead: list[str]  # sentences of the lead section
    sentences: list[str]  # every sentence, the lead's first
    lead_links: list[Link]
    links: list[Link]
    kind: str | None = None  # what its infobox says it is: "island", "country", "person"...

    @property
    def passage(self) -> str:
        """The lead as a known passage (its first sentences)."""
        return " ".join(self.lead[:_PASSAGE_SENTENCES])

    def link_labels(self, titles: Iterable[str]) -> list[str]:
        """How the article words its links to these titles (`[[Warsaw|the capital]]`)."""
        wanted = {t.casefold() for t in titles if t}
        return list(dict.fromkeys(link.text for link in self.links
                                  if link.title.casefold() in wanted))

    def sentences_naming(self, names: Sequence[str], limit: int = 2) -> list[str]:
        """Up to `limit` sentences that name any of `names` (whole words, normalised)."""
        found = [s for s in self.sentences if any(contains_answer(s, n) for n in names if n)]
        return found[:limit]


def split_sentences(text: str) -> list[str]:
    pieces = _SENTENCE_END.split(text)
    sentences: list[str] = []
    for piece in pieces:
        if sentences and _ABBREVIATION_END.search(sentences[-1]):
            sentences[-1] = f"{sentences[-1]} {piece}"  # "U.S. President" is one sentence
        else:
            sentences.append(piece)
    return [s.strip() for s in sentences if s.strip()]


def _sections(nodes: list[Node]) -> Iterable[tuple[str, list[Node]]]:
    """(heading, nodes) in page order; the lead has the heading ""."""
    heading, current = "", []
    for node in nodes:
        if isinstance(node, Heading):
            yield heading, current
            heading, current = str(node.title.strip_code()).strip().lower(), []
        else:
            current.append(node)
    yield heading, current


def _render_section(nodes: list[Node]) -> tuple[list[str], list[Link]]:
    sentences: list[str] = []
    links: list[Link] = []
    for line in iter_lines(nodes):
        rendered = render(line.nodes)
        if rendered.text:
            sentences += split_sentences(rendered.text)
            links += rendered.links
    return sentences, links


@lru_cache(maxsize=256)
def _parse(title: str, wikitext: str) -> ArticleText:
    lead: list[str] = []
    lead_links: list[Link] = []
    sentences: list[str] = []
    links: list[Link] = []
    for heading, nodes in _sections(parse_wikitext(wikitext).nodes):
        if heading in _SKIPPED_SECTIONS:
            continue
        found, found_links = _render_section(nodes)
        if heading == "":
            lead, lead_links = found, found_links
        sentences += found
        links += found_links
    return ArticleText(title=title, lead=lead, sentences=sentences, lead_links=lead_links,
                       links=links, kind=_infobox_kind(wikitext))


_INFOBOX = re.compile(r"^\s*infobox\s+", re.IGNORECASE)
# Infoboxes of people, whatever their trade ("officeholder", "tennis biography").
_PERSON_INFOBOX = re.compile(r"officeholder|royalty|person|biography|cyclist|golfer|player")


def _infobox_kind(wikitext: str) -> str | None:
    """What the first infobox says the subject is: its settlement type ("island", "province"),
    else its kind ("country", "political party"), "person" for any biography."""
    template = next((t for t in parse_wikitext(wikitext).filter_templates(recursive=False)
                     if _INFOBOX.match(str(t.name))), None)
    if template is None:
        return None
    if template.has("settlement_type"):
        kind = render(template.get("settlement_type").value.nodes).text.strip().lower()
        if kind:
            return kind
    kind = " ".join(_INFOBOX.sub("", str(template.name)).split()).lower()
    return "person" if _PERSON_INFOBOX.search(kind) else kind or None


def article_text(page: Page) -> ArticleText:
    """The readable text of an article page (parsed once per title and text)."""
    return _parse(page.meta.title, page.wikitext)
