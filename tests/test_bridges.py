"""Which entities may be a bridge or an answer: named things, on the shapes real pages give."""

from __future__ import annotations

from collections import Counter

import pytest

from cuqa_builder.generation.bridges import (
    COMMON_NOUN,
    DEMONYM,
    NUMBER_OR_DATE,
    OFFICE,
    canonical_name,
    set_aside_reason,
    substitute,
    surface_name,
    usable,
)
from cuqa_builder.ner import EntityExtractor
from cuqa_builder.records import Entity, Event, EventSource, Link


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor()


def _event(text: str, links: list[Link]) -> Event:
    return Event(id="ev-1", date="2023-09-12", text=text, links=links,
                 source=EventSource(title="t", revid=1, url="https://example.org/t"))


def test_the_entities_stage_output_keeps_only_named_things(extractor: EntityExtractor) -> None:
    """A portal sentence with a demonym, a possessive, a linked common noun and an office, run
    through the real NER + wikilink merge; only the people, places and organisations are left."""
    text = ("Israeli aircraft strike the headquarters of Khalifa Haftar's forces near Benghazi, "
            "Libya, as the President of Turkey calls for a ceasefire at a basketball match.")
    links = [Link(title="Khalifa Haftar", text="Khalifa Haftar"),
             Link(title="Benghazi", text="Benghazi"), Link(title="Libya", text="Libya"),
             Link(title="Headquarters", text="headquarters"),
             Link(title="President of Turkey", text="President of Turkey"),
             Link(title="Basketball", text="basketball")]
    [event] = extractor.for_events([_event(text, links)])
    set_aside: Counter[str] = Counter()
    kept = usable(event.entities, set_aside)
    assert [e.text for e in kept] == ["Khalifa Haftar", "Benghazi", "Libya", "Turkey"]
    assert set_aside[DEMONYM] == 1  # Israeli
    assert set_aside[COMMON_NOUN] == 2  # headquarters, basketball
    assert set_aside[OFFICE] == 1  # President of Turkey


@pytest.mark.parametrize(("entity", "reason"), [
    (Entity(text="Turkish", label="NORP"), DEMONYM),
    (Entity(text="Russian", label="NORP", wiki_title="Russians"), DEMONYM),
    (Entity(text="rebellion", label="LINK", wiki_title="Wagner Group rebellion"), COMMON_NOUN),
    (Entity(text="Madagascar President", label="ORG"), OFFICE),
    (Entity(text="Prime Minister", label="LINK", wiki_title="Prime Minister of Spain"), OFFICE),
    (Entity(text="2023", label="LINK", wiki_title="2023"), NUMBER_OR_DATE),
    (Entity(text="24 August", label="LINK", wiki_title="August 24"), NUMBER_OR_DATE),
    (Entity(text="Queen Camilla", label="PERSON", wiki_title="Camilla, Queen Consort"), None),
    (Entity(text="Bank of England", label="ORG", wiki_title="Bank of England"), None),
    (Entity(text="Chandrayaan-3", label="LINK", wiki_title="Chandrayaan-3"), None),
])
def test_set_aside_reasons(entity: Entity, reason: str | None) -> None:
    assert set_aside_reason(entity) == reason


def test_names_are_cleaned_and_the_title_is_the_answer() -> None:
    assert surface_name("Khalifa Haftar's") == "Khalifa Haftar"
    assert surface_name("the Philippines’") == "Philippines"
    assert surface_name("U.S..") == "U.S."
    assert canonical_name(Entity(text="U.S.", label="GPE", wiki_title="United States")) == (
        "United States")
    assert canonical_name(Entity(text="Derna", label="GPE", wiki_title="Derna, Libya")) == (
        "Derna, Libya")
    assert canonical_name(Entity(text="Titan", label="LINK", wiki_title="Titan (submersible)")
                          ) == "Titan"


def test_the_merge_replaces_the_bridge_and_nothing_else() -> None:
    names = ["United Kingdom"]
    description = "the country that hosted the first AI Safety Summit in November 2023"
    assert substitute("Is the United Kingdom an African country?", names, description) == (
        "Is the country that hosted the first AI Safety Summit in November 2023 an African "
        "country?")
    assert substitute("United Kingdom borders which country?", names, description) == (
        "The country that hosted the first AI Safety Summit in November 2023 borders which "
        "country?")
    assert substitute("What is the capital of France?", names, description) is None
