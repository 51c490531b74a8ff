"""Bridges described only through the event (the connected recipe's unknown part).

One request describes every named thing of the event (`DescribeBridges`), or says why it cannot
be (its part was foreseeable, several things are alike, every description gives it away, it is
no specific thing). Each description is checked: a noun phrase starting with "the", dated with
the event's year, not naming the bridge, and naming nothing that leads to the bridge by what
was written before the cutoff (`giveaways`). A small model writes no description: the event
sentence's parse does (`generation/structural.py`), and a giveaway name in it is said by its
kind ("most of a town").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cuqa_builder.generation.algorithm import KnownArticle, same_entity
from cuqa_builder.generation.bridges import usable
from cuqa_builder.generation.output_parsing import OutputError, parse_passage
from cuqa_builder.generation.steps import Step, names_found
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.verification.names import kind_of, names_of

_MIN_WORDS, _MAX_WORDS = 5, 35
_QUOTES = "\"'“”‘’«»`*"
_YEAR = re.compile(r"\b(?:1[89]|2\d)\d{2}\b")
# "B3: the town where ..." or "B3: SKIP foreseeable: ..."
_BRIDGE_LINE = re.compile(r"^[\s*#>_-]*B(\d{1,2})\b[*_]*\s*[:.)–—-]\s*[*_]*\s*(.*)$",
                          re.IGNORECASE)
_SKIP = re.compile(r"^\W*skip\b\W*(.*)$", re.IGNORECASE)
_LEAD_IN = re.compile(r"^(?:noun phrase|description)\s*:\s*", re.IGNORECASE)


def parse_descriptions(raw: str) -> str:
    """The reply's "B<n>: ..." lines as they are, one per line; refused without any."""
    lines = [f"B{int(m[1])}: {m[2].strip()}"
             for line in parse_passage(raw).splitlines() if (m := _BRIDGE_LINE.match(line))]
    if not lines:
        raise OutputError("no 'B1: ...' line in the model output")
    return "\n".join(lines)


DESCRIBE_BRIDGES = Step(
    "DescribeBridges", "connected_describe_bridges",
    frozenset({"event", "date", "bridges", "cutoff"}), parse_descriptions, feedback=True,
    long_output=True,
)


def as_description(text: str) -> str:
    """A noun phrase to stand inside a question: no label, quotes or full stop, its leading
    "The" in lower case."""
    phrase = _LEAD_IN.sub("", text.strip().strip(_QUOTES).strip()).strip(_QUOTES).strip()
    phrase = phrase.rstrip(".").strip()
    return "the" + phrase[3:] if phrase.startswith("The ") else phrase


def _leans_on_a_topic(phrase: str, topics: list[str]) -> str | None:
    """A "the X" whose X only the topic line the event is filed under introduces ("the death
    toll from the earthquake rose" under "2023 Al Haouz earthquake"): in a question it refers
    to nothing."""
    for word in {w for topic in topics for w in re.findall(r"\b[a-z]{4,}\b", topic)}:
        if re.search(rf"\bthe {word}\b", phrase) and not re.search(rf"\ban? {word}\b", phrase):
            return f"the {word}"
    return None


def description_problem(phrase: str, names: list[str], event: Event) -> str | None:
    """Why a description cannot stand for the bridge in a question, or None."""
    words, year = len(phrase.split()), event.date.year
    if found := names_found(phrase, names):
        return f"the description names the bridge {found!r}"
    if phrase.endswith("?") or not phrase.lower().startswith("the "):
        return "the description is not a noun phrase starting with 'the'"
    if not _MIN_WORDS <= words <= _MAX_WORDS:
        return f"the description has {words} words (not {_MIN_WORDS}-{_MAX_WORDS})"
    if str(year) not in phrase:
        return f"the description does not date the event ({year})"
    if dangling := _leans_on_a_topic(phrase, event.topics):
        return f"the description says {dangling!r}, which only the event's topic line names"
    return None


@dataclass(frozen=True)
class Described:
    """A bridge's description, or why it has none."""

    description: str | None = None
    set_aside: str | None = None


def read_descriptions(parsed: str, bridges: list[Entity], event: Event,
                      known: dict[str, KnownArticle]) -> list[Described]:
    """Each bridge's line of the reply (listed as B1, B2, ... in `bridges`' order), checked."""
    lines: dict[int, list[str]] = {}
    for line in parsed.splitlines():
        if found := _BRIDGE_LINE.match(line):
            lines.setdefault(int(found[1]), []).append(found[2].strip())
    read = []
    for number, bridge in enumerate(bridges, 1):
        said = lines.get(number, [])
        if len(said) != 1:
            read.append(Described(set_aside="no line for it in the reply" if not said
                                  else "two lines for it in the reply"))
            continue
        if skipped := _SKIP.match(said[0]):
            read.append(Described(set_aside=f"skipped: {skipped[1].strip() or 'no reason'}"))
            continue
        phrase = as_description(said[0])
        problem = description_problem(phrase, names_of(bridge), event)
        if problem is None and (leaks := giveaways(phrase, bridge, event, known)):
            problem = (f"the description names {leaks[0].text!r}, which gives "
                       f"{bridge.text!r} away without the news")
        read.append(Described(set_aside=f"refused: {problem}") if problem
                    else Described(description=phrase))
    return read


THE_EVENT_ITSELF = "the event itself (a topic it is filed under, or a name dated its year)"


def is_the_event(entity: Entity, event: Event) -> bool:
    """A topic the event is filed under, or a name dated the event's year ("2023 Guatemalan
    general election")."""
    names = names_of(entity)
    return (any(n.casefold() in {t.casefold() for t in event.topics} for n in names)
            or any(str(event.date.year) in _YEAR.findall(n) for n in names))


def _mentions(article: KnownArticle, entity: Entity) -> bool:
    """Whether an article's lead names the entity or links its article."""
    title = entity_key(entity)
    return (any(link.title.casefold() == title.casefold() for link in article.links)
            or bool(names_found(article.passage, names_of(entity))))


def giveaways(description: str, bridge: Entity, event: Event,
              known: dict[str, KnownArticle]) -> list[Entity]:
    """The other named things of the event that the description names and that lead to the
    bridge by what was written before the cutoff: one's article names the bridge, or the
    bridge's names it ("the town of Lahaina" gives Maui away, "the High Atlas" Morocco), or it
    is the event itself, scheduled before the cutoff ("the 2023 Rugby World Cup")."""
    own = known.get(entity_key(bridge))
    found = []
    for other in usable(event.entities, text=event.text):
        if same_entity(other, bridge) or not names_found(description, names_of(other)):
            continue
        article = known.get(entity_key(other))
        if is_the_event(other, event) or (article is not None and _mentions(article, bridge)) \
                or (own is not None and _mentions(own, other)
                    and not _holds_too_many(other, bridge, known)):
            found.append(other)
    return found


# Kinds of place that hold too many people for naming one to point to a person in it.
_LARGE_PLACES = frozenset({"country", "state", "province", "region"})


def _holds_too_many(place: Entity, bridge: Entity, known: dict[str, KnownArticle]) -> bool:
    """A person's article names their country, but "the politician who won Guatemala's runoff"
    does not give Arévalo away: the country holds thousands like him. (A place in a country is
    another matter: few islands of Hawaii, few ranges of Morocco.)"""
    return kind_word(bridge, known) == "person" and kind_word(place, known) in _LARGE_PLACES


# Infobox kinds plain enough to stand in a question for the name; others (jargon such as
# "census-designated place") give way to NER's plain word ("place"). A closed class.
_PLAIN_KINDS = frozenset({
    "city", "town", "village", "country", "island", "islands", "state", "province", "region",
    "county", "district", "river", "lake", "mountain", "mountain range", "volcano", "company",
    "political party", "university", "club", "team", "airport", "port", "stadium", "person",
    "church", "cathedral", "abbey", "building", "palace", "castle", "bridge",
})


def plain_kind(kind: str | None) -> str | None:
    """An infobox's kind as a plain word: as it is when plain, else its last word when that is
    ("home rule city" -> "city"), else None."""
    if kind is None or kind in _PLAIN_KINDS:
        return kind
    last = kind.split()[-1] if kind.split() else ""
    return last if last in _PLAIN_KINDS else None


def kind_word(entity: Entity, known: dict[str, KnownArticle]) -> str:
    """A plain word for what a named thing is: its infobox's kind when plain, else NER's."""
    article = known.get(entity_key(entity))
    return plain_kind(article.kind if article is not None else None) or kind_of(entity)


# Whatever leads to a name in a description: its own kind ("the town of Lahaina"), a "the".
_LEAD_TO = r"(?:\bthe\s+(?P<kind>[a-z][\w-]*)\s+of\s+|\bthe\s+)?"
# After a name said by its kind, what keeps the phrase whole: the end, a comma, a preposition
# or a clause ("most of a town, in August", "a mountain range in 2023"). Anything else means
# the name modified a noun ("his 24th Grand Slam singles title"): no kind can stand there.
_STANDS_ALONE = re.compile(
    r"^(?:$|[,;.)]|\s+(?:in|at|on|near|into|from|and|with|after|before|during|by|as|where"
    r"|which|that|who|killing|leaving)\b)")
# NER's kinds for a name whose article gives none: "releasing water from an organisation into a
# place" says nothing a person would write.
_VAGUE_KINDS = frozenset({"place", "organisation", "thing", "event"})


def without_giveaways(description: str, others: list[Entity], event: Event,
                      known: dict[str, KnownArticle]) -> str | None:
    """The description with each name that gives the bridge away said by its kind instead:
    "the islands where wildfires destroyed most of the town of Lahaina" -> "... most of a
    town". None when one cannot be: the event itself (a thing dated its year was scheduled
    before the cutoff), a name that modifies a noun, or one whose kind is only NER's vague
    word."""
    for other in others:
        if is_the_event(other, event):
            return None
        names = "|".join(re.escape(n) for n in sorted(names_of(other), key=len, reverse=True))
        found = re.search(rf"{_LEAD_TO}(?<!\w)(?:{names})(?!\w)", description, re.IGNORECASE)
        if found is None or not _STANDS_ALONE.match(description[found.end():]):
            return None
        kind = found["kind"] or kind_word(other, known)
        if kind in _VAGUE_KINDS:
            return None
        article = "an" if kind[0] in "aeiou" else "a"
        description = f"{description[:found.start()]}{article} {kind}" \
            f"{description[found.end():]}"
    return description
