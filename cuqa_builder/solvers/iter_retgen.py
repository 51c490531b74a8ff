"""ITER-RETGEN (Shao et al., 2023; demonstrations of Table 20): retrieval and generation in turn.

Each iteration retrieves with the question plus the previous generation, then generates a
step-by-step answer from the retrieved passages; the last generation gives the answer.
"""

from __future__ import annotations

from cuqa_builder.answer_parsing import cut_at_stop
from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.direct import NEXT_EXAMPLE
from cuqa_builder.solvers.prompting import demonstrations, join_passages

ITER_RETGEN = "solver_iter_retgen"
ITER_RETGEN_DEMOS = "solver_demos_iter_retgen"
ITERATIONS = 2  # T = 2


async def iter_retgen(question: str, run: SolverRun) -> str:
    demos = demonstrations(ITER_RETGEN_DEMOS)
    generation = ""
    for _ in range(ITERATIONS):
        passages = await run.retrieve(f"{question} {generation}".strip())
        values = {"demonstrations": demos, "passage": join_passages(passages), "question": question}
        result = await run.ask(ITER_RETGEN, values, stop=NEXT_EXAMPLE)
        generation = cut_at_stop(result.text, NEXT_EXAMPLE).strip()
    return run.conclude(generation)
