"""Retrieve-then-read (RR, Table 16): retrieve for the question, answer from the passages.

`retrieve_then_read` is also Self-DC's branch for unknown questions and Self-Ask's answerer of
follow-up questions; `read` is shared with generate-then-read.
"""

from __future__ import annotations

from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.prompting import join_passages

READ = "solver_read"


async def read(question: str, passage: str, run: SolverRun) -> str:
    result = await run.ask(READ, {"passage": passage, "question": question})
    return run.conclude(result.text)


async def retrieve_then_read(question: str, run: SolverRun) -> str:
    passages = await run.retrieve(question)
    return await read(question, join_passages(passages), run)
