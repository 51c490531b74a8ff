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
import datetime
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from pydantic import BaseModel
from tqdm import tqdm

from cuqa_builder.generation.algorithm import (
    GenerationError,
    Generator,
    KnownArticle,
    Made,
    Sampling,
    load_templates,
)
from cuqa_builder.generation.connected import ConnectedGenerator
from cuqa_builder.generation.estimate import StepRates, plan_easy, plan_hard
from cuqa_builder.generation.hard import choose_pairs, merge_pair
from cuqa_builder.generation.pool_report import PoolTally
from cuqa_builder.generation.recipes import RECIPES
from cuqa_builder.generation.seeding import candidate_id
from cuqa_builder.generation.yield_report import SKIPPED, item_calls, short, stage_line
from cuqa_builder.grounding.articles import ArticleStore, open_article_store
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.jsonio import (
    JsonlAppender,
    atomic_write_text,
    iter_jsonl,
    keep_latest,
    numbered_jsonl,
    read_jsonl,
    write_jsonl,
)
from cuqa_builder.llm.batch.summary import describe_batches, files_read
from cuqa_builder.llm.estimate import CallPlan, calibration, reads_a_cache
from cuqa_builder.llm.gateway import Gateway, open_gateway
from cuqa_builder.llm.settings import LLMSettings, resolve_settings
from cuqa_builder.llm.types import BatchCallFailed, GatewayStats, LLMError
from cuqa_builder.ner import Token
from cuqa_builder.passage_entities import PassageEntities
from cuqa_builder.records import (
    Candidate,
    Entity,
    Event,
    GenerationFailure,
    PoolRecord,
    PromptCall,
)
from cuqa_builder.refresh import stale_candidates
from cuqa_builder.run import (
    CANDIDATES,
    EVENTS,
    GENERATION_FAILURES,
    LLM_CACHE,
    NER_MEMO,
    POOL,
    GenerationInfo,
    NothingProducedError,
    RunContext,
    Unfinished,
    load_run_info,
    save_run_info,
)
from cuqa_builder.stages.endpoints import open_checker
from cuqa_builder.stages.generate_tally import Tally, summary_of
from cuqa_builder.stages.probe_check import check_probe_model
from cuqa_builder.verification.checker import ItemChecker

# Events in flight per allowed concurrent call: an event waits on one call at a time for most
# of its life, so twice as many events as call slots keeps every slot busy.
EVENTS_PER_CALL_SLOT = 2
# The connected recipe checks the pools of this many events together, their questions dealt
# across requests (issue 37). The groups are fixed blocks of the usable events, done or not,
# so that a re-run asks the same requests and reads them from the cache.
EVENTS_CHECKED_TOGETHER = 24
T = TypeVar("T")


def _known_articles(
    ctx: RunContext, events: list[Event], tally: Tally
) -> dict[str, KnownArticle]:
    """--known-source wiki: every entity's article at the cutoff (looked up once, kept)."""
    store = open_article_store(ctx)
    entities = [entity for event in events for entity in event.entities]
    tally.articles = "; ".join([
        store.ensure_shown(entities, "articles", ctx.options.quiet).line(),
        *store.wikitext_lines()])
    return _passages(store, entities)


def _with_a_known_bridge(
    events: list[Event], known: dict[str, KnownArticle], tally: Tally, generator: Generator
) -> list[Event]:
    """--known-source wiki: an event none of whose bridges had an article at the cutoff has no
    bridge to ask about (a finding of the lookups, not a failure to retry): it is skipped."""
    usable = [e for e in events
              if any(entity_key(x) in known for x in generator.bridge_candidates(e))]
    tally.no_article = len(events) - len(usable)
    kept = {e.id for e in usable}
    tally.skipped += [(e.id, "no named thing of the event had a Wikipedia article at the "
                       "cutoff (--known-source wiki)") for e in events if e.id not in kept]
    return usable


def _passages(store: ArticleStore, entities: list[Entity]) -> dict[str, KnownArticle]:
    known: dict[str, KnownArticle] = {}
    for entity in entities:
        lookup = store.lookup(entity)
        text = store.text(lookup)
        if lookup is None or text is None:
            continue
        if text.passage:
            known[entity_key(entity)] = KnownArticle(
                passage=text.passage, links=text.lead_links,
                evidence=store.evidence(lookup, text.lead[:1]), kind=text.kind,
                relations=[r for r in text.relations if r.values and text.sentences_naming(
                    [r.values[0].text, r.values[0].title], limit=1)],
                names=text.names, definite=text.definite,
                size=sum(len(sentence) for sentence in text.sentences),
            )
    return known


class _Named(BaseModel):
    text: str


class _EventHead(BaseModel):
    """What choosing the events to work on needs of one (a large run reads them all on every
    run: as whole records the pass cost twice as much)."""

    id: str
    date: datetime.date
    text: str
    entities: list[_Named]


def _usable_lines(
    ctx: RunContext, tally: Tally, events: list[Event] | None = None
) -> Iterator[tuple[int, _EventHead | Event]]:
    """The first --limit events of the file (with their line numbers), or of `events` (with
    their indexes), minus those Algorithm 1 cannot use, read one at a time; `tally` counts
    them."""
    limit = ctx.options.generate.limit
    seen: set[str] = set()
    numbered = (enumerate(events) if events is not None
                else numbered_jsonl(ctx.path(EVENTS), _EventHead))
    for number, (line, event) in enumerate(numbered):
        if limit is not None and number >= limit:
            return
        tally.selected += 1
        if not ctx.window.contains(event.date):
            tally.outside_window += 1
        elif not event.entities:
            tally.no_entities += 1
            tally.skipped.append((event.id, "the event names no entity (NER and its links found "
                                  "none): nothing to ask about"))
        elif event.id not in seen:
            seen.add(event.id)
            yield line, event


@dataclass(frozen=True)
class _Job:
    """One candidate to make; what to log if it fails."""

    candidate_id: str
    make: Callable[[], Awaitable[Made | Candidate]]
    event_id: str | None = None
    sub_items: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Group:
    """The events checked together: each event's job, and which of them only take part
    (already done: their calls come from the cache and nothing of theirs is written)."""

    jobs: list[_Job]
    make: Callable[[], Awaitable[list[Made | GenerationError]]]
    done: frozenset[str] = frozenset()


class _Writer:
    """Appends finished candidates and failures as they come, and keeps the tally."""

    def __init__(self, ctx: RunContext, tally: Tally) -> None:
        self.tally = tally
        self.out = ctx.out
        self.seed = ctx.options.generate.seed
        self.candidates = JsonlAppender(ctx.path(CANDIDATES))
        atomic_write_text(ctx.path(GENERATION_FAILURES), "")  # the failures of this run only
        self.failures = JsonlAppender(ctx.path(GENERATION_FAILURES))
        self.pool_path = ctx.path(POOL)
        self.pool_size = ctx.options.generate.pool_size
        keep_latest(self.pool_path, _PoolKey, _event_of)  # a record a kill left torn, too
        self.pools = JsonlAppender(self.pool_path)
        self._skipped_written = 0
        self.write_skipped()

    def write_skipped(self) -> None:
        """The events not tried, with why: every event of the window ends in one file."""
        for event_id, why in self.tally.skipped[self._skipped_written:]:
            self.failures.append(GenerationFailure(
                candidate_id=candidate_id(self.seed, event_id), event_id=event_id,
                step=SKIPPED, reason=why))
        self._skipped_written = len(self.tally.skipped)

    def done(self, made: Made | Candidate) -> None:
        made = made if isinstance(made, Made) else Made([made])
        if not self.tally.written and made.items:  # the seed is the candidates': recorded
            save_run_info(self.out, seed=made.items[0].seed)  # with the first one
        self.candidates.append_all(made.items)
        if made.pool is not None:  # after the items: a pool record says the event is done
            self.pool(made.pool)
        self.tally.count_made(made)

    def pool(self, record: PoolRecord) -> None:
        """An event's pool record, with the --pool-size it was screened with."""
        self.pools.append(record.model_copy(update={"pool_size": self.pool_size}))

    def failed(self, job: _Job, error: GenerationError) -> None:
        unanswered = _caused_by(error, LLMError)
        self.failures.append(GenerationFailure(
            candidate_id=job.candidate_id, event_id=job.event_id, sub_items=list(job.sub_items),
            step=error.step, reason=error.reason, branch=error.branch, calls=error.attempts,
            unanswered=unanswered,
        ))
        if error.pool is not None:
            self.pool(error.pool)
        self.tally.refused += sum(call.rejected is not None for call in error.attempts)
        if job.sub_items:
            self.tally.hard_failed += 1
        else:
            self.tally.failed += 1
        self.tally.reasons.add(f"{error.step}: {short(error.reason)}")
        self.tally.unanswered += unanswered
        self.tally.given_up += _caused_by(error, BatchCallFailed)
        if error.unasked is not None:
            self.tally.unasked[error.unasked] += 1

    def close(self) -> None:
        self.candidates.close()
        self.failures.close()
        self.pools.close()
        keep_latest(self.pool_path, _PoolKey, _event_of)  # an event tried again: its latest


class _PoolKey(BaseModel):
    event_id: str


def _event_of(key: _PoolKey) -> str:
    return key.event_id


def _caused_by(error: BaseException, kind: type[LLMError]) -> bool:
    """Whether the failure was a call the endpoint did not answer (somewhere in its causes),
    of this kind."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, kind):
            return True
        cause = cause.__cause__
    return False


async def _run_jobs(
    ctx: RunContext, desc: str, jobs: Iterable[_Job | _Group], total: int, writer: _Writer,
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

    async def run_one(job: _Job | _Group) -> None:
        if isinstance(job, _Group):
            await run_group(job)
            return
        try:
            writer.done(await job.make())
        except GenerationError as exc:
            writer.failed(job, exc)
        advance(1)

    async def run_group(group: _Group) -> None:
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


def _easy_jobs(generator: Generator, events: Iterable[Event], tally: Tally) -> Iterator[_Job]:
    for e in events:
        generator.bridge_candidates(e, tally.set_aside)  # counts the entities it leaves out
        yield _Job(candidate_id(generator.seed, e.id), partial(generator.make, e), event_id=e.id)


def _grouped_jobs(generator: ConnectedGenerator, events: Iterable[Event], tally: Tally,
                  todo: _Todo) -> Iterator[_Group]:
    """The events in their fixed groups, each group's pools checked together."""
    group: list[Event] = []
    for event in events:
        if group and todo.group_of[event.id] != todo.group_of[group[0].id]:
            yield _group(generator, group, tally, todo.done)
            group = []
        group.append(event)
    if group:
        yield _group(generator, group, tally, todo.done)


def _group(generator: ConnectedGenerator, events: list[Event], tally: Tally,
           done: frozenset[str]) -> _Group:
    for event in events:
        if event.id not in done:
            generator.bridge_candidates(event, tally.set_aside)  # counts what it leaves out
    jobs = [_Job(candidate_id(generator.seed, e.id), partial(generator.make, e), event_id=e.id)
            for e in events]
    return _Group(jobs, partial(generator.make_many, events),
                  frozenset(e.id for e in events if e.id in done))


def _hard_jobs(
    ctx: RunContext, generator: Generator, entities: dict[str, list[Entity]]
) -> list[_Job]:
    """Pairs still to merge; hard items already in the file count towards --hard."""
    requested = ctx.options.generate.hard
    items = read_jsonl(ctx.path(CANDIDATES), Candidate)
    done = {item.id for item in items if item.difficulty == "hard"}
    easy = [item for item in items if item.difficulty == "easy"]
    pairs = [p for p in choose_pairs(easy, entities, generator.seed, requested) if p.id not in done]
    return [
        _Job(p.id, partial(merge_pair, generator, p), sub_items=(p.first.id, p.second.id))
        for p in pairs[: max(0, requested - len(done))]
    ]


def _drop_stale(ctx: RunContext, regenerable: set[str]) -> int:
    """Take out of candidates.jsonl the easy candidates whose event (still usable: its id is in
    `regenerable`) changed since they were made, and the hard items built on them, so that they
    are made again; returns how many easy ones. Candidates of removed events stay (validation
    keeps them out of the data). Reads both files whole: only when `_made` found a reworded one."""
    candidates = read_jsonl(ctx.path(CANDIDATES), Candidate)
    events = {event.id: event for event in iter_jsonl(ctx.path(EVENTS), Event)}
    stale = stale_candidates(candidates, events)
    dropped = {c.id for c in candidates if c.difficulty == "easy" and c.id in stale
               and stale[c.id].kind == "reworded" and c.event.id in regenerable}
    dropped |= {c.id for c in candidates if any(sub.id in dropped for sub in c.sub_items)}
    if dropped:
        write_jsonl(ctx.path(CANDIDATES), [c for c in candidates if c.id not in dropped])
    return sum(1 for c in candidates if c.id in dropped and c.difficulty == "easy")


class _MadeEvent(BaseModel):
    id: str
    text: str


class _Written(BaseModel):
    """What a run needs to know of a candidate already in the file (not all of it: a large
    run's candidates would not fit in memory)."""

    id: str
    difficulty: str
    event: _MadeEvent


@dataclass
class _Done:
    events: set[str] = field(default_factory=set)  # of the easy candidates: these are done
    hard: int = 0
    reworded: bool = False  # an easy one's event text changed since it was made (a refresh)


def _made(ctx: RunContext, texts: dict[str, str]) -> _Done:
    """One light pass over candidates.jsonl; `texts` are the usable events' texts now, by id."""
    done = _Done()
    for item in iter_jsonl(ctx.path(CANDIDATES), _Written):
        if item.difficulty == "easy":
            done.events.add(item.event.id)
        done.hard += item.difficulty == "hard"
        done.reworded |= item.difficulty == "easy" and texts.get(
            item.event.id, item.event.text) != item.event.text
    return done


@dataclass
class _Todo:
    """The events still to generate (`events()` reads them again, one at a time), how many,
    and how many hard items the file holds. With groups (`group_of`: event id -> its group),
    `events()` gives every event of a group that has one to do, and `done` those of them
    already made."""

    events: Callable[[], Iterator[Event]]
    count: int
    hard_done: int
    group_of: dict[str, int] = field(default_factory=dict)
    done: frozenset[str] = frozenset()
    done_before: dict[int, str] = field(default_factory=dict)  # line -> id of events done


def _todo(
    ctx: RunContext, tally: Tally, drop_stale: bool = True, events: list[Event] | None = None,
    group: int | None = None,
) -> _Todo:
    """The events to generate. `drop_stale=False` (an estimate) writes nothing: stale
    candidates then count as done. `events`: the events, when the file is not written yet (an
    estimate of a new run). `group`: the size of the fixed blocks of usable events checked
    together.

    A large run does this on every run of the command (each batch round), so each file is read
    once, lightly; the events to do are read whole later, by their line numbers."""
    texts: dict[str, str] = {}  # of the usable events: only their candidates are made again
    usable: list[tuple[int, str]] = []  # (line, event id) of each usable event
    for line, event in _usable_lines(ctx, tally, events):
        usable.append((line, event.id))
        texts[event.id] = event.text
    done = _made(ctx, texts)
    if drop_stale and done.reworded:
        tally.stale = _drop_stale(ctx, set(texts))
        done = _made(ctx, {})
    del texts
    todo_lines = {line for line, event_id in usable if event_id not in done.events}
    tally.already_done = len(usable) - len(todo_lines)
    tally.hard_requested = ctx.options.generate.hard
    count = len(todo_lines)
    group_of = {event_id: i // group for i, (_, event_id) in enumerate(usable)} if group else {}
    taking_part: set[str] = set()
    if group:
        open_groups = {group_of[event_id] for line, event_id in usable if line in todo_lines}
        lines = {line for line, event_id in usable if group_of[event_id] in open_groups}
        taking_part = {event_id for line, event_id in usable
                       if line in lines - todo_lines}
        todo_lines = lines

    def todo() -> Iterator[Event]:
        if events is not None:
            return (event for line, event in enumerate(events) if line in todo_lines)
        return iter_jsonl(ctx.path(EVENTS), Event, lines=todo_lines)

    done_before = {line: event_id for line, event_id in usable if event_id in done.events}
    return _Todo(todo, count, done.hard, group_of, frozenset(taking_part), done_before)


def estimate(ctx: RunContext, settings: LLMSettings, model: str,
             events: list[Event] | None = None) -> CallPlan:
    """The calls this stage would make now (`--estimate`; nothing is called or written), from
    `events` when events.jsonl is not written yet. An item that failed last time with every
    call answered is made again from the cache and fails alike: its calls are cached ones."""
    tally = Tally()
    planned = _todo(ctx, tally, drop_stale=False, events=events)
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


async def _run(
    ctx: RunContext, tally: Tally
) -> tuple[list[str], GatewayStats, CallPlan | None]:
    """Make the candidates; returns the models asked (the generator first), the generator's
    calls and the estimate to compare them with."""
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE),
                                progress=not ctx.options.quiet)
    grouped = _groups_checks(ctx, settings)
    planned = _todo(ctx, tally, group=EVENTS_CHECKED_TOGETHER if grouped else None)
    todo, count = planned.events, planned.count
    seed = ctx.options.generate.seed
    # The estimate the summary compares with; a --batch-files run is one of several (each
    # replays the ones before), so its summary reports its own calls only.
    compared = count and settings.batch_mode != "files"
    plan = estimate(ctx, settings, settings.model or settings.local or "") if compared else None
    in_flight = settings.jobs_in_flight(EVENTS_PER_CALL_SLOT)
    find_entities = PassageEntities(ctx.options.source.spacy_model, ctx.path(NER_MEMO))
    writer = _Writer(ctx, tally)
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
                lost = _without_a_pool_record(ctx, planned.done_before)
                _note_pool_size(ctx, tally, options.pool_size)
            if generator.known_source == "wiki":  # wiki passages: the events are looked up first
                events = list(todo())
                generator.known_articles = _known_articles(ctx, events + lost, tally)
                usable = _with_a_known_bridge(events, generator.known_articles, tally, generator)
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
                tally.pool_records = await _rebuild_pools(
                    generator, _lost_groups(ctx, lost, planned) if grouped
                    else [[event] for event in lost], {e.id for e in lost}, writer,
                    [gateway, *others], in_flight)
            if count and not settings.batched and generator.known_source == "model":
                find_entities.start()  # the pipeline loads while the first calls are answered
            jobs: Iterable[_Job | _Group] = _easy_jobs(generator, todo(), tally)
            if isinstance(generator, ConnectedGenerator) and generator.checker is not None:
                jobs = _grouped_jobs(generator, todo(), tally, planned)
                in_flight = max(1, in_flight // EVENTS_CHECKED_TOGETHER)
            await _run_jobs(ctx, "generate", jobs, count, writer, in_flight, gateway.stats)
            if ctx.options.generate.hard:
                entities = {e.id: e.entities for e in iter_jsonl(ctx.path(EVENTS), Event)}
                hard = _hard_jobs(ctx, generator, entities)
                await _run_jobs(ctx, "hard", hard, len(hard), writer, in_flight, gateway.stats)
            tally.others = [_asked_while_composing(other, checker) for other in others]
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


def _without_a_pool_record(ctx: RunContext, done: dict[int, str]) -> list[Event]:
    """The events done before (their candidates are in the file) whose record pool.jsonl
    lacks: the file was deleted, emptied, or its last line torn by a kill."""
    pooled = {key.event_id for key in iter_jsonl(ctx.path(POOL), _PoolKey)}
    lines = {line for line, event_id in done.items() if event_id not in pooled}
    return list(iter_jsonl(ctx.path(EVENTS), Event, lines=lines)) if lines else []


def _note_pool_size(ctx: RunContext, tally: Tally, pool_size: int) -> None:
    """Say so when --pool-size differs from the one the events already done were screened
    with: it cannot change what is done (each event's record keeps its own)."""
    recorded = load_run_info(ctx.out).generation
    before = recorded.pool_size if recorded is not None else None
    if tally.already_done and before is not None and before != pool_size:
        tally.notes.append(
            f"--pool-size {pool_size} screens the events still to try; the {tally.already_done} "
            f"already done keep what --pool-size {before} screened (pool.jsonl records each "
            "event's size): to screen them all alike, build into a new --out")


async def _rebuild_pools(generator: ConnectedGenerator, groups: list[list[Event]],
                         lost: set[str], writer: _Writer, gateways: list[Gateway],
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


def _lost_groups(ctx: RunContext, lost: list[Event], planned: _Todo) -> list[list[Event]]:
    """The groups of events checked together that hold an event whose pool record is lost,
    each whole (its events done before, read again)."""
    wanted = {planned.group_of[e.id] for e in lost if e.id in planned.group_of}
    lines = {line for line, event_id in planned.done_before.items()
             if planned.group_of.get(event_id) in wanted}
    groups: dict[int, list[Event]] = {}
    for event in iter_jsonl(ctx.path(EVENTS), Event, lines=lines):
        groups.setdefault(planned.group_of[event.id], []).append(event)
    return list(groups.values())


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


def _asked_while_composing(other: Gateway, checker: ItemChecker | None) -> str:
    """What another model than the generator did while composing, in the summary's words."""
    assert checker is not None  # only a checker asks other models
    roles = [role for role, asked in (("(the checker) checked the items", checker.client),
                                      ("(a model of the cutoff) guessed at the whole questions",
                                       checker.guesser)) if other is asked]
    stats = other.stats
    return (f"{other.model} {' and '.join(roles)}: {stats.calls} calls, {stats.cache_hits} "
            f"cache hits{describe_batches(stats)}")


def _whole_stage(ctx: RunContext, models: list[str]) -> str:
    """The stage over every command of a --batch-files run: its records, and the batch files of
    every model it asked. The records count a call for each item it served, the files an answer
    for each request: when they differ, the line says by how much and why."""
    calls = 0

    def counted(records: Iterator[T], calls_of: Callable[[T], Sequence[PromptCall]]
                ) -> Iterator[T]:
        nonlocal calls
        for record in records:
            calls += len(calls_of(record))
            yield record

    records = stage_line(
        counted(iter_jsonl(ctx.path(CANDIDATES), Candidate), item_calls),
        counted(iter_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure),
                lambda failure: failure.calls))
    read = files_read(ctx.path(LLM_CACHE), models)
    differ = ""
    if calls > read.answered:
        differ = (f"; the records count {calls - read.answered} calls more than the answers "
                  "read: an answer that several items share (the same request), or that the "
                  "cache held before the rounds, counts for each item")
    elif calls < read.answered:
        differ = (f"; {read.answered - calls} answers read are in no item's record (the "
                  f"records count {calls} calls)")
    return f"{records}; {read.describe()}{differ}"


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
        summary += "\n" + _whole_stage(ctx, models)
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
