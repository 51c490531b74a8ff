"""The release stage: the run's reviewed `cuqa.jsonl` -> `OUTPUT_ROOT/NAME/`, ready to share.

The folder holds the items (`cuqa.jsonl`, as the annotation pull step left them, each with its
review), the JSON Schema of an item, a dataset card (`README.md`, whose YAML header the `datasets`
library reads), `stats.json` (the card's figures, machine-readable) and the run's page manifest.
Every file is replaced atomically, so a re-release never leaves a half-written file behind.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

from pydantic import ValidationError

from cuqa_builder import __version__
from cuqa_builder.annotation.review import ReviewReport
from cuqa_builder.dataset import load
from cuqa_builder.dataset_card import (
    CARD,
    SCHEMA,
    STATS,
    ReleaseStats,
    ReleaseWindow,
    render_card,
)
from cuqa_builder.errors import describe_validation_error
from cuqa_builder.jsonio import atomic_write_json, atomic_write_text, iter_jsonl, write_jsonl
from cuqa_builder.prompts import PromptError, load_prompt
from cuqa_builder.records import Candidate, CuqaItem, Event
from cuqa_builder.run import (
    CANDIDATES,
    DATASET,
    EVENTS,
    MANIFEST,
    REVIEW_REPORT,
    RunContext,
    load_run_info,
)
from cuqa_builder.validation.checks import describe_checks
from cuqa_builder.validation.limits import Limits

GROUNDING_SUMMARY = (
    "the bridge entity had a Wikipedia article at the cutoff",
    "the known sub-question's answer found in that article (or the known answer's) as of the "
    "cutoff, with the evidence sentences in `grounding`",
)

NO_CATEGORY = "(none)"  # year-article events carry no portal category
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def _release_dir(ctx: RunContext) -> Path:
    name = ctx.options.release.name
    if not name:
        raise ValueError("the release stage needs --name NAME (it writes OUTPUT_ROOT/NAME/)")
    if not _NAME.match(name):
        raise ValueError(f"--name {name!r}: use letters, digits, '.', '_' and '-' only")
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


def _failed_automatic_checks(ctx: RunContext, items: list[CuqaItem]) -> int | None:
    """How many released items failed validation: reviewers can accept those (`--only all`)."""
    path = ctx.path(CANDIDATES)
    if not path.exists():
        return None
    released = {item.id for item in items}
    return sum(
        1 for c in iter_jsonl(path, Candidate)
        if c.id in released and c.validation is not None and not c.validation.passed
    )


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


def compute_stats(ctx: RunContext, name: str, items: list[CuqaItem]) -> ReleaseStats:
    categories = _categories(ctx, items)
    info = load_run_info(ctx.out)
    prompts: dict[str, set[str]] = {}
    for item in items:
        for template, sha in item.generator.prompts.items():
            prompts.setdefault(template, set()).add(sha)
    return ReleaseStats(
        name=name,
        released=date.today(),
        tool=f"cuqa-builder {__version__}",
        items=len(items),
        window=ReleaseWindow(
            cutoff=ctx.window.label,
            known_until=ctx.window.cutoff,
            first_unknown_day=ctx.window.cutoff + timedelta(days=1),
            until=ctx.window.until,
        ),
        by_type=_counts(item.type for item in items),
        by_difficulty=_counts(item.difficulty for item in items),
        by_month=dict(sorted(Counter(f"{item.event.date:%Y-%m}" for item in items).items())),
        by_category=_counts(categories.get(item.event.id, NO_CATEGORY) for item in items),
        by_review_status=_counts(item.review.status for item in items),
        generator_models=sorted({item.generator.model for item in items}),
        prompts={template: sorted(hashes) for template, hashes in sorted(prompts.items())},
        seed=info.seed,
        validation=info.validation,
        checks=[*describe_checks(info.validation.limits if info.validation else Limits()),
                *(GROUNDING_SUMMARY if any(item.grounding for item in items) else ())],
        source_pages=dict(sorted({i.event.source_title: i.event.revid for i in items}.items())),
        failed_automatic_checks=_failed_automatic_checks(ctx, items),
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


def _copy_manifest(ctx: RunContext, dest: Path) -> bool:
    source = ctx.path(MANIFEST)
    if not source.exists():
        (dest / MANIFEST).unlink(missing_ok=True)  # never leave an older run's manifest behind
        return False
    atomic_write_text(dest / MANIFEST, source.read_text(encoding="utf-8"))
    return True


def run(ctx: RunContext) -> str:
    dest = _release_dir(ctx)
    items = _read_items(ctx)
    stats = compute_stats(ctx, dest.name, items)
    dest.mkdir(parents=True, exist_ok=True)
    write_jsonl(dest / DATASET, items)
    atomic_write_json(dest / SCHEMA, CuqaItem.model_json_schema())
    atomic_write_json(dest / STATS, stats.model_dump(mode="json"))
    has_manifest = _copy_manifest(ctx, dest)
    atomic_write_text(dest / CARD, render_card(stats, has_manifest, prompt_sources(stats)))
    reviewed = stats.by_review_status.get("accepted", 0)
    return (
        f"release: {stats.items} items ({reviewed} accepted by review) -> {dest}/ "
        f"({DATASET}, {SCHEMA}, {CARD}, {STATS}" + (f", {MANIFEST})" if has_manifest else ")")
    )
