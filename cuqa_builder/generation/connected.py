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
`masked_question`) that the `connected` check asks closed-book.
"""

from __future__ import annotations

import re
from collections import Counter
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
from cuqa_builder.generation.bridges import (
    canonical_name,
    kind_of,
    mention,
    names_of,
    set_aside_reason,
    substitute,
    surface_name,
    usable,
)
from cuqa_builder.generation.output_parsing import OutputError, parse_passage, parse_question
from cuqa_builder.generation.structural import describe_from_parse, plural
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.llm.client import prompt_request
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records import Candidate, Entity, Event, Intermediates, PromptCall
from cuqa_builder.validation.connected import (
    CHECK_SAMPLING,
    CONNECTED_TEMPLATE,
    GUESS_TEMPLATE,
    gives_answer,
    masked_question,
)
from cuqa_builder.validation.question_form import form_problem

_MIN_DESCRIPTION_WORDS, _MAX_DESCRIPTION_WORDS = 5, 35
_MAX_KNOWN_QUESTION_WORDS = 16  # besides the bridge's name: one property, no room for clues
_MAX_CATEGORY_WORDS = 10
BRIDGE_TRIES = 3  # bridges tried per event before its last item goes on as it is
_MAX_WORDS_AFTER_BRIDGE = 2  # "Where was X born?", "Which party does X lead?"
_LEAD_IN = re.compile(r"^(?:noun phrase|description|category|answer)\s*:\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’«»`*"
_NONE = re.compile(r"^\W*none\b", re.IGNORECASE)
# "the oldest Grand Slam": the description would land after "the oldest".
_DETERMINER_BEFORE = re.compile(r"\b(?:the|a|an)\s+[\w-]+\s+$", re.IGNORECASE)


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


DESCRIBE_BRIDGE = Step(
    "DescribeBridge", "connected_describe_bridge",
    frozenset({"event", "date", "bridge", "cutoff"}), parse_description,
)
KNOWN_PASSAGE = Step(
    "KnownPassage", "connected_known_passage", frozenset({"entity", "event", "cutoff"}),
    parse_passage, long_output=True,
)
PROPERTY_QUESTION = Step(
    "PropertyQuestion", "connected_known_question",
    frozenset({"passage", "bridge", "answer", "event", "cutoff"}), parse_question,
)
CATEGORY = Step(
    "Category", "connected_category", frozenset({"bridge", "passage", "cutoff"}),
    parse_phrase,
)
# The validate stage's two checks, asked while composing so that a shortcut bridge is replaced.
CHECK_CONNECTED = Step("ConnectedCheck", CONNECTED_TEMPLATE, frozenset({"question"}), str.strip)
CHECK_UNKNOWN = Step("UnknownBeforeCutoff", GUESS_TEMPLATE, frozenset({"question", "cutoff"}),
                     str.strip)


def _words(text: str) -> int:
    return len(text.split())


def description_check(names: list[str], year: int) -> StepCheck:
    def check(phrase: str) -> str | None:
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


def property_check(bridge: list[str], answer: list[str]) -> StepCheck:
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
        if _words(question[match.end():]) > _MAX_WORDS_AFTER_BRIDGE:
            return ("the known question goes on after the bridge (its description would leave "
                    "the end of the question dangling)")
        return None

    return check


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


# Where a description's head (what the bridge is) ends and the event's part begins.
_EVENT_PART = re.compile(
    r"\s+(?:whose|that|which|who|whom|where|when|(?:in|at|on|from|by|during) (?:which|whom))\b"
    r"|,|\s+\w+(?:ed|ing)\b"
    # the irregular past participles a description opens its event with
    r"|\s+(?:struck|hit|held|won|lost|led|made|sent|found|built|chosen|taken|given|shot)\b"
)


def masked_description(description: str) -> str:
    """The description with the event's part taken out: "the Danish cyclist who won ..." ->
    "a certain Danish cyclist". What is left is what the merged question says of the bridge
    without the event, so the `connected` check sees a nationality or a home city it gives."""
    head = _EVENT_PART.split(_strip_the(description), maxsplit=1)[0].strip()
    return f"a certain {head or 'one'}"


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


def _strip_the(phrase: str) -> str:
    return phrase[4:] if phrase.lower().startswith("the ") else phrase


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


def _answer_names(entity: Entity) -> tuple[str, list[str]]:
    """The canonical answer and its aliases (the name as written, when it differs)."""
    answer = canonical_name(entity)
    aliases = [n for n in dict.fromkeys([surface_name(entity.text)]) if n.casefold()
               != answer.casefold()]
    return answer, aliases


@dataclass
class ConnectedGenerator(Generator):
    recipe: ClassVar[str] = "connected"
    steps: ClassVar[tuple[Step, ...]] = (
        DESCRIBE_BRIDGE, KNOWN_PASSAGE, PROPERTY_QUESTION, CATEGORY, CHECK_CONNECTED,
        CHECK_UNKNOWN, MERGE_QUESTIONS,
    )
    default_known_source: ClassVar = "wiki"

    @classmethod
    def bridge_candidates(cls, event: Event, set_aside: Counter[str] | None = None
                          ) -> list[Entity]:
        """Named things only (no demonyms, common nouns, offices, dates)."""
        return usable(event.entities, set_aside)

    async def easy(self, event: Event) -> Candidate:
        """Up to `BRIDGE_TRIES` bridges, the drawn one first: an item whose question the
        checker still answers with the event masked, or as a model of the cutoff, is set aside
        for the next bridge (the same calls as the validate stage's checks, which the cache
        then answers). With no bridge left, the last item made goes on to validation. With
        `structure_first` the first item made goes on at once."""
        pool = self._bridge_pool(event)
        draws = draw(self.seed, event.id, len(pool))
        bridges = [pool[(draws.cur_index + i) % len(pool)]
                   for i in range(min(BRIDGE_TRIES, len(pool)))]
        spent: list[PromptCall] = []
        made: Candidate | None = None
        failure: GenerationError | None = None
        for entity in bridges:
            try:
                made = await self._compose(event, _bridge(entity, self.known_articles), draws,
                                           spent)
            except GenerationError as exc:
                spent += exc.attempts
                failure = exc
                continue
            if self.structure_first or await self._needs_the_event(made, spent):
                break  # a small model is no judge of shortcuts: validate asks the checker
        if made is None:
            assert failure is not None
            failure.branch = "AAB" if draws.aab else "ABC"
            failure.attempts = spent
            raise failure
        assert made.intermediates is not None
        asked = {call.function for call in spent}
        prompts = {**made.generator.prompts, **{
            step.template: self.templates[step.template].sha256
            for step in (CHECK_CONNECTED, CHECK_UNKNOWN) if step.function in asked}}
        return made.model_copy(update={
            "intermediates": made.intermediates.model_copy(update={"calls": spent}),
            "generator": made.generator.model_copy(update={"prompts": prompts}),
        })

    async def _needs_the_event(self, item: Candidate, spent: list[PromptCall]) -> bool:
        """The `connected` and `unknown_before_cutoff` questions asked of the generator; each
        call is kept, refused when the reply gives the item's answer."""
        asks = ((CHECK_CONNECTED, {"question": masked_question(item)}),
                (CHECK_UNKNOWN, {"question": item.question, "cutoff": self.cutoff}))
        for step, values in asks:
            template = self.templates[step.template]
            result = await self.gateway.chat(prompt_request(template, values, **CHECK_SAMPLING))
            answered = gives_answer(result.text, item)
            spent.append(PromptCall(
                function=step.function, template_hash=template.sha256, raw=result.text,
                parsed=result.text.strip(), seed=int(CHECK_SAMPLING["seed"]),
                rejected=f"the checker answers {item.answer!r} without the event: a shortcut; "
                "the next bridge is tried" if answered else None,
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            ))
            if answered:
                return False
        return True

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
        of California, where the party was held in 2023-04"), at seconds a try."""
        check = description_check(bridge.names, event.date.year)
        if self.structure_first:
            found = await self._parsed_description(event, bridge)
            if found is None or check(found) is not None:
                raise GenerationError(DESCRIBE_BRIDGE.function, (
                    f"the event's first sentence gives no description of "
                    f"{bridge.entity.text!r} (it is not a place, the subject or the object of "
                    "its verb, or the sentence would not read without it); a small model "
                    "writes none of its own"))
            return found
        try:
            return await self._step(DESCRIBE_BRIDGE, {
                "event": event.text, "date": f"{event.date:%-d %B %Y}",
                "bridge": bridge.entity.text, "cutoff": self.cutoff,
            }, draws, spent, check)
        except GenerationError as exc:
            spent += exc.attempts
            found = await self._parsed_description(event, bridge)
            if found is None or check(found) is not None:
                raise GenerationError(exc.step, exc.reason) from exc
            return found

    async def _parsed_description(self, event: Event, bridge: _Bridge) -> str | None:
        if self.parse is None:
            return None
        mention = next((m for name in bridge.names if (m := re.search(
            rf"(?<!\w){re.escape(name)}(?!\w)", event.text))), None)
        if mention is None:
            return None
        tokens = await self.parse(event.text)
        return describe_from_parse(tokens, mention.start(), mention.end(), bridge.kind,
                                   f"{event.date:%B %Y}")

    async def _known_passage(self, event: Event, bridge: _Bridge, draws: Draws,
                             spent: list[PromptCall]) -> str:
        if self.known_source == "wiki":
            return self.known_articles[bridge.key].passage
        return await self._step(KNOWN_PASSAGE, {
            "entity": bridge.entity.text, "event": event.text, "cutoff": self.cutoff,
        }, draws, spent)

    async def _known_answer(self, passage: str, bridge: _Bridge, fraction: float) -> Entity | None:
        """k_ent: a named thing of the passage (the article's links, else NER) other than the
        bridge."""
        if self.known_source == "wiki":
            found = self._linked_entities(passage, bridge.entity)
        else:
            found = await self.find_entities(passage)
        pool = [e for e in found
                if set_aside_reason(e) is None and not same_entity(e, bridge.entity)]
        return pool[int(fraction * len(pool))] if pool else None

    async def _compose(self, event: Event, bridge: _Bridge, draws: Draws,
                       spent: list[PromptCall]) -> Candidate:
        """The drawn branch, else the other one: ABC needs a named thing in the passage, AAB a
        category holding the bridge."""
        description = await self._description(event, bridge, draws, spent)
        passage = await self._known_passage(event, bridge, draws, spent)
        no_k_ent = f"no named thing other than {bridge.entity.text!r} in the known passage"
        no_category = f"no category with several members holds {bridge.entity.text!r}"
        # A small model copies a category from the prompt's examples: ABC from structure only.
        if draws.aab and not self.structure_first:
            category = await self._category(bridge, passage, draws, spent)
            if category is not None:
                return self._aab(event, bridge, description, passage, category, spent)
        fallback = no_category if draws.aab else None
        if templated := self._infobox_hop(bridge, draws.k_fraction):
            k_ent, known = templated
            return await self._abc(event, bridge, k_ent, description, passage, draws, spent,
                                   fallback=fallback, known=known)
        # A small model's own known questions rarely ask for their answer: infobox hops only.
        k_ent = None if self.structure_first else await self._known_answer(
            passage, bridge, draws.k_fraction)
        if k_ent is not None:
            return await self._abc(event, bridge, k_ent, description, passage, draws, spent,
                                   fallback=fallback)
        if self.structure_first:
            raise GenerationError(PROPERTY_QUESTION.function, f"no relation of the infobox of "
                                  f"{bridge.entity.text!r} has a question template (a small "
                                  "model writes no known question of its own)")
        if draws.aab:
            raise GenerationError(CATEGORY.function, f"{no_category}, and {no_k_ent}")
        category = await self._category(bridge, passage, draws, spent)
        if category is None:
            raise GenerationError(CATEGORY.function, f"{no_k_ent}, and {no_category}")
        return self._aab(event, bridge, description, passage, category, spent, fallback=no_k_ent)

    def _infobox_hop(self, bridge: _Bridge, fraction: float) -> tuple[Entity, str] | None:
        """With `structure_first`: k_ent is one of the bridge's infobox relations that has a
        question template, and the known question is that template's."""
        article = self.known_articles.get(bridge.key)
        if not self.structure_first or article is None:
            return None
        questions = infobox_questions()
        usable_relations = [
            (name, link) for name, link in article.relations.items() if name in questions
            and set_aside_reason(k := Entity(text=link.text, label=LINK_LABEL,
                                             wiki_title=link.title)) is None
            and not same_entity(k, bridge.entity)
        ]
        if not usable_relations:
            return None
        name, link = usable_relations[int(fraction * len(usable_relations))]
        k_ent = Entity(text=link.text, label=LINK_LABEL, wiki_title=link.title)
        return k_ent, questions[name].format(bridge=bridge.entity.text)

    async def _abc(self, event: Event, bridge: _Bridge, k_ent: Entity, description: str,
                   passage: str, draws: Draws, spent: list[PromptCall], fallback: str | None,
                   known: str | None = None) -> Candidate:
        """`known`: a templated known question (no call), else the model writes one."""
        answer, aliases = _answer_names(k_ent)
        templated = known is not None
        known = known or await self._step(PROPERTY_QUESTION, {
            "passage": passage, "bridge": bridge.entity.text, "answer": k_ent.text,
            "event": event.text, "cutoff": self.cutoff,
        }, draws, spent, property_check(bridge.names, [answer, *aliases]))
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
        if templated:  # the known question came from the infobox template file
            item.generator.prompts[INFOBOX_QUESTIONS] = load_prompt(INFOBOX_QUESTIONS).sha256
        return item

    async def _category(self, bridge: _Bridge, passage: str, draws: Draws,
                        spent: list[PromptCall]) -> str | None:
        """A category with several members holding the bridge; None when the model says there
        is none (an answer, not a refusal to ask again)."""
        category = await self._step(CATEGORY, {
            "bridge": bridge.entity.text, "passage": passage,
            "cutoff": self.cutoff,
        }, draws, spent, category_check(bridge.names))
        return None if _NONE.match(category) else _strip_the(category)

    def _aab(self, event: Event, bridge: _Bridge, description: str, passage: str,
             category: str, spent: list[PromptCall], fallback: str | None = None) -> Candidate:
        answer, aliases = _answer_names(bridge.entity)
        steps = self._intermediates(
            "AAB", event, bridge, description, passage, f"What are the {category}?", answer,
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
