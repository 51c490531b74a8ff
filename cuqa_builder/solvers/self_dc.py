"""Self-DC (Figure 3 of the Self-DC paper): answer by confidence, decompose when uncertain.

With c the model's confidence in answering: c in (alpha-beta, alpha+beta) -> decompose, solve
each sub-question recursively and combine; c >= alpha+beta -> generate-then-read; otherwise
retrieve-then-read. A decomposition into at most one sub-question ends the recursion with
retrieve-then-read on the current question, and so does an uncertain question at depth t (without
asking for a decomposition that could not be used). The two read branches are the very functions
of GenRead and RR. GenRead == Self-DC(0, 0) call for call: every confidence is >= 0, so none is
asked. RR and Self-DC(1, 0) differ: Figure 3 sends a confidence of exactly 1.0 (a verbal 100%) to
generate-then-read, so Self-DC(1, 0) asks for each confidence (one call more per question than
RR) and retrieves for every other value.

Table 21's decomposition prompt asks for independent parts, but models write dependent ones
("Which party was founded by the politician from #1?"). By default (`self_dc_dependent="fill"`,
our deviation) the sub-questions are solved in order and each "#k" is replaced by the answer of
sub-question k before the sub-question is asked, retrieved for and combined, as Self-Ask feeds
its intermediate answers back; "literal" asks them as written, as Figure 3 does.
"""

from __future__ import annotations

import math
import re
from typing import Literal

from cuqa_builder.answer_parsing import (
    parse_confidence,
    parse_sub_questions,
)
from cuqa_builder.solvers.base import SolverRun, UnsupportedEndpoint
from cuqa_builder.solvers.direct import DIRECT
from cuqa_builder.solvers.genread import generate_then_read
from cuqa_builder.solvers.rr import retrieve_then_read

CONFIDENCE = "solver_self_dc_confidence"
DECOMPOSE = "solver_self_dc_decompose"
COMBINE = "solver_self_dc_combine"
FILL = "self-dc-fill"  # the trace's record of a sub-question whose "#k" was filled
_REFERENCE = re.compile(r"#\s?(\d+)\b")  # "#1", "# 2": the answer of that sub-question


async def verb_confidence(question: str, run: SolverRun) -> float:
    result = await run.ask(CONFIDENCE, {"question": question})
    confidence = parse_confidence(result.text)
    # The prompt tells the model to say 0% when it does not know; no number reads the same way.
    return 0.0 if confidence is None else confidence


async def prob_confidence(question: str, run: SolverRun) -> float:
    """Eq. 1: the mean token probability of the Direct prompt's short answer."""
    result = await run.ask(DIRECT, {"question": question}, logprobs=True)
    if result.logprobs is None:
        raise UnsupportedEndpoint(
            "the endpoint returned no token logprobs for --confidence prob; use --confidence verb"
        )
    if not result.logprobs:
        return 0.0  # no answer at all: nothing to be confident about
    return sum(math.exp(t.logprob) for t in result.logprobs) / len(result.logprobs)


async def confidence_of(question: str, run: SolverRun) -> float:
    if run.options.confidence == "prob":
        return await prob_confidence(question, run)
    return await verb_confidence(question, run)


def fill_references(sub_question: str, answers: list[str]) -> tuple[str, dict[str, str]]:
    """`sub_question` with each "#k" of an answered sub-question replaced by its answer (a
    reference to itself or a later one stays as written), and the answers it took ("#1": ...)."""
    filled: dict[str, str] = {}

    def answer_of(found: re.Match[str]) -> str:
        k = int(found.group(1))
        if not 1 <= k <= len(answers):
            return found.group(0)
        filled[f"#{k}"] = answers[k - 1]
        return answers[k - 1]

    return _REFERENCE.sub(answer_of, sub_question), filled


async def solve_in_order(
    sub_questions: list[str], run: SolverRun, depth: int
) -> tuple[list[str], list[str]]:
    """Each sub-question solved in turn (its "#k" filled, unless literal): the questions as
    asked, and their answers."""
    asked: list[str] = []
    answers: list[str] = []
    for written in sub_questions:
        question = written
        if run.options.self_dc_dependent == "fill":
            question, filled = fill_references(written, answers)
            if filled:
                run.route(FILL, depth=depth, written=written, question=question, filled=filled)
        asked.append(question)
        answers.append(await self_dc(question, run, depth))
    return asked, answers


def format_sub_qas(sub_questions: list[str], sub_answers: list[str]) -> str:
    pairs = zip(sub_questions, sub_answers, strict=True)
    return "\n".join(f"#{i}: {q} Answer: {a}" for i, (q, a) in enumerate(pairs, 1))


Band = Literal["unknown", "uncertain", "known"]
# alpha and beta are read to this many decimals: enough for any grid, and few enough that
# 0.4 + 0.2 is 0.6 (the float sum is 0.6000000000000001, which a verbal 60% would fall below).
THRESHOLD_DECIMALS = 9


def thresholds(alpha: float, beta: float) -> tuple[float, float]:
    """Figure 3's alpha - beta and alpha + beta, free of floating-point residue."""
    return round(alpha - beta, THRESHOLD_DECIMALS), round(alpha + beta, THRESHOLD_DECIMALS)


def band(confidence: float, low: float, high: float) -> Band:
    """Figure 3: (alpha-beta, alpha+beta) is uncertain, [alpha+beta, 1] known, the rest unknown."""
    if low < confidence < high:
        return "uncertain"
    return "known" if confidence >= high else "unknown"


async def self_dc(question: str, run: SolverRun, depth: int = 1) -> str:
    low, high = thresholds(run.options.alpha, run.options.beta)
    # Every confidence is >= 0, so with alpha+beta <= 0 every question is known whatever the
    # model says: asking would be a call GenRead (alpha=beta=0) does not make.
    if high <= 0:
        run.route("self-dc", question=question, depth=depth, confidence=None,
                  branch="generate", reason="alpha+beta <= 0: every question counts as known")
        return await generate_then_read(question, run)

    confidence = await confidence_of(question, run)
    found = band(confidence, low, high)
    if found == "uncertain":
        return await decompose_and_combine(question, run, depth, confidence)
    if found == "known":
        run.route("self-dc", question=question, depth=depth, confidence=confidence,
                  branch="generate", reason="known")
        return await generate_then_read(question, run)
    run.route("self-dc", question=question, depth=depth, confidence=confidence,
              branch="retrieve", reason="unknown")
    return await retrieve_then_read(question, run)


async def decompose_and_combine(
    question: str, run: SolverRun, depth: int, confidence: float
) -> str:
    if depth >= run.options.depth:
        run.route("self-dc", question=question, depth=depth, confidence=confidence,
                  branch="retrieve", reason="uncertain, depth t reached")
        return await retrieve_then_read(question, run)
    decomposition = await run.ask(DECOMPOSE, {"question": question})
    sub_questions = parse_sub_questions(decomposition.text)
    if len(sub_questions) <= 1:
        run.route("self-dc", question=question, depth=depth, confidence=confidence,
                  branch="retrieve", reason="uncertain, one sub-question",
                  sub_questions=sub_questions)
        return await retrieve_then_read(question, run)

    run.route("self-dc", question=question, depth=depth, confidence=confidence,
              branch="decompose", reason="uncertain", sub_questions=sub_questions)
    asked, sub_answers = await solve_in_order(sub_questions, run, depth + 1)
    values = {"question": question, "sub_qas": format_sub_qas(asked, sub_answers)}
    combined = await run.ask(COMBINE, values)
    return run.conclude(combined.text)


async def solve(question: str, run: SolverRun) -> str:
    return await self_dc(question, run)
