"""Known hops: what was known of each bridge at the cutoff, as questions (the connected recipe's
known part).

A bridge's hops come from three places, and each hop keeps which:
- `infobox`: one relation of its article's infobox at the cutoff with a question template
  (`prompts/known_questions_from_infobox.txt`), asked without a call;
- `article`: a question the generator writes about one lasting property whose answer its
  article's lead links (`KnownFacts`, one request for all the bridges of an event);
- `model`: with `--known-source model`, a lasting property from the generator's own knowledge
  of before the cutoff (the same request, without the articles).
An ABC hop asks one property of the bridge, the bridge its last words; an AAB hop is a category
of 10 to 60 members holding the bridge. Each is checked before it joins the pool: the question
reads as one question, names the bridge as written and not its own answer; the answer is a
named thing, neither the bridge nor the event nor anything the event names; the category is a
short plural phrase of the bridge's own kind ("member states" hold countries, not a national
team).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from cuqa_builder.generation.algorithm import LINK_LABEL, KnownArticle, same_entity
from cuqa_builder.generation.bridges import set_aside_reason
from cuqa_builder.generation.describing import is_the_event
from cuqa_builder.generation.output_parsing import OutputError, parse_passage
from cuqa_builder.generation.steps import Step, StepCheck, names_found
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.records.items import KnownFrom
from cuqa_builder.verification.names import mention, names_of, without_the
from cuqa_builder.verification.question_form import form_problem

_MAX_KNOWN_QUESTION_WORDS = 16  # besides the bridge's name: one property, no room for clues
_MAX_CATEGORY_WORDS = 10
MODEL_LABEL = "FACT"  # label of an answer the generator named from its own knowledge
CATEGORY = "category"
# "T2 | birthplace | Alausí | What is the birthplace of X?" or "T2 | category | ..."
_FACT_LINE = re.compile(r"^[\s*#>_-]*T(\d{1,2})\b[*_]*\s*\|(.+)$", re.IGNORECASE)
_NOTHING = re.compile(r"^\W*(?:none|nothing|n/a)\W*$", re.IGNORECASE)
_QUOTES = "\"'“”‘’«»`*"
# "the oldest Grand Slam": the description would land after "the oldest".
_DETERMINER_BEFORE = re.compile(r"\b(?:the|a|an)\s+[\w-]+\s+$", re.IGNORECASE)


def parse_facts(raw: str) -> str:
    """The reply's "T<n> | ..." lines, fields trimmed; "" for a reply that says there is
    nothing (the prompt allows it); refused when it has text but no such line."""
    try:
        text = parse_passage(raw).strip()
    except OutputError:  # an empty reply: nothing to write, as the prompt allows
        return ""
    if _NOTHING.match(text):
        return ""
    lines = []
    for line in text.splitlines():
        if found := _FACT_LINE.match(line):
            fields = [f.strip().strip(_QUOTES).strip() for f in found[2].split("|")]
            lines.append(" | ".join([f"T{int(found[1])}", *fields]))
    if not lines:
        raise OutputError("no 'T1 | ...' line in the model output")
    return "\n".join(lines)


_FACT_VALUES = frozenset({"event", "date", "things", "cutoff"})
KNOWN_FACTS = Step("KnownFacts", "connected_known_facts", _FACT_VALUES, parse_facts,
                   long_output=True, feedback=True)
KNOWN_FACTS_MODEL = Step("KnownFacts", "connected_known_facts_model", _FACT_VALUES, parse_facts,
                         long_output=True, feedback=True)


@dataclass(frozen=True)
class Hop:
    """One known hop of a bridge: a property question (ABC) or a category (AAB)."""

    property: str  # "birthplace", "district", "category"
    known_from: KnownFrom
    question: str | None = None  # ABC: the known question, naming the bridge as written
    answer: Entity | None = None  # ABC: its answer
    category: str | None = None  # AAB: the category holding the bridge


@dataclass(frozen=True)
class BridgeFacts:
    """What the hops of one bridge are checked against."""

    entity: Entity
    names: list[str]  # every name a question may call it by
    kind: str  # what it is, in a plain word
    links: list[Entity]  # its article's linked named things (the answers a hop may have)
    written: str = ""  # its name as the prompt wrote it ("the United Kingdom")


# The same property under the names models give it.
_PROPERTY_NAMES = {"birth place": "birthplace", "place of birth": "birthplace",
                   "founded by": "founder", "founders": "founder",
                   "university": "alma mater", "almamater": "alma mater",
                   "federation": "governing body", "association": "governing body",
                   "home stadium": "home ground", "stadium": "home ground"}


def property_name(text: str) -> str:
    """A property as the mix counts it: lower case, single spaces, no "the", one name each."""
    name = without_the(" ".join(text.lower().split())).strip(" .:")
    return _PROPERTY_NAMES.get(name, name)


def about_the_event(entity: Entity, event: Event) -> bool:
    """Whether a named thing is the event itself or named by it. The known hop's answer must
    come from what was known, not from the news."""
    return is_the_event(entity, event) or bool(names_found(event.text, names_of(entity)))


def answer_problem(answer: Entity, bridge: BridgeFacts, event: Event) -> str | None:
    """Why a named thing cannot answer a known hop of the bridge, or None."""
    if reason := set_aside_reason(answer):
        return f"the answer {answer.text!r} is {reason}"
    if same_entity(answer, bridge.entity):
        return f"the answer {answer.text!r} is the bridge itself"
    if about_the_event(answer, event):
        return f"the answer {answer.text!r} is the event or named by it"
    return None


def property_check(bridge: list[str], answer: list[str]) -> StepCheck:
    """A known question about one property of the bridge: the bridge its last words, so that
    the long description the merge puts in its place leaves no word stranded after it."""

    def check(question: str) -> str | None:
        if problem := form_problem(question):
            return f"the known question: {problem}"
        if found := names_found(question, answer):
            return f"the known question names its own answer {found!r}"
        match = mention(question, bridge)
        if match is None:
            return f"the known question does not name the bridge {bridge[0]!r} as written"
        if len(question.split()) - len(match.group().split()) > _MAX_KNOWN_QUESTION_WORDS:
            return "the known question says more than one property of the bridge"
        if _DETERMINER_BEFORE.search(question[: match.start()]):
            return ("the known question puts words between an article and the bridge ('the "
                    "oldest X'): its description would not fit there")
        if question[match.end():].strip(" ?\"'”’"):
            return ("the known question goes on after the bridge (its description would leave "
                    "the end of the question stranded): end it with the bridge")
        return None

    return check


# What a category's last word says its members are, for the kinds a bridge often has: a
# national team is no member state, a town no club. A closed class; other words pass.
_MEMBER_KINDS = {
    "country": frozenset({"countries", "states", "nations", "members", "economies"}),
    "team": frozenset({"teams", "clubs", "sides", "squads", "members", "participants"}),
    "club": frozenset({"clubs", "teams", "sides", "members", "participants"}),
    "person": frozenset({"people", "laureates", "winners", "members", "politicians", "players",
                         "leaders", "presidents", "ministers", "athletes", "recipients"}),
}
_PLURALS = frozenset({"people", "men", "women", "children", "alumni", "media"})
_COUNTRY_WORDS = frozenset({"countries", "states", "nations", "economies"})


def _head_noun(words: list[str]) -> str:
    """What a category's members are called: its last word when plural ("Premier League
    clubs"), else the word before its "of" ("districts of Tamil Nadu")."""
    lowered = [w.lower().strip(",") for w in words]
    if lowered[-1].endswith("s") or "of" not in lowered:
        return lowered[-1]
    return lowered[lowered.index("of") - 1] if lowered.index("of") else lowered[-1]


def category_problem(category: str, bridge: BridgeFacts) -> str | None:
    """Why a category cannot be the AAB hop of the bridge, or None."""
    if found := names_found(category, bridge.names):
        return f"the category names the bridge {found!r}"
    words = category.split()
    if not 1 < len(words) <= _MAX_CATEGORY_WORDS:
        return f"the category {category!r} is not a short plural noun phrase"
    head = _head_noun(words)
    if not head.endswith("s") and head not in _PLURALS:
        return f"the category {category!r} is not a plural noun phrase (its members)"
    members = _MEMBER_KINDS.get(bridge.kind)
    if members is not None and head not in members:
        return f"the category {category!r} holds {head}, not a {bridge.kind}"
    if members is None and head in _COUNTRY_WORDS:
        return f"the category {category!r} holds {head}, and {bridge.entity.text!r} is a " \
            f"{bridge.kind}"
    return None


def read_facts(parsed: str, bridges: Sequence[BridgeFacts], event: Event,
               known_from: KnownFrom) -> tuple[list[list[Hop]], list[str]]:
    """Each bridge's hops from the reply (bridges listed as T1, T2, ...), and why the refused
    lines were refused."""
    hops: list[list[Hop]] = [[] for _ in bridges]
    refused: list[str] = []
    for line in parsed.splitlines():
        fields = [f.strip() for f in line.split(" | ")]
        number = int(fields[0][1:]) if fields[0][1:].isdigit() else 0
        if not 1 <= number <= len(bridges):
            refused.append(f"{line!r}: no named thing {fields[0]} was listed")
            continue
        hop = _hop(fields[1:], bridges[number - 1], event, known_from)
        if isinstance(hop, str):
            refused.append(f"{bridges[number - 1].entity.text}: {hop}")
        else:
            hops[number - 1].append(hop)
    return hops, refused


def _hop(fields: list[str], bridge: BridgeFacts, event: Event, known_from: KnownFrom
         ) -> Hop | str:
    """One line's hop, or why it is refused."""
    if len(fields) == 2 and property_name(fields[0]) == CATEGORY:
        category = without_the(fields[1])
        return category_problem(category, bridge) or Hop(CATEGORY, known_from,
                                                         category=category)
    if len(fields) != 3:
        return f"a line of {len(fields)} fields, not 3 (property | answer | question)"
    prop, said, question = fields
    if known_from == "model":
        answer = Entity(text=said, label=MODEL_LABEL)
    else:
        found = chosen(said, bridge.links)
        if found is None:
            return f"the answer {said!r} is not one of the article's linked named things"
        answer = found
    if problem := answer_problem(answer, bridge, event):
        return problem
    check = property_check(bridge.names, names_of(answer))
    if (problem := check(question)) and (asked := templated(prop, bridge)):
        question, problem = asked, check(asked)  # "Which university did X attend?"
    return problem or Hop(property_name(prop), known_from, question=question, answer=answer)


def templated(prop: str, bridge: BridgeFacts) -> str | None:
    """The templated question of a property the infobox templates know ("alma mater" -> "What
    is the alma mater of X?"): a model's question that does not end with the bridge is asked
    that way instead."""
    wanted = property_name(prop)
    for found, template in infobox_questions().values():
        if "{label}" in found and "{label}" in template and wanted in _DIVISIONS:
            return template.format(bridge=bridge.written or bridge.entity.text, label=wanted)
        if found == wanted:
            return template.format(bridge=bridge.written or bridge.entity.text, label="")
    return None


# The divisions a place lies in, asked "Which district contains X?" (as an infobox's row does).
_DIVISIONS = frozenset({"district", "province", "region", "state", "county", "governorate",
                        "municipality", "prefecture", "oblast", "department", "country",
                        "administrative region"})


def chosen(answer: str, answers: Sequence[Entity]) -> Entity | None:
    """The named thing a reply chose, by any of its names."""
    wanted = answer.casefold()
    return next((e for e in answers if wanted in {n.casefold() for n in names_of(e)}), None)


INFOBOX_QUESTIONS = "known_questions_from_infobox"
_NUMBERED = re.compile(r"\d+$")


@cache
def infobox_questions() -> dict[str, tuple[str, str]]:
    """Infobox parameter -> (the property, the question template) it makes."""
    text = load_prompt(INFOBOX_QUESTIONS, expects=frozenset({"bridge", "label"})).text
    rows = (line.split(" | ") for line in text.splitlines() if line.count(" | ") == 2)
    return {name.strip(): (prop.strip(), question.strip()) for name, prop, question in rows}


def infobox_hops(article: KnownArticle | None, bridge: BridgeFacts, event: Event
                 ) -> tuple[list[Hop], list[str]]:
    """The hops the bridge's infobox relations make (one named value each, a template for its
    parameter), and why the others were refused."""
    if article is None:
        return [], []
    templates = infobox_questions()
    hops: list[Hop] = []
    refused: list[str] = []
    seen: set[str] = set()
    for relation in article.relations:
        parameter = _NUMBERED.sub("", (relation.parameter or "").lower())
        if parameter not in templates or len(relation.values) != 1:
            continue
        label = (relation.label or "").lower()
        prop, template = templates[parameter]
        if "{label}" in prop and not label:
            continue
        link = relation.values[0]
        answer = Entity(text=link.text, label=LINK_LABEL, wiki_title=link.title)
        question = template.format(bridge=article.as_written(bridge.entity.text), label=label)
        if question in seen:
            continue
        seen.add(question)
        problem = answer_problem(answer, bridge, event)
        if problem:
            refused.append(f"{bridge.entity.text}: {problem}")
            continue
        hops.append(Hop(property_name(prop.format(label=label)), "infobox", question=question,
                        answer=answer))
    return hops, refused
