"""Which of the passed items a run keeps (issue 33, "keep the best" and "diversity you can
see"): up to `--per-event N` items of each event, each of another bridge and another property,
the best ranked first; then no property above `--max-share` of the items, the lowest ranked of
a property over its share giving way to an event's next best item of another property.

An item that passed every check but is not kept fails `per_event` or `max_share`, with the item
kept in its place named, so a reader sees that it was good and why it is not in the data.
Hard items are not selected (each is its own pair of events).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from cuqa_builder.records.candidates import Candidate, CheckFailure

PER_EVENT, MAX_SHARE = "per_event", "max_share"
SELECTION_CHECKS = (PER_EVENT, MAX_SHARE)


def _bridge_of(item: Candidate) -> str:
    steps = item.intermediates
    return (steps.cur_ent.wiki_title or steps.cur_ent.text) if steps is not None else item.id


def _rank(item: Candidate) -> tuple[float, str]:
    steps = item.intermediates
    return (-(steps.rank or 0.0) if steps is not None else 0.0, item.id)


@dataclass
class Selection:
    """The passed items not kept, each with the failure that says why."""

    dropped: dict[str, CheckFailure]


def _fits(item: Candidate, kept: Sequence[Candidate]) -> bool:
    return all(_bridge_of(k) != _bridge_of(item) and
               (k.property is None or k.property != item.property) for k in kept)


def select(passed: Sequence[Candidate], per_event: int, max_share: float) -> Selection:
    by_event: defaultdict[str, list[Candidate]] = defaultdict(list)
    for item in passed:
        if item.difficulty == "easy":
            by_event[item.event.id].append(item)
    kept: dict[str, list[Candidate]] = {}
    dropped: dict[str, CheckFailure] = {}
    for event, items in by_event.items():
        items.sort(key=_rank)
        kept[event] = []
        for item in items:
            if len(kept[event]) < per_event and _fits(item, kept[event]):
                kept[event].append(item)
    capped = _cap_shares(by_event, kept, max_share)
    for event, items in by_event.items():
        ids = [k.id for k in kept[event]]
        for item in items:
            if item.id not in ids and item.id not in dropped:
                dropped[item.id] = _why_not_kept(item, kept[event], per_event, max_share,
                                                 kept, item.id in capped)
    return Selection(dropped)


def _allowed(kept: dict[str, list[Candidate]], max_share: float) -> int:
    total = sum(len(items) for items in kept.values())
    return max(1, math.floor(max_share * total))


def _counts(kept: dict[str, list[Candidate]]) -> Counter[str]:
    return Counter(p for items in kept.values() for i in items if (p := i.property))


def _cap_shares(by_event: dict[str, list[Candidate]], kept: dict[str, list[Candidate]],
                max_share: float) -> set[str]:
    """Drop the lowest ranked item of the property most over its share, and let its event
    take its next best item of a property under its share, until none is over; the ids
    dropped."""
    removed: set[str] = set()
    while True:
        counts = _counts(kept)
        allowed = _allowed(kept, max_share)
        over = [p for p, n in counts.most_common() if n > allowed]
        if not over:
            return removed
        worst = max((i for items in kept.values() for i in items if i.property == over[0]),
                    key=_rank)
        event = worst.event.id
        kept[event].remove(worst)
        removed.add(worst.id)
        replacement = next((i for i in by_event[event] if i.id not in removed
                            and i not in kept[event] and _fits(i, kept[event])
                            and counts[i.property or ""] < allowed), None)
        if replacement is not None:
            kept[event].append(replacement)


def _why_not_kept(item: Candidate, kept: list[Candidate], per_event: int, max_share: float,
                  every: dict[str, list[Candidate]], capped: bool) -> CheckFailure:
    prop = item.property
    counts = _counts(every)
    if capped:
        return CheckFailure(check=MAX_SHARE, reason=(
            f"passed, but {counts[prop]} of the {sum(len(v) for v in every.values())} items "
            f"kept already ask for a {prop} (--max-share {max_share:g})"))
    named = ", ".join(f"{k.id} ({k.property or k.type} via {k.intermediates.cur_ent.text})"
                      if k.intermediates else k.id for k in kept)
    return CheckFailure(check=PER_EVENT, reason=(
        f"passed, but its event keeps the best ranked items of other bridges and properties "
        f"(--per-event {per_event}): {named or 'none'}"))
