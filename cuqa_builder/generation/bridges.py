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

from cuqa_builder.generation.name_parts import (
    COUNTY,
    DEMONYMS,
    is_county_without_state,
    is_fragment,
    trimmed,
    with_state,
)
from cuqa_builder.records.events import Entity
from cuqa_builder.verification.names import canonical_name, surface_name

NUMBER_OR_DATE = "a number or a date"
NUMBER_PHRASE = "a number of things ('3,500 rockets'), not a named thing"
DEMONYM = "a nationality, religious or political group (NORP): an adjective, not a thing"
COMMON_NOUN = "a common noun (written in lower case)"
OFFICE = "an office or title, not its holder"
DESCRIBED = "a link text that describes rather than names, to an article with no name either"
GENERIC = "a title, office or service alone ('Senator', 'Navy'), to no article with a name"
FRAGMENT = "a part of a longer name the event gives ('Kafr' of 'Kafr 'Aqab')"
AMBIGUOUS_COUNTY = "ambiguous county name (no state: many counties share it)"
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
    r"|Pope|Emperor|Speaker|Chief Justice|Government|Head of Government|Head of State)"
    r"(?: of\b|$)"
    r"|\b(?:President|Prime Minister|Chancellor|Governor|Mayor|Minister)$"
    r"|\b(?:Secretary|Minister) of\b"
)
# Titles, offices and services that, alone, name no one thing ("the Navy" of which country?):
# a closed class, like the office words. Linked to an article with a name ("[[Indian
# Navy|Navy]]") the word is that article's.
_GENERIC_WORDS = frozenset({
    "senator", "camerlengo", "cardinal", "bishop", "archbishop", "patriarch", "ayatollah",
    "sheikh", "emir", "sultan", "prince", "princess", "duke", "general", "admiral", "colonel",
    "judge", "justice", "ambassador", "chairman", "chairwoman", "chancellor", "commissioner",
    "congressman", "congresswoman", "representative", "deputy", "sheriff", "navy", "army",
    "military", "police", "coastguard", "defense", "defence", "interior", "treasury",
    "railway", "railways", "ministry", "embassy", "cabinet", "parliament", "senate",
    "congress", "court", "judiciary", "customs", "government", "presidency",
})
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


def _generic(entity: Entity) -> bool:
    """A lone title, office or service word ("Senator", "Navy")."""
    return surface_name(entity.text).casefold() in _GENERIC_WORDS


def _named_by_title(entity: Entity) -> bool:
    """Linked to an article whose title is a name other than the word: "[[Indian Navy|Navy]]",
    not "[[Camerlengo]]"."""
    title = canonical_name(entity)
    return bool(entity.wiki_title) and _written_as_name(title) and (
        title.casefold() != surface_name(entity.text).casefold()
        and title.casefold() not in _GENERIC_WORDS)


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
    elif _generic(entity):
        if not _named_by_title(entity):
            return GENERIC
        text = canonical_name(entity)
    if is_county_without_state(entity):
        return AMBIGUOUS_COUNTY
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
    basketball team|Germany]]" names the team, not the country; a question must too; and a
    county's, whose state the title gives ("[[Hickman County, Kentucky|Hickman County]]")."""
    text, title = surface_name(entity.text).casefold(), canonical_name(entity).casefold()
    return bool(entity.wiki_title) and (title.startswith(f"{text} ") or (
        bool(COUNTY.search(surface_name(entity.text))) and title.startswith(f"{text}, ")))


def _renamed(entity: Entity) -> bool:
    """Whether the entity is named by its article's title rather than its text."""
    return (_describes(entity) or _role_before(entity) or _title_goes_on(entity)
            or (_generic(entity) and _named_by_title(entity)))


def named(entity: Entity) -> Entity:
    """`entity` with its name cleaned for use in a question (the title is kept as it is); a
    link text that describes, or puts a role before the name, gives way to the article's
    title."""
    text = canonical_name(entity) if _renamed(entity) else surface_name(entity.text)
    return entity if text == entity.text else entity.model_copy(update={"text": text})


def usable(entities: list[Entity], set_aside: Counter[str] | None = None,
           text: str | None = None) -> list[Entity]:
    """The named things among `entities` (of the event whose sentence is `text`), cleaned, one
    per name (the one with a title first); `set_aside` counts the others by reason, and the
    describing link texts renamed (`RENAMED`). A span NER ran on past its name is trimmed
    ("Serbia 83–77"), a county takes the state the event gives. A name that only adds a role
    before another's ("Ukrainian President Volodymyr Zelenskyy" beside "Volodymyr Zelenskyy")
    is that one; a span that is only a part of a longer name ("Kafr" of "Kafr 'Aqab") is none."""
    kept: dict[str, tuple[Entity, str]] = {}  # each name's entity, and how the text writes it
    for entity in entities:
        entity = with_state(trimmed(entity), text)
        reason = set_aside_reason(entity)
        if reason is not None:
            _count(set_aside, reason)
            continue
        if _renamed(entity):
            _count(set_aside, RENAMED)
        clean = named(entity)
        key = clean.text.casefold()
        if key not in kept or (clean.wiki_title and not kept[key][0].wiki_title):
            kept[key] = (clean, _written(entity, clean))
    names = _one_per_thing(kept, set_aside)
    longer = [n for n in names if _a_name(n[0])]
    whole = [e for e, written in names
             if not is_fragment(e, written, [n for n in longer if n[0] is not e], text)]
    _count(set_aside, FRAGMENT, len(names) - len(whole))
    return whole


def _one_per_thing(kept: dict[str, tuple[Entity, str]], set_aside: Counter[str] | None
                   ) -> list[tuple[Entity, str]]:
    """The names but those another names better (`_same_thing_named_better`); one dropped
    for a longer is counted a fragment ("Atlas" of "High Atlas"), a role before a name not."""
    names = []
    for key, (e, written) in kept.items():
        better = [o for k, (o, _) in kept.items() if k != key and _same_thing_named_better(e, o)]
        if not better:
            names.append((e, written))
        elif len(e.text) < len(better[0].text):
            _count(set_aside, FRAGMENT)
    return names


def _a_name(entity: Entity) -> bool:
    """Written as a name, maybe with its kind after it ("Bang Kruai district", "Apollo crater",
    "Nova music festival massacre"); not a phrase about a name ("Gaza's civil defence
    agency")."""
    words = entity.text.split()
    head = next((i for i, w in enumerate(words) if not _written_as_name(w)), len(words))
    return head > 0 and _written_as_name(" ".join(words[:head])) and not any(
        _written_as_name(w) for w in words[head:]) and not any(
        w.endswith(("'s", "’s")) for w in words[:head])


def _written(entity: Entity, clean: Entity) -> str:
    """How the text writes the name, where it does: a link text that describes or puts a role
    first ("Israel's prime minister") writes no name, and no name is a part of it."""
    text = surface_name(entity.text)
    return text if text.casefold() in clean.text.casefold() else clean.text


def _count(set_aside: Counter[str] | None, reason: str, n: int = 1) -> None:
    if set_aside is not None and n:
        set_aside[reason] += n


def _same_thing_named_better(entity: Entity, other: Entity) -> bool:
    """Two spans of one name, one inside the other's end ("Ukrainian President Volodymyr
    Zelenskyy" and "Volodymyr Zelenskyy", "High Atlas" and "Atlas"): the one with a title is
    the name; with a title on both or neither, the shorter when what comes before it is a role
    (lower-case words, an office, a title or a demonym). Before a name ("Al Jazeera Arabic"
    and "Arabic"), the shorter is a part of the longer: `is_fragment` judges it."""
    long, short = sorted((entity, other), key=lambda e: len(e.text), reverse=True)
    before = long.text[: -len(short.text)].strip()
    if not long.text.casefold().endswith(f" {short.text.casefold()}") or before.endswith(","):
        return False  # "Hickman County, Kentucky" is no role before "Kentucky"
    if bool(short.wiki_title) == bool(long.wiki_title):
        return other is short and _a_role(before)
    return other is (short if short.wiki_title else long)


def _a_role(words: str) -> bool:
    """Words before a name that say what the named one is ("Ukrainian President", "Special
    counsel", "Senator"), not a part of the name ("Al Jazeera", "Donald")."""
    return (not _written_as_name(words) or bool(_OFFICE.search(words))
            or any(w.strip(".,'’") in DEMONYMS or w.casefold() in _GENERIC_WORDS
                   for w in words.split()))
