"""The generate stage: `events.jsonl` -> `candidates.jsonl` by Algorithm 1, resumable.

Many events run at once (the gateway bounds the calls in flight); each candidate is appended
and flushed the moment it is done, so a killed run loses nothing, and a re-run skips the events
whose candidate is in the file. A candidate whose event was reworded by a refresh is stale: it
is taken out of the file first (with the hard items built on it) and made again; its calls that
do not depend on the new text come from the cache. An event that fails for good is logged to
`generation-failures.jsonl` (the failures of the latest run) and retried by the next run, whose
finished calls come from the LLM cache: a failed call is asked again, while an answer that held
no usable question is cached like any other and fails the same way (`--refresh` asks anew).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from contextlib import AsyncExitStack

from tqdm import tqdm

from cuqa_builder.generation.connected import ConnectedGenerator
from cuqa_builder.generation.pool_report import PoolTally
from cuqa_builder.generation.recipes import RECIPES
from cuqa_builder.generation.steps import GenerationError
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.llm.estimate import CallPlan
from cuqa_builder.llm.gateway import Gateway, open_gateway
from cuqa_builder.llm.settings import LLMSettings, resolve_settings
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.ner import Token
from cuqa_builder.passage_entities import PassageEntities
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.records.pool import PoolRecord
from cuqa_builder.run import (
    EVENTS,
    GENERATION_FAILURES,
    LLM_CACHE,
    NER_MEMO,
    POOL,
    GenerationInfo,
    NothingProducedError,
    RunContext,
    Unfinished,
    save_run_info,
)
from cuqa_builder.stages.endpoints import open_checker
from cuqa_builder.stages.generate_estimate import estimate
from cuqa_builder.stages.generate_jobs import Group, Job, easy_jobs, grouped_jobs, hard_jobs
from cuqa_builder.stages.generate_known import known_articles, with_a_known_bridge
from cuqa_builder.stages.generate_pools import (
    lost_groups,
    note_pool_size,
    rebuild_pools,
    without_a_pool_record,
)
from cuqa_builder.stages.generate_resume import EVENTS_CHECKED_TOGETHER, plan_todo
from cuqa_builder.stages.generate_tally import Tally, asked_while_composing, summary_of, whole_stage
from cuqa_builder.stages.generate_writer import Writer
from cuqa_builder.stages.probe_check import check_probe_model
from cuqa_builder.verification.checker import ItemChecker

# Events in flight per allowed concurrent call: an event waits on one call at a time for most
# of its life, so twice as many events as call slots keeps every slot busy.
EVENTS_PER_CALL_SLOT = 2


async def _run_jobs(
    ctx: RunContext, desc: str, jobs: Iterable[Job | Group], total: int, writer: Writer,
    limit: int, stats: GatewayStats,
) -> None:
    """Run jobs concurrently, at most `limit` at a time, started in list order. `limit`
    workers take the jobs in turn, so a job takes memory only while it runs (a batch run has
    tens of thousands in flight and may have many more to do)."""
    bar = tqdm(total=total, desc=desc, unit="item", disable=ctx.options.quiet or not total)
    queue = iter(jobs)

    async def worker() -> None:
        for job in queue:  # one shared iterator: each job is taken once
            await run_one(job)

    async def run_one(job: Job | Group) -> None:
        if isinstance(job, Group):
            await run_group(job)
            return
        try:
            writer.done(await job.make())
        except GenerationError as exc:
            writer.failed(job, exc)
        advance(1)

    async def run_group(group: Group) -> None:
        for one, made in zip(group.jobs, await group.make(), strict=True):
            if one.event_id in group.done:
                continue
            if isinstance(made, GenerationError):
                writer.failed(one, made)
            else:
                writer.done(made)
        advance(sum(one.event_id not in group.done for one in group.jobs))

    def advance(count: int) -> None:
        bar.set_postfix(
            calls=stats.calls, hits=stats.cache_hits,
            tokens=stats.prompt_tokens + stats.completion_tokens, cost=f"${stats.cost:.4f}",
            refresh=False,
        )
        bar.update(count)

    with bar:
        await asyncio.gather(*(worker() for _ in range(min(limit, total))))


async def _run(
    ctx: RunContext, tally: Tally
) -> tuple[list[str], GatewayStats, CallPlan | None]:
    """Make the candidates; returns the models asked (the generator first), the generator's
    calls and the estimate to compare them with."""
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE),
                                progress=not ctx.options.quiet)
    grouped = _groups_checks(ctx, settings)
    planned = plan_todo(ctx, tally, group=EVENTS_CHECKED_TOGETHER if grouped else None)
    todo, count = planned.events, planned.count
    seed = ctx.options.generate.seed
    # The estimate the summary compares with; a --batch-files run is one of several (each
    # replays the ones before), so its summary reports its own calls only.
    compared = count and settings.batch_mode != "files"
    plan = estimate(ctx, settings, settings.model or settings.local or "") if compared else None
    in_flight = settings.jobs_in_flight(EVENTS_PER_CALL_SLOT)
    find_entities = PassageEntities(ctx.options.source.spacy_model, ctx.path(NER_MEMO))
    writer = Writer(ctx, tally)
    try:
        options = ctx.options.generate
        async with AsyncExitStack() as stack:
            gateway = await stack.enter_async_context(open_gateway(settings))
            small = settings.uses_local_model  # the embedded model is small
            tally.probe_check = await check_probe_model(ctx, gateway, stack,
                                                        settings.batch_mode == "files")
            checker, others = await _compose_time_checker(ctx, gateway, small, stack)

            async def passage_entities(text: str) -> list[Entity]:
                # spaCy runs in a thread; a batch round waits for it (the ABC question's call).
                async with gateway.outside_work():
                    return await find_entities(text)

            async def parse(text: str) -> list[Token]:
                async with gateway.outside_work():
                    return await find_entities.parse(text)

            generator = RECIPES[options.prompts](
                gateway, passage_entities, seed=seed, cutoff=ctx.window.label,
                attempts=options.attempts, known_source=options.known_source, parse=parse,
                structure_first=small, checker=checker,
            )
            lost: list[Event] = []  # events done before whose pool record is not in the file
            if isinstance(generator, ConnectedGenerator):
                generator.pool_size, generator.per_event = options.pool_size, options.per_event
                lost = without_a_pool_record(ctx, planned.done_before)
                note_pool_size(ctx, tally, options.pool_size)
            if generator.known_source == "wiki":  # wiki passages: the events are looked up first
                events = list(todo())
                generator.known_articles = known_articles(ctx, events + lost, tally)
                usable = with_a_known_bridge(events, generator.known_articles, tally, generator)
                writer.write_skipped()
                todo = lambda: iter(usable)  # noqa: E731
                count = sum(e.id not in planned.done for e in usable)
            save_run_info(ctx.out, generation=GenerationInfo(
                model=gateway.model, seed=seed, sampling=generator.sampling.model_dump(),
                prompts=generator.prompt_hashes, hard=options.hard, attempts=options.attempts,
                known_source=generator.known_source, recipe=generator.recipe,
                pool_size=options.pool_size if isinstance(generator, ConnectedGenerator)
                else None,
            ))
            if lost:
                tally.pool_records = await rebuild_pools(
                    generator, lost_groups(ctx, lost, planned) if grouped
                    else [[event] for event in lost], {e.id for e in lost}, writer,
                    [gateway, *others], in_flight)
            if count and not settings.batched and generator.known_source == "model":
                find_entities.start()  # the pipeline loads while the first calls are answered
            jobs: Iterable[Job | Group] = easy_jobs(generator, todo(), tally)
            if isinstance(generator, ConnectedGenerator) and generator.checker is not None:
                jobs = grouped_jobs(generator, todo(), tally, planned)
                in_flight = max(1, in_flight // EVENTS_CHECKED_TOGETHER)
            await _run_jobs(ctx, "generate", jobs, count, writer, in_flight, gateway.stats)
            if ctx.options.generate.hard:
                entities = {e.id: e.entities for e in iter_jsonl(ctx.path(EVENTS), Event)}
                hard = hard_jobs(ctx, generator, entities)
                await _run_jobs(ctx, "hard", hard, len(hard), writer, in_flight, gateway.stats)
            tally.others = [asked_while_composing(other, checker) for other in others]
            return ([gateway.model, *(other.model for other in others)],
                    gateway.stats.model_copy(), plan)
    finally:
        writer.close()
        find_entities.close()


def _groups_checks(ctx: RunContext, settings: LLMSettings) -> bool:
    """Whether the run checks its events' pools in groups: the connected recipe with a checker
    while composing (as `_compose_time_checker` decides)."""
    return (RECIPES[ctx.options.generate.prompts] is ConnectedGenerator
            and not settings.uses_local_model and ctx.options.checks.check_model != "none")


async def _compose_time_checker(
    ctx: RunContext, gateway: Gateway, small: bool, stack: AsyncExitStack
) -> tuple[ItemChecker | None, list[Gateway]]:
    """The checker asked while composing, the one validate asks (--check-model, else the
    generator; the --probe-model guessing at the whole question), so that validate reads its
    answers from the cache, and the gateways it asks besides the generator's. None for a small
    model, which is no judge of its own items (validate asks them), or when --check-model none
    turns them off."""
    model = ctx.options.checks.check_model or gateway.model
    if small or model == "none":
        return None, []
    checker, asked = await open_checker(ctx.options, ctx.path(LLM_CACHE), ctx.window.label,
                                        model, stack, generator=gateway)
    return checker, [other for other in asked if other is not gateway]


def run(ctx: RunContext) -> str:
    started = time.perf_counter()
    tally = Tally()
    models, stats, plan = asyncio.run(_run(ctx, tally))
    if ctx.path(POOL).exists():  # the pool line counts the whole run, not this command's part
        tally.pools = PoolTally.of_run(iter_jsonl(ctx.path(POOL), PoolRecord))
    summary = summary_of(ctx, tally, models[0], stats, time.perf_counter() - started, plan)
    if ctx.options.generate.limit == 0:
        summary = ("generate: nothing to do: --limit 0 takes no event (the later stages work "
                   "on the candidates already made, if any)\n" + summary)
    if ctx.options.llm.batch_files is not None:  # this command made only the last round's part
        summary += "\n" + whole_stage(ctx, models)
    if tally.unasked:  # what was made is written; the events it could not check are not
        raise Unfinished("; ".join(
            f"{who} could not be asked while composing about {n} event{'s' * (n > 1)}"
            for who, n in tally.unasked.items()) + ": run generate again once it answers",
            summary)
    if tally.reasons.total() and not tally.written and not tally.already_done:
        # every item it tried failed and none was made before: say why, exit 1
        raise NothingProducedError(
            f"no candidate could be made: {tally.failed + tally.hard_failed} failed, most "
            f"commonly {tally.most_common_failure()}; details in "
            f"{ctx.path(GENERATION_FAILURES)}; {tally.retry()}"
        )
    return summary
