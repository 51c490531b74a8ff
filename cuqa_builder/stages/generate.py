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
import importlib
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from pydantic import BaseModel
from tqdm import tqdm

from cuqa_builder.generation.algorithm import (
    GenerationError,
    Generator,
    KnownArticle,
    Sampling,
    candidate_id,
    load_templates,
)
from cuqa_builder.generation.bridges import RENAMED
from cuqa_builder.generation.estimate import StepRates, plan_easy, plan_hard
from cuqa_builder.generation.hard import choose_pairs, merge_pair
from cuqa_builder.generation.recipes import RECIPES
from cuqa_builder.generation.structural import Token
from cuqa_builder.generation.yield_report import Reasons, item_calls, stage_line
from cuqa_builder.grounding.article_text import article_text
from cuqa_builder.grounding.articles import ArticleStore, open_article_store
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.jsonio import (
    JsonlAppender,
    atomic_write_text,
    iter_jsonl,
    numbered_jsonl,
    read_jsonl,
    write_jsonl,
)
from cuqa_builder.llm.batch import describe_batches, describe_files_read
from cuqa_builder.llm.estimate import CallPlan, calibration, compare, reads_a_cache
from cuqa_builder.llm.gateway import Gateway, open_gateway
from cuqa_builder.llm.settings import LLMSettings, resolve_settings
from cuqa_builder.llm.types import GatewayStats, LLMError
from cuqa_builder.ner import EntityExtractor, parse_tokens
from cuqa_builder.ner_memo import NerMemo
from cuqa_builder.records import Candidate, Entity, Event, GenerationFailure
from cuqa_builder.refresh import stale_candidates
from cuqa_builder.run import (
    CANDIDATES,
    EVENTS,
    GENERATION_FAILURES,
    LLM_CACHE,
    NER_MEMO,
    GenerationInfo,
    NothingProducedError,
    RunContext,
    load_run_info,
    save_run_info,
)
from cuqa_builder.stages.endpoints import open_checker
from cuqa_builder.verification.checker import ItemChecker

# Events in flight per allowed concurrent call: an event waits on one call at a time for most
# of its life, so twice as many events as call slots keeps every slot busy.
EVENTS_PER_CALL_SLOT = 2


@dataclass
class Tally:
    selected: int = 0
    stale: int = 0  # candidates taken out to be made again: their event changed
    no_entities: int = 0
    outside_window: int = 0
    already_done: int = 0
    aab: int = 0
    abc: int = 0
    fallbacks: int = 0
    failed: int = 0
    hard_requested: int = 0
    hard_written: int = 0
    hard_failed: int = 0
    no_article: int = 0  # --known-source wiki: no entity of the event had an article then
    refused: int = 0  # outputs a step check refused (asked again, or the step failed)
    repaired: int = 0  # items written after at least one refused output
    articles: str = ""  # --known-source wiki: what the article lookups did
    guesser: str = ""  # --probe-model: its guesses while composing
    set_aside: Counter[str] = field(default_factory=Counter)  # entities no bridge, by reason
    reasons: Reasons = field(default_factory=Reasons)  # "step: reason" of each failure
    unanswered: int = 0  # failures of a call to the endpoint: a re-run asks it again

    @property
    def written(self) -> int:
        return self.aab + self.abc + self.hard_written

    def most_common_failure(self) -> str:
        return self.reasons.most_common()

    def retry(self) -> str:
        """What trying the failures again takes. A re-run asks again only the calls the endpoint
        did not answer; the answers it gave are cached, so their failures come back alike."""
        failed = self.reasons.total()
        if self.unanswered == failed:
            return "their calls were not answered: the same command asks them again"
        again = (f"; the {self.unanswered} whose call was not answered are asked again"
                 if self.unanswered else "")
        return ("a re-run replays the cached answers and fails them alike: a larger --attempts "
                "asks a refused step again, --refresh asks every call anew, another --model or "
                f"--seed takes another way{again}")

    def count(self, item: Candidate) -> None:
        calls = item_calls(item)
        refused = sum(call.rejected is not None for call in calls)
        self.refused += refused
        self.repaired += refused > 0
        if item.difficulty == "hard":
            self.hard_written += 1
            return
        if item.type == "AAB":
            self.aab += 1
        else:
            self.abc += 1
        if item.intermediates and item.intermediates.fallback:
            self.fallbacks += 1


class PassageEntities:
    """spaCy NER on known passages, off the event loop, one passage at a time; each passage's
    entities are kept (`NER_MEMO`), so a resumed run does not find them again."""

    def __init__(self, model_name: str, memo_path: Path) -> None:
        self.model_name = model_name
        self._memo_path = memo_path
        self._memo: NerMemo | None = None  # opened by the first passage (none in AAB-only runs)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spacy")
        self._pipeline: Future[EntityExtractor] | None = None

    def start(self) -> None:
        """Import spaCy and load the pipeline in the background while the first calls run.

        spaCy imports the legacy `httpx` package, which the openai client looks up in
        `sys.modules` while building every request: imported from another thread, it could be
        seen half-initialised and the request would fail. So `httpx` alone is imported here,
        on the event loop's thread (~50 ms), and the rest of spaCy (~1 s) off it.
        """
        if self._pipeline is None:
            importlib.import_module("httpx")
            self._pipeline = self._thread.submit(EntityExtractor, self.model_name)

    def _find(self, text: str) -> list[Entity]:
        assert self._pipeline is not None
        assert self._memo is not None
        found = self._pipeline.result().for_texts([text])[0]
        self._memo.put(text, found)
        return found

    async def parse(self, text: str) -> list[Token]:
        """An event sentence's dependency parse (the connected recipe's fallback description),
        on the same thread as NER."""
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, parse_tokens, text, self.model_name)

    async def __call__(self, text: str) -> list[Entity]:
        if self._memo is None:
            self._memo = NerMemo(self._memo_path, pipeline=self.model_name)
        found = self._memo.get(text)
        if found is not None:
            return found
        self.start()
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._find, text)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
        if self._memo is not None:
            self._memo.close()


def _known_articles(
    ctx: RunContext, events: list[Event], tally: Tally
) -> dict[str, KnownArticle]:
    """--known-source wiki: every entity's article at the cutoff (looked up once, kept)."""
    store = open_article_store(ctx)
    entities = [entity for event in events for entity in event.entities]
    tally.articles = store.ensure_shown(entities, "articles", ctx.options.quiet).line()
    return _passages(store, entities)


def _with_a_known_bridge(
    events: list[Event], known: dict[str, KnownArticle], tally: Tally, generator: Generator
) -> list[Event]:
    """--known-source wiki: an event none of whose bridges had an article at the cutoff has no
    bridge to ask about (a finding of the lookups, not a failure to retry): it is skipped."""
    usable = [e for e in events
              if any(entity_key(x) in known for x in generator.bridge_candidates(e))]
    tally.no_article = len(events) - len(usable)
    return usable


def _passages(store: ArticleStore, entities: list[Entity]) -> dict[str, KnownArticle]:
    known: dict[str, KnownArticle] = {}
    for entity in entities:
        lookup = store.lookup(entity)
        page = store.page(lookup)
        if lookup is None or page is None:
            continue
        text = article_text(page)
        if text.passage:
            known[entity_key(entity)] = KnownArticle(
                passage=text.passage, links=text.lead_links,
                evidence=store.evidence(lookup, text.lead[:1]), kind=text.kind,
                relations=[r for r in text.relations if r.values and text.sentences_naming(
                    [r.values[0].text, r.values[0].title], limit=1)],
                names=text.names, definite=text.definite,
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
        elif event.id not in seen:
            seen.add(event.id)
            yield line, event


@dataclass(frozen=True)
class _Job:
    """One candidate to make; what to log if it fails."""

    candidate_id: str
    make: Callable[[], Awaitable[Candidate]]
    event_id: str | None = None
    sub_items: tuple[str, ...] = ()


class _Writer:
    """Appends finished candidates and failures as they come, and keeps the tally."""

    def __init__(self, ctx: RunContext, tally: Tally) -> None:
        self.tally = tally
        self.out = ctx.out
        self.candidates = JsonlAppender(ctx.path(CANDIDATES))
        atomic_write_text(ctx.path(GENERATION_FAILURES), "")  # the failures of this run only
        self.failures = JsonlAppender(ctx.path(GENERATION_FAILURES))

    def done(self, item: Candidate) -> None:
        if not self.tally.written:  # the seed is the candidates': recorded with the first one
            save_run_info(self.out, seed=item.seed)
        self.candidates.append(item)
        self.tally.count(item)

    def failed(self, job: _Job, error: GenerationError) -> None:
        unanswered = _unanswered(error)
        self.failures.append(GenerationFailure(
            candidate_id=job.candidate_id, event_id=job.event_id, sub_items=list(job.sub_items),
            step=error.step, reason=error.reason, branch=error.branch, calls=error.attempts,
            unanswered=unanswered,
        ))
        self.tally.refused += sum(call.rejected is not None for call in error.attempts)
        if job.sub_items:
            self.tally.hard_failed += 1
        else:
            self.tally.failed += 1
        self.tally.reasons.add(f"{error.step}: {_short(error.reason)}")
        self.tally.unanswered += unanswered

    def close(self) -> None:
        self.candidates.close()
        self.failures.close()


def _unanswered(error: BaseException) -> bool:
    """Whether the failure was a call the endpoint did not answer (somewhere in its causes)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, LLMError):
            return True
        cause = cause.__cause__
    return False


async def _run_jobs(
    ctx: RunContext, desc: str, jobs: Iterable[_Job], total: int, writer: _Writer, limit: int,
    stats: GatewayStats,
) -> None:
    """Run jobs concurrently, at most `limit` at a time, started in list order. `limit`
    workers take the jobs in turn, so a job takes memory only while it runs (a batch run has
    tens of thousands in flight and may have many more to do)."""
    bar = tqdm(total=total, desc=desc, unit="item", disable=ctx.options.quiet or not total)
    queue = iter(jobs)

    async def worker() -> None:
        for job in queue:  # one shared iterator: each job is taken once
            await run_one(job)

    async def run_one(job: _Job) -> None:
        try:
            writer.done(await job.make())
        except GenerationError as exc:
            writer.failed(job, exc)
        bar.set_postfix(
            calls=stats.calls, hits=stats.cache_hits,
            tokens=stats.prompt_tokens + stats.completion_tokens, cost=f"${stats.cost:.4f}",
            refresh=False,
        )
        bar.update(1)

    with bar:
        await asyncio.gather(*(worker() for _ in range(min(limit, total))))


def _easy_jobs(generator: Generator, events: Iterable[Event], tally: Tally) -> Iterator[_Job]:
    for e in events:
        generator.bridge_candidates(e, tally.set_aside)  # counts the entities it leaves out
        yield _Job(candidate_id(generator.seed, e.id), partial(generator.easy, e), event_id=e.id)


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


class _Made(BaseModel):
    """What a run needs to know of a candidate already in the file (not all of it: a large
    run's candidates would not fit in memory)."""

    id: str
    difficulty: str
    event: _MadeEvent


@dataclass
class _Done:
    ids: set[str] = field(default_factory=set)
    hard: int = 0
    reworded: bool = False  # an easy one's event text changed since it was made (a refresh)


def _made(ctx: RunContext, texts: dict[str, str]) -> _Done:
    """One light pass over candidates.jsonl; `texts` are the usable events' texts now, by id."""
    done = _Done()
    for item in iter_jsonl(ctx.path(CANDIDATES), _Made):
        done.ids.add(item.id)
        done.hard += item.difficulty == "hard"
        done.reworded |= item.difficulty == "easy" and texts.get(
            item.event.id, item.event.text) != item.event.text
    return done


def _todo(
    ctx: RunContext, tally: Tally, drop_stale: bool = True, events: list[Event] | None = None
) -> tuple[Callable[[], Iterator[Event]], int, int]:
    """The events still to generate (a function that reads them again, one at a time), how
    many they are, and how many hard items are in the file already. `drop_stale=False` (an
    estimate) writes nothing: stale candidates then count as done. `events`: the events, when
    the file is not written yet (an estimate of a new run).

    A large run does this on every run of the command (each batch round), so each file is read
    once, lightly; the events to do are read whole later, by their line numbers."""
    seed = ctx.options.generate.seed
    texts: dict[str, str] = {}  # of the usable events: only their candidates are made again
    usable: list[tuple[int, str]] = []  # (line, candidate id) of each usable event
    for line, event in _usable_lines(ctx, tally, events):
        usable.append((line, candidate_id(seed, event.id)))
        texts[event.id] = event.text
    done = _made(ctx, texts)
    if drop_stale and done.reworded:
        tally.stale = _drop_stale(ctx, set(texts))
        done = _made(ctx, {})
    del texts
    todo_lines = {line for line, cid in usable if cid not in done.ids}

    def todo() -> Iterator[Event]:
        if events is not None:
            return (event for line, event in enumerate(events) if line in todo_lines)
        return iter_jsonl(ctx.path(EVENTS), Event, lines=todo_lines)

    tally.already_done = len(usable) - len(todo_lines)
    tally.hard_requested = ctx.options.generate.hard
    return todo, len(todo_lines), done.hard


def estimate(ctx: RunContext, settings: LLMSettings, model: str,
             events: list[Event] | None = None) -> CallPlan:
    """The calls this stage would make now (`--estimate`; nothing is called or written), from
    `events` when events.jsonl is not written yet. An item that failed last time with every
    call answered is made again from the cache and fails alike: its calls are cached ones."""
    tally = Tally()
    todo, _, hard_done = _todo(ctx, tally, drop_stale=False, events=events)
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
                     structure_first=small, checked=checked)
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


async def _run(ctx: RunContext, tally: Tally) -> tuple[str, GatewayStats, CallPlan | None]:
    todo, count, _ = _todo(ctx, tally)
    seed = ctx.options.generate.seed
    settings = resolve_settings(ctx.options.llm, default_cache=ctx.path(LLM_CACHE),
                                progress=not ctx.options.quiet)
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
            checker = await _compose_time_checker(ctx, gateway, small, stack)

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
            if generator.known_source == "wiki":  # wiki passages: the events are looked up first
                events = list(todo())
                generator.known_articles = _known_articles(ctx, events, tally)
                usable = _with_a_known_bridge(events, generator.known_articles, tally, generator)
                todo, count = (lambda: iter(usable)), len(usable)
            save_run_info(ctx.out, generation=GenerationInfo(
                model=gateway.model, seed=seed, sampling=generator.sampling.model_dump(),
                prompts=generator.prompt_hashes, hard=options.hard, attempts=options.attempts,
                known_source=generator.known_source, recipe=generator.recipe,
            ))
            if count and not settings.batched and generator.known_source == "model":
                find_entities.start()  # the pipeline loads while the first calls are answered
            await _run_jobs(ctx, "generate", _easy_jobs(generator, todo(), tally), count, writer,
                            in_flight, gateway.stats)
            if ctx.options.generate.hard:
                entities = {e.id: e.entities for e in iter_jsonl(ctx.path(EVENTS), Event)}
                hard = _hard_jobs(ctx, generator, entities)
                await _run_jobs(ctx, "hard", hard, len(hard), writer, in_flight, gateway.stats)
            if checker is not None and isinstance(checker.guesser, Gateway):
                guessed = checker.guesser.stats
                tally.guesser = (f"{checker.guesser.model} (a model of the cutoff) guessed at "
                                 f"the whole questions: {guessed.calls} calls, "
                                 f"{guessed.cache_hits} cache hits")
            return gateway.model, gateway.stats.model_copy(), plan
    finally:
        writer.close()
        find_entities.close()


async def _compose_time_checker(
    ctx: RunContext, gateway: Gateway, small: bool, stack: AsyncExitStack
) -> ItemChecker | None:
    """The checker asked while composing, the one validate asks (--check-model, else the
    generator; the --probe-model guessing at the whole question), so that validate reads its
    answers from the cache. None for a small model, which is no judge of its own items
    (validate asks them), or when --check-model none turns them off."""
    model = ctx.options.checks.check_model or gateway.model
    if small or model == "none":
        return None
    checker, _ = await open_checker(ctx.options, ctx.path(LLM_CACHE), ctx.window.label, model,
                                    stack, generator=gateway)
    return checker


def _summary(
    ctx: RunContext, tally: Tally, model: str, stats: GatewayStats, wall: float,
    plan: CallPlan | None,
) -> str:
    skipped = [f"{n} {why}" for n, why in (
        (tally.no_entities, "without entities"), (tally.outside_window, "outside the window"),
        (tally.no_article, "without an entity that had an article at the cutoff"),
    ) if n]
    lines = [
        f"generate: {tally.selected} events"
        + (f" ({', '.join(skipped)} skipped)" if skipped else "")
        + f"; {tally.aab + tally.abc} new candidates (AAB {tally.aab}, ABC {tally.abc}"
        + (f"; {tally.fallbacks} took the other branch" if tally.fallbacks else "")
        + f"), {tally.already_done} already done, {tally.failed} failed"
        + (f"; {tally.stale} of them stale (their event was reworded), made again"
           if tally.stale else ""),
    ]
    if tally.hard_requested:
        lines.append(f"  hard: {tally.hard_written} new (requested {tally.hard_requested}), "
                     f"{tally.hard_failed} failed")
    if tally.failed or tally.hard_failed:
        lines.append(f"  most common failure: {tally.most_common_failure()}")
        lines.append(f"  failures: {ctx.path(GENERATION_FAILURES)} ({tally.retry()})")
    lines.append(f"  repair (--attempts {ctx.options.generate.attempts}): {tally.refused} outputs "
                 f"refused by their step check; {tally.repaired} items written after a retry")
    if tally.articles:
        lines.append(f"  articles at the cutoff: {tally.articles}")
    renamed = tally.set_aside.pop(RENAMED, 0)
    if tally.set_aside:
        reasons = "; ".join(f"{n} {why}" for why, n in tally.set_aside.most_common())
        lines.append(f"  entities set aside as bridges: {reasons}")
    if renamed:
        lines.append(f"  {renamed} bridges named by their article's title: {RENAMED}")
    lines.append(
        f"  LLM {model}: {stats.calls} calls, {stats.cache_hits} cache hits, "
        f"{stats.prompt_tokens} tokens in, {stats.completion_tokens} out, ${stats.cost:.4f}"
        f"{describe_batches(stats)}; wall {wall:.1f} s -> {ctx.path(CANDIDATES)}"
    )
    if tally.guesser:
        lines.append(f"  {tally.guesser}")
    if plan is not None:
        lines.append(compare(plan, stats))
    return "\n".join(lines)


def _whole_stage(ctx: RunContext, model: str) -> str:
    records = stage_line(iter_jsonl(ctx.path(CANDIDATES), Candidate),
                         iter_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure))
    return f"{records}; {describe_files_read(ctx.path(LLM_CACHE), model)}"


def _short(reason: str, limit: int = 160) -> str:
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 1] + "…"


def run(ctx: RunContext) -> str:
    started = time.perf_counter()
    tally = Tally()
    model, stats, plan = asyncio.run(_run(ctx, tally))
    summary = _summary(ctx, tally, model, stats, time.perf_counter() - started, plan)
    if ctx.options.generate.limit == 0:
        summary = ("generate: nothing to do: --limit 0 takes no event (the later stages work "
                   "on the candidates already made, if any)\n" + summary)
    if ctx.options.llm.batch_files is not None:  # this command made only the last round's part
        summary += "\n" + _whole_stage(ctx, model)
    if tally.reasons.total() and not tally.written and not tally.already_done:
        # every item it tried failed and none was made before: say why, exit 1
        raise NothingProducedError(
            f"no candidate could be made: {tally.failed + tally.hard_failed} failed, most "
            f"commonly {tally.most_common_failure()}; details in "
            f"{ctx.path(GENERATION_FAILURES)}; {tally.retry()}"
        )
    return summary
