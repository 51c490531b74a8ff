"""Talking to a Label Studio server through label-studio-sdk 2.1.2 (the version it pins).

The API key comes from the environment only. Every failure becomes one `LabelStudioError` line
(unreachable server, refused key, missing project...) with the key scrubbed from it: the SDK's
own error text carries response headers and bodies, which are not ours to print.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from label_studio_sdk.core.api_error import ApiError

from cuqa_builder.annotation.config import LabelingConfig
from cuqa_builder.annotation.tasks import TaskKey, task_key, tasks_to_import
from cuqa_builder.errors import CuqaError

API_KEY_ENV = "LABEL_STUDIO_API_KEY"
IMPORT_BATCH = 500  # tasks per import request: bulk, yet small enough to stay well under limits
LIST_PAGE = 1000
TIMEOUT_S = 300.0  # a full export of a large project can take a while


class LabelStudioError(CuqaError, RuntimeError):
    pass


@dataclass(frozen=True)
class ProjectSettings:
    """What push sets on the project each time, so that a reused project follows them too."""

    config: LabelingConfig
    instructions: str  # HTML, shown to each annotator before the first task
    annotators: int  # judgements per task: Label Studio hands a task to this many people

    def fields(self) -> dict[str, Any]:
        return {
            "label_config": self.config.xml,
            "expert_instruction": self.instructions,
            "show_instruction": True,
            "show_skip_button": True,
            # An untouched submission is kept, so pull can count it as undecided.
            "enable_empty_annotation": True,
            # Never pre-fill a task from predictions, should any be imported by hand.
            "show_collab_predictions": False,
            "maximum_annotations": self.annotators,
            "overlap_cohort_percentage": 100,  # every task, not a sample, gets the overlap
        }


@dataclass
class PushResult:
    project_id: int
    created_project: bool
    imported: int
    skipped: int
    task_ids: list[int] = field(default_factory=list)
    annotators_before: int | None = None  # a reused project's overlap before this push


def api_key_from_env() -> str:
    key = os.environ.get(API_KEY_ENV, "").strip()
    if not key:
        raise LabelStudioError(
            f"set {API_KEY_ENV} to your Label Studio access token (Account & Settings)"
        )
    return key


class ReviewServer:
    """One Label Studio server, seen through the few calls the round trip needs."""

    def __init__(self, url: str, api_key: str, timeout_s: float = TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._key = api_key
        # Imported here: the client pulls in pandas (~2 s), which offline commands never need.
        from label_studio_sdk import LabelStudio

        self._client = LabelStudio(base_url=self.url, api_key=api_key, timeout=timeout_s)

    @contextmanager
    def _calling(self, action: str) -> Iterator[None]:
        try:
            yield
        except LabelStudioError:
            raise
        except ApiError as exc:
            raise LabelStudioError(self._scrub(self._api_error(action, exc))) from None
        except httpx.TimeoutException:
            raise LabelStudioError(f"Label Studio at {self.url} timed out while {action}") from None
        except httpx.HTTPError as exc:
            reason = self._scrub(str(exc) or type(exc).__name__)
            raise LabelStudioError(f"cannot reach Label Studio at {self.url}: {reason}") from None

    def _api_error(self, action: str, exc: ApiError) -> str:
        if exc.status_code in (401, 403):
            return (f"Label Studio at {self.url} refused the API key (HTTP {exc.status_code}) "
                    f"while {action}: check {API_KEY_ENV}")
        detail = exc.body.get("detail") if isinstance(exc.body, dict) else exc.body
        detail = " ".join(str(detail or "").split())[:300]
        return (f"Label Studio at {self.url} answered HTTP {exc.status_code} while {action}: "
                f"{detail}")

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text

    def check_access(self) -> None:
        """Fail early, in one line, when the server is down or the key is wrong."""
        with self._calling("checking the API key"):
            self._client.users.whoami()

    def find_project(self, title: str) -> int | None:
        with self._calling(f"looking up project {title!r}"):
            matches = [p.id for p in self._client.projects.list(title=title) if p.title == title]
        if len(matches) > 1:
            raise LabelStudioError(
                f"{len(matches)} projects at {self.url} are titled {title!r}; "
                "rename all but one or pass another --project"
            )
        return matches[0] if matches else None

    def project_id(self, title: str) -> int:
        found = self.find_project(title)
        if found is None:
            raise LabelStudioError(f"no project titled {title!r} at {self.url}; push first")
        return found

    def ensure_project(self, title: str, settings: ProjectSettings) -> tuple[int, bool, int | None]:
        """(project id, created?, overlap before): reuse the project of that title with the
        settings applied, or create it with them."""
        found = self.find_project(title)
        if found is not None:
            before = self.project_annotators(found)
            with self._calling(f"updating the settings of project {title!r}"):
                self._client.projects.update(found, **settings.fields())
            return found, False, before
        with self._calling(f"creating project {title!r}"):
            project = self._client.projects.create(title=title, **settings.fields())
        return project.id, True, None

    def project_annotators(self, project_id: int) -> int:
        """How many annotations the project asks for per task (Label Studio's overlap)."""
        with self._calling("reading the project's settings"):
            return self._client.projects.get(project_id).maximum_annotations or 1

    def task_keys(self, project_id: int) -> set[TaskKey]:
        """The candidates already in the project and the text each task shows, read from the
        tasks' meta (or data)."""
        with self._calling("listing the project's tasks"):
            tasks = self._client.tasks.list(
                project=project_id, include="id,meta,data", page_size=LIST_PAGE
            )
            return {task_key({"meta": t.meta, "data": t.data}) for t in tasks}

    def import_tasks(self, project_id: int, tasks: Sequence[dict[str, Any]]) -> list[int]:
        """Bulk import, IMPORT_BATCH tasks per request; returns the new task ids."""
        ids: list[int] = []
        for start in range(0, len(tasks), IMPORT_BATCH):
            batch = list(tasks[start:start + IMPORT_BATCH])
            with self._calling(f"importing tasks {start + 1}-{start + len(batch)}"):
                response = self._client.projects.import_tasks(
                    project_id, request=batch, return_task_ids=True
                )
            ids += response.task_ids or []
        return ids

    def push(
        self, title: str, settings: ProjectSettings, tasks: Sequence[dict[str, Any]]
    ) -> PushResult:
        """Create or reuse the project and import the tasks it does not hold yet (idempotent)."""
        project_id, created, before = self.ensure_project(title, settings)
        present = set() if created else self.task_keys(project_id)
        new = tasks_to_import(tasks, present)
        task_ids = self.import_tasks(project_id, new)
        return PushResult(project_id=project_id, created_project=created, imported=len(new),
                          skipped=len(tasks) - len(new), task_ids=task_ids,
                          annotators_before=before)

    def export(self, project_id: int) -> list[dict[str, Any]]:
        """The full JSON export (annotations with every field, cancelled ones included)."""
        with self._calling("exporting annotations"):
            exported = self._client.projects.exports.as_json(project_id)
        if not isinstance(exported, list):
            raise LabelStudioError(f"Label Studio at {self.url} sent an export that is not a list")
        return exported
