"""`cuqa-build --estimate`: the LLM calls the chosen stages would make, their tokens, cost and
time, and the MediaWiki requests of looking entity articles up, before any is made; nothing is
called or written (see `llm/estimate.py` for the method)."""

from __future__ import annotations

from collections.abc import Sequence

from cuqa_builder.generation.recipes import RECIPES
from cuqa_builder.grounding.articles import article_snapshot
from cuqa_builder.jsonio import count_records
from cuqa_builder.llm.estimate import CallPlan, describe
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.settings import LOCAL_SLOTS_MAX, resolve_settings
from cuqa_builder.run import ARTICLES, EVENTS, LLM_CACHE, RunContext
from cuqa_builder.snapshot import articles_dir
from cuqa_builder.stages import generate, validate
from cuqa_builder.stages.registry import Stage


def _article_requests(ctx: RunContext, names: set[str]) -> str | None:
    """What looking entity articles up costs in MediaWiki requests (ground, and generate with
    `--known-source wiki`), or None when no stage looks any up."""
    known_source = (ctx.options.generate.known_source
                    or RECIPES[ctx.options.generate.prompts].default_known_source)
    if "ground" not in names and not ("generate" in names and known_source == "wiki"):
        return None
    snapshot = article_snapshot(ctx)
    if snapshot is not None:
        return f"  articles: read from {articles_dir(snapshot)}, no MediaWiki request"
    known = count_records(ctx.path(ARTICLES))
    return ("  articles: 2 MediaWiki API requests per entity article not looked up yet (its "
            "revision at the end of the cutoff, then MediaWiki's rendering of it), 1 more per "
            f"entity found by search; {known} looked up already (asked again: none)")


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
    if articles := _article_requests(ctx, names):
        lines.append(articles)
    if not plans:
        lines.append("  no LLM calls")
    prices = PriceTable.load(settings.prices_path)
    concurrency = (min(settings.concurrency, LOCAL_SLOTS_MAX) if settings.uses_local_model
                   else settings.concurrency)
    lines += [describe(plan, settings, prices, concurrency) for plan in plans]
    return "\n".join(lines)
