"""`cuqa-eval --estimate`: a dry run of the method over the items, planning every call the
solver makes instead of making it (see `llm/estimate.py` for the method).

The solver runs for real against a stand-in gateway that plans each call (its rendered prompt,
its max_tokens) and answers with stand-in text: a short answer that ends a method's loop at once
("So the answer is unknown."), "No" to the judge. So the plan follows each method's shortest
path; methods that iterate or decompose can make more calls (up to their depth). Retrieval is
stood in too (`--top-k` passages of an event's length), so no index is built or read. A call the
run's cache holds is answered from it and costs nothing (a finished run asks nothing again);
prompts that hold retrieved passages are not the run's, so those calls are planned anew.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cuqa_builder.evaluation.datasets import load_items
from cuqa_builder.evaluation.gap import sub_question_items
from cuqa_builder.evaluation.sweep import option_field
from cuqa_builder.judge import DEFAULT_JUDGE_PROMPT, judge
from cuqa_builder.llm.estimate import (
    CallPlan,
    PlanningGateway,
    StandIn,
    cache_to_read,
    calibration,
    describe,
)
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.settings import LOCAL_SLOTS_MAX, LLMSettings
from cuqa_builder.llm.types import ChatRequest
from cuqa_builder.retrieval.types import Passage
from cuqa_builder.solvers import NO_RETRIEVAL, get_solver
from cuqa_builder.solvers.base import SolverOptions, SolverRun

STAND_IN_ANSWER = "So the answer is unknown."
ANSWER_TOKENS = 48  # before the cache knows the model: a sentence or two
PASSAGE_CHARS = 300  # about one event's text with its title


@dataclass(frozen=True)
class EvalCommand:
    """What an evaluation command was asked (from cuqa-eval's flags)."""

    command: str
    method: str
    data: Path
    split: str | None = None
    limit: int | None = None
    aliases: bool = True
    judge_model: str | None = None
    judge_prompt: str = DEFAULT_JUDGE_PROMPT
    sweep: tuple[str, tuple[float | int, ...]] | None = None  # (param, values)


def stand_in(request: ChatRequest) -> StandIn:
    """A model that answers at once: a short answer that ends a method's loop, "No" to the
    judge."""
    template = request.template or "chat"
    return StandIn(template, ANSWER_TOKENS,
                   "No" if template.startswith("judge") else STAND_IN_ANSWER)


class StandInRetriever:
    name = "stand-in"

    def search(self, query: str, k: int) -> list[Passage]:
        return [Passage(id=f"p{i}", text="x" * PASSAGE_CHARS) for i in range(k)]


async def plan_evaluation(
    asked: EvalCommand, options: SolverOptions, settings: LLMSettings
) -> list[CallPlan]:
    model = settings.model or settings.local or "(no --model given)"
    plan = CallPlan(model, calibration(settings, model))
    judge_plan = None
    if asked.judge_model:
        judge_plan = plan if asked.judge_model == model else CallPlan(
            asked.judge_model, calibration(settings, asked.judge_model))
    solver = get_solver(asked.method)
    retriever = None if asked.method in NO_RETRIEVAL else StandInRetriever()
    items = load_items(asked.data, split=asked.split, limit=asked.limit, aliases=asked.aliases)
    if asked.command == "gap":  # the composed questions, then each of their sub-questions
        composed = [item for item in items if item.sub_questions]
        items = [*composed, *sub_question_items(composed)]
    seen: set[str] = set()
    with cache_to_read(settings) as cache:
        for run_options in _option_grid(asked, options):
            for item in items:
                gateway = PlanningGateway(plan, stand_in, cache, seen, settings.api,
                                          settings.held_to_format)
                run = SolverRun(gateway, retriever, run_options)
                answer = (await solver(item.question, run)).strip()
                plan.rounds = max(plan.rounds, run.llm_calls)
                if judge_plan is not None:
                    await judge(PlanningGateway(judge_plan, stand_in, cache, seen),
                                item.question, answer or "x", item.answers, asked.judge_prompt)
    plan.notes.append(f"{len(items)} items; each method's shortest path (a model that answers "
                      "at once): iterating or decomposing methods can call more")
    if judge_plan is not None and judge_plan is not plan:
        judge_plan.rounds = 1
        return [plan, judge_plan]
    if judge_plan is plan:
        plan.rounds += 1
    return [plan]


def _option_grid(asked: EvalCommand, options: SolverOptions) -> list[SolverOptions]:
    """The options of each run the command makes: one, or a sweep's one per value."""
    if asked.sweep is None:
        return [options]
    param, values = asked.sweep
    field = option_field(param, asked.method)
    return [SolverOptions.checked(**{**options.model_dump(), field: value}) for value in values]


async def estimate_evaluation(
    asked: EvalCommand, options: SolverOptions, settings: LLMSettings
) -> str:
    plans = await plan_evaluation(asked, options, settings)
    prices = PriceTable.load(settings.prices_path)
    concurrency = (min(settings.concurrency, LOCAL_SLOTS_MAX) if settings.uses_local_model
                   else settings.concurrency)
    lines = [f"estimate for cuqa-eval {asked.command} --method {asked.method} (nothing was "
             "called or written):"]
    if asked.command == "gap":
        lines.append("  the composed questions and, as questions of their own, their "
                     "sub-questions")
    elif asked.sweep is not None:
        lines.append(f"  one run per value of {asked.sweep[0]} ({len(asked.sweep[1])}); a call "
                     "two values make alike is counted once (the cache answers it)")
    lines += [describe(plan, settings, prices, concurrency) for plan in plans]
    return "\n".join(lines)
