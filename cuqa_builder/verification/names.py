"""Names of entities as questions use them: cleaned, canonical, every spelling, and where a
question names one (to mask or replace it). Shared by generation (the merge puts a description
where the bridge's name was) and by the checks (the masked question)."""

from __future__ import annotations

import re

from cuqa_builder.records.events import Entity

_POSSESSIVE = re.compile(r"['’]s$|(?<=s)['’]$")
_PARENTHETICAL = re.compile(r"\s*\([^)]*\)$")
_PERSON_LABELS = frozenset({"PERSON"})
_PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
_GROUP_LABELS = frozenset({"ORG"})


def without_the(phrase: str) -> str:
    """The phrase without a leading "the"."""
    return phrase[4:] if phrase.lower().startswith("the ") else phrase


def surface_name(text: str) -> str:
    """The name as a question can use it: no leading "the", possessive or doubled full stop
    ("Khalifa Haftar's" -> "Khalifa Haftar", "U.S.." -> "U.S.")."""
    name = _POSSESSIVE.sub("", without_the(text.strip()))
    while name.endswith(".."):
        name = name[:-1]
    return name.strip()


def canonical_name(entity: Entity) -> str:
    """The answer as a dataset gives it: the article title (without a disambiguation suffix)
    when there is one, else the name as written."""
    if entity.wiki_title:
        return _PARENTHETICAL.sub("", entity.wiki_title).strip() or surface_name(entity.text)
    return surface_name(entity.text)


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
