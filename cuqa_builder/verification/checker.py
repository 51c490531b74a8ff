"""The checker's four checks on an item, asked through the gateway (SPEC 2.9, "verified both
ways"). Both the connected recipe (while it composes, so that a failing bridge is replaced) and
the validate stage (which then reads the answers from the cache) call `ItemChecker`.

Without the event, the checker must guess (five guesses, ranked; the first `counted` count):
- `connected`: the question with the event masked (each easy item of a hard one). The answer
  among the guesses means the known part gives it away: a shortcut (MuSiQue's filter).
- `unknown_before_cutoff`: the whole question, by a model that knows only what was known at the
  cutoff (`guesser`, when one is given, e.g. `--probe-model`), else by the checker told so. The
  answer among the guesses means it is guessable from older knowledge. A checker that knows
  later events cannot truly forget them: told so, it errs towards failing.
With the event (open book: the news item as dated on its page, and the known passage as of the
cutoff), the checker answers the question and says what else fits:
- `answered_with_event`: its answer must be the item's (a known hop that changed by the event's
  date, a garbled question or a wrong bridge gives another one);
- `one_answer`: nothing else named in the event may fit the description, and the question may
  have no other right answer.
An answer is the item's however worded: its names first, then one judge call (`answers.py`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from cuqa_builder.concurrency import all_finished
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.llm.types import ChatRequest, ChatResult
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, CheckerKnowledge, CheckerVerdict, PromptCall
from cuqa_builder.verification import DEFAULT_GUESSES_COUNTED, GUESSES_ASKED
from cuqa_builder.verification.answers import (
    Judge,
    another_name,
    answer_names,
    decided,
    names_the_answer,
)
from cuqa_builder.verification.masking import masked_question
from cuqa_builder.verification.names import names_of
from cuqa_builder.verification.replies import (
    RECURS,
    OpenBookReply,
    Unreadable,
    cut_short,
    read_guesses,
    read_open_book,
)
from cuqa_builder.window import parse_cutoff

CONNECTED = "connected"
UNKNOWN_BEFORE_CUTOFF = "unknown_before_cutoff"
ANSWERED_WITH_EVENT = "answered_with_event"
ONE_ANSWER = "one_answer"
# Asked by the pooled open book only (issue 37): nothing else in the whole world's news of the
# event's month fits the description, and its kind of event does not recur many times a month.
ONE_THING = "one_thing"
CHECKER_CHECKS = (CONNECTED, UNKNOWN_BEFORE_CUTOFF, ANSWERED_WITH_EVENT, ONE_ANSWER)
GUESS_TEMPLATE = "guess_answers"
OPEN_BOOK_TEMPLATE = "answer_with_event"
JUDGE_TEMPLATE = "judge_reworded"
CHECKER_TEMPLATES = (GUESS_TEMPLATE, OPEN_BOOK_TEMPLATE, JUDGE_TEMPLATE)
# Greedy decoding makes a verdict repeatable; room for five guesses of long names ("United
# Nations Educational, Scientific and Cultural Organization" is 11 tokens), numbered and bold,
# after a lead-in; or three short lines. A reply cut at its limit is unreadable.
GUESS_SAMPLING = {"temperature": 0.0, "max_tokens": 120, "seed": 0}
OPEN_BOOK_SAMPLING = {"temperature": 0.0, "max_tokens": 120, "seed": 0}
# What each template's call is called in an item's record of calls.
CALL_NAMES = {GUESS_TEMPLATE: "GuessAnswers", OPEN_BOOK_TEMPLATE: "AnswerWithEvent",
              JUDGE_TEMPLATE: "SameAnswer", "guess_answers_many": "GuessAnswers",
              "answer_with_event_many": "AnswerWithEvent", "judge_reworded_many": "SameAnswer"}
_MONTH_CUTOFF = re.compile(r"^\d{4}-\d{2}$")


def cutoff_phrase(label: str) -> str:
    """How the prompts name the cutoff: "the end of April 2023", or "15 April 2023"."""
    day = parse_cutoff(label)
    return f"the end of {day:%B %Y}" if _MONTH_CUTOFF.match(label.strip()) else f"{day:%-d %B %Y}"


def _easy_items(item: Candidate) -> Iterator[Candidate]:
    if item.difficulty == "easy":
        yield item
    for sub in item.sub_items:
        yield from _easy_items(sub)


def _bridge_names(item: Candidate) -> list[str]:
    """The names of the things the item's descriptions stand for (an AAB bridge is its answer)."""
    names: list[str] = []
    for easy in _easy_items(item):
        if easy.intermediates is not None:
            names += names_of(easy.intermediates.cur_ent)
        names += answer_names(easy)
    return names


@dataclass
class Recorder:
    """A client that keeps each call as an item records its calls (the checker's, and the
    pooled checks' of an event)."""

    client: LLMClient
    calls: list[PromptCall] = field(default_factory=list)

    @property
    def model(self) -> str:
        return self.client.model

    async def chat(self, request: ChatRequest) -> ChatResult:
        result = await self.client.chat(request)
        self.calls.append(PromptCall(
            function=CALL_NAMES.get(request.template or "", request.template or "check"),
            template_hash=request.template_hash or "", raw=result.text,
            parsed=result.text.strip(), seed=request.seed,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
        ))
        return result


@dataclass(frozen=True)
class Asked:
    """One check asked: its verdicts, and the calls it made (the judge's included)."""

    verdicts: list[CheckerVerdict]
    calls: list[PromptCall]


@dataclass
class Outcome:
    """An item's checks as asked (compose time records their calls)."""

    asked: list[Asked]

    @property
    def verdicts(self) -> list[CheckerVerdict]:
        return [v for a in self.asked for v in a.verdicts]

    @property
    def calls(self) -> list[PromptCall]:
        return [c for a in self.asked for c in a.calls]

    @property
    def failed(self) -> CheckerVerdict | None:
        return next((v for v in self.verdicts if not v.passed), None)

    def calls_marked(self, why: Callable[[CheckerVerdict], str]) -> list[PromptCall]:
        """Every call, the first of each failing check marked `rejected` with `why`."""
        marked = []
        for asked in self.asked:
            failed = next((v for v in asked.verdicts if not v.passed), None)
            marked += [c.model_copy(update={"rejected": why(failed)})
                       if failed is not None and i == 0 else c
                       for i, c in enumerate(asked.calls)]
        return marked


# A check: (the checker's client, the guessing client) -> its verdicts.
_Ask = Callable[["Recorder", "Recorder"], Awaitable[list[CheckerVerdict]]]


@dataclass
class Checking:
    """The models the checks ask: one item at a time (`ItemChecker`) or an event's questions
    together (`pooled.PooledChecker`)."""

    client: LLMClient  # the checker: open book, judge, and the guesses without a `guesser`
    cutoff: str  # the cutoff as the run's label ("2023-04")
    counted: int = DEFAULT_GUESSES_COUNTED
    guesser: LLMClient | None = None  # a model whose knowledge ends at the cutoff

    @property
    def knowledge(self) -> CheckerKnowledge:
        return "cutoff" if self.guesser is not None else "told"


@dataclass
class ItemChecker(Checking):

    async def check(self, item: Candidate, *, fail_fast: bool = False) -> Outcome:
        """Every check of the item, all at once; with `fail_fast`, the guesses first and the
        answer with the event only when no guess named the answer (compose time: the bridge is
        replaced, the rest need not be asked; two batch rounds, not three)."""
        stages: list[list[_Ask]] = [
            [*(self._connected_ask(easy, item) for easy in _easy_items(item)),
             lambda client, guesser: self._unknown_before_cutoff(guesser, client, item)],
            [lambda client, _: self._open_book(client, item)],
        ]
        if not fail_fast:
            stages = [[ask for stage in stages for ask in stage]]
        outcome = Outcome([])
        for stage in stages:
            outcome.asked += await all_finished(*(self._ask(ask) for ask in stage))
            if outcome.failed is not None:
                break
        return outcome

    async def _ask(self, ask: _Ask) -> Asked:
        client = Recorder(self.client)
        guesser = Recorder(self.guesser) if self.guesser is not None else client
        verdicts = await ask(client, guesser)
        return Asked(verdicts, client.calls + (guesser.calls if guesser is not client else []))

    def _connected_ask(self, easy: Candidate, item: Candidate) -> _Ask:
        async def ask(client: Recorder, _: Recorder) -> list[CheckerVerdict]:
            verdict = await self._guesses(client, client, easy, masked_question(easy), CONNECTED)
            return [verdict.model_copy(update={"item": easy.id}) if easy is not item
                    else verdict]
        return ask

    async def _unknown_before_cutoff(self, guesser: Recorder, judge: Recorder,
                                     item: Candidate) -> list[CheckerVerdict]:
        return [await self._guesses(guesser, judge, item, item.question, UNKNOWN_BEFORE_CUTOFF)]

    async def _guesses(self, client: Recorder, judge: Recorder, item: Candidate,
                       question: str, check: str) -> CheckerVerdict:
        template = load_prompt(GUESS_TEMPLATE)
        result = await client.chat(prompt_request(
            template, {"question": question, "cutoff": cutoff_phrase(self.cutoff)},
            **GUESS_SAMPLING))
        knowledge = self.knowledge if check == UNKNOWN_BEFORE_CUTOFF else "told"
        return await guess_verdict(judge, GuessAsked(check, question, client.model, knowledge),
                                   result.text, answer_names(item), self.counted,
                                   cut=result.finish_reason == "length")

    async def _open_book(self, client: Recorder, item: Candidate) -> list[CheckerVerdict]:
        easy = list(_easy_items(item))
        template = load_prompt(OPEN_BOOK_TEMPLATE)
        result = await client.chat(prompt_request(template, {
            "date": "; ".join(f"{e.event.date:%-d %B %Y}" for e in easy),
            "event": " ".join(e.event.text for e in easy),
            "passage": " ".join(e.intermediates.known_passage for e in easy
                                if e.intermediates is not None),
            "cutoff": cutoff_phrase(self.cutoff), "question": item.question,
        }, **OPEN_BOOK_SAMPLING))
        return await open_book_verdicts(client, item.question, client.model, result.text,
                                        answer_names(item), _bridge_names(item),
                                        cut=result.finish_reason == "length")


@dataclass(frozen=True)
class GuessAsked:
    """What a guessing check asked, of whom."""

    check: str  # CONNECTED or UNKNOWN_BEFORE_CUTOFF
    question: str
    model: str
    knowledge: CheckerKnowledge


async def guess_verdict(judge: LLMClient | Judge, asked: GuessAsked, reply: str, names: list[str],
                        counted: int, cut: bool = False) -> CheckerVerdict:
    """The verdict of a guessing check on its reply: failed when a counted guess names the
    answer, and failed as unreadable when the reply (or a judge it needed) cannot be read, or
    was `cut` at its token limit."""
    common = {"check": asked.check, "question": asked.question, "reply": reply.strip(),
              "model": asked.model, "counted": counted, "knowledge": asked.knowledge}
    guesses = cut_short(reply) if cut else read_guesses(reply)
    if isinstance(guesses, Unreadable):
        return CheckerVerdict(passed=False, unreadable=guesses.why, **common)
    guesses = guesses[:GUESSES_ASKED]
    for guess in guesses[:counted]:
        how = await names_the_answer(judge, asked.question, guess, names)
        if isinstance(how, Unreadable):
            return CheckerVerdict(passed=False, guesses=guesses, unreadable=how.why, **common)
        if how:
            return CheckerVerdict(passed=False, guesses=guesses, matched=f"{guess} ({how})",
                                  **common)
    return CheckerVerdict(passed=True, guesses=guesses, **common)


async def open_book_verdicts(client: LLMClient | Judge, question: str, model: str, reply: str,
                             names: list[str], bridges: list[str], cut: bool = False
                             ) -> list[CheckerVerdict]:
    """`answered_with_event` and `one_answer` on an open-book reply: the answer must be the
    item's; nothing else may fit (other things named, other right answers: not the bridge,
    nor the answer under another name). Unreadable parts, or a reply `cut` at its token limit,
    fail as unreadable."""
    common = {"question": question, "reply": reply.strip(), "model": model}
    read = cut_short(reply) if cut else read_open_book(reply)
    if isinstance(read, Unreadable):
        return [CheckerVerdict(check=check, passed=False, unreadable=read.why, **common)
                for check in (ANSWERED_WITH_EVENT, ONE_ANSWER)]
    common["answer"] = read.answer
    how = await names_the_answer(client, question, read.answer, names)
    answered = (CheckerVerdict(check=ANSWERED_WITH_EVENT, passed=False, unreadable=how.why,
                               **common) if isinstance(how, Unreadable) else
                CheckerVerdict(check=ANSWERED_WITH_EVENT, passed=how is not None,
                               matched=f"{read.answer} ({how})" if how else None, **common))
    if read.others_unreadable is not None:
        return [answered, CheckerVerdict(check=ONE_ANSWER, passed=False,
                                         unreadable=read.others_unreadable.why, **common)]
    others = await _others(client, question, read, names, bridges)
    if isinstance(others, Unreadable):
        return [answered, CheckerVerdict(check=ONE_ANSWER, passed=False,
                                         unreadable=others.why, **common)]
    return [answered, CheckerVerdict(check=ONE_ANSWER, passed=not others, others=others,
                                     **common)]


async def _others(client: LLMClient | Judge, question: str, read: OpenBookReply, names: list[str],
                  bridges: list[str]) -> list[str] | Unreadable:
    """What else fits: another thing than the bridge (or the answer), and other right answers
    that are not the answer under another name (the judge decides)."""
    own = {n.casefold() for n in bridges}
    others = [o for o in read.other_fits if o.casefold() not in own and not decided(o, names)]
    for other in read.other_answers:
        if other.casefold() in own:
            continue
        same = await another_name(client, question, other, names)
        if isinstance(same, Unreadable):
            return same
        if not same:
            others.append(other)
    return others


UNREADABLE = "unreadable"  # the check's name in a failure whose reply could not be read
_REPLY_QUOTED = 160


def failure_check(verdict: CheckerVerdict) -> str:
    """The name a failing verdict fails its item under: its check, or `unreadable`."""
    return UNREADABLE if verdict.unreadable else verdict.check


def failure_reason(verdict: CheckerVerdict) -> str:
    """Why a verdict fails its item, for a person to read."""
    on = f" ({verdict.item})" if verdict.item else ""
    if verdict.unreadable:
        reply = " ".join(verdict.reply.split())
        if len(reply) > _REPLY_QUOTED:
            reply = reply[: _REPLY_QUOTED - 1] + "…"
        return (f"{verdict.check}: the reply of {verdict.model} to \"{verdict.question}\"{on} "
                f'cannot be read ({verdict.unreadable}): "{reply}": nothing measured')
    guesses = "; ".join(verdict.guesses[: verdict.counted or None])
    if verdict.check == CONNECTED:
        return (f'with the event masked, "{verdict.question}", {verdict.model} guesses the '
                f"answer: {verdict.matched} among \"{guesses}\"{on}")
    if verdict.check == UNKNOWN_BEFORE_CUTOFF:
        who = ("knowing only what was known at the cutoff" if verdict.knowledge == "cutoff"
               else "told to know nothing after the cutoff")
        return (f"{verdict.model}, {who}, guesses the answer: {verdict.matched} among "
                f'"{guesses}"')
    if verdict.check == ONE_THING:
        return (f"with the event in hand, {verdict.model} says the description fits many things "
                "of its month in the world (its kind of event recurs)" if RECURS in verdict.others
                else f"with the event in hand, {verdict.model} says the description fits other "
                f"things of its month in the world: {'; '.join(verdict.others)}")
    if verdict.check == ANSWERED_WITH_EVENT:
        if not verdict.answer:
            return f"with the event in hand, {verdict.model} gave no answer"
        return f'with the event in hand, {verdict.model} answers "{verdict.answer}" instead'
    return (f"with the event in hand, {verdict.model} finds more than one answer: "
            f"{'; '.join(verdict.others)}")
