"""A living run: event ids that survive edits, what a refresh changed, and stale candidates.

**What "the same event" means.** An event's id is the hash of its page title and its text *when
the run first saw it* (`records.event_id`). Wikipedia keeps editing recent day pages: a sentence
gets a date fixed or a word changed, and a pure hash of the current text would make every such
edit look like one event removed and another added, orphaning the items built on it. So when the
events stage runs again over newer pages, each parsed event is matched to the previous
`events.jsonl`:
1. the same page title and text as a previous event: it keeps that event's id (for an event
   never edited, the id is simply the hash of its title and text);
2. otherwise, among the previous events of the same page and day left unmatched, the one whose
   text is most alike (difflib ratio >= SAME_EVENT_RATIO, best pairs first): it keeps that id
   and counts as *changed*;
3. anything else is a new event with a new id; previous events left unmatched are *removed*.
The id therefore stays the same through rewordings, at the price that a run's ids depend on its
history: a fresh build from the same revisions gives an edited event the hash of its current
text. Candidates built on an event whose text changed (or that was removed) are *stale*: the
text they were made from is in their `event.text`, so staleness is read off the files at any
time, never stored apart from them.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Literal

from pydantic import BaseModel, Field

from cuqa_builder.records.candidates import Candidate, CheckFailure
from cuqa_builder.records.events import Event, event_id
from cuqa_builder.records.items import CuqaItem, EventRef

SAME_EVENT_RATIO = 0.6  # rewordings score ~0.7-0.95; two different news items rarely 0.5
STALE = "event_changed"  # the validation check a stale candidate fails


class ChangeCounts(BaseModel):
    """How many records were added, removed and changed (events here, items in a release diff)."""

    added: int = 0
    removed: int = 0
    changed: int = 0


class ChangedEvent(BaseModel):
    id: str
    date: date
    source_title: str
    previous_text: str
    text: str


class RefreshReport(BaseModel):
    """`refresh.json`: what the latest events run that changed anything changed."""

    refreshed: str = Field(description="ISO time of the events run, UTC")
    cutoff: str
    previous_until: str | None = Field(description="the window's last day before its extension")
    until: str
    events_before: int
    events_after: int
    added: list[str] = Field(description="ids of new events")
    changed: list[ChangedEvent] = Field(description="same id, new text")
    removed: list[str] = Field(description="ids of events no longer on their page")
    by_month: dict[str, ChangeCounts] = Field(description="YYYY-MM of the events -> changes")
    pages_revised: dict[str, tuple[int | None, int | None]] = Field(
        description="page title -> (previous, new) revid of the pages the events came from"
    )
    stale_candidates: list[str] = Field(
        description="candidates built on a reworded event, when the events ran (the generate "
        "stage makes them again)"
    )
    orphaned_candidates: list[str] = Field(
        description="candidates built on a removed event: validation keeps them out of the data"
    )

    @property
    def has_changes(self) -> bool:
        return bool(self.added or self.changed or self.removed)


# --- stable ids ---------------------------------------------------------------------------------


def _content_key(event: Event) -> str:
    """What an event's id would be if first seen with its current text."""
    return event_id(event.source.title, event.text)


def _similar_pairs(old: list[Event], new: list[Event]) -> list[tuple[int, int]]:
    """Greedy one-to-one matching of rewordings, most alike first: (old index, new index)."""
    scored = sorted(
        ((difflib.SequenceMatcher(None, o.text, n.text).ratio(), i, j)
         for i, o in enumerate(old) for j, n in enumerate(new)),
        key=lambda entry: (-entry[0], entry[1], entry[2]),
    )
    pairs: list[tuple[int, int]] = []
    used_old: set[int] = set()
    used_new: set[int] = set()
    for ratio, i, j in scored:
        if ratio < SAME_EVENT_RATIO:
            break
        if i not in used_old and j not in used_new:
            pairs.append((i, j))
            used_old.add(i)
            used_new.add(j)
    return pairs


def carry_ids(previous: list[Event], parsed: list[Event]) -> list[Event]:
    """`parsed` (ids freshly hashed, unique) with the ids of the previous events they are."""
    by_content = {_content_key(event): event for event in previous}
    ids: dict[int, str] = {}  # index in parsed -> id carried over
    taken: set[str] = set()
    for index, event in enumerate(parsed):
        if (old := by_content.get(event.id)) is not None and old.id not in taken:
            ids[index] = old.id
            taken.add(old.id)
    left_old: dict[tuple[str, date], list[Event]] = defaultdict(list)
    for event in previous:
        if event.id not in taken:
            left_old[(event.source.title, event.date)].append(event)
    left_new: dict[tuple[str, date], list[int]] = defaultdict(list)
    for index, event in enumerate(parsed):
        if index not in ids:
            left_new[(event.source.title, event.date)].append(index)
    for key, indexes in left_new.items():
        olds = left_old.get(key, [])
        for i, j in _similar_pairs(olds, [parsed[index] for index in indexes]):
            ids[indexes[j]] = olds[i].id
            taken.add(olds[i].id)
    return [_with_id(event, ids.get(index), taken) for index, event in enumerate(parsed)]


def _with_id(event: Event, carried: str | None, taken: set[str]) -> Event:
    if carried is not None:
        return event if carried == event.id else event.model_copy(update={"id": carried})
    if event.id not in taken:
        return event
    # A new event whose own hash is an id a reworded event kept (its first wording came back
    # beside the new one): hash it apart, deterministically.
    salt = 1
    while (fresh := event_id(event.source.title, f"{event.text}\n#{salt}")) in taken:
        salt += 1
    return event.model_copy(update={"id": fresh})


# --- what changed -------------------------------------------------------------------------------


def compare_events(
    previous: list[Event], current: list[Event]
) -> tuple[list[str], list[ChangedEvent], list[str], dict[str, ChangeCounts]]:
    """Added ids, changed events, removed ids, and their counts per month."""
    before = {event.id: event for event in previous}
    after = {event.id: event for event in current}
    added = [event for event in current if event.id not in before]
    removed = [event for event in previous if event.id not in after]
    changed = [
        ChangedEvent(id=event.id, date=event.date, source_title=event.source.title,
                     previous_text=before[event.id].text, text=event.text)
        for event in current
        if event.id in before and before[event.id].text != event.text
    ]
    months: dict[str, ChangeCounts] = defaultdict(ChangeCounts)
    for event in added:
        months[f"{event.date:%Y-%m}"].added += 1
    for change in changed:
        months[f"{change.date:%Y-%m}"].changed += 1
    for event in removed:
        months[f"{event.date:%Y-%m}"].removed += 1
    return ([e.id for e in added], changed, [e.id for e in removed], dict(sorted(months.items())))


def revised_pages(
    previous: list[Event], current: list[Event]
) -> dict[str, tuple[int | None, int | None]]:
    """Pages whose events now come from another revision: title -> (previous, new) revid."""
    old = {event.source.title: event.source.revid for event in previous}
    new = {event.source.title: event.source.revid for event in current}
    return {title: (old.get(title), new.get(title)) for title in sorted(old.keys() | new.keys())
            if old.get(title) != new.get(title)}


def summarize_changes(report: RefreshReport) -> str:
    window = (f" (window extended from {report.previous_until} to {report.until})"
              if report.previous_until else "")
    lines = [
        f"refresh: {len(report.added)} events added, {len(report.changed)} changed, "
        f"{len(report.removed)} removed since the previous events.jsonl{window}; "
        f"{len(report.pages_revised)} pages at a new revision",
    ]
    if report.by_month:
        lines.append("  per month (added/changed/removed): " + ", ".join(
            f"{month} {c.added}/{c.changed}/{c.removed}" for month, c in report.by_month.items()
        ))
    if report.stale_candidates:
        lines.append(f"  {len(report.stale_candidates)} candidates are stale (their event was "
                     "reworded): the generate stage makes them again")
    if report.orphaned_candidates:
        lines.append(f"  {len(report.orphaned_candidates)} candidates lost their event "
                     "(removed): they are kept out of the data")
    return "\n".join(lines)


# --- stale candidates -------------------------------------------------------------------------


def event_refs(item: CuqaItem) -> list[EventRef]:
    """Every event an item was built from: a hard candidate's are its easy items'."""
    if isinstance(item, Candidate) and item.sub_items:
        return [ref for sub in item.sub_items for ref in event_refs(sub)]
    return [item.event]


@dataclass(frozen=True)
class Staleness:
    """Why an item is out of date: an event `reworded` (made again by generate) or `removed`."""

    kind: Literal["reworded", "removed"]
    reason: str

    def failure(self) -> CheckFailure:
        return CheckFailure(check=STALE, reason=self.reason)


def staleness(refs: Iterable[EventRef], events: Mapping[str, Event]) -> Staleness | None:
    """Why an item built from these events is out of date, or None if it is not."""
    for ref in refs:
        current = events.get(ref.id)
        if current is None:
            return Staleness("removed", f"its event {ref.id} is no longer on {ref.source_title} "
                             "(removed, or out of the window)")
        if current.text != ref.text:
            return Staleness("reworded", f"its event {ref.id} was reworded on "
                             f"{current.source.title} since it was generated: run the generate "
                             "stage to make it again")
    return None


def stale_candidates(
    candidates: Iterable[Candidate], events: Mapping[str, Event]
) -> dict[str, Staleness]:
    """Candidate id -> why it is stale, for the candidates whose events changed or went away."""
    return {
        candidate.id: found
        for candidate in candidates
        if (found := staleness(event_refs(candidate), events)) is not None
    }

