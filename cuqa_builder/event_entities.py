"""The entities of an event: spaCy's NER spans merged with the event's wikilinks (SPEC 2.2).

A wikilink is the strongest evidence of an entity (an editor chose it, and it names the Wikipedia
article), so an NER span that matches a link takes the link's title, and a link NER missed still
becomes an entity. Only labels that can name a question's answer are kept: no dates or numbers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cuqa_builder.records.events import Entity, Link

USEFUL_LABELS = frozenset(
    {
        "PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT",
        "WORK_OF_ART", "LAW", "PRODUCT", "LANGUAGE",
    }
)
LINK_LABEL = "LINK"
# A link takes the label of an NER span only when the span covers more than half of it: "Prime
# Minister of Japan" is not a GPE because NER found "Japan" inside it.
_LABEL_COVERAGE = 0.5


@dataclass(frozen=True)
class NerSpan:
    """One entity spaCy found in a text: where, and its label."""

    start: int
    end: int
    text: str
    label: str


def merge_with_links(text: str, links: list[Link], spans: list[NerSpan]) -> list[Entity]:
    """Entities of one event: NER spans (titled when they match a link) plus the unmatched links.

    `spans` are all NER spans of `text`, dropped labels included: they tell a link that only
    names a date or a number ("[[2023 in film|2023]]") from one NER missed.
    """
    titles = {_key(link.text): link.title for link in links}
    useful = [span for span in spans if span.label in USEFUL_LABELS]
    found: list[tuple[int, Entity]] = []
    matched_titles: set[str] = set()
    for span in useful:
        title = titles.get(_key(span.text))
        if title is not None:
            matched_titles.add(title)
        found.append((span.start, span_entity(span, wiki_title=title)))
    for start, link in _locate_links(text, links):
        end = start + len(link.text)
        if link.title in matched_titles or _only_dropped(start, end, spans):
            continue
        label = _label_covering(start, end, useful)
        found.append((start, Entity(text=link.text, label=label, wiki_title=link.title)))
    found.sort(key=lambda item: item[0])
    return dedupe(found)


def _locate_links(text: str, links: list[Link]) -> Iterator[tuple[int, Link]]:
    """Where each link's label occurs; links come in text order, so search on from the last one."""
    cursor = 0
    for link in links:
        if not link.text.strip():
            continue
        start = text.find(link.text, cursor)
        if start < 0:
            start = text.find(link.text)
        if start < 0:
            # The label is not in the plain text (odd markup): keep the link, placed at the end.
            yield len(text), link
            continue
        cursor = start + len(link.text)
        yield start, link


def _only_dropped(start: int, end: int, spans: list[NerSpan]) -> bool:
    """Whether a dropped-label span (date, number...) covers the whole link."""
    return any(
        span.start <= start and end <= span.end and span.label not in USEFUL_LABELS
        for span in spans
    )


def _label_covering(start: int, end: int, spans: list[NerSpan]) -> str:
    best_label, best_overlap = LINK_LABEL, 0
    for span in spans:
        overlap = min(end, span.end) - max(start, span.start)
        if overlap > best_overlap and overlap > _LABEL_COVERAGE * (end - start):
            best_label, best_overlap = span.label, overlap
    return best_label


def dedupe(found: Iterable[tuple[int, Entity]]) -> list[Entity]:
    """First mention wins; a later duplicate only fills in a missing title or label."""
    kept: list[Entity] = []
    by_text: dict[str, int] = {}
    by_title: dict[str, int] = {}
    for _, entity in found:
        key = _key(entity.text)
        index = by_text.get(key)
        if index is None and entity.wiki_title:
            index = by_title.get(entity.wiki_title)
        if index is None:
            index = len(kept)
            kept.append(entity)
        else:
            kept[index] = _fill_in(kept[index], entity)
        by_text.setdefault(key, index)
        if kept[index].wiki_title:
            by_title.setdefault(kept[index].wiki_title, index)
    return kept


def _fill_in(kept: Entity, duplicate: Entity) -> Entity:
    updates: dict[str, str] = {}
    if kept.wiki_title is None and duplicate.wiki_title:
        updates["wiki_title"] = duplicate.wiki_title
    if kept.label == LINK_LABEL and duplicate.label != LINK_LABEL:
        updates["label"] = duplicate.label
    return kept.model_copy(update=updates) if updates else kept


def span_entity(span: NerSpan, wiki_title: str | None = None) -> Entity:
    return Entity(text=_strip_article(span.text), label=span.label, wiki_title=wiki_title)


def _strip_article(text: str) -> str:
    # spaCy includes a lowercase "the" in spans ("the United Nations"); it is not part of the name.
    return text[4:] if text.startswith("the ") else text


def _key(text: str) -> str:
    """Comparison key: case-insensitive, without a leading article or a possessive 's."""
    key = text.strip().casefold()
    key = key[4:] if key.startswith("the ") else key
    return key.removesuffix("'s").removesuffix("\u2019s")
