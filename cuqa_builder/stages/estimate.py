"""`cuqa-build --estimate`: the LLM calls the chosen stages would make, their tokens, cost and
time, before any is made; nothing is called or written (see `llm/estimate.py` for the method)."""

from __future__ import annotations

from collections.abc import Sequence

from cuqa_builder.llm.estimate import CallPlan, describe
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.settings import LOCAL_SLOTS_MAX, resolve_settings
from cuqa_builder.run import EVENTS, LLM_CACHE, RunContext
from cuqa_builder.stages import generate, validate
from cuqa_builder.stages.registry import Stage


def estimate_build(ctx: RunContext, stages: Sequence[Stage]) -> str:
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE))
    names = {stage.name for stage in stages}
    lines = [f"estimate for {', '.join(s.name for s in stages)} in {ctx.out} "
             "(nothing was called or written):"]
    plans: list[CallPlan] = []
    planned = 0
    if "generate" in names:
        if ctx.path(EVENTS).exists():
            model = settings.model or settings.local or "(no --model given)"
            plan = generate.estimate(ctx, settings, model)
            planned = plan.items
            plans.append(plan)
        else:
            lines.append("  generate: no events.jsonl yet; run the events stage (it calls no "
                         "model) and estimate again to count generation's calls")
    if "validate" in names:
        plans += validate.estimate(ctx, planned)
    if not plans:
        lines.append("  no LLM calls")
    prices = PriceTable.load(settings.prices_path)
    concurrency = (min(settings.concurrency, LOCAL_SLOTS_MAX) if settings.uses_local_model
                   else settings.concurrency)
    lines += [describe(plan, settings, prices, concurrency) for plan in plans]
    return "\n".join(lines)
