"""The checker's four checks on all the questions of one event at once (issue 33: "screen
cheaply, then verify"). The same checks as `checker.py`, the same verdicts, read by the same
grammars; only the requests differ: one request per model for the event's guesses (the masked
questions to the checker, the whole questions to the model of the cutoff, never in one request,
so that a masked question is not guessed with its event in sight), and one open-book request
for the questions no guess answered. A question whose part of a reply cannot be read fails as
unreadable; the others are judged as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cuqa_builder.concurrency import all_finished
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records import CheckerKnowledge, CheckerVerdict, Event
from cuqa_builder.verification.checker import (
    ANSWERED_WITH_EVENT,
    CONNECTED,
    ONE_ANSWER,
    UNKNOWN_BEFORE_CUTOFF,
    Checking,
    GuessAsked,
    cutoff_phrase,
    guess_verdict,
    open_book_verdicts,
)
from cuqa_builder.verification.replies import Unreadable, sections

GUESS_MANY_TEMPLATE = "guess_answers_many"
OPEN_BOOK_MANY_TEMPLATE = "answer_with_event_many"
POOLED_TEMPLATES = (GUESS_MANY_TEMPLATE, OPEN_BOOK_MANY_TEMPLATE)
# Greedy decoding makes a verdict repeatable; room for each question's line (five guesses of
# long names, or four short lines) and a little more. A question a reply cut at its limit did
# not finish is unreadable.
_GUESS_TOKENS_EACH, _OPEN_BOOK_TOKENS_EACH, _SLACK = 100, 70, 40


@dataclass(frozen=True)
class PooledQuestion:
    """One question of an event's pool, as the checks need it."""

    key: str  # whose question (a pool member's id)
    question: str  # the whole question
    masked: str  # the question with the event masked
    names: tuple[str, ...]  # every form of its answer
    bridges: tuple[str, ...]  # the names of what its description stands for
    passage: str  # the known passage as of the cutoff, for the open book


Verdicts = dict[str, list[CheckerVerdict]]


def _numbered(texts: Sequence[str]) -> str:
    return "\n".join(f"Q{n}. {text}" for n, text in enumerate(texts, 1))


def _unreadable(check: str, question: str, model: str, read: Unreadable,
                knowledge: CheckerKnowledge | None = None) -> CheckerVerdict:
    return CheckerVerdict(check=check, question=question, reply=read.reply.strip(), model=model,
                          passed=False, unreadable=read.why, knowledge=knowledge)


@dataclass
class PooledChecker(Checking):

    async def guesses(self, questions: Sequence[PooledQuestion]) -> Verdicts:
        """`connected` and `unknown_before_cutoff` of every question: two requests, asked
        together."""
        masked, whole = await all_finished(
            self._guess_all(self.client, questions, CONNECTED, "told"),
            self._guess_all(self.guesser or self.client, questions, UNKNOWN_BEFORE_CUTOFF,
                            self.knowledge))
        return {q.key: [*masked[q.key], *whole[q.key]] for q in questions}

    async def _guess_all(self, guesser: LLMClient, questions: Sequence[PooledQuestion],
                         check: str, knowledge: CheckerKnowledge) -> Verdicts:
        asked = [q.masked if check == CONNECTED else q.question for q in questions]
        texts = list(dict.fromkeys(asked))  # one line for questions worded alike
        result = await guesser.chat(prompt_request(
            load_prompt(GUESS_MANY_TEMPLATE),
            {"questions": _numbered(texts), "cutoff": cutoff_phrase(self.cutoff)},
            temperature=0.0, max_tokens=_GUESS_TOKENS_EACH * len(texts) + _SLACK, seed=0))
        parts = sections(result.text, len(texts), cut=result.finish_reason == "length")

        async def verdict(q: PooledQuestion, text: str) -> CheckerVerdict:
            part = parts[texts.index(text) + 1]
            if isinstance(part, Unreadable):
                return _unreadable(check, text, guesser.model, part, knowledge)
            return await guess_verdict(self.client, GuessAsked(check, text, guesser.model,
                                                               knowledge),
                                       part, list(q.names), self.counted)

        found = await all_finished(*(verdict(q, text) for q, text in zip(questions, asked,
                                                                              strict=True)))
        return {q.key: [v] for q, v in zip(questions, found, strict=True)}

    async def open_book(self, event: Event, questions: Sequence[PooledQuestion]) -> Verdicts:
        """`answered_with_event` and `one_answer` of every question: one request with the news
        as dated on its page and each known passage once."""
        texts = list(dict.fromkeys(q.question for q in questions))
        passages = "\n".join(dict.fromkeys(q.passage for q in questions))
        result = await self.client.chat(prompt_request(load_prompt(OPEN_BOOK_MANY_TEMPLATE), {
            "date": f"{event.date:%-d %B %Y}", "event": event.text, "passages": passages,
            "cutoff": cutoff_phrase(self.cutoff), "questions": _numbered(texts),
        }, temperature=0.0, max_tokens=_OPEN_BOOK_TOKENS_EACH * len(texts) + _SLACK, seed=0))
        parts = sections(result.text, len(texts), cut=result.finish_reason == "length")

        async def verdicts(q: PooledQuestion) -> list[CheckerVerdict]:
            part = parts[texts.index(q.question) + 1]
            if isinstance(part, Unreadable):
                return [_unreadable(check, q.question, self.client.model, part)
                        for check in (ANSWERED_WITH_EVENT, ONE_ANSWER)]
            return await open_book_verdicts(self.client, q.question, self.client.model, part,
                                            list(q.names), list(q.bridges))

        found = await all_finished(*(verdicts(q) for q in questions))
        return {q.key: v for q, v in zip(questions, found, strict=True)}
