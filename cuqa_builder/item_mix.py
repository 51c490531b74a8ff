"""The mix of a set of items (issue 33, "diversity you can see"): how many ask each property,
of each branch, from each event category and month; the validate summary and the dataset card
show it, so that a release is seen not to be a list of birthplaces."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from cuqa_builder.records.items import CuqaItem

UNSTATED = "none"  # an item that says no property (the paper's recipe), an event without a category


def mix(items: Iterable[CuqaItem]) -> dict[str, Counter[str]]:
    """Counts of the items by property, branch, event category and month."""
    found: dict[str, Counter[str]] = {key: Counter() for key in
                                      ("property", "branch", "category", "month")}
    for item in items:
        found["property"][item.property or UNSTATED] += 1
        found["branch"][item.type if item.difficulty == "easy" else "hard"] += 1
        found["category"][item.event.category or UNSTATED] += 1
        found["month"][f"{item.event.date:%Y-%m}"] += 1
    return found


def shares(counts: Counter[str]) -> str:
    total = sum(counts.values())
    return ", ".join(f"{name} {n} ({n / total:.0%})" for name, n in counts.most_common())


def mix_line(items: Sequence[CuqaItem]) -> str:
    """One line of the mix for a summary."""
    if not items:
        return "no item kept"
    found = mix(items)
    return (f"{len(items)} items by property: {shares(found['property'])}; by branch: "
            f"{shares(found['branch'])}; by category: {shares(found['category'])}; by month: "
            f"{shares(found['month'])}")
