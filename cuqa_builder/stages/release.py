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

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import date, timedelta
from pathlib import Path

from pydantic import ValidationError

from cuqa_builder import __version__
from cuqa_builder.dataset import SUBSET_PREFIX, load
from cuqa_builder.dataset_card import (
    CARD,
    CHANGELOG,
    SCHEMA,
    STATS,
    CheckRun,
    Composition,
    CutoffSubset,
    PageOrigin,
    ReleaseStats,
    ReleaseWindow,
    render_card,
)
from cuqa_builder.errors import describe_validation_error
from cuqa_builder.generation.yield_report import item_calls
from cuqa_builder.grounding.verdicts import BRIDGE, GROUNDING_CHECKS, KNOWN_HOP
from cuqa_builder.jsonio import (
    JsonFileError,
    atomic_write_json,
    atomic_write_text,
    iter_jsonl,
    read_model,
    write_jsonl,
)
from cuqa_builder.prompts import PromptError, load_prompt
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event
from cuqa_builder.records.items import CuqaItem, EventRef
from cuqa_builder.refresh import STALE, event_refs, staleness
from cuqa_builder.review_report import ReviewReport
from cuqa_builder.run import (
    CANDIDATES,
    DATASET,
    EVENTS,
    MANIFEST,
    REVIEW_REPORT,
    Manifest,
    RunContext,
    ValidationInfo,
    load_run_info,
)
from cuqa_builder.snapshot import snapshot_sha256
from cuqa_builder.stages.options import RELEASE_NEEDS_NAME
from cuqa_builder.validation.checks import describe_checks
from cuqa_builder.validation.connected import CHECKER_ERROR
from cuqa_builder.validation.critic import CRITIC_ERROR, CRITIC_PREFIX
from cuqa_builder.validation.limits import Limits
from cuqa_builder.validation.probes import (
    DOES_NOT_COMPOSE,
    KNOWN_PART_NOT_KNOWN,
    NOT_UNKNOWN,
    PROBE_ERROR,
)
from cuqa_builder.validation.selection import MAX_SHARE, PER_EVENT
from cuqa_builder.verification.checker import (
    ANSWERED_WITH_EVENT,
    CALL_NAMES,
    CONNECTED,
    ONE_ANSWER,
    ONE_THING,
    UNKNOWN_BEFORE_CUTOFF,
)
from cuqa_builder.window import Window

# The checker's calls are recorded with an item's generation calls; they wrote none of it.
CHECKER_CALLS = frozenset(CALL_NAMES.values())

NO_CATEGORY = "(none)"  # year-article events carry no portal category
NO_PROPERTY = "(not recorded)"  # the paper recipe asks no named property


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


def _categories(ctx: RunContext, items: list[CuqaItem]) -> dict[str, str]:
    """Event id -> portal category, for the items' events (from the run's events.jsonl)."""
    wanted = {item.event.id for item in items}
    return {
        event.id: event.category or NO_CATEGORY
        for event in iter_jsonl(ctx.path(EVENTS), Event)
        if event.id in wanted
    }


def _released_candidates(ctx: RunContext, items: list[CuqaItem]) -> list[Candidate] | None:
    """The candidates of the released items (None: the run has no candidates.jsonl)."""
    path = ctx.path(CANDIDATES)
    if not path.exists():
        return None
    released = {item.id for item in items}
    return [c for c in iter_jsonl(path, Candidate) if c.id in released]


def _failed_automatic_checks(candidates: list[Candidate]) -> int:
    """How many released items failed validation: reviewers can accept those (`--only all`)."""
    return sum(1 for c in candidates if c.validation is not None and not c.validation.passed)


def _written_by_model(candidate: Candidate) -> bool:
    """Whether a generation call of the recipe gave the item's text (an accepted one: a
    refused try was replaced). Composed from structure, an item has none."""
    return any(call.function not in CHECKER_CALLS and call.rejected is None
               for call in item_calls(candidate)) or any(map(_written_by_model,
                                                             candidate.sub_items))


def _composition(candidates: list[Candidate]) -> Composition:
    by_model = [c for c in candidates if _written_by_model(c)]
    return Composition(by_model=len(by_model), from_structure=len(candidates) - len(by_model),
                       models=sorted({c.generator.model for c in by_model}))


def _model_check_summaries(guesses: int | None) -> dict[str, str]:
    """What the checks other than the format checks (`validation/checks.py`) require."""
    counted = f"the first {guesses}" if guesses else "the counted"
    return {
        STALE: "the event's text unchanged since the item was made",
        BRIDGE: "the bridge entity had a Wikipedia article at the cutoff",
        KNOWN_HOP: "the known sub-question's answer found in that article (or the known "
                   "answer's) as of the cutoff, with the evidence sentences in `grounding`",
        CONNECTED: f"with the event masked, none of {counted} guesses of the checker model "
                   "names the answer (the known part alone does not give it)",
        UNKNOWN_BEFORE_CUTOFF: f"none of {counted} guesses at the whole question names the "
                               "answer, by a model that knows (or is told to know) nothing "
                               "after the cutoff",
        ANSWERED_WITH_EVENT: "given the event's text, the checker answers with the item's "
                             "answer",
        ONE_ANSWER: "given the event's text, the checker finds nothing else that fits",
        ONE_THING: "given the event's text, the checker finds nothing else in the whole world's "
                   "news of that month that the description fits, and its kind of event does "
                   "not recur many times a month",
        NOT_UNKNOWN: "the probe model, closed-book, does not already answer the question",
        KNOWN_PART_NOT_KNOWN: "the probe model answers the known sub-question",
        DOES_NOT_COMPOSE: "given the unknown part's answer, the probe model answers the "
                          "question",
        f"{CRITIC_PREFIX}natural_question": "the critic model finds the question natural",
        f"{CRITIC_PREFIX}one_clear_answer": "the critic model finds one clear answer",
        f"{CRITIC_PREFIX}both_hops_needed": "the critic model finds both hops needed",
        f"{CRITIC_PREFIX}known_answer_supported": "the critic model finds the known answer "
                                                  "supported",
        PER_EVENT: "among the first --per-event (default 2) of its event's items that passed, "
                   "ranked best first, each of another bridge and property: the run keeps a "
                   "few items an event, not every variant of one",
        MAX_SHARE: "its property (birthplace, capital...) is not over --max-share (default "
                   "40%) of the items, or it ranks above the items of that property that were "
                   "dropped (one item of each property is always kept)",
        CHECKER_ERROR: "candidates the checker could not be asked about (nothing measured: "
                       "each failed)",
        PROBE_ERROR: "candidates the probe model could not be asked about (each failed)",
        CRITIC_ERROR: "candidates the critic could not be asked about (each failed)",
    }


def _checks_run(info: ValidationInfo | None, grounded: bool) -> list[CheckRun]:
    """Every check validation ran, with what it requires and its counts over the run's
    candidates; a run validated before the counts were recorded gets the format checks' (and
    grounding's) requirements without figures."""
    limits = info.limits if info else Limits()
    requires = {**describe_checks(limits),
                **_model_check_summaries(info.guesses if info else None)}
    if info is not None and info.counts:
        return [CheckRun(name=name, requires=requires.get(name, name), passed=count.passed,
                         failed=count.failed) for name, count in info.counts.items()]
    names = [*describe_checks(limits), *(GROUNDING_CHECKS if grounded else ())]
    return [CheckRun(name=name, requires=requires[name]) for name in names]


def _review_report(ctx: RunContext) -> ReviewReport | None:
    path = ctx.path(REVIEW_REPORT)
    if not path.exists():
        return None
    try:
        return ReviewReport.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ValueError(
            f"{path} is not a review report: {describe_validation_error(exc)}"
        ) from None


def _counts(values: Iterable[str]) -> dict[str, int]:
    """Most frequent first, then alphabetical."""
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def release_window(window: Window) -> ReleaseWindow:
    return ReleaseWindow(
        cutoff=window.label,
        known_until=window.cutoff,
        first_unknown_day=window.cutoff + timedelta(days=1),
        until=window.until,
    )


def compute_stats(
    ctx: RunContext, name: str, items: list[CuqaItem], window: Window | None = None
) -> ReleaseStats:
    """The card's figures for `items`, released for `window` (default: the run's)."""
    categories = _categories(ctx, items)
    info = load_run_info(ctx.out)
    candidates = _released_candidates(ctx, items)
    prompts: dict[str, set[str]] = {}
    for item in items:
        for template, sha in item.generator.prompts.items():
            prompts.setdefault(template, set()).add(sha)
    released = date.today()
    return ReleaseStats(
        name=name,
        version=ctx.options.release.release_version or released.isoformat(),
        released=released,
        tool=f"cuqa-builder {__version__}",
        items=len(items),
        window=release_window(window or ctx.window),
        by_type=_counts(item.type for item in items),
        by_difficulty=_counts(item.difficulty for item in items),
        by_month=dict(sorted(Counter(f"{item.event.date:%Y-%m}" for item in items).items())),
        by_category=_counts(categories.get(item.event.id, NO_CATEGORY) for item in items),
        by_property=_counts(item.property or NO_PROPERTY for item in items),
        by_review_status=_counts(item.review.status for item in items),
        generator_models=sorted({item.generator.model for item in items}),
        composed=None if candidates is None else _composition(candidates),
        recipes=sorted({item.generator.recipe for item in items}),
        prompts={template: sorted(hashes) for template, hashes in sorted(prompts.items())},
        seed=info.seed,
        validation=info.validation,
        probe_model_check=info.probe_model_check,
        checks_run=_checks_run(info.validation, any(item.grounding for item in items)),
        source_pages=dict(sorted({i.event.source_title: i.event.revid for i in items}.items())),
        failed_automatic_checks=None if candidates is None else _failed_automatic_checks(
            candidates),
        review=_review_report(ctx),
    )


def prompt_sources(stats: ReleaseStats) -> dict[str, str]:
    """Each template's cited source, when the installed file is the one that was used."""
    return {name: _prompt_source(name, hashes) for name, hashes in stats.prompts.items()}


def _prompt_source(template: str, hashes: list[str]) -> str:
    try:
        prompt = load_prompt(template)
    except PromptError:
        return ""
    if prompt.sha256 not in hashes:
        return "(the installed template differs)"
    return re.sub(r"^source:\s*", "", prompt.source.splitlines()[0]) if prompt.source else ""


# --- the stage ----------------------------------------------------------------------------------


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
            items=len(chosen), by_type=_counts(i.type for i in chosen),
            by_difficulty=_counts(i.difficulty for i in chosen),
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
