"""The snapshot shipped for the README's quick start stays readable and useful."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from cuqa_builder.ner import EntityExtractor
from cuqa_builder.records import Event, Page
from cuqa_builder.snapshot import iter_snapshot, page_kind
from cuqa_builder.stages.events import parse_page
from cuqa_builder.window import Window

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wiki-sample"


@pytest.fixture(scope="module")
def pages() -> list[Page]:
    found = list(iter_snapshot(SAMPLE))
    assert all(isinstance(page, Page) for page in found), found  # sidecars and hashes match
    return found


@pytest.fixture(scope="module")
def unknown_events(pages: list[Page]) -> list[Event]:
    window = Window.parse("2023-04", "2023-12-31")  # the README's quick start
    return [e for page in pages for e in parse_page(page) if window.contains(e.date)]


def test_the_sample_has_a_year_article_and_portal_days_in_both_layouts(pages: list[Page]) -> None:
    assert Counter(page_kind(page.meta.title) for page in pages) == {"year": 1, "portal": 4}
    portal_text = [page.wikitext for page in pages if page_kind(page.meta.title) == "portal"]
    assert sum("|content=" in text for text in portal_text) == 2
    assert sum("|top=yes}}" in text and "|bottom=yes}}" in text for text in portal_text) == 2


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
    enriched = EntityExtractor().for_events(unknown_events)
    assert all(event.entities for event in enriched)
    assert all(any(e.wiki_title for e in event.entities) for event in enriched)
