"""The generate stage's units of work: one job per event (or per pair of easy items to merge
into a hard one), or one group of events whose pools are checked together."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial

from cuqa_builder.generation.algorithm import Generator, Made
from cuqa_builder.generation.connected import ConnectedGenerator
from cuqa_builder.generation.hard import choose_pairs, merge_pair
from cuqa_builder.generation.seeding import candidate_id
from cuqa_builder.generation.steps import GenerationError
from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Entity, Event
from cuqa_builder.run import CANDIDATES, RunContext
from cuqa_builder.stages.generate_resume import Todo
from cuqa_builder.stages.generate_tally import Tally


@dataclass(frozen=True)
class Job:
    """One candidate to make; what to log if it fails."""

    candidate_id: str
    make: Callable[[], Awaitable[Made | Candidate]]
    event_id: str | None = None
    sub_items: tuple[str, ...] = ()


@dataclass(frozen=True)
class Group:
    """The events checked together: each event's job, and which of them only take part
    (already done: their calls come from the cache and nothing of theirs is written)."""

    jobs: list[Job]
    make: Callable[[], Awaitable[list[Made | GenerationError]]]
    done: frozenset[str] = frozenset()


def easy_jobs(generator: Generator, events: Iterable[Event], tally: Tally) -> Iterator[Job]:
    for e in events:
        generator.bridge_candidates(e, tally.set_aside)  # counts the entities it leaves out
        yield Job(candidate_id(generator.seed, e.id), partial(generator.make, e), event_id=e.id)


def grouped_jobs(generator: ConnectedGenerator, events: Iterable[Event], tally: Tally,
                  todo: Todo) -> Iterator[Group]:
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
           done: frozenset[str]) -> Group:
    for event in events:
        if event.id not in done:
            generator.bridge_candidates(event, tally.set_aside)  # counts what it leaves out
    jobs = [Job(candidate_id(generator.seed, e.id), partial(generator.make, e), event_id=e.id)
            for e in events]
    return Group(jobs, partial(generator.make_many, events),
                  frozenset(e.id for e in events if e.id in done))


def hard_jobs(
    ctx: RunContext, generator: Generator, entities: dict[str, list[Entity]]
) -> list[Job]:
    """Pairs still to merge; hard items already in the file count towards --hard."""
    requested = ctx.options.generate.hard
    items = read_jsonl(ctx.path(CANDIDATES), Candidate)
    done = {item.id for item in items if item.difficulty == "hard"}
    easy = [item for item in items if item.difficulty == "easy"]
    pairs = [p for p in choose_pairs(easy, entities, generator.seed, requested) if p.id not in done]
    return [
        Job(p.id, partial(merge_pair, generator, p), sub_items=(p.first.id, p.second.id))
        for p in pairs[: max(0, requested - len(done))]
    ]
