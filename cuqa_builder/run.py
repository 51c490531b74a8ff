"""The run directory: every file a stage reads or writes, and `run.json`, what a run was told.

All run-directory file names live here, so a stage, the annotation step and the release agree
on them, and the stage registry (`stages/registry.py`) can say which stage makes which file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from cuqa_builder.errors import CuqaError, describe_validation_error
from cuqa_builder.jsonio import atomic_write_json
from cuqa_builder.snapshot import ARTICLES_SUBDIR
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.validation.limits import Limits
from cuqa_builder.window import Window

PAGES_DIR = "pages"
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
CANDIDATES = "candidates.jsonl"
GENERATION_FAILURES = "generation-failures.jsonl"
DATASET = "cuqa.jsonl"
REVIEW_REPORT = "review-report.json"
RUN_INFO = "run.json"
LLM_CACHE = "llm-cache.sqlite"
ARTICLES = "articles.jsonl"  # entity articles looked up as of the cutoff
ARTICLE_PAGES = f"{PAGES_DIR}/{ARTICLES_SUBDIR}"  # ...and the articles themselves


class RunInfoError(CuqaError, ValueError):
    """run.json cannot be read as a RunInfo."""


class GenerationInfo(BaseModel):
    """How the generate stage made its candidates (model, seed, sampling, prompt hashes)."""

    model: str
    seed: int
    sampling: dict[str, float | int] = Field(description="temperature, top_p, max tokens")
    prompts: dict[str, str] = Field(description="template name -> sha256")
    hard: int = 0
    attempts: int = Field(1, description="tries per step (repair)")
    known_source: str = Field("model", description="where known passages came from")


class ValidationInfo(BaseModel):
    """How the validate stage judged them: the checks' limits and the probes, if any."""

    limits: Limits
    probe_model: str | None = None
    judge: str | None = None
    critic_model: str | None = None
    prompts: dict[str, str] | None = Field(None, description="probe/critic template -> sha256")


class RunInfo(BaseModel):
    """`run.json`: the settings a dataset depends on, to rebuild it exactly."""

    cutoff: str | None = None
    until: str | None = None
    seed: int | None = None
    generation: GenerationInfo | None = None
    validation: ValidationInfo | None = None


@dataclass(frozen=True)
class RunContext:
    """What a stage needs: the run directory, the window and its typed options."""

    out: Path
    window: Window
    options: BuildOptions

    @property
    def pages_dir(self) -> Path:
        return self.out / PAGES_DIR

    def path(self, name: str) -> Path:
        return self.out / name


def load_run_info(out: Path) -> RunInfo:
    """The run's recorded settings; an empty RunInfo for a new run directory."""
    path = out / RUN_INFO
    if not path.exists():
        return RunInfo()
    try:
        return RunInfo.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        raise RunInfoError(
            f"{path} is not a run.json written by cuqa-build ({describe_validation_error(exc)}); "
            "move it aside to start the run afresh"
        ) from None


def save_run_info(out: Path, **updates: object) -> RunInfo:
    """Record settings (None values leave the recorded ones alone); returns what is recorded."""
    info = load_run_info(out).model_copy(
        update={key: value for key, value in updates.items() if value is not None}
    )
    info = RunInfo.model_validate(info.model_dump())  # re-checks the updated fields
    atomic_write_json(out / RUN_INFO, info.model_dump(mode="json", exclude_none=True))
    return info
