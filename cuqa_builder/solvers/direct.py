"""Methods without retrieval that answer in one call: Direct (Table 14), zero-shot CoT
(Table 15) and few-shot CoT (Table 19 demonstrations)."""

from __future__ import annotations

from cuqa_builder.answer_parsing import cut_at_stop
from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.prompting import demonstrations

DIRECT = "solver_direct"
COT = "solver_cot"
FEWSHOT_COT = "solver_fewshot_cot"
FEWSHOT_COT_DEMOS = "solver_demos_fewshot_cot"
# The demonstrations' next "Question:" (or its "Quesion:" typo) would start an invented example.
NEXT_EXAMPLE = ["\nQuestion:", "\nQuesion:"]


async def direct(question: str, run: SolverRun) -> str:
    result = await run.ask(DIRECT, {"question": question})
    return run.conclude(result.text)


async def cot(question: str, run: SolverRun) -> str:
    result = await run.ask(COT, {"question": question})
    return run.conclude(result.text)


async def fewshot_cot(question: str, run: SolverRun) -> str:
    values = {"demonstrations": demonstrations(FEWSHOT_COT_DEMOS), "question": question}
    result = await run.ask(FEWSHOT_COT, values, stop=NEXT_EXAMPLE)
    return run.conclude(cut_at_stop(result.text, NEXT_EXAMPLE))
