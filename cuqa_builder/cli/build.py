"""`cuqa-build`: from a knowledge cutoff to a CuQA dataset, stage by stage."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import date, datetime, timezone
from pathlib import Path

from cuqa_builder import __version__
from cuqa_builder.cli.flags import add_flags, add_wait_for_lock_flag, options_from
from cuqa_builder.cli.shell import CommandParser, add_verbosity_flags, run_command
from cuqa_builder.cutoff_estimate import CutoffProbeResult, resolve_cutoff
from cuqa_builder.errors import CuqaError, Paused, UsageError
from cuqa_builder.llm.settings import LLMOptions
from cuqa_builder.run import (
    RunContext,
    RunInfo,
    Unfinished,
    WindowExtension,
    built_from_snapshot,
    has_candidates,
    load_run_info,
    save_run_info,
    set_aside_candidates,
)
from cuqa_builder.run_lock import run_lock
from cuqa_builder.snapshot import SnapshotError
from cuqa_builder.stages.options import (
    RELEASE_NEEDS_NAME,
    BuildOptions,
    GenerateOptions,
    ReleaseOptions,
    SourceOptions,
    ValidateOptions,
)
from cuqa_builder.stages.registry import (
    BY_NAME,
    STAGES,
    Stage,
    refuse_missing_inputs,
    run_stage,
)
from cuqa_builder.validation.limits import Limits
from cuqa_builder.window import Window, parse_cutoff, parse_until

PROG = "cuqa-build"
DIFF = "diff"  # `cuqa-build diff OLD NEW`: a first word, so every `cuqa-build --flag` still works


def _epilog() -> str:
    width = max(len(stage.name) for stage in STAGES)
    lines = [f"  {stage.name:<{width}}  {stage.job}" for stage in STAGES]
    return (
        "stages (each reads the previous stage's file in --out, so any can be re-run alone):\n"
        + "\n".join(lines)
        + f"\n  {'all':<{width}}  (fetch unless --source,) events, generate, ground and validate, "
        "and release when --name is given\n\nA killed run resumes: run the same command again. "
        "A later --until on an existing run\nrefreshes it: new days are fetched, recent pages "
        "re-checked (--settle), stale candidates\nregenerated. One command at a time writes a "
        "run: a second one on the same --out is\nrefused (or waits, with --wait-for-lock).\n\n"
        f"{PROG} {DIFF} OLD NEW: compare two releases; writes NEW/CHANGELOG.md and a section of "
        "NEW's card.\n"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
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
        "dated after it are unknown (required for a new run, recorded in OUT/run.json). "
        "auto:MODEL takes the estimate of `cuqa-eval cutoff --model MODEL` (or auto:DIR, a "
        "probe's output). A comma-separated list, none before the run's cutoff, makes a "
        "release with one subset per cutoff",
    )
    window.add_argument(
        "--until",
        help="last day of the window, YYYY-MM[-DD] or `today` (default: the run's recorded "
        "one, else today); a later one on an existing run extends it (a refresh)",
    )
    run = parser.add_argument_group("run")
    run.add_argument("--out", type=Path, required=True, help="run directory")
    run.add_argument("--stage", choices=(*BY_NAME, "all"), default="all",
                     help="stage to run (default: all)")
    add_flags(run, GenerateOptions)
    add_verbosity_flags(run)
    add_flags(run, BuildOptions, only=["quiet", "force", "reseed"])
    add_wait_for_lock_flag(run)
    source = parser.add_argument_group("Wikipedia source")
    where = source.add_mutually_exclusive_group()
    add_flags(where, SourceOptions, only=["source", "wiki_api"])
    add_flags(source, SourceOptions, exclude=["source", "wiki_api"])
    add_flags(parser.add_argument_group("LLM"), LLMOptions)
    checks = parser.add_argument_group("validation and probes")
    add_flags(checks, ValidateOptions, exclude=["limits"])
    add_flags(checks, Limits)
    add_flags(parser.add_argument_group("release"), ReleaseOptions, exclude=["cutoffs"])
    # `diff` is a first word argparse does not know of: the usage line names it too.
    usage = parser.format_usage().removeprefix("usage: ").rstrip()
    parser.usage = f"{usage}\n       {PROG} {DIFF} OLD NEW"
    return parser


def _options(parser: argparse.ArgumentParser, args: argparse.Namespace, seed: int) -> BuildOptions:
    """The typed options of every stage, from the flags (the seed resolved against run.json)."""
    return BuildOptions(
        source=options_from(parser, SourceOptions, args),
        llm=options_from(parser, LLMOptions, args),
        # the recipe as given, for now: a run resolves it against run.json as the seed
        generate=options_from(parser, GenerateOptions, args, seed=seed,
                              prompts=args.prompts or "connected"),
        checks=options_from(
            parser, ValidateOptions, args, limits=options_from(parser, Limits, args)
        ),
        release=options_from(parser, ReleaseOptions, args),
        quiet=args.quiet,
        force=args.force,
        reseed=args.reseed,
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
        names = [*([] if offline else ["fetch"]), "events", "generate", "ground", "validate"]
        names += ["release"] if options.release.name else []
    return [BY_NAME[name] for name in names]


def _given_cutoffs(text: str | None) -> dict[str, CutoffProbeResult | None]:
    """`--cutoff A[,B...]` in date order, `auto:MODEL` resolved: label -> the probe it came from."""
    if not text:
        return {}
    resolved = [resolve_cutoff(part) for part in text.split(",") if part.strip()]
    return dict(sorted(dict(resolved).items(), key=lambda entry: parse_cutoff(entry[0])))


def _run_cutoff(out: Path, given: list[str], recorded: str | None, stage: str) -> str:
    """The run's own cutoff: a new run takes the earliest given; an existing run keeps its
    recorded one. Later cutoffs name the release's extra subsets; but when the earliest given is
    not the run's, a stage other than release would build for another cutoff in this directory
    and mix two runs, so it is refused. Cutoffs earlier than the recorded one are refused
    before this."""
    if recorded is None:
        if not given:
            raise UsageError("--cutoff is required for a new run directory")
        return given[0]
    if stage != "release" and given and given[0] != recorded:
        raise UsageError(
            f"{out} was built for cutoff {recorded}; a run for --cutoff {','.join(given)} "
            "needs another --out"
        )
    return recorded


def _refuse_earlier_cutoffs(given: list[str], recorded: str | None) -> None:
    if recorded is None:
        return
    for label in given:
        if parse_cutoff(label) < parse_cutoff(recorded):
            raise UsageError(
                f"cutoff {label} is earlier than this run's cutoff {recorded}: the run holds no "
                f"events up to {recorded} and its known hops may need knowledge up to it; "
                "build another run (--out) for an earlier cutoff"
            )


def _until(given: str | None, recorded: str | None) -> tuple[str | None, WindowExtension | None]:
    """The window's last day: the recorded one unless --until is given. A later --until extends
    the run (recorded as a WindowExtension); an earlier one would silently drop events."""
    if given is None or recorded is None:
        return given or recorded, None
    new, old = parse_until(given), date.fromisoformat(recorded)
    if new < old:
        raise UsageError(
            f"--until {new} is before this run's last day {old}: a run's window only grows "
            "(a refresh extends it); use another --out for a shorter window"
        )
    if new == old:
        return given, None
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    return given, WindowExtension(previous_until=recorded, until=new.isoformat(), at=now)


def _probes(recorded: RunInfo, used: list[CutoffProbeResult]) -> list[CutoffProbeResult] | None:
    """The run's probe records with the ones used now (one per model, the latest)."""
    if not used:
        return None
    by_model = {probe.model: probe for probe in [*recorded.cutoff_probes, *used]}
    return list(by_model.values())


def _start_run(
    args: argparse.Namespace, options: BuildOptions, record: bool = True
) -> RunContext:
    """The window and options of this run; run.json records the cutoff and window (the seed is
    generation's: it records it with its first candidate), and a resumed run keeps the ones it
    started with (`record=False`: nothing is written)."""
    if args.out.exists() and not args.out.is_dir():
        raise UsageError(f"--out {args.out} is a file; give a directory for the run")
    recorded = load_run_info(args.out)
    given = _given_cutoffs(args.cutoff)
    _refuse_earlier_cutoffs(list(given), recorded.cutoff)
    until, extension = _until(args.until, recorded.until)
    if not record and not options.llm.estimate:  # the flags' values are good: can it start?
        _refuse_before_writing(args, options)
    window = Window.parse(_run_cutoff(args.out, list(given), recorded.cutoff, args.stage), until)
    for label in given:  # each subset's window must hold days, as the run's does
        Window.parse(label, window.until.isoformat())
    seed = args.seed if args.seed is not None else (recorded.seed or 0)
    made = has_candidates(args.out)
    if recorded.seed is not None and seed != recorded.seed and made:
        _change_seed(args.out, recorded.seed, seed, options.reseed, move=record)
    generate = options.generate.model_copy(update={
        "seed": seed, **_recipe(args, recorded, made)})
    release = options.release.model_copy(update={"cutoffs": tuple(given) or (window.label,)})
    options = options.model_copy(update={"generate": generate, "release": release})
    if record:
        args.out.mkdir(parents=True, exist_ok=True)
        extensions = [*recorded.extensions, extension] if extension else None
        save_run_info(
            args.out, cutoff=window.label, until=window.until.isoformat(),
            extensions=extensions,
            cutoff_probes=_probes(recorded, [probe for probe in given.values() if probe]),
        )
    return RunContext(out=args.out, window=window, options=options)


def _with_recorded_snapshot(out: Path, options: BuildOptions) -> BuildOptions:
    """A run built from `--source DIR` goes on reading DIR when a later command leaves
    `--source` out (fetching instead would rewrite its manifest and find no articles)."""
    if options.source.source is not None:
        return options
    snapshot = built_from_snapshot(out)
    if snapshot is None:
        return options
    logging.getLogger(__name__).debug("%s: reading %s, the snapshot it was built from", out,
                                     snapshot)
    source = options.source.model_copy(update={"source": snapshot})
    return options.model_copy(update={"source": source})


def _recipe(args: argparse.Namespace, recorded: RunInfo, made: bool) -> dict[str, str]:
    """The recipe and known source of a run: as given, else as recorded (a resumed run goes on
    as it started). Another recipe or known source than the ones that made the candidates is
    refused (the candidates made stay as they are, and run.json must keep saying so)."""
    generation = recorded.generation
    recipe = args.prompts or (generation.recipe if generation else "connected")
    if made and generation:
        if recipe != generation.recipe:
            raise _mixes(args.out, "--prompts", generation.recipe, recipe, "recipes")
        known_source = args.known_source or generation.known_source
        if known_source != generation.known_source:
            raise _mixes(args.out, "--known-source", generation.known_source, known_source,
                         "known sources")
    chosen = {"prompts": recipe}
    if args.known_source is None and generation and generation.recipe == recipe:
        chosen["known_source"] = generation.known_source
    return chosen


def _mixes(out: Path, flag: str, old: str, new: str, what: str) -> UsageError:
    return UsageError(f"{out} was generated with {flag} {old}; {flag} {new} would mix two "
                      f"{what}' candidates: use another --out")


def _change_seed(out: Path, old: int, new: int, reseed: bool, move: bool) -> None:
    """A new seed would mix two seeds' candidates (two items for one event): refused, unless
    `--reseed` says to set the old ones aside and start afresh (`move`: now; not while only
    checking, or estimating)."""
    if not reseed:
        raise UsageError(
            f"{out} was generated with --seed {old}; --seed {new} would mix two seeds' "
            "candidates: use another --out, or add --reseed to set the old ones aside"
        )
    if not move:
        return
    set_aside = set_aside_candidates(out, old)
    logging.getLogger(__name__).warning(
        "--reseed: seed %d -> %d; %s", old, new,
        f"kept the old candidates as {', '.join(map(str, set_aside))}" if set_aside
        else "no candidates to set aside",
    )


def _refuse_before_writing(args: argparse.Namespace, options: BuildOptions) -> None:
    """What would stop the first stage at once, refused before --out is made or written: a
    release without --name (a usage error), a --source that is not there, the first stage's
    missing input (named before anything else, even a new run's missing --cutoff)."""
    plan = _plan(args.stage, options)
    if any(stage.name == "release" for stage in plan) and not options.release.name:
        raise UsageError(RELEASE_NEEDS_NAME)
    source = options.source.source
    if source is not None and not source.is_dir():
        raise SnapshotError(f"snapshot directory {source} does not exist")
    refuse_missing_inputs(plan[0], args.out, offline=source is not None)


class StageFailed(CuqaError):
    def __init__(self, stage: str, error: Exception) -> None:
        super().__init__(f"{stage} failed: {error}")
        self.exit_code = error.exit_code if isinstance(error, CuqaError) else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [DIFF]:
        from cuqa_builder.cli.diff import main as diff_main

        return diff_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    parsed = _options(parser, args, seed=0)  # every flag checked before anything runs

    def build(args: argparse.Namespace) -> int:
        # release reads only the run: a snapshot moved since is no reason to refuse it
        reads_snapshot = any(stage.name != "release" for stage in _plan(args.stage, parsed))
        options = _with_recorded_snapshot(args.out, parsed) if reads_snapshot else parsed
        if options.llm.estimate:  # before any call, and nothing written
            from cuqa_builder.stages.estimate import estimate_build

            ctx = _start_run(args, options, record=False)
            print(estimate_build(ctx, _plan(args.stage, ctx.options)))
            return 0
        _start_run(args, options, record=False)  # every refusal before --out is made
        args.out.mkdir(parents=True, exist_ok=True)
        plan = _plan(args.stage, options)
        writes = any(stage.writes for stage in plan)  # release writes elsewhere
        with run_lock(args.out, PROG, wait=args.wait_for_lock, read_only=not writes):
            ctx = _start_run(args, options)  # read again: a command before us may have changed it
            for stage in plan:
                try:
                    summary = run_stage(stage, ctx)
                except (KeyboardInterrupt, StageFailed, Paused):
                    raise
                except Unfinished as exc:  # what it did, then why it is not done
                    print(exc.summary)
                    raise StageFailed(stage.name, exc) from exc
                except Exception as exc:
                    raise StageFailed(stage.name, exc) from exc
                print(summary)
        return 0

    return run_command(PROG, args, build)


if __name__ == "__main__":
    sys.exit(main())
