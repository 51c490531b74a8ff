"""Probes: does a target model really need the unknown event to answer a candidate?

Three questions per candidate, closed-book, through the gateway (so they are cached and a re-run
asks nothing twice):
- the merged question: answered correctly means the item is "not unknown" to that model;
- each known sub-question: answered wrong means the "known part" is "not known" (a connected
  AAB item's "What are the <category>?" is asked as "Is <answer> one of the <category>?");
- the merged question with the unknown sub-question(s) and their answers given: still wrong means
  the question "does not compose" (the model cannot bridge from the unknown part to the answer).
An answer is correct when it names a gold answer or alias by the names alone (normalised words,
a plural, an acronym, a place without its administrative words), or, with a judge model, when
the judge says it implies one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from pydantic import BaseModel
from tqdm import tqdm

from cuqa_builder.answer_parsing import extract_answer
from cuqa_builder.judge import judge
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.llm.types import BatchCallFailed, LLMError
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, CheckFailure, Validation
from cuqa_builder.records.items import SubQuestion
from cuqa_builder.text import normalize_answer
from cuqa_builder.validation.checks import CheckReport
from cuqa_builder.verification.answers import decided
from cuqa_builder.verification.question_form import category_question, membership_question

T = TypeVar("T")

CLOSED_BOOK = "probe_closed_book"
WITH_UNKNOWN_ANSWER = "probe_with_unknown_answer"
NOT_UNKNOWN = "probe_not_unknown"
KNOWN_PART_NOT_KNOWN = "probe_known_part_not_known"
DOES_NOT_COMPOSE = "probe_does_not_compose"
PROBE_ERROR = "probe_error"
PROBE_CHECKS = (NOT_UNKNOWN, KNOWN_PART_NOT_KNOWN, DOES_NOT_COMPOSE)
NORMALISED_MATCH = "normalised match"
YES = "yes"  # the right reply to a membership question (the known part of a connected AAB item)
# The prompts ask for "just a few words"; greedy decoding makes a probe's verdict repeatable.
PROBE_SAMPLING = {"temperature": 0.0, "max_tokens": 32}


class ProbeAnswer(BaseModel):
    question: str
    answers: list[str]
    prediction: str
    correct: bool


class ProbeResult(BaseModel):
    """What the target model said to one candidate's three probes (`Validation.probes`)."""

    model: str
    judge: str
    closed_book: ProbeAnswer
    known: list[ProbeAnswer]
    with_unknown_answer: ProbeAnswer

    def failures(self) -> list[CheckFailure]:
        found = []
        if self.closed_book.correct:
            found.append(CheckFailure(
                check=NOT_UNKNOWN,
                reason=f"{self.model} answered the question closed-book: "
                f'"{self.closed_book.prediction}"',
            ))
        found += [
            CheckFailure(
                check=KNOWN_PART_NOT_KNOWN,
                reason=f'{self.model} got the known sub-question "{probe.question}" wrong: '
                f'"{probe.prediction}" instead of "{probe.answers[0]}"',
            )
            for probe in self.known
            if not probe.correct
        ]
        if not self.with_unknown_answer.correct:
            found.append(CheckFailure(
                check=DOES_NOT_COMPOSE,
                reason=f"given the unknown part, {self.model} still answered "
                f'"{self.with_unknown_answer.prediction}" instead of '
                f'"{self.with_unknown_answer.answers[0]}"',
            ))
        return found


def _items(candidate: Candidate) -> Iterator[Candidate]:
    yield candidate
    for sub in candidate.sub_items:
        yield from _items(sub)


def _alias_table(candidate: Candidate) -> dict[str, list[str]]:
    """Normalised answer -> its aliases, from the item and its easy sub-items."""
    table: dict[str, list[str]] = {}
    for item in _items(candidate):
        table.setdefault(normalize_answer(item.answer), []).extend(item.answer_aliases)
    return table


def _given_facts(candidate: Candidate) -> str:
    """The unknown sub-questions answered, one per line: the passage of the composition probe."""
    return "\n".join(
        f"{sub.question} {sub.answer.rstrip('.')}."
        for sub in candidate.sub_questions
        if sub.kind == "unknown"
    )


@dataclass
class Prober:
    gateway: LLMClient
    judge_gateway: LLMClient | None = None

    @property
    def judge_name(self) -> str:
        return self.judge_gateway.model if self.judge_gateway else NORMALISED_MATCH

    async def probe(self, candidate: Candidate) -> ProbeResult:
        aliases = _alias_table(candidate)

        def gold(answer: str) -> list[str]:
            return list(dict.fromkeys([answer, *aliases.get(normalize_answer(answer), [])]))

        def known_probe(sub: SubQuestion) -> tuple[str, list[str]]:
            category = candidate.intermediates and candidate.intermediates.category
            if category and sub.question == category_question(category):
                return membership_question(category, sub.answer), [YES]
            return sub.question, gold(sub.answer)

        final = gold(candidate.answer)
        known = [known_probe(s) for s in candidate.sub_questions if s.kind == "known"]
        closed_book, with_unknown, *known_answers = await asyncio.gather(
            self._ask(CLOSED_BOOK, candidate.question, final),
            self._ask(WITH_UNKNOWN_ANSWER, candidate.question, final,
                      passage=_given_facts(candidate)),
            *(self._ask(CLOSED_BOOK, question, answers) for question, answers in known),
        )
        return ProbeResult(
            model=self.gateway.model,
            judge=self.judge_name,
            closed_book=closed_book,
            known=known_answers,
            with_unknown_answer=with_unknown,
        )

    async def ask_closed_book(self, question: str, answers: list[str]) -> ProbeAnswer:
        """One question, no passage: the target model's answer and whether it is right."""
        return await self._ask(CLOSED_BOOK, question, answers)

    async def _ask(
        self, template_name: str, question: str, answers: list[str], **values: str
    ) -> ProbeAnswer:
        template = load_prompt(template_name)
        result = await self.gateway.chat(
            prompt_request(template, {"question": question, **values}, **PROBE_SAMPLING)
        )
        prediction = extract_answer(result.text)
        correct = await self._is_correct(question, prediction, answers)
        return ProbeAnswer(
            question=question, answers=answers, prediction=prediction, correct=correct
        )

    async def _is_correct(self, question: str, prediction: str, answers: list[str]) -> bool:
        if self.judge_gateway is not None:
            # The probes judge a short answer against the item's answer and aliases.
            return await judge(self.judge_gateway, question, prediction, answers, "reworded")
        return decided(prediction, answers) is True


async def probe_all(
    prober: Prober, candidates: Sequence[Candidate], *, progress: bool = False
) -> list[ProbeResult | LLMError]:
    """Probe every candidate at once (the gateway bounds the calls in flight); a candidate
    whose calls fail for good gets its LLMError instead of a result."""
    return await ask_each(candidates, prober.probe, "probes", progress)


async def ask_each(
    candidates: Sequence[Candidate], ask: Callable[[Candidate], Awaitable[T]], desc: str,
    progress: bool,
) -> list[T | LLMError]:
    """`ask` about every candidate at once, with a progress bar; a candidate whose calls fail
    for good gets its LLMError instead of an answer (the others go on)."""
    bar = tqdm(total=len(candidates), desc=desc, unit="item", disable=not progress)

    async def one(candidate: Candidate) -> T | LLMError:
        try:
            answer: T | LLMError = await ask(candidate)
        except LLMError as exc:
            answer = exc
        bar.update()  # not for a call cancelled by Ctrl-C: the bar shows what was done
        return answer

    try:
        return await asyncio.gather(*(one(candidate) for candidate in candidates))
    finally:
        bar.close()


# Who a check asked, by role: what a message names when that model could not be asked.
CHECKER = "the checker {}"
PROBE_MODEL = "the probe model {} (a model of the cutoff)"
CRITIC = "the critic {}"
JUDGE = "the judge {}"


@dataclass(frozen=True)
class Roles:
    """The models a check asks, each named by its role ("the probe model M (a model of the
    cutoff)"): a call that failed is told by the model it was asked of, not by the check."""

    named: dict[str, str]  # model -> who
    first: str  # who, for an error that names no model

    @classmethod
    def of(cls, *roles: tuple[str, str | None]) -> Roles:
        """(a role's words with {} for its model, the model or None), the check's own first;
        a model with two roles is named by both."""
        phrases: dict[str, list[str]] = {}
        for role, model in roles:
            if model is not None:
                phrases.setdefault(model, []).append(role.format(model))
        named = {model: " and ".join(said) for model, said in phrases.items()}
        return cls(named, next(iter(named.values())))

    def who(self, error: LLMError) -> str:
        return self.named.get(error.model or "", self.first)


def _unasked(report: CheckReport, roles: Roles, error: LLMError, check: str) -> CheckFailure:
    """The failure of a candidate a model could not be asked about, counted by who it was."""
    who = roles.who(error)
    report.unasked[(check, who)] += 1
    if isinstance(error, BatchCallFailed):
        report.given_up.add(who)
    return CheckFailure(check=check, reason=f"{who} could not be asked ({error}); run validate "
                        "again to retry")


def record_probes(
    report: CheckReport,
    indexes: Sequence[int],
    outcomes: Sequence[ProbeResult | LLMError],
    model: str,
    roles: Roles,
) -> None:
    """Add each probe outcome to its candidate's validation, and count it per probe check;
    `roles`: the probe model and the judge, if there is one."""
    for index, outcome in zip(indexes, outcomes, strict=True):
        validation = report.validations[index]
        if isinstance(outcome, LLMError):
            validation.probes = {"model": model, "error": str(outcome)}
            failures = [_unasked(report, roles, outcome, PROBE_ERROR)]
        else:
            validation.probes = outcome.model_dump(mode="json")
            failures = outcome.failures()
            report.applied.update(PROBE_CHECKS)
        report.failed.update({f.check for f in failures})
        validation.failures.extend(failures)
        validation.passed = not validation.failures


def record_outcomes(
    report: CheckReport, indexes: Sequence[int], outcomes: Sequence[T | LLMError], *,
    roles: Roles, error_check: str, judge: Callable[[Validation, T], list[CheckFailure]],
    advisory: bool = False,
) -> None:
    """Store what a checker model said of each candidate: `judge` records an answer and returns
    its failures; an answer that could not be had fails the item with `error_check`, naming the
    model (of `roles`) that could not be asked, to be retried. Advisory failures are noted, not
    failing."""
    for index, outcome in zip(indexes, outcomes, strict=True):
        validation = report.validations[index]
        if isinstance(outcome, LLMError):
            failures = [_unasked(report, roles, outcome, error_check)]
        else:
            failures = judge(validation, outcome)
        report.failed.update({f.check for f in failures})
        if advisory and not isinstance(outcome, LLMError):
            validation.advisories.extend(failures)
        else:
            validation.failures.extend(failures)
            validation.passed = not validation.failures
