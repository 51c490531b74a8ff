"""Which entities may be a bridge or an answer: named things, on the shapes real pages give."""

from __future__ import annotations

from collections import Counter

import pytest

from cuqa_builder.generation.bridges import (
    COMMON_NOUN,
    DEMONYM,
    DESCRIBED,
    NUMBER_OR_DATE,
    NUMBER_PHRASE,
    OFFICE,
    RENAMED,
    set_aside_reason,
    usable,
)
from cuqa_builder.records.events import Entity
from cuqa_builder.verification.names import canonical_name, substitute, surface_name


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
    # shapes of real portal pages: a count of things, an ordinal unit, describing link texts
    (Entity(text="3,500 rockets", label="LINK", wiki_title="Rocket attacks"), NUMBER_PHRASE),
    (Entity(text="933rd Nahal Brigade", label="ORG", wiki_title="Nahal Brigade"), None),
    (Entity(text="Ecuadorian presidential candidate", label="LINK",
            wiki_title="Fernando Villavicencio"), None),  # named by its title
    (Entity(text="Maui blazes", label="LINK", wiki_title="2023 Hawaii wildfires"), DESCRIBED),
    (Entity(text="Thai general election", label="LINK", wiki_title="2023 Thai general election"),
     None),  # the event's own name, as its title writes it
    (Entity(text="Lebanese government", label="LINK", wiki_title="Government of Lebanon"),
     OFFICE),
    (Entity(text="Alternative for Germany", label="ORG", wiki_title="Alternative for Germany"),
     None),
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


def test_a_describing_link_text_is_named_by_its_article_title() -> None:
    """"[[Fernando Villavicencio|Ecuadorian presidential candidate]]" is a bridge by its title;
    the same person found by NER without a title is the same bridge, kept once."""
    entities = [
        Entity(text="Ecuadorian", label="NORP"),
        Entity(text="Ecuadorian presidential candidate", label="LINK",
               wiki_title="Fernando Villavicencio"),
        Entity(text="Fernando Villavicencio", label="PERSON"),
        Entity(text="U.S. state", label="LINK", wiki_title="Michigan"),
        Entity(text="Pakistani soldiers", label="LINK", wiki_title="Pakistan Army"),
        Entity(text="3,500 rockets", label="LINK", wiki_title="Rocket attacks"),
        # a sentence's first words: its capital is the "The", the link still describes
        Entity(text="The agency's director general", label="LINK",
               wiki_title="Rafael Mariano Grossi"),
    ]
    counted: Counter[str] = Counter()
    kept = usable(entities, counted)
    assert [(e.text, e.wiki_title) for e in kept] == [
        ("Fernando Villavicencio", "Fernando Villavicencio"), ("Michigan", "Michigan"),
        ("Pakistan Army", "Pakistan Army"), ("Rafael Mariano Grossi", "Rafael Mariano Grossi")]
    assert counted == {RENAMED: 4, DEMONYM: 1, NUMBER_PHRASE: 1}


def test_a_role_before_the_name_gives_way_to_the_name() -> None:
    """"[[Jim Justice|West Virginia governor Jim Justice]]" is Jim Justice; a span NER took
    with its title ("Ukrainian President Volodymyr Zelenskyy") is the person linked beside it."""
    entities = [
        Entity(text="Ukrainian President Volodymyr Zelenskyy", label="PERSON"),
        Entity(text="Volodymyr Zelenskyy", label="LINK", wiki_title="Volodymyr Zelenskyy"),
        Entity(text="West Virginia governor Jim Justice", label="LINK", wiki_title="Jim Justice"),
        Entity(text="Special counsel Jack Smith", label="LINK", wiki_title="Jack Smith (lawyer)"),
    ]
    counted: Counter[str] = Counter()
    assert [e.text for e in usable(entities, counted)] == [
        "Volodymyr Zelenskyy", "Jim Justice", "Jack Smith"]
    assert counted == {RENAMED: 2}
