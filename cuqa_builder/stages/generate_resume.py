"""How the generate stage resumes: which usable events of events.jsonl are still to do and
which are done (their candidates in candidates.jsonl), the candidates a refresh reworded taken
out to be made again, and the fixed groups of events whose pools are checked together. A large
run plans this on every run of the command (each batch round): each file is read once, lightly;
the events to do are read whole later, by their line numbers."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import BaseModel

from cuqa_builder.jsonio import iter_jsonl, numbered_jsonl, read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event
from cuqa_builder.refresh import stale_candidates
from cuqa_builder.run import CANDIDATES, EVENTS, RunContext
from cuqa_builder.stages.generate_tally import Tally

# The connected recipe checks the pools of this many events together, their questions dealt
# across requests (issue 37). The groups are fixed blocks of the usable events, done or not,
# so that a re-run asks the same requests and reads them from the cache.
EVENTS_CHECKED_TOGETHER = 24


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
class Todo:
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


def plan_todo(
    ctx: RunContext, tally: Tally, drop_stale: bool = True, events: list[Event] | None = None,
    group: int | None = None,
) -> Todo:
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
    return Todo(todo, count, done.hard, group_of, frozenset(taking_part), done_before)
