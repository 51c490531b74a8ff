"""Generate-then-read (GenRead, Table 17): the model writes a background document, then reads it.

`generate_then_read` is also Self-DC's branch for known questions.
"""

from __future__ import annotations

from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.rr import read

GENERATE = "solver_genread_generate"


async def generate_then_read(question: str, run: SolverRun) -> str:
    background = await run.ask(GENERATE, {"question": question})
    return await read(question, background.text.strip(), run)
