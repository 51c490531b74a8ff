"""Names as NER cuts them, made whole (issue 37 item 6): a span run on past its name ("Personal
Information Protection Commission of", "Ain al-Hilweh Palestinian", "Serbia 83–77") is trimmed;
a span that is only a part of a longer name of the event ("Kafr" beside "Kafr 'Aqab", "Teodoro
Nguema" beside "Teodoro Nguema Obiang Mangue") is no named thing of its own; a county's name
takes its state ("Hickman County" -> "Hickman County, Kentucky"). Only the event's own text and
entities are read: the lists below are closed classes (they do not grow with the pages read)."""

from __future__ import annotations

import re

from cuqa_builder.records.events import Entity
from cuqa_builder.verification.names import surface_name

# The small words no name ends with ("Commission of", "Bank and"): a closed class.
_TRAILING_SMALL = frozenset({
    "of", "the", "a", "an", "and", "or", "but", "nor", "in", "at", "on", "for", "to", "by",
    "with", "from", "as", "into", "near",
})
# Nationality, ethnic and religious adjectives NER runs a place's name on into ("Ain al-Hilweh
# Palestinian refugee camp"). Not a person's: "Bill English" ends with a surname.
_DEMONYM_WORDS = """
    Afghan African Albanian Algerian American Angolan Arab Arabic Argentine Argentinian Armenian
    Asian Australian Austrian Azerbaijani Bahraini Bangladeshi Belarusian Belgian Bolivian Bosnian
    Brazilian British Bulgarian Burmese Cambodian Cameroonian Canadian Catholic Chadian Chilean
    Chinese Christian Colombian Congolese Croatian Cuban Cypriot Czech Danish Druze Dutch
    Ecuadorian Egyptian Emirati English Eritrean Estonian Ethiopian European Filipino Finnish
    French Georgian German Ghanaian Greek Guatemalan Haitian Hindu Honduran Hungarian Icelandic
    Indian Indonesian Iranian Iraqi Irish Israeli Italian Ivorian Jamaican Japanese Jewish
    Jordanian Kazakh Kenyan Korean Kurdish Kuwaiti Lebanese Libyan Lithuanian Malaysian Malian
    Mexican Moldovan Mongolian Moroccan Muslim Nepalese Nigerian Nigerien Norwegian Omani
    Pakistani Palestinian Persian Peruvian Polish Portuguese Qatari Romanian Russian Rwandan
    Saudi Scottish Senegalese Serbian Shia Shiite Sikh Slovak Slovenian Somali Spanish Sudanese
    Sunni Swedish Swiss Syrian Taiwanese Tamil Tanzanian Thai Tibetan Tunisian Turkish Ugandan
    Ukrainian Uyghur Venezuelan Vietnamese Welsh Yemeni Zambian Zimbabwean
"""
DEMONYMS = frozenset(_DEMONYM_WORDS.split())
_PERSON = "PERSON"
# A match's score run into a team's name ("Serbia 83–77").
_SCORE = re.compile(r"\s+\d+\s*[–—-]\s*\d+$")
# The US states, which a county's name needs: thirty states have a Washington County.
_US_STATES = frozenset({
    "Alabama", "Alaska", "Arizona", "Arkansas", "California", "Colorado", "Connecticut",
    "Delaware", "Florida", "Georgia", "Hawaii", "Idaho", "Illinois", "Indiana", "Iowa", "Kansas",
    "Kentucky", "Louisiana", "Maine", "Maryland", "Massachusetts", "Michigan", "Minnesota",
    "Mississippi", "Missouri", "Montana", "Nebraska", "Nevada", "New Hampshire", "New Jersey",
    "New Mexico", "New York", "North Carolina", "North Dakota", "Ohio", "Oklahoma", "Oregon",
    "Pennsylvania", "Rhode Island", "South Carolina", "South Dakota", "Tennessee", "Texas", "Utah",
    "Vermont", "Virginia", "Washington", "West Virginia", "Wisconsin", "Wyoming",
})
_STATES = "|".join(sorted(_US_STATES, key=len, reverse=True))
_STATE_NAMED = re.compile(rf"(?<!\w)(?:{_STATES})(?!\w)")
COUNTY = re.compile(r"\bCounty$")


def trimmed(entity: Entity) -> Entity:
    """A span NER made (a link's text is the editor's: left as it is) without the words it ran
    on past its name: a trailing small word, score, or demonym after other words."""
    if entity.wiki_title:
        return entity
    text = surface_name(entity.text)
    while True:
        shorter = _SCORE.sub("", text)
        words = shorter.split()
        if len(words) > 1 and (words[-1].casefold() in _TRAILING_SMALL or (
                entity.label != _PERSON and words[-1] in DEMONYMS)):
            shorter = " ".join(words[:-1])
        if shorter == text:
            break
        text = shorter
    return entity if text == entity.text else entity.model_copy(update={"text": text})


def with_state(entity: Entity, text: str | None) -> Entity:
    """A county's name with its state where the event gives it: written after it ("Hickman
    County, Kentucky") or the one state the event names. A link's title carries it already."""
    name = surface_name(entity.text)
    if entity.wiki_title or not COUNTY.search(name) or not text:
        return entity
    after = re.search(rf"{re.escape(name)},\s+({_STATES})(?!\w)", text)
    named = set(_STATE_NAMED.findall(text))
    state = after.group(1) if after else (named.pop() if len(named) == 1 else None)
    return entity.model_copy(update={"text": f"{name}, {state}"}) if state else entity


def is_county_without_state(entity: Entity) -> bool:
    """A county named without its state and no article to tell which: many share each name."""
    return not entity.wiki_title and bool(COUNTY.search(surface_name(entity.text)))


def _part_of(short: str, long: str) -> bool:
    return len(short) < len(long) and bool(
        re.search(rf"(?<!\w){re.escape(short)}(?!\w)", long, re.IGNORECASE))


def _mentioned_alone(short: str, longer: list[str], text: str) -> bool:
    """Whether the event's text names `short` somewhere outside the longer names."""
    rest = text
    for name in sorted(longer, key=len, reverse=True):
        rest = rest.replace(name, " | ")
    return bool(re.search(rf"(?<!\w){re.escape(short)}(?!\w)", rest))


def is_fragment(short: Entity, written: str, longer: list[tuple[Entity, str]],
                text: str | None) -> bool:
    """Whether `short` (a span NER made; `written` is how the text writes it) is only a part of
    a longer name of the event (`longer`: each entity with how the text writes it): a link of
    its own is a thing of its own, and so is a span the text also names alone; a part of a
    person's name is that person whatever the text ("Teodoro Nguema"). Without the text, a
    part is taken for a fragment."""
    if short.wiki_title:
        return False
    parts_of = [(e, w) for e, w in longer if _part_of(short.text, e.text)]
    if not parts_of:
        return False
    if short.label == _PERSON and any(e.label in (_PERSON, "LINK") for e, _ in parts_of):
        return True
    return text is None or not _mentioned_alone(written, [w for _, w in parts_of], text)
