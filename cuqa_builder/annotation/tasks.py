"""Candidates -> Label Studio tasks, with the automatic verdicts as pre-annotations.

Each task's `data` fills every `$variable` of the labeling config (the server refuses a task
missing one), `meta.candidate_id` ties it back to `candidates.jsonl`, and one inline prediction
pre-selects accept (passed every check) or reject with the reasons the checks point to, and
pre-fills both text areas with the generated question and answer so an annotator edits in place.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import Any, Literal

from cuqa_builder import __version__
from cuqa_builder.annotation.config import (
    ACCEPT,
    CORRECTION,
    REASONS,
    REJECT,
    REWRITE,
    VERDICT,
    LabelingConfig,
)
from cuqa_builder.records import Candidate, CheckFailure, SubQuestion, Validation
from cuqa_builder.wiki.wikitext import revision_url

Only = Literal["passed", "all"]
# Label Studio pre-labels a task with the predictions of the project's model version only, so
# it stays the same across releases of this tool (a reused project keeps its pre-labels); the
# tool version goes in each task's meta instead.
MODEL_VERSION = "cuqa-builder-checks"
TOOL = f"cuqa-builder {__version__}"
CANDIDATE_ID = "candidate_id"

# Check names come from the validators and probes; the first keyword found in a failed check's
# name picks the reject reason offered to the annotator ("other" when none matches).
_REASON_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("not unknown", "not unknown"),
    ("cutoff", "not unknown"),
    ("known part", "known part wrong"),
    ("mentions bridge", "known part wrong"),
    ("compose", "answer wrong"),
    ("leak", "other"),
    ("in question", "other"),
    ("duplicate", "other"),
    ("answer", "answer wrong"),
    ("residue", "unnatural"),
    ("echo", "unnatural"),
    ("length", "unnatural"),
    ("question", "unnatural"),
)
FALLBACK_REASON = "other"


def select_candidates(candidates: Iterable[Candidate], only: Only) -> list[Candidate]:
    """`passed`: only candidates whose validation passed; `all`: every candidate."""
    if only == "all":
        return list(candidates)
    return [c for c in candidates if c.validation is not None and c.validation.passed]


def build_tasks(candidates: Iterable[Candidate], config: LabelingConfig) -> list[dict[str, Any]]:
    return [build_task(candidate, config) for candidate in candidates]


def build_task(candidate: Candidate, config: LabelingConfig) -> dict[str, Any]:
    return {
        "data": task_data(candidate),
        "meta": {CANDIDATE_ID: candidate.id, "tool": TOOL},
        "predictions": [prediction(candidate, config)],
    }


def candidate_id_of(task: dict[str, Any]) -> str | None:
    """The candidate a Label Studio task was made from (meta first, data as a fallback)."""
    for holder in (task.get("meta"), task.get("data")):
        if isinstance(holder, dict) and isinstance(holder.get(CANDIDATE_ID), str):
            return holder[CANDIDATE_ID]
    return None


def task_data(candidate: Candidate) -> dict[str, str]:
    event = candidate.event
    return {
        CANDIDATE_ID: candidate.id,
        "question": candidate.question,
        "answer": candidate.answer,
        "aliases": _aliases_line(candidate.answer_aliases),
        "kind": f"{candidate.type} · {candidate.difficulty} · knowledge cutoff {candidate.cutoff}",
        "unknown_pair": _pairs(candidate.sub_questions, "unknown"),
        "known_pair": _pairs(candidate.sub_questions, "known"),
        "event_date": event.date.isoformat(),
        "event_text": event.text,
        "revision_link": _revision_link(event.source_title, event.revid),
        "known_passage": "\n\n".join(known_passages(candidate)),
        "checks": _checks_summary(candidate),
    }


def prediction(candidate: Candidate, config: LabelingConfig) -> dict[str, Any]:
    result = [
        *_verdict(candidate.validation, config.reasons),
        _text(REWRITE, "question", candidate.question),
        _text(CORRECTION, "answer", candidate.answer),
    ]
    return {"model_version": MODEL_VERSION, "result": result}


def _verdict(validation: Validation | None, allowed: frozenset[str]) -> list[dict[str, Any]]:
    """Accept when every check passed, else reject with reasons; nothing when never validated."""
    if validation is None:
        return []
    if validation.passed:
        return [_choices(VERDICT, [ACCEPT])]
    reasons = suggested_reasons(validation.failures, allowed)
    return [_choices(VERDICT, [REJECT]), *([_choices(REASONS, reasons)] if reasons else [])]


def suggested_reasons(failures: Iterable[CheckFailure], allowed: frozenset[str]) -> list[str]:
    """Reject reasons that the failed checks point to, in the config's vocabulary."""
    reasons = dict.fromkeys(_reason_for(f.check) for f in failures)
    return [r for r in reasons if r in allowed]


def known_passages(candidate: Candidate) -> list[str]:
    """The model-written passages behind the known parts (a hard item has one per easy item)."""
    if candidate.intermediates is not None:
        return [candidate.intermediates.known_passage]
    return [p for sub in candidate.sub_items for p in known_passages(sub)]


def _reason_for(check: str) -> str:
    name = check.lower().replace("_", " ").replace("-", " ")
    return next((reason for key, reason in _REASON_KEYWORDS if key in name), FALLBACK_REASON)


def _choices(name: str, values: list[str]) -> dict[str, Any]:
    return {"from_name": name, "to_name": "question", "type": "choices",
            "value": {"choices": values}}


def _text(name: str, to_name: str, text: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": to_name, "type": "textarea", "value": {"text": [text]}}


def _aliases_line(aliases: list[str]) -> str:
    return f"Also accepted: {'; '.join(aliases)}" if aliases else ""


def _pairs(sub_questions: list[SubQuestion], kind: str) -> str:
    pairs = [f"Q: {s.question}\nA: {s.answer}" for s in sub_questions if s.kind == kind]
    if len(pairs) <= 1:
        return "".join(pairs)
    return "\n\n".join(f"({n}) {pair}" for n, pair in enumerate(pairs, start=1))


def _revision_link(title: str, revid: int | None) -> str:
    label = f"{title} (revision {revid})" if revid is not None else title
    href = html.escape(revision_url(title, revid), quote=True)
    return f'<a href="{href}" target="_blank" rel="noopener">{html.escape(label)}</a>'


def _checks_summary(candidate: Candidate) -> str:
    if candidate.validation is None:
        return "Not validated."
    lines = [f"✗ {f.check}: {f.reason}" for f in candidate.validation.failures]
    if candidate.validation.passed:
        lines.insert(0, "Passed every automatic check.")
    return "\n".join(lines) or "Failed (no reason recorded)."
