"""`cuqa-build diff OLD NEW`: what changed between two releases, compared by item id.

An item is *added* or *removed* when its id is in one release only, and *changed* when both
hold it and its question, answer (or aliases), review or anything else differs (the `cutoff`
label aside: a multi-cutoff release labels each subset's copy with its own cutoff). Totals and
the breakdowns by event month, type and difficulty count distinct items; the breakdown by cutoff
compares each subset (config) with the subset of the same cutoff. The result is written into NEW:
`CHANGELOG.md` (every id), `stats.json` (`changes`) and a section of its card.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from cuqa_builder.dataset import load
from cuqa_builder.dataset_card import (
    CARD,
    CHANGELOG,
    STATS,
    ItemChange,
    ReleaseDiff,
    ReleaseStats,
    render_card,
    render_changelog,
)
from cuqa_builder.errors import CuqaError, UsageError
from cuqa_builder.jsonio import atomic_write_json, atomic_write_text, read_model
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.refresh import ChangeCounts
from cuqa_builder.run import MANIFEST
from cuqa_builder.stages.release import page_origin
from cuqa_builder.stages.release_stats import prompt_sources

COMPARED_FIELDS = ("question", "answer", "review")  # named in the changelog; the rest is "other"


class ReleaseDiffError(CuqaError, ValueError):
    """A folder that is not a release written by cuqa-build."""


def read_stats(folder: Path) -> ReleaseStats:
    path = folder / STATS
    if not path.is_file():
        raise ReleaseDiffError(f"{folder} is not a release folder (no {STATS})")
    return read_model(path, ReleaseStats, "the stats.json of a release", error=ReleaseDiffError)


def read_subsets(folder: Path, stats: ReleaseStats) -> dict[str, list[CuqaItem]]:
    """Cutoff -> the items of its subset (one entry for a single-cutoff release)."""
    if not stats.subsets:
        return {stats.window.cutoff: load(folder)}
    return {subset.window.cutoff: load(folder / subset.path) for subset in stats.subsets}


def label(stats: ReleaseStats) -> str:
    return f"{stats.name} {stats.version or stats.released}"


def changed_fields(old: CuqaItem, new: CuqaItem) -> list[str]:
    """Which of question, answer, review (and `other` for the rest) differ; [] when none."""
    fields = []
    if old.question != new.question:
        fields.append("question")
    if (old.answer, old.answer_aliases) != (new.answer, new.answer_aliases):
        fields.append("answer")
    if old.review.model_dump() != new.review.model_dump():
        fields.append("review")
    ignored = {"question", "answer", "answer_aliases", "review", "cutoff"}
    if old.model_dump(exclude=ignored) != new.model_dump(exclude=ignored):
        fields.append("other")
    return fields


def _distinct(subsets: dict[str, list[CuqaItem]]) -> dict[str, CuqaItem]:
    """Each item once, from the earliest cutoff's subset that holds it."""
    items: dict[str, CuqaItem] = {}
    for cutoff in sorted(subsets):
        for item in subsets[cutoff]:
            items.setdefault(item.id, item)
    return items


def _count(
    into: dict[str, dict[str, ChangeCounts]], item: CuqaItem, change: str
) -> None:
    for breakdown, key in (("month", f"{item.event.date:%Y-%m}"), ("type", item.type),
                           ("difficulty", item.difficulty)):
        counts = into[breakdown].setdefault(key, ChangeCounts())
        setattr(counts, change, getattr(counts, change) + 1)


def compare(
    old_stats: ReleaseStats, old: dict[str, list[CuqaItem]],
    new_stats: ReleaseStats, new: dict[str, list[CuqaItem]],
) -> ReleaseDiff:
    before, after = _distinct(old), _distinct(new)
    added = [item_id for item_id in after if item_id not in before]
    removed = [item_id for item_id in before if item_id not in after]
    changed = [
        ItemChange(id=item_id, fields=fields)
        for item_id, item in after.items()
        if item_id in before and (fields := changed_fields(before[item_id], item))
    ]
    breakdowns: dict[str, dict[str, ChangeCounts]] = defaultdict(dict)
    for item_id in added:
        _count(breakdowns, after[item_id], "added")
    for item_id in removed:
        _count(breakdowns, before[item_id], "removed")
    for change in changed:
        _count(breakdowns, after[change.id], "changed")
    changed_ids = {change.id for change in changed}
    by_cutoff = {}
    for cutoff in sorted(old.keys() | new.keys()):
        was = {item.id for item in old.get(cutoff, [])}
        now = {item.id for item in new.get(cutoff, [])}
        by_cutoff[cutoff] = ChangeCounts(added=len(now - was), removed=len(was - now),
                                         changed=len(now & was & changed_ids))
    by_field = {name: sum(name in c.fields for c in changed)
                for name in (*COMPARED_FIELDS, "other")}
    return ReleaseDiff(
        old=label(old_stats), new=label(new_stats), old_items=len(before), new_items=len(after),
        added=added, removed=removed, changed=changed,
        by_field={name: n for name, n in by_field.items() if n},
        by_cutoff=by_cutoff,
        by_month=dict(sorted(breakdowns["month"].items())),
        by_type=dict(sorted(breakdowns["type"].items())),
        by_difficulty=dict(sorted(breakdowns["difficulty"].items())),
    )


def refuse_same_release(old_folder: Path, new_folder: Path) -> None:
    """A release compared with itself would have its real changelog, card section and recorded
    changes replaced by "0 changes": refuse, however the two paths are spelled (the arguments
    are at fault: a usage error)."""
    if old_folder.exists() and new_folder.exists() and old_folder.samefile(new_folder):
        raise UsageError(f"OLD and NEW are the same release ({new_folder.resolve()}): "
                         "give the earlier release as OLD")


def diff_releases(old_folder: Path, new_folder: Path) -> ReleaseDiff:
    """Compare two release folders and record the result in the newer one."""
    refuse_same_release(old_folder, new_folder)
    old_stats, new_stats = read_stats(old_folder), read_stats(new_folder)
    result = compare(old_stats, read_subsets(old_folder, old_stats),
                     new_stats, read_subsets(new_folder, new_stats))
    stats = new_stats.model_copy(update={"changes": result})
    atomic_write_text(new_folder / CHANGELOG, render_changelog(result))
    atomic_write_json(new_folder / STATS, stats.model_dump(mode="json"))
    has_manifest = (new_folder / MANIFEST).is_file()
    atomic_write_text(new_folder / CARD, render_card(stats, has_manifest, prompt_sources(stats),
                                                     page_origin(new_folder / MANIFEST)))
    return result


def summarize(result: ReleaseDiff, new_folder: Path) -> str:
    fields = ", ".join(f"{name} {n}" for name, n in result.by_field.items()) or "none"
    lines = [
        f"diff {result.old} -> {result.new}: {len(result.added)} added, {len(result.removed)} "
        f"removed, {len(result.changed)} changed ({fields})",
        *(f"  cutoff {cutoff}: +{c.added} -{c.removed} ~{c.changed}"
          for cutoff, c in result.by_cutoff.items()),
        f"-> {new_folder / CHANGELOG}, and a section of {new_folder / CARD}",
    ]
    return "\n".join(lines)
