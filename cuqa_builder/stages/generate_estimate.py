"""`--estimate` for the generate stage: the calls it would make now, nothing called or
written; the items that failed last time with every call answered count as cached."""

from __future__ import annotations

from cuqa_builder.generation.estimate import StepRates, plan_easy, plan_hard
from cuqa_builder.generation.recipes import RECIPES
from cuqa_builder.generation.seeding import candidate_id
from cuqa_builder.generation.steps import Sampling, load_templates
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.llm.estimate import CallPlan, calibration, reads_a_cache
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.records.candidates import GenerationFailure
from cuqa_builder.records.events import Event
from cuqa_builder.run import CANDIDATES, GENERATION_FAILURES, RunContext, load_run_info
from cuqa_builder.stages.generate_resume import plan_todo
from cuqa_builder.stages.generate_tally import Tally


def estimate(ctx: RunContext, settings: LLMSettings, model: str,
             events: list[Event] | None = None) -> CallPlan:
    """The calls this stage would make now (`--estimate`; nothing is called or written), from
    `events` when events.jsonl is not written yet. An item that failed last time with every
    call answered is made again from the cache and fails alike: its calls are cached ones."""
    tally = Tally()
    planned = plan_todo(ctx, tally, drop_stale=False, events=events)
    todo, hard_done = planned.events, planned.hard_done
    plan = CallPlan(model, calibration(settings, model))
    replayed = _replayed_failures(ctx, settings, model)
    recipe = RECIPES[ctx.options.generate.prompts]
    sampling, templates = Sampling(), load_templates(recipe.steps)
    known_source = ctx.options.generate.known_source or recipe.default_known_source
    rates = StepRates.from_records(ctx.path(CANDIDATES), ctx.path(GENERATION_FAILURES))
    small = settings.uses_local_model
    checked = not small and ctx.options.checks.check_model != "none"
    seed = ctx.options.generate.seed
    to_do = list(todo())
    ids = {candidate_id(seed, event.id) for event in to_do}
    new = [event for event in to_do if candidate_id(seed, event.id) not in replayed]
    easy = plan_easy(plan, new, seed, templates, sampling, recipe, known_source, rates,
                     structure_first=small, checked=checked,
                     pool_size=ctx.options.generate.pool_size)
    easy_made = tally.already_done + easy
    pairs = min(max(0, ctx.options.generate.hard - hard_done), easy_made // 2)
    failed_pairs = [failure for failure in replayed.values() if failure.sub_items][:pairs]
    plan_hard(plan, pairs - len(failed_pairs), templates, sampling)
    if pairs > len(failed_pairs):
        plan.notes.append(f"hard: {pairs - len(failed_pairs)} pairs assumed composable (known "
                          "once easy items exist)")
    _count_replayed(plan, [*(replayed[i] for i in ids if i in replayed), *failed_pairs])
    return plan


def _replayed_failures(ctx: RunContext, settings: LLMSettings,
                       model: str) -> dict[str, GenerationFailure]:
    """The last run's failures a re-run makes again from the cache alone, by candidate id:
    every call answered, by the same model, and a cache to read them from."""
    generation = load_run_info(ctx.out).generation
    if generation is None or generation.model != model or not reads_a_cache(settings):
        return {}
    return {failure.candidate_id: failure for failure in
            iter_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure)
            if not failure.unanswered}


def _count_replayed(plan: CallPlan, failures: list[GenerationFailure]) -> None:
    if not failures:
        return
    plan.cached += sum(len(failure.calls) for failure in failures)
    plan.notes.append(
        f"generate: the {len(failures)} items that failed last time, every call answered, are "
        "made again from the cache and fail alike (--attempts, --refresh, another --seed or "
        "--model try them otherwise)")
