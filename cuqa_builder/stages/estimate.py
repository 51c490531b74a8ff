"""`cuqa-build --estimate`: the LLM calls the chosen stages would make, their tokens, cost and
time, and the MediaWiki requests of looking entity articles up, before any is made; nothing is
called or written (see `llm/estimate.py` for the method)."""

from __future__ import annotations

from collections.abc import Sequence

from cuqa_builder.generation.recipes import RECIPES
from cuqa_builder.grounding.articles import article_snapshot
from cuqa_builder.jsonio import count_records
from cuqa_builder.llm.estimate import CallPlan, describe, one_per_model
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.settings import LOCAL_SLOTS_MAX, resolve_settings
from cuqa_builder.records.events import Event
from cuqa_builder.run import ARTICLES, EVENTS, LLM_CACHE, RunContext
from cuqa_builder.snapshot import articles_dir
from cuqa_builder.stages import generate_estimate, validate_estimate
from cuqa_builder.stages.events import (
    EventCounts,
    ParseReport,
    by_day,
    extract_events,
    pages_source,
)
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


def _events_in_memory(ctx: RunContext, lines: list[str]) -> list[Event] | None:
    """A new run's events, extracted as the events stage would (parsed, entities found, nothing
    written) when its pages are on disk (--source DIR, or fetched); None when they are not."""
    source = pages_source(ctx)
    if not any(source.glob("*.wiki")):
        return None
    events = by_day(extract_events(ctx, ParseReport(), EventCounts()))
    lines.append(f"  events: {len(events)} in the window from {source} (extracted to plan "
                 "generation; the events stage writes them)")
    return events


def estimate_build(ctx: RunContext, stages: Sequence[Stage]) -> str:
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE))
    names = {stage.name for stage in stages}
    lines = [f"estimate for {', '.join(s.name for s in stages)} in {ctx.out} "
             "(nothing was called or written):"]
    plans: list[CallPlan] = []
    planned = 0
    if "generate" in names:
        events = None if ctx.path(EVENTS).exists() else _events_in_memory(ctx, lines)
        if ctx.path(EVENTS).exists() or events is not None:
            model = settings.model or settings.local or "(no --model given)"
            plan = generate_estimate.estimate(ctx, settings, model, events)
            planned = plan.items
            plans.append(plan)
        else:  # its candidates, and so validate's calls, are unknown too
            names.discard("validate")
            lines.append(f"  generate and validate: the window's pages are not fetched yet "
                         f"({pages_source(ctx)}), so their events are unknown, and the calls "
                         "made for them: run --stage events (it fetches and parses, calling no "
                         "model), then estimate again")
    if "validate" in names:
        plans += validate_estimate.estimate(ctx, planned)
    if articles := _article_requests(ctx, names):
        lines.append(articles)
    if not plans:
        lines.append("  no LLM calls")
    prices = PriceTable.load(settings.prices_path)
    concurrency = (min(settings.concurrency, LOCAL_SLOTS_MAX) if settings.uses_local_model
                   else settings.concurrency)
    lines += [describe(plan, settings, prices, concurrency) for plan in one_per_model(plans)]
    return "\n".join(lines)
