"""`cuqa-build`: from a knowledge cutoff to a CuQA dataset, stage by stage."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cuqa_builder import __version__
from cuqa_builder.cli.flags import add_flags, options_from
from cuqa_builder.cli.shell import add_verbosity_flags, run_command
from cuqa_builder.errors import CuqaError, Paused, UsageError
from cuqa_builder.llm.settings import LLMOptions
from cuqa_builder.run import RunContext, load_run_info, save_run_info
from cuqa_builder.stages.options import (
    BuildOptions,
    GenerateOptions,
    ReleaseOptions,
    SourceOptions,
    ValidateOptions,
)
from cuqa_builder.stages.registry import BY_NAME, STAGES, Stage, run_stage
from cuqa_builder.validation.limits import Limits
from cuqa_builder.window import Window

PROG = "cuqa-build"


def _epilog() -> str:
    width = max(len(stage.name) for stage in STAGES)
    lines = [f"  {stage.name:<{width}}  {stage.job}" for stage in STAGES]
    return (
        "stages (each reads the previous stage's file in --out, so any can be re-run alone):\n"
        + "\n".join(lines)
        + f"\n  {'all':<{width}}  (fetch unless --source,) events, generate and validate, and "
        "release when --name is given\n\nA killed run resumes: run the same command again.\n"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Build CuQA compositional unknown questions from Wikipedia events dated "
        "after a model's knowledge cutoff.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    window = parser.add_argument_group("window")
    window.add_argument(
        "--cutoff",
        help="the model's knowledge cutoff: YYYY-MM (end of that month) or YYYY-MM-DD; events "
        "dated after it are unknown (required for a new run, recorded in OUT/run.json)",
    )
    window.add_argument("--until", help="last day of the window, YYYY-MM[-DD] (default: today)")
    run = parser.add_argument_group("run")
    run.add_argument("--out", type=Path, required=True, help="run directory")
    run.add_argument("--stage", choices=(*BY_NAME, "all"), default="all",
                     help="stage to run (default: all)")
    add_flags(run, GenerateOptions)
    add_verbosity_flags(run)
    add_flags(run, BuildOptions, only=["quiet"])
    source = parser.add_argument_group("Wikipedia source")
    where = source.add_mutually_exclusive_group()
    add_flags(where, SourceOptions, only=["source", "wiki_api"])
    add_flags(source, SourceOptions, exclude=["source", "wiki_api"])
    add_flags(parser.add_argument_group("LLM"), LLMOptions)
    checks = parser.add_argument_group("validation and probes")
    add_flags(checks, ValidateOptions, exclude=["limits"])
    add_flags(checks, Limits)
    add_flags(parser.add_argument_group("release"), ReleaseOptions)
    return parser


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace, seed: int) -> BuildOptions:
    """The typed options of every stage, from the flags (the seed resolved against run.json)."""
    return BuildOptions(
        source=options_from(parser, SourceOptions, args),
        llm=options_from(parser, LLMOptions, args),
        generate=options_from(parser, GenerateOptions, args, seed=seed),
        checks=options_from(
            parser, ValidateOptions, args, limits=options_from(parser, Limits, args)
        ),
        release=options_from(parser, ReleaseOptions, args),
        quiet=args.quiet,
    )


def parse_options(argv: list[str], seed: int = 0) -> BuildOptions:
    """The typed options a command line gives (for tools and tests; `main` also resolves the
    seed against the run directory)."""
    parser = build_parser()
    return _options(parser, parser.parse_args(argv), seed)


def _plan(stage: str, options: BuildOptions) -> list[Stage]:
    offline = options.source.source is not None
    if stage == "events":
        names = ["events"] if offline else ["fetch", "events"]
    elif stage != "all":
        names = [stage]
    else:
        names = [*([] if offline else ["fetch"]), "events", "generate", "validate"]
        names += ["release"] if options.release.name else []
    return [BY_NAME[name] for name in names]


def _start_run(
    parser: argparse.ArgumentParser, args: argparse.Namespace, record: bool = True
) -> RunContext:
    """The window and options of this run; run.json records the cutoff, window and seed, and
    a resumed run keeps the ones it started with (`record=False`: nothing is written)."""
    recorded = load_run_info(args.out)
    cutoff = args.cutoff or recorded.cutoff
    if not cutoff:
        raise UsageError("--cutoff is required for a new run directory")
    window = Window.parse(cutoff, args.until or recorded.until)
    seed = args.seed if args.seed is not None else (recorded.seed or 0)
    options = _options(parser, args, seed)
    if record:
        args.out.mkdir(parents=True, exist_ok=True)
        save_run_info(args.out, cutoff=window.label, until=window.until.isoformat(), seed=seed)
    return RunContext(out=args.out, window=window, options=options)


class StageFailed(CuqaError):
    def __init__(self, stage: str, error: Exception) -> None:
        super().__init__(f"{stage} failed: {error}")
        self.exit_code = error.exit_code if isinstance(error, CuqaError) else 1


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    def build(args: argparse.Namespace) -> int:
        if args.estimate:  # before any call, and nothing written
            from cuqa_builder.stages.estimate import estimate_build

            ctx = _start_run(parser, args, record=False)
            print(estimate_build(ctx, _plan(args.stage, ctx.options)))
            return 0
        ctx = _start_run(parser, args)
        for stage in _plan(args.stage, ctx.options):
            try:
                summary = run_stage(stage, ctx)
            except (KeyboardInterrupt, StageFailed, Paused):
                raise
            except Exception as exc:
                raise StageFailed(stage.name, exc) from exc
            print(summary)
        return 0

    return run_command(PROG, args, build)


if __name__ == "__main__":
    sys.exit(main())
