"""The connected recipe (`--prompts connected`, the default): items a model can answer only by
learning the event.

The paper's recipe lets the model merge two free-standing questions, and the known question it
writes tends to identify the answer by itself (a shortcut). Here the model writes less and the
structure does the rest:
- the bridge is described **only through the event** (a noun phrase with its details and date);
- ABC: the known question asks **one property of the bridge** (its answer a link of the bridge's
  article at the cutoff, or an entity of a passage written "as known before" the cutoff), and
  the merged question is that question with the bridge's name replaced by the description;
- AAB: the known part is a **category with several members** holding the bridge, and the merged
  question asks which member of it the description picks out.
So the merge adds nothing but the event, and masking the description leaves a question (kept as
`masked_question`) on which the checker guesses without the event. The checker's four checks
(`verification/checker.py`) are asked as soon as an item is composed: a bridge whose item fails
one is replaced by the next.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import ClassVar

from cuqa_builder.generation.algorithm import (
    LINK_LABEL,
    MERGE_QUESTIONS,
    Draws,
    GenerationError,
    Generator,
    KnownArticle,
    Step,
    StepCheck,
    StepResult,
    draw,
    names_found,
    same_entity,
)
from cuqa_builder.generation.bridges import set_aside_reason, usable
from cuqa_builder.generation.output_parsing import OutputError, parse_passage, parse_question
from cuqa_builder.generation.structural import describe_from_parse, plural
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records import Candidate, Entity, Event, Intermediates, Link, PromptCall
from cuqa_builder.verification.checker import CHECKER_TEMPLATES, cutoff_phrase, failure_reason
from cuqa_builder.verification.masking import masked_description
from cuqa_builder.verification.names import (
    canonical_name,
    kind_of,
    mention,
    names_of,
    substitute,
    surface_name,
    without_the,
)
from cuqa_builder.verification.question_form import category_question, form_problem

_MIN_DESCRIPTION_WORDS, _MAX_DESCRIPTION_WORDS = 5, 35
_MAX_KNOWN_QUESTION_WORDS = 16  # besides the bridge's name: one property, no room for clues
_MAX_CATEGORY_WORDS = 10
BRIDGE_TRIES = 3  # bridges tried per event before its last item goes on as it is
_MAX_KNOWN_ANSWERS = 30  # named things of the passage offered as the known question's answer
_LEAD_IN = re.compile(r"^(?:noun phrase|description|category|answer)\s*:\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’«»`*"
_NONE = re.compile(r"^\W*none\b", re.IGNORECASE)
# "the oldest Grand Slam": the description would land after "the oldest".
_DETERMINER_BEFORE = re.compile(r"\b(?:the|a|an)\s+[\w-]+\s+$", re.IGNORECASE)
# A possessive after the bridge ("X's capital") would land on the description's last word.
_AFTER_BRIDGE = re.compile(r"^\W*$")
_ANSWER_LINE = re.compile(r"^\W*answer\W*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
_YEAR = re.compile(r"\b(?:1[89]|2\d)\d{2}\b")


def parse_phrase(raw: str) -> str:
    """The first line of a reply that should be a bare phrase: no label, quotes or full stop."""
    lines = [line.strip().strip(_QUOTES).strip() for line in parse_passage(raw).splitlines()]
    phrase = _LEAD_IN.sub("", next((line for line in lines if line), "")).strip(_QUOTES).strip()
    phrase = phrase.rstrip(".").strip()
    if not phrase:
        raise OutputError("no phrase in the model output")
    return phrase


def parse_description(raw: str) -> str:
    """A noun phrase to stand inside a question: its leading "The" in lower case."""
    phrase = parse_phrase(raw)
    return "the" + phrase[3:] if phrase.startswith("The ") else phrase


def _two_lines(first: str, second: str, parse_second: Callable[[str], str]
               ) -> Callable[[str], str]:
    """A parser for a reply of two labelled lines ("Answer: X" / "Question: ...?"), as two
    lines in that form again ("NONE" when the model found none)."""
    label = re.compile(rf"^\W*{first}\W*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)

    def parse(raw: str) -> str:
        text = parse_passage(raw)
        if _NONE.match(text.strip().strip(_QUOTES)):
            return "NONE"
        found = label.search(text)
        if found is None:
            raise OutputError(f"no '{first}:' line in the model output")
        value = found[1].strip().strip(_QUOTES).rstrip(".").strip()
        return f"{first}: {value}\n{second}: {parse_second(label.sub('', text))}"

    return parse


parse_answer_and_question = _two_lines("Answer", "Question", parse_question)
parse_chosen_bridge = _two_lines(
    "Named thing", "Description",
    lambda rest: parse_description(re.sub(r"(?im)^\W*description\W*:\s*", "", rest)))


def two_parts(parsed: str) -> tuple[str, str] | None:
    """The two values of a two-line reply as its parser writes it; None for NONE."""
    if parsed == "NONE":
        return None
    first, second = parsed.split("\n", 1)
    return first.split(": ", 1)[1], second.split(": ", 1)[1]


DESCRIBE_BRIDGE = Step(
    "DescribeBridge", "connected_describe_bridge",
    frozenset({"event", "date", "bridge", "cutoff", "others"}), parse_description, feedback=True,
)
CHOOSE_BRIDGE = Step(
    "ChooseBridge", "connected_choose_bridge",
    frozenset({"event", "date", "bridges", "cutoff"}), parse_chosen_bridge, feedback=True,
)
KNOWN_PASSAGE = Step(
    "KnownPassage", "connected_known_passage", frozenset({"entity", "event", "cutoff"}),
    parse_passage, long_output=True,
)
PROPERTY_QUESTION = Step(
    "PropertyQuestion", "connected_known_question",
    frozenset({"passage", "bridge", "answers", "event", "cutoff"}), parse_answer_and_question,
    feedback=True,
)
CATEGORY = Step(
    "Category", "connected_category", frozenset({"bridge", "passage", "cutoff"}),
    parse_phrase, feedback=True,
)


def _words(text: str) -> int:
    return len(text.split())


def description_check(names: list[str], year: int) -> StepCheck:
    def check(phrase: str) -> str | None:
        if _NONE.match(phrase):
            return None  # an answer: no phrase tells the bridge apart, the next one is tried
        if found := names_found(phrase, names):
            return f"the description names the bridge {found!r}"
        if phrase.endswith("?") or not phrase.lower().startswith("the "):
            return "the description is not a noun phrase starting with 'the'"
        if not _MIN_DESCRIPTION_WORDS <= _words(phrase) <= _MAX_DESCRIPTION_WORDS:
            return (f"the description has {_words(phrase)} words (not "
                    f"{_MIN_DESCRIPTION_WORDS}-{_MAX_DESCRIPTION_WORDS})")
        if str(year) not in phrase:
            return f"the description does not date the event ({year})"
        return None

    return check


def choice_check(bridges: list[Entity], event: Event, known: dict[str, KnownArticle]
                 ) -> StepCheck:
    """The named thing chosen is one of those offered, and its description passes
    `description_check` and names nothing that gives it away."""

    def check(parsed: str) -> str | None:
        found = two_parts(parsed)
        if found is None:
            return None  # an answer: no named thing of the news can be told apart
        chosen = chosen_answer(found[0], bridges)
        if chosen is None:
            return f"the named thing {found[0]!r} is not one of those offered"
        if problem := description_check(names_of(chosen), event.date.year)(found[1]):
            return problem
        if leaks := giveaways(found[1], chosen, event, known):
            return (f"the description names {leaks[0].text!r}, which gives {chosen.text!r} "
                    "away without the news")
        return None

    return check


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
        if _words(question) - _words(match.group()) > _MAX_KNOWN_QUESTION_WORDS:
            return "the known question says more than one property of the bridge"
        if _DETERMINER_BEFORE.search(question[: match.start()]):
            return ("the known question puts words between an article and the bridge ('the "
                    "oldest X'): its description would not fit there")
        if not _AFTER_BRIDGE.match(question[match.end():]):
            return ("the known question goes on after the bridge (its description would leave "
                    "the end of the question stranded): end it with the bridge")
        return None

    return check


def known_answer_check(bridge: list[str], answers: list[Entity]) -> StepCheck:
    """The answer is one of the named things offered, and the question asks for it."""

    def check(parsed: str) -> str | None:
        found = two_parts(parsed)
        if found is None:
            return None  # an answer: the other branch is tried
        answer, question = found
        chosen = chosen_answer(answer, answers)
        if chosen is None:
            return f"the answer {answer!r} is not one of the named things offered"
        return property_check(bridge, names_of(chosen))(question)

    return check


def chosen_answer(answer: str, answers: list[Entity]) -> Entity | None:
    """The named thing the model chose, by any of its names."""
    wanted = answer.casefold()
    return next((e for e in answers if wanted in {n.casefold() for n in names_of(e)}), None)


def category_check(bridge: list[str]) -> StepCheck:
    def check(category: str) -> str | None:
        if _NONE.match(category):
            return None  # an answer: the other branch is tried
        if found := names_found(category, bridge):
            return f"the category names the bridge {found!r}"
        if not 1 < _words(category) <= _MAX_CATEGORY_WORDS:
            return f"the category {category!r} is not a short plural noun phrase"
        return None

    return check


def unknown_question(kind: str, description: str) -> str:
    verb = "are" if plural(kind) else "is"  # "What are the islands where ...?"
    return f"{'Who' if kind == 'person' else 'What'} {verb} {description}?"


INFOBOX_QUESTIONS = "known_questions_from_infobox"


@cache
def infobox_questions() -> dict[str, str]:
    """Infobox parameter -> the known question it makes (`prompts/{INFOBOX_QUESTIONS}.txt`)."""
    text = load_prompt(INFOBOX_QUESTIONS, expects=frozenset({"bridge"})).text
    pairs = (line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {name.strip(): question.strip() for name, question in pairs}


THE_EVENT_ITSELF = "the event itself (a topic it is filed under, or a name dated its year)"


def is_the_event(entity: Entity, event: Event) -> bool:
    """A topic the event is filed under, or a name dated the event's year ("2023 Guatemalan
    general election")."""
    names = names_of(entity)
    return (any(n.casefold() in {t.casefold() for t in event.topics} for n in names)
            or any(str(event.date.year) in _YEAR.findall(n) for n in names))


def about_the_event(entity: Entity, event: Event) -> bool:
    """Whether a named thing is the event itself or named by it. The known hop's answer must
    come from what was known, not from the news."""
    return is_the_event(entity, event) or bool(names_found(event.text, names_of(entity)))


# Whatever leads to a name in a description: its own kind ("the town of Lahaina"), a "the".
_LEAD_TO = r"(?:\bthe\s+(?P<kind>[a-z][\w-]*)\s+of\s+|\bthe\s+)?"


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
    for other in usable(event.entities):
        if same_entity(other, bridge) or not names_found(description, names_of(other)):
            continue
        article = known.get(entity_key(other))
        if is_the_event(other, event) or (article is not None and _mentions(article, bridge)) \
                or (own is not None and _mentions(own, other)):
            found.append(other)
    return found


# Infobox kinds plain enough to stand in a question for the name; others (jargon such as
# "census-designated place") give way to NER's plain word ("place"). A closed class.
_PLAIN_KINDS = frozenset({
    "city", "town", "village", "country", "island", "islands", "state", "province", "region",
    "county", "district", "river", "lake", "mountain", "mountain range", "volcano", "company",
    "political party", "university", "club", "team", "airport", "port", "stadium", "person",
    "church", "cathedral", "abbey", "building", "palace", "castle", "bridge",
})


def kind_word(entity: Entity, known: dict[str, KnownArticle]) -> str:
    """A plain word for what a named thing is: its infobox's kind when plain, else NER's."""
    article = known.get(entity_key(entity))
    kind = article.kind if article is not None else None
    return kind if kind in _PLAIN_KINDS else kind_of(entity)


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
    "the islands where wildfires destroy most of the town of Lahaina" -> "... most of a
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


@dataclass(frozen=True)
class _Bridge:
    entity: Entity  # as the event names it, cleaned
    key: str  # its article's key (from the entity as the event file has it)
    names: list[str]  # every name a question could call it by
    kind: str  # what it is, in a plain word: "island", "company", "person"


def _bridge(entity: Entity, known: dict[str, KnownArticle]) -> _Bridge:
    """The bridge; its kind from its article's infobox when there is one, else NER's label."""
    clean = entity.model_copy(update={"text": surface_name(entity.text)})
    article = known.get(entity_key(entity))
    kind = article.kind if article and article.kind else kind_of(entity)
    return _Bridge(clean, entity_key(entity), names_of(entity), kind)


def _answer_names(entity: Entity, article: KnownArticle | None) -> tuple[str, list[str]]:
    """The canonical answer and its aliases: the name as written, and with the entity's article
    at hand its title (where a redirect led) and the bold names of its lead."""
    answer = canonical_name(entity)
    names = [surface_name(entity.text)]
    if article is not None:
        names += [article.evidence.title, *article.names]
    aliases = [n for n in dict.fromkeys(names) if n.casefold() != answer.casefold()]
    return answer, aliases


class NoBridge(GenerationError):
    """The model finds no named thing of the news worth describing (an answer, not a refusal:
    the event gives no item)."""


@dataclass(frozen=True)
class _KnownPart:
    """What the item knows of the bridge: the passage, and the category holding it (AAB) or a
    known answer with its question (ABC)."""

    passage: str
    category: str | None = None
    k_ent: Entity | None = None
    known: str | None = None
    templated: bool = False  # the question from the infobox template file (no call)
    fallback: str | None = None  # why the other branch than the one drawn


@dataclass
class ConnectedGenerator(Generator):
    recipe: ClassVar[str] = "connected"
    steps: ClassVar[tuple[Step, ...]] = (
        CHOOSE_BRIDGE, DESCRIBE_BRIDGE, KNOWN_PASSAGE, PROPERTY_QUESTION, CATEGORY,
        MERGE_QUESTIONS,
    )
    default_known_source: ClassVar = "wiki"

    @classmethod
    def bridge_candidates(cls, event: Event, set_aside: Counter[str] | None = None
                          ) -> list[Entity]:
        """Named things only (no demonyms, common nouns, offices, dates), and not the event
        itself: a thing dated the event's year or the topic it is filed under ("2023 Turkish
        presidential election") was scheduled before the cutoff, and describing it by its own
        news gives it away."""
        named = usable(event.entities, set_aside)
        kept = [e for e in named if not is_the_event(e, event)]
        if set_aside is not None and len(kept) < len(named):
            set_aside[THE_EVENT_ITSELF] += len(named) - len(kept)
        return kept

    async def easy(self, event: Event) -> Candidate:
        """Up to `BRIDGE_TRIES` bridges: an item the checker fails (its answer guessed without
        the event, another answer with it) is set aside for the next bridge (the same calls as
        the validate stage's checks, which the cache then answers). With no bridge left, the
        last item made goes on to validation. Without a `checker` (a small model, or the checks
        turned off) the first item made goes on at once.

        The model chooses each bridge among those not tried yet, listed in the order drawn
        (`ChooseBridge`), and may find none worth describing; a small model (`structure_first`)
        takes them in the order drawn."""
        pool = self._bridge_pool(event)
        draws = draw(self.seed, event.id, len(pool))
        order = [pool[(draws.cur_index + i) % len(pool)] for i in range(len(pool))]
        spent: list[PromptCall] = []
        made: Candidate | None = None
        failure: GenerationError | None = None
        tried: list[Entity] = []
        while len(tried) < min(BRIDGE_TRIES, len(order)):
            untried = [e for e in order if e not in tried]
            try:
                entity, description = untried[0], None
                if not self.structure_first:
                    entity, description = await self._choose(event, untried, draws, spent)
            except NoBridge as exc:
                failure = exc
                break  # none left worth describing
            except GenerationError as exc:  # every reply refused: the parse may describe one
                spent += exc.attempts
                description = await self._parsed_description(
                    event, _bridge(entity, self.known_articles))
                if description is None:
                    failure = GenerationError(exc.step, exc.reason)
                    break
            tried.append(entity)
            try:
                made = await self._compose(event, _bridge(entity, self.known_articles), draws,
                                           spent, description)
            except GenerationError as exc:
                spent += exc.attempts
                failure = exc
                continue
            if self.checker is None or await self._verified(made, spent):
                break
        if made is None:
            assert failure is not None
            failure.branch = "AAB" if draws.aab else "ABC"
            failure.attempts = spent
            raise failure
        assert made.intermediates is not None
        asked = {call.template_hash: call for call in spent}
        prompts = {**made.generator.prompts, **{
            name: load_prompt(name).sha256 for name in CHECKER_TEMPLATES
            if load_prompt(name).sha256 in asked}}
        return made.model_copy(update={
            "intermediates": made.intermediates.model_copy(update={"calls": spent}),
            "generator": made.generator.model_copy(update={"prompts": prompts}),
        })

    async def _choose(self, event: Event, bridges: list[Entity], draws: Draws,
                      spent: list[PromptCall]) -> tuple[Entity, str]:
        """The bridge the model chooses among `bridges`, and its description."""
        parsed = await self._step(CHOOSE_BRIDGE, {
            "event": event.text, "date": f"{event.date:%-d %B %Y}",
            "bridges": "\n".join(f"- {e.text}" for e in bridges),
            "cutoff": cutoff_phrase(self.cutoff),
        }, draws, spent, choice_check(bridges, event, self.known_articles))
        found = two_parts(parsed)
        if found is None:
            raise NoBridge(CHOOSE_BRIDGE.function, "no named thing of the news can be "
                           "described without giving itself away")
        chosen = chosen_answer(found[0], bridges)
        assert chosen is not None  # the step check found it
        return chosen, found[1]

    async def _verified(self, item: Candidate, spent: list[PromptCall]) -> bool:
        """The checker's checks, in order until one fails; each call is kept, the failing
        check's last call marked with why the bridge is replaced."""
        assert self.checker is not None
        outcome = await self.checker.check(item, fail_fast=True)
        spent += outcome.calls_marked(
            lambda failed: f"{failure_reason(failed)}: the next bridge is tried")
        return outcome.failed is None

    async def _step(
        self, step: Step, values: dict[str, str], draws: Draws, spent: list[PromptCall],
        check: StepCheck | None = None,
    ) -> str:
        result: StepResult = await self.call(step, values, draws.api_seed, check)
        spent += result.attempts
        return result.parsed

    async def _description(self, event: Event, bridge: _Bridge, draws: Draws,
                           spent: list[PromptCall]) -> str:
        """The model's description of the bridge; when every try is refused, one made from the
        event sentence's parse, if the bridge's role in it allows (`generation/structural.py`).
        With `structure_first` the parse's only: a small model's own descriptions were refused
        or wrong in all but one of 233 tries on the two example snapshots (that one: "the state
        of California, where the party was held in 2023-04"), at seconds a try. A model that
        finds no phrase telling the bridge apart from the other things the news names says so:
        the next bridge is tried."""
        check = description_check(bridge.names, event.date.year)
        if self.structure_first:
            found = await self._parsed_description(event, bridge)
            if found is None:
                raise GenerationError(DESCRIBE_BRIDGE.function, (
                    f"the event's first sentence gives no description of "
                    f"{bridge.entity.text!r} (it is not a place, the subject or the object of "
                    "its verb, or the sentence would not read without it); a small model "
                    "writes none of its own"))
            return found
        others = [e.text for e in usable(event.entities) if not same_entity(e, bridge.entity)]
        try:
            phrase = await self._step(DESCRIBE_BRIDGE, {
                "event": event.text, "date": f"{event.date:%-d %B %Y}",
                "bridge": bridge.entity.text, "cutoff": cutoff_phrase(self.cutoff),
                "others": ", ".join(others) or "nothing else",
            }, draws, spent, check)
        except GenerationError as exc:
            spent += exc.attempts
            found = await self._parsed_description(event, bridge)
            if found is None:
                raise GenerationError(exc.step, exc.reason) from exc
            return found
        if _NONE.match(phrase):
            raise GenerationError(DESCRIBE_BRIDGE.function, f"no phrase tells "
                                  f"{bridge.entity.text!r} apart from the other things the "
                                  "news names")
        return phrase

    async def _parsed_description(self, event: Event, bridge: _Bridge) -> str | None:
        """The bridge described by the event sentence's parse, when its role allows and the
        description passes the description's check; a name in it that gives the bridge away
        is said by its kind ("the town of Lahaina" -> "a town")."""
        if self.parse is None:
            return None
        found = next((m for name in bridge.names if (m := re.search(
            rf"(?<!\w){re.escape(name)}(?!\w)", event.text))), None)
        if found is None:
            return None
        tokens = await self.parse(event.text)
        described = describe_from_parse(tokens, found.start(), found.end(), bridge.kind,
                                        f"{event.date:%B %Y}")
        if described is None:
            return None
        described = without_giveaways(
            described, giveaways(described, bridge.entity, event, self.known_articles), event,
            self.known_articles)
        if described is None or description_check(bridge.names, event.date.year)(described):
            return None
        return described

    async def _known_passage(self, event: Event, bridge: _Bridge, draws: Draws,
                             spent: list[PromptCall]) -> str:
        if self.known_source == "wiki":
            return self.known_articles[bridge.key].passage
        return await self._step(KNOWN_PASSAGE, {
            "entity": bridge.entity.text, "event": event.text,
            "cutoff": cutoff_phrase(self.cutoff),
        }, draws, spent)

    async def _known_answers(self, event: Event, passage: str, bridge: _Bridge
                             ) -> list[Entity]:
        """The named things of the passage (the article's links, else NER) that may answer the
        known question: not the bridge, and nothing the event is or names."""
        if self.known_source == "wiki":
            found = self._linked_entities(passage, bridge.entity)
        else:
            found = await self.find_entities(passage)
        pool = [e for e in usable(found)
                if not same_entity(e, bridge.entity) and not about_the_event(e, event)]
        return pool[:_MAX_KNOWN_ANSWERS]

    async def _compose(self, event: Event, bridge: _Bridge, draws: Draws,
                       spent: list[PromptCall], description: str | None = None) -> Candidate:
        """The item of one bridge: its description (given, or asked together with the known
        part: neither needs the other, one batch round fewer) and the known part."""

        async def describe() -> str:
            return description or await self._description(event, bridge, draws, spent)

        described, found = await asyncio.gather(
            describe(), self._known_part(event, bridge, draws, spent), return_exceptions=True)
        errors = [e for e in (described, found) if isinstance(e, BaseException)]
        for error in errors[1:]:  # the first is raised with its calls; keep the other's too
            if isinstance(error, GenerationError):
                spent += error.attempts
        if errors:
            raise errors[0]
        assert isinstance(described, str) and isinstance(found, _KnownPart)
        if found.category is not None:
            return self._aab(event, bridge, described, found.passage, found.category, spent,
                             fallback=found.fallback)
        assert found.k_ent is not None and found.known is not None
        return self._abc(event, bridge, found.k_ent, described, found.passage, found.known,
                         spent, fallback=found.fallback, templated=found.templated)

    async def _known_part(self, event: Event, bridge: _Bridge, draws: Draws,
                          spent: list[PromptCall]) -> _KnownPart:
        """The drawn branch, else the other one: ABC needs a named thing of the passage that
        answers a property of the bridge, AAB a category holding the bridge."""
        passage = await self._known_passage(event, bridge, draws, spent)
        no_category = f"no category with several members holds {bridge.entity.text!r}"
        no_property = (f"no named thing of the known passage answers a lasting property of "
                       f"{bridge.entity.text!r}")
        # A small model copies a category from the prompt's examples: ABC from structure only.
        if draws.aab and not self.structure_first:
            category = await self._category(bridge, passage, draws, spent)
            if category is not None:
                return _KnownPart(passage, category=category)
        fallback = no_category if draws.aab else None
        if self.structure_first:
            templated = self._infobox_hop(event, bridge, draws.k_fraction)
            if templated is None:
                raise GenerationError(PROPERTY_QUESTION.function, f"no lasting relation of the "
                                      f"infobox of {bridge.entity.text!r} has a question "
                                      "template (a small model writes no known question of "
                                      "its own)")
            return _KnownPart(passage, k_ent=templated[0], known=templated[1], templated=True,
                              fallback=fallback)
        chosen = await self._property(event, bridge, passage, draws, spent)
        if chosen is not None:
            return _KnownPart(passage, k_ent=chosen[0], known=chosen[1], fallback=fallback)
        if draws.aab:
            raise GenerationError(CATEGORY.function, f"{no_category}, and {no_property}")
        category = await self._category(bridge, passage, draws, spent)
        if category is None:
            raise GenerationError(CATEGORY.function, f"{no_property}, and {no_category}")
        return _KnownPart(passage, category=category, fallback=no_property)

    async def _property(self, event: Event, bridge: _Bridge, passage: str, draws: Draws,
                        spent: list[PromptCall]) -> tuple[Entity, str] | None:
        """The known answer the model picks among the passage's named things, and its
        question; None when there are none, or the model finds no lasting property."""
        answers = await self._known_answers(event, passage, bridge)
        if not answers:
            return None
        parsed = await self._step(PROPERTY_QUESTION, {
            "passage": passage, "bridge": bridge.entity.text, "event": event.text,
            "cutoff": cutoff_phrase(self.cutoff),
            "answers": "\n".join(f"- {e.text}" for e in answers),
        }, draws, spent, known_answer_check(bridge.names, answers))
        found = two_parts(parsed)
        if found is None:
            return None
        k_ent = chosen_answer(found[0], answers)
        assert k_ent is not None  # the step check found it
        return k_ent, found[1]

    def _infobox_hop(self, event: Event, bridge: _Bridge, fraction: float
                     ) -> tuple[Entity, str] | None:
        """With `structure_first`: k_ent is one of the bridge's infobox relations that has a
        question template (each a lasting relation), and the known question is that
        template's."""
        article = self.known_articles.get(bridge.key)
        if article is None:
            return None
        questions = infobox_questions()
        single: dict[str, Link] = {}  # one thing named (a list has no single answer)
        for relation in article.relations:
            if relation.parameter in questions and len(relation.values) == 1:
                single.setdefault(relation.parameter, relation.values[0])
        usable_relations = [
            (name, link) for name, link in single.items()
            if set_aside_reason(k := Entity(text=link.text, label=LINK_LABEL,
                                            wiki_title=link.title)) is None
            and not same_entity(k, bridge.entity) and not about_the_event(k, event)
        ]
        if not usable_relations:
            return None
        name, link = usable_relations[int(fraction * len(usable_relations))]
        k_ent = Entity(text=link.text, label=LINK_LABEL, wiki_title=link.title)
        return k_ent, questions[name].format(bridge=article.as_written(bridge.entity.text))

    def _abc(self, event: Event, bridge: _Bridge, k_ent: Entity, description: str,
             passage: str, known: str, spent: list[PromptCall], fallback: str | None,
             templated: bool = False) -> Candidate:
        """`templated`: the known question came from the infobox template file (no call)."""
        answer, aliases = _answer_names(k_ent, self.known_articles.get(entity_key(k_ent)))
        merged = substitute(known, bridge.names, description)
        masked = substitute(known, bridge.names, masked_description(description))
        assert merged is not None and masked is not None  # the step check found the name
        steps = self._intermediates(
            "ABC", event, bridge, description, passage, known, answer, merged, masked, spent,
            k_ent=k_ent, fallback=fallback,
        )
        item = self.candidate(event, answer, aliases, steps,
                              {DESCRIBE_BRIDGE, *self._passage_step()} if templated else
                              {DESCRIBE_BRIDGE, PROPERTY_QUESTION, *self._passage_step()})
        if templated:
            item.generator.prompts[INFOBOX_QUESTIONS] = load_prompt(INFOBOX_QUESTIONS).sha256
        return item

    async def _category(self, bridge: _Bridge, passage: str, draws: Draws,
                        spent: list[PromptCall]) -> str | None:
        """A category with several members holding the bridge; None when the model says there
        is none (an answer, not a refusal to ask again)."""
        category = await self._step(CATEGORY, {
            "bridge": bridge.entity.text, "passage": passage,
            "cutoff": cutoff_phrase(self.cutoff),
        }, draws, spent, category_check(bridge.names))
        return None if _NONE.match(category) else without_the(category)

    def _aab(self, event: Event, bridge: _Bridge, description: str, passage: str,
             category: str, spent: list[PromptCall], fallback: str | None = None) -> Candidate:
        answer, aliases = _answer_names(bridge.entity, self.known_articles.get(bridge.key))
        steps = self._intermediates(
            "AAB", event, bridge, description, passage, category_question(category), answer,
            f"Which of the {category} is {description}?",
            f"Which of the {category} is {masked_description(description)}?", spent,
            category=category, fallback=fallback,
        )
        return self.candidate(event, answer, aliases, steps,
                              {DESCRIBE_BRIDGE, CATEGORY, *self._passage_step()})

    def _passage_step(self) -> set[Step]:
        return {KNOWN_PASSAGE} if self.known_source == "model" else set()

    def _intermediates(
        self, branch: str, event: Event, bridge: _Bridge, description: str, passage: str,
        known: str, answer: str, merged: str, masked: str, spent: list[PromptCall], *,
        k_ent: Entity | None = None, category: str | None = None, fallback: str | None = None,
    ) -> Intermediates:
        article = self.known_articles.get(bridge.key)
        return Intermediates(
            branch=branch, cur_ent=bridge.entity, k_ent=k_ent, known_passage=passage,
            unknown_question=unknown_question(bridge.kind, description),
            known_question=known, known_answer=answer, merged_question=merged, calls=spent,
            fallback=fallback, known_source=self.known_source,
            known_article=article.evidence if article and self.known_source == "wiki" else None,
            bridge_description=description, category=category, masked_question=masked,
        )
