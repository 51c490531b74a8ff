"""The run directory: every file a stage reads or writes, and `run.json`, what a run was told.

All run-directory file names live here, so a stage, the annotation step and the release agree
on them, and the stage registry (`stages/registry.py`) can say which stage makes which file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from cuqa_builder.cutoff_estimate import CutoffProbeResult, ProbeModelCheck
from cuqa_builder.errors import CuqaError, describe_validation_error
from cuqa_builder.jsonio import atomic_write_json, count_records, read_model
from cuqa_builder.records.base import Record
from cuqa_builder.snapshot import ARTICLES_SUBDIR, SnapshotError
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.validation.limits import Limits
from cuqa_builder.wiki.wikitext import WIKIPEDIA_INDEX
from cuqa_builder.window import Window

PAGES_DIR = "pages"
MANIFEST = "manifest.json"
EVENTS = "events.jsonl"
CANDIDATES = "candidates.jsonl"
GENERATION_FAILURES = "generation-failures.jsonl"
POOL = "pool.jsonl"  # connected recipe: each event's pool, every member's checks and fate
DATASET = "cuqa.jsonl"
REVIEW_REPORT = "review-report.json"
RUN_INFO = "run.json"
REFRESH = "refresh.json"  # what the last events run changed against the previous events.jsonl
LLM_CACHE = "llm-cache.sqlite"
NER_MEMO = "passage-entities.sqlite"  # the entities NER found in each known passage
ARTICLES = "articles.jsonl"  # entity articles looked up as of the cutoff
ARTICLE_PAGES = f"{PAGES_DIR}/{ARTICLES_SUBDIR}"  # ...and the articles themselves


class RunInfoError(CuqaError, ValueError):
    """run.json cannot be read as a RunInfo, or this command asks it to change a setting that
    would mix two runs in one directory."""


class NothingProducedError(CuqaError):
    """A stage had work to do and produced nothing: its summary says why; exit status 1."""


class Unfinished(CuqaError):
    """A stage wrote what it could but could not finish (an endpoint failed for some records):
    the command shows its summary, then the message; exit status 1."""

    def __init__(self, message: str, summary: str) -> None:
        super().__init__(message)
        self.summary = summary


class OutputShrinkError(CuqaError):
    """A stage would replace a good output with an empty or much smaller one."""


def check_replacement(path: Path, new_count: int, noun: str, force: bool) -> None:
    """Refuse to replace `path` by `new_count` records when that drops it to nothing or to less
    than half (a bad input rather than a real change); `--force` replaces it anyway."""
    refuse_shrinking(path, count_records(path), new_count, noun, force)


def refuse_shrinking(
    path: Path, old_count: int, new_count: int, noun: str, force: bool,
    dropped: Sequence[str] = (),
) -> None:
    """`check_replacement` for a caller that counts the old records itself (only the reviewed
    items of cuqa.jsonl, say) and can name the ones that would be dropped."""
    if force or old_count == 0 or new_count * 2 >= old_count > 0 and new_count > 0:
        return
    lost = len(dropped) if dropped else old_count - new_count
    named = f": {_first_names(dropped)}" if dropped else ""
    raise OutputShrinkError(
        f"not replacing {path}: it holds {old_count} {noun} and this run has {new_count} "
        f"({lost} would be dropped{named}); nothing was written. Check the input, or "
        "pass --force to replace it anyway"
    )


def _first_names(names: Sequence[str], shown: int = 5) -> str:
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


class Manifest(Record):
    """`manifest.json`: which revision of each page a run used, to fetch the same ones later."""

    api: str | None  # the api.php the pages came from; None: read from a snapshot
    fetched: str | None  # ISO time of the fetch, UTC; None: read from a snapshot
    pages: dict[str, int]  # title -> revid
    # The --source directory, when the pages came from one: absolute in a run's manifest (to
    # find it again), its name only in a release's; and the sha256 of its content.
    snapshot: str | None = None
    snapshot_sha256: str | None = None

    @property
    def index_url(self) -> str | None:
        """Where revision links point: the wiki the pages were fetched from; None for a
        snapshot, whose revision ids no wiki has checked."""
        return None if self.snapshot or not self.api else index_url_for(self.api)


def index_url_for(api_url: str | None) -> str:
    """Revision links point at the wiki the pages came from: `.../api.php` -> `.../index.php`."""
    if api_url and api_url.endswith("/api.php"):
        return api_url.removesuffix("api.php") + "index.php"
    return WIKIPEDIA_INDEX


def built_from_snapshot(out: Path) -> Path | None:
    """The snapshot a run was built from (its manifest.json names it); None for a run that
    fetched its pages, or has no manifest yet. A run built from a snapshot keeps reading it:
    fetching instead would rewrite its manifest and leave its articles behind. Raises
    SnapshotError when the snapshot is no longer where the run recorded it."""
    path = out / MANIFEST
    if not path.exists():
        return None
    built_from = read_model(path, Manifest, "a manifest.json").snapshot
    if built_from is None:
        return None
    if not Path(built_from).is_dir():  # a relative one is as the building command gave it
        raise SnapshotError(
            f"{out} was built from the snapshot {built_from}, which is not there (moved, "
            "or named relative to another directory): pass --source with that snapshot"
        )
    return Path(built_from)


class GenerationInfo(BaseModel):
    """How the generate stage made its candidates (model, seed, sampling, prompt hashes)."""

    model: str
    seed: int
    sampling: dict[str, float | int] = Field(description="temperature, top_p, max tokens")
    prompts: dict[str, str] = Field(description="template name -> sha256")
    hard: int = 0
    attempts: int = Field(1, description="tries per step (repair)")
    known_source: str = Field("model", description="where known passages came from")
    recipe: str = Field("paper", description="--prompts: how items were composed")
    pool_size: int | None = Field(
        None, description="connected recipe: the --pool-size of the latest command (each "
        "event's record in pool.jsonl holds the one it was screened with)")


class CheckCount(BaseModel):
    """How many candidates one check passed and failed (`passed` None: a model that could not
    be asked, which measured nothing and failed each item it could not answer for)."""

    passed: int | None = None
    failed: int


class ValidationInfo(BaseModel):
    """How the validate stage judged them: the checks' limits and the probes, if any."""

    limits: Limits
    probe_model: str | None = None
    judge: str | None = None
    critic_model: str | None = None
    check_model: str | None = Field(None, description="the checker's model")
    guesses: int | None = Field(None, description="how many of the checker's guesses counted")
    prompts: dict[str, str] | None = Field(
        None, description="probe/critic/checker template -> sha256"
    )
    counts: dict[str, CheckCount] = Field(
        default_factory=dict, description="every check that ran, in the summary's order -> "
        "the candidates it passed and failed (empty: validated before they were recorded)"
    )


class WindowExtension(BaseModel):
    """A refresh that moved the window's last day later (`--until LATER` on an existing run)."""

    previous_until: str
    until: str
    at: str = Field(description="ISO time of the command, UTC")


class RunInfo(BaseModel):
    """`run.json`: the settings a dataset depends on, to rebuild it exactly."""

    cutoff: str | None = None
    until: str | None = None
    seed: int | None = None
    extensions: list[WindowExtension] = Field(default_factory=list)
    cutoff_probes: list[CutoffProbeResult] = Field(
        default_factory=list, description="the probes whose estimate `--cutoff auto:MODEL` used"
    )
    generation: GenerationInfo | None = None
    probe_model_check: ProbeModelCheck | None = Field(
        None, description="the check that --probe-model did not know the first events after "
        "the cutoff")
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


def has_candidates(out: Path) -> bool:
    """Whether generation has written a candidate into the run (of the seed it recorded)."""
    path = out / CANDIDATES
    return path.exists() and path.stat().st_size > 0


def set_aside_candidates(out: Path, seed: int) -> list[Path]:
    """Rename a seed's candidates and failures to `NAME.seed-N.jsonl`, so that generation can
    start afresh with another seed without mixing the two; returns the new paths."""
    moved = []
    for name in (CANDIDATES, GENERATION_FAILURES):
        path = out / name
        if path.exists():
            target = path.with_name(f"{path.stem}.seed-{seed}{path.suffix}")
            path.replace(target)
            moved.append(target)
    return moved


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
    """Record settings (None values leave the recorded ones alone); returns what is recorded.
    Nothing is written when nothing changes (a command that only reads a run may find it
    read-only)."""
    recorded = load_run_info(out)
    info = recorded.model_copy(
        update={key: value for key, value in updates.items() if value is not None}
    )
    info = RunInfo.model_validate(info.model_dump())  # re-checks the updated fields
    if info != recorded or not (out / RUN_INFO).exists():
        atomic_write_json(out / RUN_INFO, info.model_dump(mode="json", exclude_none=True))
    return info
