"""The checker's checks on the pooled questions of many events at once (issue 33: "screen
cheaply, then verify"; issue 37: across events). The same checks as `checker.py`, read by the
same grammars; only the requests differ. The questions of a group of events are shuffled by the
seed and dealt into requests of a few dozen, never two questions of one bridge in one request
(siblings give each other away: "Which raion contains a certain town?" beside "Which of the
cities of Donetsk Oblast is a certain town?"). The masked questions go to the checker, the whole
questions to the model of the cutoff, never in one request, so that a masked question is not
guessed with its event in sight; the survivors go to the open book, each with its own news and
background, which also asks `one_thing`. A question whose part of a reply cannot be read fails
as unreadable; the others are judged as usual.

Which questions share a request depends only on the questions and the seed, so a re-run asks
the same requests and finds them in the cache. Each request's call is recorded once, on the
question dealt into it first (its event's record); a judge's call on the question it judged.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from cuqa_builder.concurrency import all_finished
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import CheckerKnowledge, CheckerVerdict, PromptCall
from cuqa_builder.records.events import Event
from cuqa_builder.verification.answers import Judge, decided
from cuqa_builder.verification.checker import (
    ANSWERED_WITH_EVENT,
    CONNECTED,
    ONE_ANSWER,
    ONE_THING,
    UNKNOWN_BEFORE_CUTOFF,
    Checking,
    GuessAsked,
    Recorder,
    cutoff_phrase,
    guess_verdict,
    open_book_verdicts,
)
from cuqa_builder.verification.replies import (
    OpenBookReply,
    Unreadable,
    read_open_book,
    read_yes_no,
    sections,
)

GUESS_MANY_TEMPLATE = "guess_answers_many"
OPEN_BOOK_MANY_TEMPLATE = "answer_with_event_many"
JUDGE_MANY_TEMPLATE = "judge_reworded_many"
POOLED_TEMPLATES = (GUESS_MANY_TEMPLATE, OPEN_BOOK_MANY_TEMPLATE, JUDGE_MANY_TEMPLATE)
# Questions a request holds at most: guesses are short lines; an open book carries each
# question's news and background.
GUESSES_PER_REQUEST, OPEN_BOOKS_PER_REQUEST, JUDGED_PER_REQUEST = 30, 10, 40
# Greedy decoding makes a verdict repeatable; room for each question's line (five guesses of
# long names, or five short lines) and a little more. A question a reply cut at its limit did
# not finish is unreadable.
_GUESS_TOKENS_EACH, _OPEN_BOOK_TOKENS_EACH, _JUDGE_TOKENS_EACH, _SLACK = 100, 90, 8, 40


@dataclass(frozen=True)
class PooledQuestion:
    """One question of an event's pool, as the checks need it."""

    key: str  # whose question (a pool member's id)
    question: str  # the whole question
    masked: str  # the question with the event masked
    names: tuple[str, ...]  # every form of its answer
    bridges: tuple[str, ...]  # the names of what its description stands for
    passage: str  # the known passage as of the cutoff, for the open book
    event: Event  # the news it is asked about
    bridge: str  # which bridge of which event: no two of one bridge share a request


Verdicts = dict[str, list[CheckerVerdict]]


@dataclass
class Checked:
    """The verdicts of every question asked, and each question's share of the calls."""

    verdicts: Verdicts = field(default_factory=dict)
    calls: dict[str, list[PromptCall]] = field(default_factory=lambda: defaultdict(list))

    def add(self, other: Checked) -> None:
        for key, found in other.verdicts.items():
            self.verdicts.setdefault(key, []).extend(found)
        for key, calls in other.calls.items():
            self.calls[key] += calls


def deal(questions: Sequence[PooledQuestion], seed: int, size: int
         ) -> list[list[PooledQuestion]]:
    """The questions dealt into requests of at most `size`, shuffled by `seed`, no two of one
    bridge in a request: as few requests as the largest bridge and `size` allow, each bridge's
    questions to the emptiest requests in turn."""
    if not questions:
        return []
    order = sorted(questions, key=lambda q: q.key)
    random.Random(seed).shuffle(order)
    per_bridge = Counter(q.bridge for q in order)
    count = max(-(-len(order) // size), max(per_bridge.values()))
    requests: list[list[PooledQuestion]] = [[] for _ in range(count)]
    taken: list[set[str]] = [set() for _ in range(count)]
    for question in order:
        free = [i for i in range(count) if question.bridge not in taken[i]]
        fewest = min(free, key=lambda i: (len(requests[i]), i))
        requests[fewest].append(question)
        taken[fewest].add(question.bridge)
    return [r for r in requests if r]


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"Q{n}. {text}" for n, text in enumerate(texts, 1))


def _unreadable(check: str, question: str, model: str, read: Unreadable,
                knowledge: CheckerKnowledge | None = None) -> CheckerVerdict:
    return CheckerVerdict(check=check, question=question, reply=read.reply.strip(), model=model,
                          passed=False, unreadable=read.why, knowledge=knowledge)


# A question's verdicts once its reply is read, made with a judge for what the words of a guess
# or an answer cannot decide: asked twice, first to collect the judge's pairs, then with them
# judged (a few requests for all the questions of a check, not one request a pair).
_Reading = Callable[[Judge], Awaitable[list[CheckerVerdict]]]
_Pair = tuple[str, str, tuple[str, ...]]  # the question, what was said, the answer's names


@dataclass(frozen=True)
class _Collecting:
    """A judge that records each pair a reading would ask, and whose question asked it first
    (`owners`, shared by the readings of one check); it answers No meanwhile, so that every
    pair the reading could need is recorded."""

    owners: dict[_Pair, str]
    key: str

    async def same(self, question: str, said: str, names: Sequence[str]) -> bool:
        self.owners.setdefault((question, said, tuple(names)), self.key)
        return False


@dataclass(frozen=True)
class _Judged:
    """The judge's verdicts, asked before."""

    found: dict[_Pair, bool | Unreadable]

    async def same(self, question: str, said: str, names: Sequence[str]) -> bool | Unreadable:
        return self.found[(question, said, tuple(names))]


@dataclass
class PooledChecker(Checking):
    seed: int = 0  # deals the questions into requests

    async def guesses(self, questions: Sequence[PooledQuestion]) -> Checked:
        """`connected` and `unknown_before_cutoff` of every question: the masked questions to
        the checker and the whole ones to the model of the cutoff, asked together."""
        found = Checked()
        for part in await all_finished(
                self._guess_all(self.client, questions, CONNECTED, "told"),
                self._guess_all(self.guesser or self.client, questions, UNKNOWN_BEFORE_CUTOFF,
                                self.knowledge)):
            found.add(part)
        await self._second_look(questions, found)
        return found

    async def _second_look(self, questions: Sequence[PooledQuestion], found: Checked) -> None:
        """The questions no guess answered by its names: each counted guess that shares no
        word with the answer judged too, as a grader would ("London" for a birthplace in
        Southwark, "University of Pennsylvania" for the Wharton School are right answers that
        names alone miss). A guess judged right fails its check; a pair left unsaid fails it as
        unreadable. Asked of the few survivors only, before their open book is paid."""
        survivors = [q for q in questions if all(v.passed for v in found.verdicts[q.key])]
        owners: dict[_Pair, str] = {}
        for q in survivors:
            for verdict in found.verdicts[q.key]:
                for guess in verdict.guesses[:self.counted]:
                    if decided(guess, q.names) is False:
                        owners.setdefault((verdict.question, guess, q.names), q.key)
        judged = await self._judge(owners, found)
        for q in survivors:
            found.verdicts[q.key] = [_judged_again(v, q.names, judged, self.counted)
                                     for v in found.verdicts[q.key]]

    async def _guess_all(self, guesser: LLMClient, questions: Sequence[PooledQuestion],
                         check: str, knowledge: CheckerKnowledge) -> Checked:
        async def one_request(dealt: list[PooledQuestion]) -> tuple[Checked, dict[str, _Reading]]:
            asked = [q.masked if check == CONNECTED else q.question for q in dealt]
            texts = list(dict.fromkeys(asked))  # one line for questions worded alike
            sent = Recorder(guesser)
            result = await sent.chat(prompt_request(
                load_prompt(GUESS_MANY_TEMPLATE),
                {"questions": _numbered(texts), "cutoff": cutoff_phrase(self.cutoff)},
                temperature=0.0, max_tokens=_GUESS_TOKENS_EACH * len(texts) + _SLACK, seed=0))
            parts = sections(result.text, len(texts), cut=result.finish_reason == "length")

            def reading(q: PooledQuestion, text: str) -> _Reading:
                part = parts[texts.index(text) + 1]

                async def verdicts(judge: Judge) -> list[CheckerVerdict]:
                    if isinstance(part, Unreadable):
                        return [_unreadable(check, text, guesser.model, part, knowledge)]
                    return [await guess_verdict(judge, GuessAsked(check, text, guesser.model,
                                                                  knowledge),
                                                part, list(q.names), self.counted)]
                return verdicts

            return _sent(dealt, sent), {q.key: reading(q, text)
                                        for q, text in zip(dealt, asked, strict=True)}

        return await self._judged(questions, GUESSES_PER_REQUEST, one_request)

    async def open_book(self, questions: Sequence[PooledQuestion]) -> Checked:
        """`answered_with_event`, `one_answer` and `one_thing` of every question: each with
        its news as dated on its page and its known passage, a few to a request."""
        async def one_request(dealt: list[PooledQuestion]) -> tuple[Checked, dict[str, _Reading]]:
            sent = Recorder(self.client)
            result = await sent.chat(prompt_request(load_prompt(OPEN_BOOK_MANY_TEMPLATE), {
                "cutoff": cutoff_phrase(self.cutoff), "questions": "\n\n".join(
                    _open_book_block(n, q, self.cutoff) for n, q in enumerate(dealt, 1)),
            }, temperature=0.0, max_tokens=_OPEN_BOOK_TOKENS_EACH * len(dealt) + _SLACK,
                seed=0))
            parts = sections(result.text, len(dealt), cut=result.finish_reason == "length")
            model = self.client.model

            def reading(q: PooledQuestion, part: str | Unreadable) -> _Reading:
                async def verdicts(judge: Judge) -> list[CheckerVerdict]:
                    if isinstance(part, Unreadable):
                        return [_unreadable(check, q.question, model, part)
                                for check in (ANSWERED_WITH_EVENT, ONE_ANSWER, ONE_THING)]
                    found = await open_book_verdicts(judge, q.question, model, part,
                                                     list(q.names), list(q.bridges))
                    return [*found, one_thing(q.question, model, part)]
                return verdicts

            return _sent(dealt, sent), {q.key: reading(q, parts[n])
                                        for n, q in enumerate(dealt, 1)}

        return await self._judged(questions, OPEN_BOOKS_PER_REQUEST, one_request)

    async def _judged(self, questions: Sequence[PooledQuestion], size: int, one_request:
                      Callable[[list[PooledQuestion]],
                               Awaitable[tuple[Checked, dict[str, _Reading]]]]) -> Checked:
        """The questions dealt into requests, every reply read, the judge's pairs of them all
        asked together, then each question's verdicts."""
        found = Checked()
        readings: dict[str, _Reading] = {}
        for sent, read in await all_finished(*(one_request(dealt) for dealt in
                                               deal(questions, self.seed, size))):
            found.add(sent)
            readings.update(read)
        owners: dict[_Pair, str] = {}
        for key, reading in readings.items():
            await reading(_Collecting(owners, key))
        judged = _Judged(await self._judge(owners, found))
        for key, reading in readings.items():
            found.verdicts[key] = await reading(judged)
        return found

    async def _judge(self, owners: dict[_Pair, str], found: Checked
                     ) -> dict[_Pair, bool | Unreadable]:
        """Every pair judged, a few dozen to a request; each request's call on the question
        that asked its first pair."""
        pairs = list(owners)

        async def one_request(batch: list[_Pair]) -> dict[_Pair, bool | Unreadable]:
            sent = Recorder(self.client)
            result = await sent.chat(prompt_request(load_prompt(JUDGE_MANY_TEMPLATE), {
                "tasks": "\n\n".join(_judge_block(n, pair) for n, pair in enumerate(batch, 1)),
            }, temperature=0.0, max_tokens=_JUDGE_TOKENS_EACH * len(batch) + _SLACK, seed=0))
            found.calls[owners[batch[0]]] += sent.calls
            parts = sections(result.text, len(batch), cut=result.finish_reason == "length")
            return {pair: part if isinstance(part, Unreadable) else read_yes_no(part)
                    for pair, part in zip(batch, parts.values(), strict=True)}

        judged: dict[_Pair, bool | Unreadable] = {}
        for part in await all_finished(*(one_request(pairs[i:i + JUDGED_PER_REQUEST])
                                         for i in range(0, len(pairs), JUDGED_PER_REQUEST))):
            judged.update(part)
        return judged


def _judged_again(verdict: CheckerVerdict, names: tuple[str, ...],
                  judged: dict[_Pair, bool | Unreadable], counted: int) -> CheckerVerdict:
    """A passing guess verdict failed by the first counted guess the judge found right, or
    found nothing about."""
    for guess in verdict.guesses[:counted]:
        said = judged.get((verdict.question, guess, names))
        if isinstance(said, Unreadable):
            return verdict.model_copy(update={"passed": False, "unreadable": (
                f"the judge, asked whether {guess!r} is a right answer, {said.why}")})
        if said:
            return verdict.model_copy(update={"passed": False, "matched": f"{guess} (judge)"})
    return verdict


def _sent(dealt: list[PooledQuestion], sent: Recorder) -> Checked:
    """A request's call, on its first question."""
    found = Checked()
    found.calls[dealt[0].key] += sent.calls
    return found


def _judge_block(number: int, pair: _Pair) -> str:
    question, said, names = pair
    return (f"Q{number}. Question: {question}\nPrediction: {said}\n"
            f"Ground-truth Answer: {' | '.join(names)}")


def _open_book_block(number: int, q: PooledQuestion, cutoff: str) -> str:
    return (f"Q{number}. News of {q.event.date:%-d %B %Y}: {q.event.text}\n"
            f"Background, as written before {cutoff_phrase(cutoff)}: {q.passage}\n"
            f"Question: {q.question}")


def one_thing(question: str, model: str, part: str) -> CheckerVerdict:
    """`one_thing` on a question's part of the open book: passed only when its "Elsewhere in
    the world" line names nothing; a missing or unreadable line has measured nothing."""
    common = {"check": ONE_THING, "question": question, "reply": part.strip(), "model": model}
    read = read_open_book(part)
    elsewhere: list[str] | Unreadable | None = (
        read.elsewhere if isinstance(read, OpenBookReply) else read)
    if elsewhere is None:
        return CheckerVerdict(passed=False, unreadable="no 'Elsewhere in the world' line",
                              **common)
    if isinstance(elsewhere, Unreadable):
        return CheckerVerdict(passed=False, unreadable=elsewhere.why, **common)
    return CheckerVerdict(passed=not elsewhere, others=elsewhere, **common)
