"""No fragments offered as named things (issue 37 item 6): the bridge candidates of events shaped
like real Current events bullets (our own sentences), their entities as spaCy's NER and the
wikilinks give them, through the functions the generation stage calls."""

from __future__ import annotations

from collections import Counter
from datetime import date

import pytest

from cuqa_builder.generation.bridges import (
    AMBIGUOUS_COUNTY,
    DEMONYM,
    FRAGMENT,
    GENERIC,
    OFFICE,
    RENAMED,
    usable,
)
from cuqa_builder.generation.connected import ConnectedGenerator
from cuqa_builder.ner import EntityExtractor
from cuqa_builder.records.events import Entity, Event, EventSource, Link


def _event(text: str, entities: list[Entity], links: list[Link] | None = None) -> Event:
    return Event(id="ev-fragments", date=date(2024, 8, 3), text=text, links=links or [],
                 source=EventSource(title="Portal:Current events/2024 August 3", revid=1,
                                    url="u"), entities=entities)


def _e(text: str, label: str, title: str | None = None) -> Entity:
    return Entity(text=text, label=label, wiki_title=title)


# Each: the bullet, its entities, the bridge candidates left, what is counted as set aside.
_BULLETS = [
    ("Israeli airstrikes kill four people in Kafr 'Aqab, north of Jerusalem.",
     [_e("Israeli", "NORP"), _e("Kafr", "PERSON"), _e("Kafr 'Aqab", "LINK", "Kafr 'Aqab"),
      _e("Jerusalem", "GPE", "Jerusalem")],
     ["Kafr 'Aqab", "Jerusalem"], {DEMONYM: 1, FRAGMENT: 1}),
    ("A fire at a market in Bang Kruai district, Nonthaburi province, kills three people.",
     [_e("Bang", "GPE"), _e("Bang Kruai district", "LINK", "Bang Kruai district"),
      _e("Kruai", "GPE"), _e("Nonthaburi province", "GPE", "Nonthaburi province")],
     ["Bang Kruai district", "Nonthaburi province"], {FRAGMENT: 2}),
    ("Vice President Teodoro Nguema Obiang Mangue says that Teodoro Nguema will lead the "
     "delegation to the talks in Malabo.",
     [_e("Teodoro Nguema", "PERSON"),
      _e("Teodoro Nguema Obiang Mangue", "LINK", "Teodoro Nguema Obiang Mangue"),
      _e("Obiang Mangue", "PERSON"), _e("Malabo", "GPE", "Malabo")],
     ["Teodoro Nguema Obiang Mangue", "Malabo"], {FRAGMENT: 2}),
    ("Al Jazeera Arabic says its correspondent was killed in an airstrike on Khan Yunis.",
     [_e("Al Jazeera", "ORG"), _e("Arabic", "LANGUAGE"),
      _e("Al Jazeera Arabic", "LINK", "Al Jazeera Arabic"), _e("Khan Yunis", "GPE")],
     ["Al Jazeera Arabic", "Khan Yunis"], {FRAGMENT: 2}),
    ("A boat carrying migrants capsizes in the English Channel off Wimereux, killing five.",
     [_e("English", "LANGUAGE"), _e("English Channel", "LINK", "English Channel"),
      _e("Wimereux", "GPE", "Wimereux")],
     ["English Channel", "Wimereux"], {FRAGMENT: 1}),
    ("Clashes between Fatah and Islamist militants in the Ain al-Hilweh Palestinian refugee "
     "camp near Sidon kill six people.",
     [_e("Fatah", "ORG", "Fatah"), _e("Ain al-Hilweh Palestinian", "FAC"),
      _e("Sidon", "GPE", "Sidon")],
     ["Fatah", "Ain al-Hilweh", "Sidon"], {}),
    ("The Personal Information Protection Commission of South Korea fines Kakao over a leak.",
     [_e("The Personal Information Protection Commission of", "ORG"),
      _e("South Korea", "GPE", "South Korea"), _e("Kakao", "ORG", "Kakao")],
     ["Personal Information Protection Commission", "South Korea", "Kakao"], {}),
    ("In basketball, Germany defeat Serbia 83–77 in the World Cup final in Manila.",
     [_e("Germany", "GPE", "Germany men's national basketball team"),
      _e("Serbia 83–77", "ORG"), _e("Serbia", "LINK", "Serbia men's national basketball team"),
      _e("Manila", "GPE", "Manila")],
     ["Germany men's national basketball team", "Serbia men's national basketball team",
      "Manila"], {RENAMED: 2, FRAGMENT: 1}),
    ("Hamas militants attack the Nova music festival near Re'im, killing hundreds.",
     [_e("Hamas", "ORG", "Hamas"), _e("Nova", "LOC"),
      _e("Nova music festival", "LINK", "Nova music festival massacre"),
      _e("Re'im", "GPE", "Re'im")],
     ["Hamas", "Nova music festival massacre", "Re'im"], {RENAMED: 1, FRAGMENT: 1}),
    ("The Navy says it shot down a missile over the Red Sea; Senator Roger Wicker calls for "
     "strikes, the Defense says, as the Railway halts trains in Aden.",
     [_e("Navy", "ORG"), _e("Red Sea", "LOC", "Red Sea"), _e("Senator", "ORG"),
      _e("Roger Wicker", "PERSON", "Roger Wicker"), _e("Defense", "ORG"),
      _e("Railway", "ORG"), _e("Aden", "GPE", "Aden")],
     ["Red Sea", "Roger Wicker", "Aden"], {GENERIC: 4}),
    ("The Camerlengo announces the death of Pope Francis at Casa Santa Marta.",
     [_e("Camerlengo", "LINK", "Camerlengo"), _e("Pope Francis", "PERSON", "Pope Francis"),
      _e("Francis", "PERSON"), _e("Casa Santa Marta", "FAC", "Domus Sanctae Marthae")],
     ["Pope Francis", "Casa Santa Marta"], {GENERIC: 1, FRAGMENT: 1}),
    # a lone service linked to an article with a name is that article's
    ("The Navy intercepts a drone off Mumbai.",
     [_e("Navy", "LINK", "Indian Navy"), _e("Mumbai", "GPE", "Mumbai")],
     ["Indian Navy", "Mumbai"], {RENAMED: 1}),
    # counties: the state from the link's title, from the text, or set aside
    ("A tornado kills five people in Hickman County.",
     [_e("Hickman County", "GPE", "Hickman County, Kentucky")],
     ["Hickman County, Kentucky"], {RENAMED: 1}),
    ("A tornado kills five people in Hickman County, Kentucky.",
     [_e("Hickman County", "GPE"), _e("Kentucky", "GPE", "Kentucky")],
     ["Hickman County, Kentucky", "Kentucky"], {}),
    ("Storms sweep western Kentucky; a tornado kills five people in Hickman County.",
     [_e("Kentucky", "GPE", "Kentucky"), _e("Hickman County", "GPE")],
     ["Kentucky", "Hickman County, Kentucky"], {}),
    ("A tornado kills five people in Hickman County.",
     [_e("Hickman County", "GPE")], [], {AMBIGUOUS_COUNTY: 1}),
    # what stays: a name the text also gives alone, a link of its own, an office set aside
    ("Israel says the Israel Defense Forces killed a commander in Beirut.",
     [_e("Israel", "GPE"), _e("Israel Defense Forces", "ORG", "Israel Defense Forces"),
      _e("Beirut", "GPE", "Beirut")],
     ["Israel", "Israel Defense Forces", "Beirut"], {}),
    ("Voters in Turkey choose a new Grand National Assembly of Turkey.",
     [_e("Turkey", "GPE", "Turkey"),
      _e("Grand National Assembly of Turkey", "ORG", "Grand National Assembly of Turkey")],
     ["Turkey", "Grand National Assembly of Turkey"], {}),
    ("Clara Brugada is elected Head of Government of Mexico City.",
     [_e("Clara Brugada", "PERSON", "Clara Brugada"), _e("Head of Government of", "ORG"),
      _e("Head of Government of Mexico City", "ORG"), _e("Mexico City", "GPE")],
     ["Clara Brugada", "Mexico City"], {OFFICE: 2}),
    # a person's surname beside the full name is that person, not a role before a name
    ("Donald Trump wins the election; Trump thanks his supporters in West Palm Beach.",
     [_e("Donald Trump", "PERSON"), _e("Trump", "PERSON"),
      _e("West Palm Beach", "GPE", "West Palm Beach, Florida")],
     ["Donald Trump", "West Palm Beach"], {FRAGMENT: 1}),
]


@pytest.mark.parametrize(("text", "entities", "kept", "counted"), _BULLETS,
                         ids=[b[0][:40] for b in _BULLETS])
def test_the_bridge_candidates_are_whole_names(
    text: str, entities: list[Entity], kept: list[str], counted: dict[str, int]
) -> None:
    set_aside: Counter[str] = Counter()
    candidates = ConnectedGenerator.bridge_candidates(_event(text, entities), set_aside)
    assert [e.text for e in candidates] == kept
    assert set_aside == counted


def test_usable_offers_none_of_the_fragments_seen_in_the_describing_requests() -> None:
    """One event holding every fragment seen: none is offered, each is counted."""
    text = ("Israeli strikes hit Kafr 'Aqab and Bang Kruai district; Teodoro Nguema Obiang Mangue "
            "speaks to Al Jazeera Arabic on the English Channel from the Ain al-Hilweh "
            "Palestinian camp; the Personal Information Protection Commission of Korea and "
            "Serbia 83–77 at the Nova music festival; the Defense, the Navy, the Railway, a "
            "Senator and the Camerlengo in Hickman County.")
    entities = [
        _e("Kafr", "PERSON"), _e("Kafr 'Aqab", "LINK", "Kafr 'Aqab"), _e("Bang", "GPE"),
        _e("Bang Kruai district", "LINK", "Bang Kruai district"), _e("Teodoro Nguema", "PERSON"),
        _e("Teodoro Nguema Obiang Mangue", "LINK", "Teodoro Nguema Obiang Mangue"),
        _e("Arabic", "LANGUAGE"), _e("Al Jazeera Arabic", "LINK", "Al Jazeera Arabic"),
        _e("English", "LANGUAGE"), _e("English Channel", "LINK", "English Channel"),
        _e("Ain al-Hilweh Palestinian", "FAC"),
        _e("Personal Information Protection Commission of", "ORG"), _e("Korea", "GPE", "Korea"),
        _e("Serbia 83–77", "ORG"), _e("Serbia", "LINK", "Serbia men's national basketball team"),
        _e("Nova", "LOC"), _e("Nova music festival", "LINK", "Nova music festival massacre"),
        _e("Defense", "ORG"), _e("Navy", "ORG"), _e("Railway", "ORG"), _e("Senator", "ORG"),
        _e("Camerlengo", "LINK", "Camerlengo"), _e("Hickman County", "GPE"),
    ]
    set_aside: Counter[str] = Counter()
    assert [e.text for e in usable(entities, set_aside, text)] == [
        "Kafr 'Aqab", "Bang Kruai district", "Teodoro Nguema Obiang Mangue", "Al Jazeera Arabic",
        "English Channel", "Ain al-Hilweh", "Personal Information Protection Commission",
        "Korea", "Serbia men's national basketball team", "Nova music festival massacre"]
    assert set_aside == {FRAGMENT: 7, GENERIC: 5, AMBIGUOUS_COUNTY: 1, RENAMED: 2}


@pytest.fixture(scope="module")
def extractor() -> EntityExtractor:
    return EntityExtractor()


def test_the_entities_stage_and_the_bridges_leave_no_fragment(extractor: EntityExtractor) -> None:
    """Bullets through spaCy's NER and the wikilink merge (the entities stage), then the
    bridge candidates: the parts NER cut out of linked names are gone."""
    bullets = [
        ("Israeli airstrikes kill four people in Kafr 'Aqab, north of Jerusalem.",
         [("Kafr 'Aqab", "Kafr 'Aqab")]),
        ("A fire at a market in Bang Kruai district, Nonthaburi province, kills three people.",
         [("Bang Kruai district", "Bang Kruai district")]),
        ("Vice President Teodoro Nguema Obiang Mangue says that Teodoro Nguema will lead the "
         "delegation.", [("Teodoro Nguema Obiang Mangue", "Teodoro Nguema Obiang Mangue")]),
        ("Hamas militants attack the Nova music festival near Re'im, killing hundreds.",
         [("Nova music festival massacre", "Nova music festival"), ("Re'im", "Re'im")]),
    ]
    events = extractor.for_events([
        _event(text, [], [Link(title=title, text=label) for title, label in links])
        for text, links in bullets])
    # what NER gives beside the links: the fragments are there before the bridges
    assert {"Kafr", "Bang", "Teodoro Nguema", "Nova"} <= {
        e.text for event in events for e in event.entities}
    kept = [[e.text for e in ConnectedGenerator.bridge_candidates(event)] for event in events]
    assert kept == [["Kafr 'Aqab", "Jerusalem"], ["Bang Kruai district", "Nonthaburi province"],
                    ["Teodoro Nguema Obiang Mangue"],
                    ["Hamas", "Nova music festival massacre", "Re'im"]]
