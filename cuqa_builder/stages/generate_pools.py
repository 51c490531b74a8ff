"""Pool records lost and made again: the events done before whose record `pool.jsonl` lacks
(the file deleted or emptied, or its last line torn by a kill) get it back from the call cache
alone, each with the events it was checked together with; nothing is asked."""

from __future__ import annotations

import asyncio

from cuqa_builder.generation.connected import ConnectedGenerator
from cuqa_builder.generation.steps import GenerationError
from cuqa_builder.generation.yield_report import short
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.llm.gateway import Gateway
from cuqa_builder.records.events import Event
from cuqa_builder.run import EVENTS, POOL, RunContext, load_run_info
from cuqa_builder.stages.generate_resume import Todo
from cuqa_builder.stages.generate_tally import Tally
from cuqa_builder.stages.generate_writer import PoolKey, Writer


def without_a_pool_record(ctx: RunContext, done: dict[int, str]) -> list[Event]:
    """The events done before (their candidates are in the file) whose record pool.jsonl
    lacks: the file was deleted, emptied, or its last line torn by a kill."""
    pooled = {key.event_id for key in iter_jsonl(ctx.path(POOL), PoolKey)}
    lines = {line for line, event_id in done.items() if event_id not in pooled}
    return list(iter_jsonl(ctx.path(EVENTS), Event, lines=lines)) if lines else []


def note_pool_size(ctx: RunContext, tally: Tally, pool_size: int) -> None:
    """Say so when --pool-size differs from the one the events already done were screened
    with: it cannot change what is done (each event's record keeps its own)."""
    recorded = load_run_info(ctx.out).generation
    before = recorded.pool_size if recorded is not None else None
    if tally.already_done and before is not None and before != pool_size:
        tally.notes.append(
            f"--pool-size {pool_size} screens the events still to try; the {tally.already_done} "
            f"already done keep what --pool-size {before} screened (pool.jsonl records each "
            "event's size): to screen them all alike, build into a new --out")


async def rebuild_pools(generator: ConnectedGenerator, groups: list[list[Event]],
                         lost: set[str], writer: Writer, gateways: list[Gateway],
                         limit: int) -> str:
    """The pool records of events done before that pool.jsonl lacks (`lost`), made again from
    the call cache alone, each with the events it was checked together with (`groups`): the
    gateways ask nothing (a call not in the cache ends that group's rebuild, whose events are
    then said lost), and only the records are written (the candidates are in the file).
    Returns what the summary says of it."""
    slots = asyncio.Semaphore(limit)
    failed: list[str] = []

    async def rebuild(group: list[Event]) -> None:
        async with slots:
            made = await generator.make_many(group)
        for event, one in zip(group, made, strict=True):
            if event.id not in lost:
                continue
            if isinstance(one, GenerationError) and one.pool is None:
                failed.append(f"{event.id} ({one.step}: {short(one.reason, 100)})")
            elif (record := one.pool) is not None:
                writer.pool(record)

    for gateway in gateways:
        gateway.cache_only = True
    try:
        await asyncio.gather(*(rebuild(group) for group in groups))
    finally:
        for gateway in gateways:
            gateway.cache_only = False
    said = (f"pool.jsonl lacked the records of {len(lost)} events done before (the file "
            "deleted or emptied, or its last line cut by a kill): "
            f"{len(lost) - len(failed)} rebuilt from the call cache, nothing asked")
    if failed:
        said += (f"; {len(failed)} lost, their calls not all in the cache (their candidates "
                 f"stand): {', '.join(failed[:3])}{' ...' if len(failed) > 3 else ''}")
    return said


def lost_groups(ctx: RunContext, lost: list[Event], planned: Todo) -> list[list[Event]]:
    """The groups of events checked together that hold an event whose pool record is lost,
    each whole (its events done before, read again)."""
    wanted = {planned.group_of[e.id] for e in lost if e.id in planned.group_of}
    lines = {line for line, event_id in planned.done_before.items()
             if planned.group_of.get(event_id) in wanted}
    groups: dict[int, list[Event]] = {}
    for event in iter_jsonl(ctx.path(EVENTS), Event, lines=lines):
        groups.setdefault(planned.group_of[event.id], []).append(event)
    return list(groups.values())
