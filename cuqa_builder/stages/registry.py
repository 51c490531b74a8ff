"""The stages of `cuqa-build`, in pipeline order: what each reads and writes in the run directory.

This table is the pipeline. `cli/build.py` runs stages from it, the "X is missing: run the Y
stage first" check is derived from it, and the README's architecture table is checked against
it by a test. A stage's module is imported only when the stage runs: the LLM stack takes
seconds to load and `--help` or the events stage never need it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cuqa_builder.errors import CuqaError
from cuqa_builder.run import (
    ARTICLE_PAGES,
    ARTICLES,
    CANDIDATES,
    DATASET,
    EVENTS,
    GENERATION_FAILURES,
    MANIFEST,
    NER_MEMO,
    PAGES_DIR,
    POOL,
    REFRESH,
    RUN_INFO,
    RunContext,
)


class MissingInputError(CuqaError, FileNotFoundError):
    """A stage's input is not in the run directory yet."""


def _fetch(ctx: RunContext) -> str:
    from cuqa_builder.stages import fetch

    return fetch.run(ctx)


def _events(ctx: RunContext) -> str:
    from cuqa_builder.stages import events

    return events.run(ctx)


def _generate(ctx: RunContext) -> str:
    from cuqa_builder.stages import generate

    return generate.run(ctx)


def _ground(ctx: RunContext) -> str:
    from cuqa_builder.stages import ground

    return ground.run(ctx)


def _validate(ctx: RunContext) -> str:
    from cuqa_builder.stages import validate

    return validate.run(ctx)


def _release(ctx: RunContext) -> str:
    from cuqa_builder.stages import release

    return release.run(ctx)


@dataclass(frozen=True)
class Stage:
    name: str
    job: str  # one line, for --help and the README
    reads: tuple[str, ...]  # run-directory files that must exist before it runs
    writes: tuple[str, ...]
    run: Callable[[RunContext], str]

    def missing_inputs(self, out: Path, offline: bool) -> list[str]:
        """Its inputs not yet in run directory `out`; `offline`: --source DIR was given, which
        the events stage reads instead of the run's pages."""
        reads = () if self.name == "events" and offline else self.reads
        return [name for name in reads if not (out / name).exists()]


STAGES: tuple[Stage, ...] = (
    Stage("fetch", "Wikipedia pages of the window -> a snapshot", (), (PAGES_DIR, MANIFEST),
          _fetch),
    Stage("events", "pages -> dated events with entities (or --source DIR)", (PAGES_DIR,),
          (EVENTS, MANIFEST, REFRESH), _events),
    Stage("generate", "events -> candidates by a recipe (--prompts)", (EVENTS,),
          (CANDIDATES, GENERATION_FAILURES, POOL, RUN_INFO, NER_MEMO), _generate),
    Stage("ground", "candidates -> their entities' articles as of the cutoff (evidence)",
          (CANDIDATES,), (ARTICLES, ARTICLE_PAGES), _ground),
    Stage("validate", "candidates -> verdicts with evidence, and the items that passed",
          (CANDIDATES,), (CANDIDATES, DATASET, RUN_INFO), _validate),
    Stage("release", "the run's items, reviewed or not -> OUTPUT_ROOT/NAME/ with card, schema, "
          "stats", (DATASET,), (), _release),
)
BY_NAME = {stage.name: stage for stage in STAGES}


def producer_of(name: str) -> Stage:
    """The first stage that writes run-directory file `name`."""
    return next(stage for stage in STAGES if name in stage.writes)


def refuse_missing_inputs(stage: Stage, out: Path, offline: bool) -> None:
    """`MissingInputError` naming the first input of `stage` not in `out` and who makes it."""
    for name in stage.missing_inputs(out, offline):
        raise MissingInputError(
            f"{out / name} is missing: run the {producer_of(name).name} stage first"
        )


def run_stage(stage: Stage, ctx: RunContext) -> str:
    """Run one stage after checking that its inputs exist; returns its summary."""
    refuse_missing_inputs(stage, ctx.out, ctx.options.source.source is not None)
    return stage.run(ctx)


def markdown_table() -> str:
    """The registry as the README's architecture table (a test keeps the two equal)."""
    def files(names: tuple[str, ...]) -> str:
        shown = (name if "." in name else f"{name}/" for name in names)  # a folder: pages/
        return ", ".join(f"`{name}`" for name in shown) or "—"

    rows = [
        f"| {stage.name} | `stages/{stage.name}.py` | {stage.job} | {files(stage.reads)} | "
        f"{files(stage.writes)} |"
        for stage in STAGES
    ]
    return "\n".join(["| stage | module | job | reads | writes |", "|---|---|---|---|---|", *rows])
