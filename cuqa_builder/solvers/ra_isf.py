"""RA-ISF in context (Liu et al., section 3.3, Algorithm 1; prompts of Appendix E).

The paper's three fine-tuned sub-models are played by the answering model itself:
self-knowledge (answer from memory if it says it knows), passage relevance (one judgement per
retrieved passage; read only the relevant ones), and question decomposition (solve the
sub-questions recursively, then combine). Past the depth threshold a question is "unknown".
"""

from __future__ import annotations

from cuqa_builder.answer_parsing import (
    parse_sub_questions,
    parse_yes_no,
)
from cuqa_builder.retrieval.types import Passage
from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.prompting import number_passages, passage_text

KNOW = "solver_ra_isf_know"
ANSWER = "solver_ra_isf_answer"
RELEVANCE = "solver_ra_isf_relevance"
READ = "solver_ra_isf_read"
DECOMPOSE = "solver_ra_isf_decompose"
COMBINE = "solver_ra_isf_combine"
UNKNOWN = "unknown"
_NEGATIVE_STARTS = ("no", "not", "none", "irrelevant")


def judged_relevant(verdict: str) -> bool:
    """M_rel's verdict: "No." (or a denial) is irrelevant; a "yes" or the paragraph quoted back
    ("Relevant paragraphs: [1] ...") is relevant; anything else is not trusted."""
    text = verdict.strip().lower()
    if text.startswith(_NEGATIVE_STARTS) or "not relevant" in text or "irrelevant" in text:
        return False
    return bool(parse_yes_no(text)) or "relevant" in text or text.startswith("[1]")


async def knows(question: str, run: SolverRun) -> bool:
    verdict = await run.ask(KNOW, {"question": question})
    return parse_yes_no(verdict.text) is True


async def relevant_passages(
    question: str, passages: list[Passage], run: SolverRun
) -> list[Passage]:
    relevant = []
    for passage in passages:
        verdict = await run.ask(RELEVANCE, {"question": question, "passage": passage_text(passage)})
        if judged_relevant(verdict.text):
            relevant.append(passage)
    return relevant


def format_sub_answers(sub_questions: list[str], sub_answers: list[str]) -> str:
    pairs = zip(sub_questions, sub_answers, strict=True)
    return "\n".join(f"{i}. {q} Answer: {a}" for i, (q, a) in enumerate(pairs, 1))


async def problem_solving(question: str, run: SolverRun, iteration: int = 0) -> str:
    """Algorithm 1's Problm-solving(q_t, iter)."""
    if iteration > run.options.raisf_depth:
        run.route("ra-isf", question=question, iteration=iteration, module="threshold",
                  outcome=UNKNOWN)
        return UNKNOWN
    if await knows(question, run):
        run.route("ra-isf", question=question, iteration=iteration, module="self-knowledge",
                  outcome="known")
        return run.conclude((await run.ask(ANSWER, {"question": question})).text)

    passages = await run.retrieve(question)
    relevant = await relevant_passages(question, passages, run)
    run.route("ra-isf", question=question, iteration=iteration, module="passage relevance",
              outcome=f"{len(relevant)} of {len(passages)} relevant",
              relevant=[p.id for p in relevant])
    if relevant:
        values = {"question": question, "passages": number_passages(relevant)}
        return run.conclude((await run.ask(READ, values)).text)

    decomposition = await run.ask(DECOMPOSE, {"question": question})
    sub_questions = parse_sub_questions(decomposition.text)
    run.route("ra-isf", question=question, iteration=iteration, module="decomposition",
              outcome=f"{len(sub_questions)} sub-questions", sub_questions=sub_questions)
    sub_answers = [await problem_solving(sub, run, iteration + 1) for sub in sub_questions]
    values = {"question": question, "sub_qas": format_sub_answers(sub_questions, sub_answers)}
    return run.conclude((await run.ask(COMBINE, values)).text)


async def solve(question: str, run: SolverRun) -> str:
    return await problem_solving(question, run)
