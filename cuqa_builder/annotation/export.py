"""A Label Studio JSON export (the full one, not JSON_MIN) read: its tasks, and the trusted parts
of each annotation as one annotator's vote. Whatever the labeling config does not allow is
reported and left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cuqa_builder.annotation.config import (
    ACCEPT,
    CORRECTION,
    REASONS,
    REJECT,
    REWRITE,
    VERDICT,
    LabelingConfig,
    ResultError,
)
from cuqa_builder.errors import CuqaError
from cuqa_builder.review_report import Problem

UNDECIDED = "undecided"  # a submitted annotation without a verdict


class ExportError(CuqaError, ValueError):
    pass


class _Lenient(BaseModel):
    # Label Studio exports carry many more keys than these; they are not ours to check.
    model_config = ConfigDict(extra="ignore")


class ExportAnnotation(_Lenient):
    id: int | None = None
    completed_by: int | dict[str, Any] | None = None
    result: list[Any] = Field(default_factory=list)
    was_cancelled: bool = False
    lead_time: float | None = None
    updated_at: str | None = None


class ExportTask(_Lenient):
    id: int | None = None
    data: dict[str, Any] = Field(default_factory=dict)
    meta: dict[str, Any] | None = None
    annotations: list[ExportAnnotation] = Field(default_factory=list)


@dataclass(frozen=True)
class Vote:
    """One annotator's counted annotation of one candidate."""

    annotator: str
    verdict: str  # accept, reject, unsure or undecided
    reasons: tuple[str, ...]
    rewrite: str
    correction: str
    lead_time: float | None
    order: tuple[str, int]  # (updated_at, annotation id): later wins


def parse_export(export: Any) -> tuple[list[ExportTask], list[Problem]]:
    """Typed tasks from an export; a task that is not even task-shaped is reported, not fatal."""
    if not isinstance(export, list):
        raise ExportError("a Label Studio JSON export is a list of tasks")
    if export and not any(isinstance(t, dict) and "data" in t for t in export):
        raise ExportError("no task in this file has `data`: export as JSON, not JSON_MIN or CSV")
    tasks, problems = [], []
    for number, raw in enumerate(export, start=1):
        try:
            tasks.append(ExportTask.model_validate(raw))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"]))
            message = f"export entry {number} skipped: {where}: {first['msg']}"
            problems.append(Problem(message=message))
    return tasks, problems



def read_vote(
    annotation: ExportAnnotation, config: LabelingConfig
) -> tuple[Vote | None, list[str]]:
    """The trusted parts of one annotation, and a message for each part that was not trusted.

    No verdict at all is an undecided vote; a verdict that cannot be trusted is no vote.
    """
    values, problems = _trusted_values(annotation.result, config)
    verdict = values.get(VERDICT)
    if verdict is None:
        if any(isinstance(i, dict) and i.get("from_name") == VERDICT for i in annotation.result):
            problems.append("no valid verdict; the annotation does not count")
            return None, problems
        verdict = (UNDECIDED,)
    judged = verdict[0]
    vote = Vote(
        annotator=annotator_name(annotation.completed_by),
        verdict=judged,
        reasons=values.get(REASONS, ()) if judged == REJECT else (),
        rewrite=values.get(REWRITE, "") if judged == ACCEPT else "",
        correction=values.get(CORRECTION, "") if judged == ACCEPT else "",
        lead_time=annotation.lead_time,
        order=(annotation.updated_at or "", annotation.id or 0),
    )
    return vote, problems


def _trusted_values(result: list[Any], config: LabelingConfig) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    repeated: set[str] = set()
    problems = []
    for item in result:
        try:
            name, value = config.read_result(item)
        except ResultError as exc:
            problems.append(f"{exc}; ignored")
            continue
        if name in values:
            repeated.add(name)
        values[name] = value
    for name in sorted(repeated):  # two answers for one control: trust neither
        problems.append(f"{name}: given more than once; ignored")
        del values[name]
    return values, problems


def annotator_name(completed_by: int | dict[str, Any] | None) -> str:
    """A pseudonymous id: released data names no annotator's e-mail."""
    user = completed_by.get("id") if isinstance(completed_by, dict) else completed_by
    return f"annotator-{user}" if user is not None else "annotator-unknown"
