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
from cuqa_builder.verification.names import canonical_name, surface_name

NUMBER_OR_DATE = "a number or a date"
NUMBER_PHRASE = "a number of things ('3,500 rockets'), not a named thing"
DEMONYM = "a nationality, religious or political group (NORP): an adjective, not a thing"
COMMON_NOUN = "a common noun (written in lower case)"
OFFICE = "an office or title, not its holder"
DESCRIBED = "a link text that describes rather than names, to an article with no name either"
# Not a reason to set an entity aside: it is kept, named by its article's title instead.
RENAMED = ("a link text that describes ('U.S. state'), puts a role before the name or gives "
           "only the start of it ('Germany' for its national team), named by its article's "
           "title ('Michigan')")

_NUMBER_OR_DATE = re.compile(
    r"^[\d\s,.–-]+$|^(?:\d{1,2} )?(?:January|February|March|April|May|June|July|August"
    r"|September|October|November|December)(?: \d{1,2})?(?:,? \d{4})?$|^\d{4}s?$"
)
# A count of common things; "933rd Nahal Brigade" (an ordinal, then a name) is a name.
_NUMBER_PHRASE = re.compile(r"^(?:about |some |over |more than )?\d[\d,.]*\s+[a-z]")
# Offices are a closed class of words (they do not grow with the pages read): a link to
# "President of Turkey" or a span "Madagascar President" names a post, whose holder changes.
_OFFICE = re.compile(
    r"^(?:President|Prime Minister|Chancellor|King|Queen|Governor|Mayor|Minister|Secretary"
    r"|Pope|Emperor|Speaker|Chief Justice|Government)(?: of\b|$)"
    r"|\b(?:President|Prime Minister|Chancellor|Governor|Mayor|Minister)$"
)
# The small words a name may keep in lower case ("Bank of England", "Alternative für
# Deutschland"): a closed class, like the office words.
_NAME_PARTICLES = frozenset({
    "of", "the", "and", "for", "in", "on", "at", "to", "a", "an", "by", "with", "without", "de",
    "del", "della", "di", "da", "do", "dos", "das", "du", "des", "la", "le", "les", "el", "al",
    "von", "van", "der", "den", "y", "e", "et", "und", "für",
})
_PERSON_LABELS = frozenset({"PERSON"})


def _written_as_name(text: str) -> bool:
    """Every word capitalised (or a number), but for the particles names keep in lower case:
    "Nahal Brigade", "Bank of England"; not "presidential candidate", "U.S. state"."""
    words = [w.strip("()'’\",.") for w in text.split()]
    return all(not w or not w[0].isalpha() or w[0].isupper() or w.lower() in _NAME_PARTICLES
               for w in words)


def _content_words(text: str) -> set[str]:
    return {w.strip("()'’\",.").casefold() for w in text.split()} - _NAME_PARTICLES - {""}


def _describes(entity: Entity) -> bool:
    """A wikilink whose text describes its target rather than naming it: lower-case words, none
    shared with the title ("[[Fernando Villavicencio|Ecuadorian presidential candidate]]",
    "[[Michigan|U.S. state]]"); "[[2023 Thai general election|Thai general election]]" names
    its event."""
    text = entity.text.strip()  # "The agency's director general": its capital is the "The"
    return bool(entity.wiki_title and text and text[0].isupper() and not _written_as_name(text)
                and not _content_words(surface_name(text)) & _content_words(entity.wiki_title))


def set_aside_reason(entity: Entity) -> str | None:
    """Why `entity` cannot be a bridge or an answer, or None when it can (a describing link
    text can, by its article's title: `named`)."""
    text = surface_name(entity.text)
    title = entity.wiki_title or ""
    if not text or _NUMBER_OR_DATE.match(text) or _NUMBER_OR_DATE.match(title):
        return NUMBER_OR_DATE
    if _NUMBER_PHRASE.match(text):
        return NUMBER_PHRASE
    if _describes(entity):  # before its case is judged: "The agency's director general"
        if not _written_as_name(canonical_name(entity)):
            return DESCRIBED
        text = canonical_name(entity)
    elif entity.label == "NORP":
        return DEMONYM
    elif not (text[0].isupper() or text[0].isdigit()):
        return COMMON_NOUN
    if entity.label not in _PERSON_LABELS and (_OFFICE.search(text) or _OFFICE.match(title)):
        return OFFICE
    return None


def _role_before(entity: Entity) -> bool:
    """A link whose text puts a role before its title's name: "[[Jim Justice|West Virginia
    governor Jim Justice]]", "[[Arvind Kejriwal|Delhi Chief Minister Arvind Kejriwal]]"."""
    text, title = surface_name(entity.text), canonical_name(entity)
    return bool(entity.wiki_title) and text != title and text.endswith(f" {title}")


def _title_goes_on(entity: Entity) -> bool:
    """A link whose text is only the start of its title's name: "[[Germany men's national
    basketball team|Germany]]" names the team, not the country; a question must too."""
    text, title = surface_name(entity.text), canonical_name(entity)
    return bool(entity.wiki_title) and title.casefold().startswith(f"{text.casefold()} ")


def named(entity: Entity) -> Entity:
    """`entity` with its name cleaned for use in a question (the title is kept as it is); a
    link text that describes, or puts a role before the name, gives way to the article's
    title."""
    renamed = _describes(entity) or _role_before(entity) or _title_goes_on(entity)
    text = canonical_name(entity) if renamed else surface_name(entity.text)
    return entity if text == entity.text else entity.model_copy(update={"text": text})


def usable(entities: list[Entity], set_aside: Counter[str] | None = None) -> list[Entity]:
    """The named things among `entities`, cleaned, one per name (the one with a title first);
    `set_aside` counts the others by reason, and the describing link texts renamed (`RENAMED`).
    A name that only adds words before another's ("Ukrainian President Volodymyr Zelenskyy"
    beside "Volodymyr Zelenskyy", as NER may span it) is that one."""
    kept: dict[str, Entity] = {}
    for entity in entities:
        reason = set_aside_reason(entity)
        if reason is not None:
            if set_aside is not None:
                set_aside[reason] += 1
            continue
        if set_aside is not None and (_describes(entity) or _role_before(entity)
                                      or _title_goes_on(entity)):
            set_aside[RENAMED] += 1
        clean = named(entity)
        key = clean.text.casefold()
        if key not in kept or (clean.wiki_title and not kept[key].wiki_title):
            kept[key] = clean
    return [e for key, e in kept.items() if not any(
        _same_thing_named_better(e, other) for k, other in kept.items() if k != key)]


def _same_thing_named_better(entity: Entity, other: Entity) -> bool:
    """Two spans of one name, one inside the other's end ("Ukrainian President Volodymyr
    Zelenskyy" and "Volodymyr Zelenskyy", "High Atlas" and "Atlas"): the one with a title is
    the name; with a title on both or neither, the shorter (a role before a name)."""
    long, short = sorted((entity, other), key=lambda e: len(e.text), reverse=True)
    if not long.text.casefold().endswith(f" {short.text.casefold()}"):
        return False
    better = short if bool(short.wiki_title) == bool(long.wiki_title) else (
        short if short.wiki_title else long)
    return better is other
