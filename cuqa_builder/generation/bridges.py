"""Which entities can be a bridge or an answer: named things with a Wikipedia title.

A compositional question hops through a *named* thing (a person, an organisation, a place, an
event, a work). Nationality adjectives ("Israeli"), common nouns linked by an editor
("headquarters", "[[basketball]]"), offices ("President of Turkey") and dates make hops that a
reader cannot check or that any guess answers. The evidence used is what `events.jsonl` already
holds: spaCy's label and the editor's wikilink, and how the name is written.
"""

from __future__ import annotations

import re
from collections import Counter

from cuqa_builder.records import Entity

NUMBER_OR_DATE = "a number or a date"
DEMONYM = "a nationality, religious or political group (NORP): an adjective, not a thing"
COMMON_NOUN = "a common noun (written in lower case)"
OFFICE = "an office or title, not its holder"

_NUMBER_OR_DATE = re.compile(
    r"^[\d\s,.–-]+$|^(?:\d{1,2} )?(?:January|February|March|April|May|June|July|August"
    r"|September|October|November|December)(?: \d{1,2})?(?:,? \d{4})?$|^\d{4}s?$"
)
# Offices are a closed class of words (they do not grow with the pages read): a link to
# "President of Turkey" or a span "Madagascar President" names a post, whose holder changes.
_OFFICE = re.compile(
    r"^(?:President|Prime Minister|Chancellor|King|Queen|Governor|Mayor|Minister|Secretary"
    r"|Pope|Emperor|Speaker|Chief Justice)(?: of\b|$)|\b(?:President|Prime Minister|Chancellor"
    r"|Governor|Mayor|Minister)$"
)
_POSSESSIVE = re.compile(r"['’]s$|(?<=s)['’]$")
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)$")
_PERSON_LABELS = frozenset({"PERSON"})
_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
_GROUP_LABELS = frozenset({"ORG"})


def surface_name(text: str) -> str:
    """The name as a question can use it: no leading "the", possessive or doubled full stop
    ("Khalifa Haftar's" -> "Khalifa Haftar", "U.S.." -> "U.S.")."""
    name = text.strip()
    if name.lower().startswith("the "):
        name = name[4:]
    name = _POSSESSIVE.sub("", name)
    while name.endswith(".."):
        name = name[:-1]
    return name.strip()


def canonical_name(entity: Entity) -> str:
    """The answer as a dataset gives it: the article title (without a disambiguation suffix)
    when there is one, else the name as written."""
    if entity.wiki_title:
        return _PARENTHETICAL.sub("", entity.wiki_title).strip() or surface_name(entity.text)
    return surface_name(entity.text)


def set_aside_reason(entity: Entity) -> str | None:
    """Why `entity` cannot be a bridge or an answer, or None when it can."""
    text = surface_name(entity.text)
    title = entity.wiki_title or ""
    if not text or _NUMBER_OR_DATE.match(text) or _NUMBER_OR_DATE.match(title):
        return NUMBER_OR_DATE
    if entity.label == "NORP":
        return DEMONYM
    if not (text[0].isupper() or text[0].isdigit()):
        return COMMON_NOUN
    if entity.label not in _PERSON_LABELS and (_OFFICE.search(text) or _OFFICE.match(title)):
        return OFFICE
    return None


def named(entity: Entity) -> Entity:
    """`entity` with its name cleaned for use in a question (the title is kept as it is)."""
    text = surface_name(entity.text)
    return entity if text == entity.text else entity.model_copy(update={"text": text})


def usable(entities: list[Entity], set_aside: Counter[str] | None = None) -> list[Entity]:
    """The named things among `entities`, cleaned; `set_aside` counts the others by reason."""
    kept = []
    for entity in entities:
        reason = set_aside_reason(entity)
        if reason is None:
            kept.append(named(entity))
        elif set_aside is not None:
            set_aside[reason] += 1
    return kept


def kind_of(entity: Entity) -> str:
    """A plain word for what the entity is, to mask it ("a certain place")."""
    if entity.label in _PERSON_LABELS:
        return "person"
    if entity.label in _PLACE_LABELS:
        return "place"
    if entity.label in _GROUP_LABELS:
        return "organisation"
    if entity.label == "EVENT":
        return "event"
    return "thing"


def _pattern(names: list[str]) -> re.Pattern[str]:
    """Any of `names` as whole words, with a "the" before it if there is one."""
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    return re.compile(rf"(?:\bthe\s+)?(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def mention(question: str, names: list[str]) -> re.Match[str] | None:
    """The first place `question` names the entity by one of `names`."""
    return _pattern(names).search(question)


def substitute(question: str, names: list[str], phrase: str) -> str | None:
    """`question` with its first mention of the entity replaced by `phrase`; None if it has
    none."""
    match = mention(question, names)
    if match is None:
        return None
    replaced = question[: match.start()] + phrase + question[match.end():]
    return replaced[:1].upper() + replaced[1:] if match.start() == 0 else replaced


def names_of(entity: Entity) -> list[str]:
    """Every name a question may call the entity by: as written, cleaned, its title."""
    return list(dict.fromkeys([surface_name(entity.text), canonical_name(entity), entity.text]))
