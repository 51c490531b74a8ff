"""The snapshots shipped in `examples/` stay readable and useful: the README's quick-start sample
and the held-out snapshot kept for the final measurement (checked by counts only)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cuqa_builder.grounding.article_text import article_text
from cuqa_builder.ner import EntityExtractor
from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page
from cuqa_builder.snapshot import articles_dir, iter_snapshot, page_kind
from cuqa_builder.stages.events import parse_page
from cuqa_builder.window import Window

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SAMPLE = EXAMPLES / "wiki-sample"
HELDOUT = EXAMPLES / "heldout-2024-25"
HELDOUT_WINDOW = Window.parse("2023-04", "2025-12-31")  # its README's command


def _read(directory: Path) -> list[Page]:
    found = list(iter_snapshot(directory))
    assert all(isinstance(page, Page) for page in found), found  # sidecars and hashes match
    return [page for page in found if isinstance(page, Page)]


def _layout(wikitext: str) -> str:
    """A portal day's layout: the older `content=` wrapper or the newer top/bottom one."""
    if "|content=" in wikitext:
        return "older"
    return "newer" if "|top=yes}}" in wikitext and "|bottom=yes}}" in wikitext else "neither"


def _layouts(pages: list[Page]) -> Counter[str]:
    return Counter(_layout(p.wikitext) for p in pages if page_kind(p.meta.title) == "portal")


def _every_event_has_an_entity_to_ask_about(events: list[Event]) -> None:
    enriched = EntityExtractor().for_events(events)
    assert all(event.entities for event in enriched)
    assert all(any(e.wiki_title for e in event.entities) for event in enriched)


@pytest.fixture(scope="module")
def pages() -> list[Page]:
    return _read(SAMPLE)


@pytest.fixture(scope="module")
def unknown_events(pages: list[Page]) -> list[Event]:
    window = Window.parse("2023-04", "2023-12-31")  # the README's quick start
    return [e for page in pages for e in parse_page(page) if window.contains(e.date)]


def test_the_sample_has_a_year_article_and_portal_days_in_both_layouts(pages: list[Page]) -> None:
    assert Counter(page_kind(page.meta.title) for page in pages) == {"year": 1, "portal": 4}
    assert _layouts(pages) == {"older": 2, "newer": 2}


def test_every_event_after_the_cutoff_is_parsed(
    pages: list[Page], unknown_events: list[Event]
) -> None:
    by_source = Counter(
        "year" if event.source.title == "2023" else "portal" for event in unknown_events
    )
    assert by_source == {"year": 18, "portal": 15}
    all_events = [e for page in pages for e in parse_page(page)]
    assert len(all_events) - len(unknown_events) == 2  # the two March events
    assert all(event.links and event.text for event in unknown_events)


def test_every_unknown_event_has_an_entity_to_ask_about(unknown_events: list[Event]) -> None:
    _every_event_has_an_entity_to_ask_about(unknown_events)


@pytest.fixture(scope="module")
def heldout_pages() -> list[Page]:
    return _read(HELDOUT)


@pytest.fixture(scope="module")
def heldout_events(heldout_pages: list[Page]) -> list[Event]:
    return [event for page in heldout_pages for event in parse_page(page)]


def test_the_heldout_snapshot_has_six_portal_days_in_both_layouts(
    heldout_pages: list[Page],
) -> None:
    assert Counter(page_kind(page.meta.title) for page in heldout_pages) == {"portal": 6}
    assert _layouts(heldout_pages) == {"older": 3, "newer": 3}


def test_every_heldout_event_is_parsed_and_falls_after_the_cutoff(
    heldout_events: list[Event],
) -> None:
    assert len(heldout_events) == 55
    assert all(HELDOUT_WINDOW.contains(event.date) for event in heldout_events)
    assert all(event.links and event.text and event.citations for event in heldout_events)


def test_every_heldout_event_has_an_entity_to_ask_about(heldout_events: list[Event]) -> None:
    _every_event_has_an_entity_to_ask_about(heldout_events)


def test_the_heldout_articles_are_hand_written_as_of_the_cutoff_and_read() -> None:
    articles = _read(articles_dir(HELDOUT))
    assert len(articles) == 131
    cutoff_end = f"{HELDOUT_WINDOW.cutoff.isoformat()}T23:59:59Z"
    assert all(a.meta.kind == "article" and a.meta.api is None for a in articles)
    assert all(a.meta.timestamp < cutoff_end and a.meta.revid >= 9500 for a in articles)
    assert sum(a.meta.redirect is not None for a in articles) == 5
    assert all(4_000 <= len(a.wikitext.encode()) <= 9_000 for a in articles)
    read = [article_text(a) for a in articles]
    assert all(text.passage and text.kind for text in read)
    assert sum(bool(text.relations) for text in read) == 129
