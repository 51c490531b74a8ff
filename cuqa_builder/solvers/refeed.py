"""REFEED (Yu et al., 2023b): answer, retrieve with the question and that answer, then refine
the answer by reading what was retrieved."""

from __future__ import annotations

from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.direct import direct
from cuqa_builder.solvers.prompting import join_passages

REFINE = "solver_refeed_refine"


async def refeed(question: str, run: SolverRun) -> str:
    initial = await direct(question, run)
    passages = await run.retrieve(f"{question} {initial}".strip())
    values = {"passage": join_passages(passages), "question": question, "initial_answer": initial}
    result = await run.ask(REFINE, values)
    return run.conclude(result.text)
