"""The release stage: the run's reviewed `cuqa.jsonl` -> `OUTPUT_ROOT/NAME/`, ready to share.

The folder holds the items (`cuqa.jsonl`, as the annotation pull step left them, each with its
review), the JSON Schema of an item, a dataset card (`README.md`, whose YAML header the `datasets`
library reads), `stats.json` (the card's figures, machine-readable) and the run's page manifest.
Every file is replaced atomically, so a re-release never leaves a half-written file behind.

Several cutoffs (`--cutoff 2023-04,2023-10`, none before the run's) make one subset each, in
`cutoff-LABEL/cuqa.jsonl`, declared as a config in the card: an item is in the subset of a
cutoff when every event it is built on is dated after that cutoff. Items whose event was
reworded or removed since generation (a refresh) are held back until made and reviewed again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from cuqa_builder.dataset import SUBSET_PREFIX, load
from cuqa_builder.dataset_card import (
    CARD,
    CHANGELOG,
    SCHEMA,
    STATS,
    CutoffSubset,
    PageOrigin,
    ReleaseStats,
    render_card,
)
from cuqa_builder.jsonio import (
    JsonFileError,
    atomic_write_json,
    atomic_write_text,
    iter_jsonl,
    read_model,
    write_jsonl,
)
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event
from cuqa_builder.records.items import CuqaItem, EventRef
from cuqa_builder.refresh import event_refs, staleness
from cuqa_builder.run import CANDIDATES, DATASET, EVENTS, MANIFEST, Manifest, RunContext
from cuqa_builder.snapshot import snapshot_sha256
from cuqa_builder.stages.options import RELEASE_NEEDS_NAME
from cuqa_builder.stages.release_stats import (
    compute_stats,
    counts_of,
    prompt_sources,
    release_window,
)
from cuqa_builder.window import Window


def _release_dir(ctx: RunContext) -> Path:
    name = ctx.options.release.name  # its form is checked with the flags
    if not name:
        raise ValueError(RELEASE_NEEDS_NAME)
    return ctx.options.release.output_root / name


def _read_items(ctx: RunContext) -> list[CuqaItem]:
    items = load(ctx.path(DATASET))
    if not items:
        raise ValueError(f"{ctx.path(DATASET)} holds no items: nothing to release")
    if stray := sorted({item.cutoff for item in items} - {ctx.window.label}):
        raise ValueError(
            f"items with cutoff {', '.join(stray)} in a run whose cutoff is {ctx.window.label}"
        )
    return items


def page_origin(manifest_path: Path) -> PageOrigin:
    """Links to the wiki the run fetched its pages from; none for a snapshot's revision ids
    or a run without a readable manifest. A snapshot is named by its directory's name."""
    try:
        manifest = read_model(manifest_path, Manifest, "a manifest.json")
    except JsonFileError:
        return PageOrigin(index_url=None)
    return PageOrigin(index_url=manifest.index_url,
                      snapshot=Path(manifest.snapshot).name if manifest.snapshot else None,
                      snapshot_sha256=manifest.snapshot_sha256)


def _released_manifest(ctx: RunContext) -> Manifest | None:
    """The run's page manifest as a release carries it (None: the run has none): a snapshot
    is named by its directory's name and content hash, never by a path on this machine."""
    path = ctx.path(MANIFEST)
    if not path.exists():
        return None
    manifest = read_model(path, Manifest, "a manifest.json")
    if manifest.snapshot is None:
        return manifest
    snapshot = Path(manifest.snapshot)
    digest = manifest.snapshot_sha256  # recorded by the events stage since issue 32
    if digest is None and snapshot.is_dir():
        digest = snapshot_sha256(snapshot)
    return manifest.model_copy(update={"snapshot": snapshot.name, "snapshot_sha256": digest})


def _write_manifest(manifest: Manifest | None, dest: Path) -> bool:
    if manifest is None:
        (dest / MANIFEST).unlink(missing_ok=True)  # never leave an older run's manifest behind
        return False
    atomic_write_json(dest / MANIFEST, manifest.model_dump(mode="json"))
    return True


def _event_refs(ctx: RunContext, items: list[CuqaItem]) -> dict[str, list[EventRef]]:
    """Item id -> every event it is built on: a hard item's two, from candidates.jsonl (a
    released item names one event only)."""
    refs = {item.id: [item.event] for item in items}
    for candidate in iter_jsonl(ctx.path(CANDIDATES), Candidate):
        if candidate.id in refs and candidate.sub_items:
            refs[candidate.id] = event_refs(candidate)
    return refs


def _hold_back_stale(
    ctx: RunContext, items: list[CuqaItem], refs: Mapping[str, list[EventRef]]
) -> tuple[list[CuqaItem], int]:
    """The items whose events are as they were generated from; and how many are not."""
    if not ctx.path(EVENTS).exists():
        return items, 0
    events = {event.id: event for event in iter_jsonl(ctx.path(EVENTS), Event)}
    kept = [item for item in items if staleness(refs[item.id], events) is None]
    return kept, len(items) - len(kept)


def _subset(
    items: list[CuqaItem], refs: Mapping[str, list[EventRef]], window: Window
) -> list[CuqaItem]:
    """The items still unknown to a model with the window's cutoff, labelled with it."""
    return [
        item if item.cutoff == window.label else item.model_copy(update={"cutoff": window.label})
        for item in items
        if all(window.contains(ref.date) for ref in refs[item.id])
    ]


def _windows(ctx: RunContext) -> list[Window]:
    until = ctx.window.until.isoformat()
    return [Window.parse(cutoff, until) for cutoff in ctx.options.release.cutoffs] or [ctx.window]


def _clear_other_layout(dest: Path, subsets: list[str]) -> None:
    """Remove what an earlier release in this folder left that this one does not write."""
    (dest / CHANGELOG).unlink(missing_ok=True)  # it compared the earlier release
    if subsets:
        (dest / DATASET).unlink(missing_ok=True)
    for folder in dest.glob(f"{SUBSET_PREFIX}*"):
        if folder.name not in subsets and (folder / DATASET).is_file():
            (folder / DATASET).unlink()
            if not any(folder.iterdir()):
                folder.rmdir()


def _write_subsets(
    dest: Path, items: list[CuqaItem], refs: Mapping[str, list[EventRef]], windows: list[Window]
) -> tuple[list[CuqaItem], list[CutoffSubset]]:
    """One folder per cutoff; returns the items of any subset (each once) and the subsets."""
    subsets: list[CutoffSubset] = []
    released: dict[str, CuqaItem] = {}
    for window in windows:
        chosen = _subset(items, refs, window)
        config = f"{SUBSET_PREFIX}{window.label}"
        write_jsonl(dest / config / DATASET, chosen)
        subsets.append(CutoffSubset(
            config=config, path=f"{config}/{DATASET}", window=release_window(window),
            items=len(chosen), by_type=counts_of(i.type for i in chosen),
            by_difficulty=counts_of(i.difficulty for i in chosen),
        ))
        for item in chosen:
            released.setdefault(item.id, item)
    return list(released.values()), subsets


def run(ctx: RunContext) -> str:
    dest = _release_dir(ctx)
    items = _read_items(ctx)
    manifest = _released_manifest(ctx)  # before anything is written: it may not be readable
    refs = _event_refs(ctx, items)
    items, held_back = _hold_back_stale(ctx, items, refs)
    windows = _windows(ctx)
    dest.mkdir(parents=True, exist_ok=True)
    multi = len(windows) > 1
    _clear_other_layout(dest, [f"{SUBSET_PREFIX}{w.label}" for w in windows] if multi else [])
    if multi:
        items, subsets = _write_subsets(dest, items, refs, windows)
    else:
        items, subsets = _subset(items, refs, windows[0]), []
        write_jsonl(dest / DATASET, items)
    stats = compute_stats(ctx, dest.name, items, windows[0]).model_copy(
        update={"subsets": subsets, "stale_held_back": held_back}
    )
    atomic_write_json(dest / SCHEMA, CuqaItem.model_json_schema())
    atomic_write_json(dest / STATS, stats.model_dump(mode="json"))
    has_manifest = _write_manifest(manifest, dest)
    atomic_write_text(dest / CARD, render_card(stats, has_manifest, prompt_sources(stats),
                                               page_origin(dest / MANIFEST)))
    return _summary(stats, dest, has_manifest)


def _review_state(stats: ReleaseStats) -> str:
    """Whether people reviewed the released items, in the summary's words."""
    accepted = stats.by_review_status.get("accepted", 0)
    if not accepted:
        return "none reviewed: released as unreviewed"
    if accepted == stats.items:
        return "all accepted by review"
    return f"{accepted} accepted by review, {stats.items - accepted} unreviewed"


def _summary(stats: ReleaseStats, dest: Path, has_manifest: bool) -> str:
    data = ", ".join(s.path for s in stats.subsets) if stats.subsets else DATASET
    lines = [
        f"release {stats.version}: {stats.items} items, {_review_state(stats)} -> "
        f"{dest}/ ({data}, {SCHEMA}, {CARD}, {STATS}" + (f", {MANIFEST})" if has_manifest else ")")
    ]
    lines += [f"  {s.config}: {s.items} items (events after {s.window.known_until})"
              for s in stats.subsets]
    if stats.stale_held_back:
        lines.append(f"  {stats.stale_held_back} items held back: their event was reworded or "
                     "removed since they were generated (run generate, validate and review "
                     "again)")
    return "\n".join(lines)
