"""`cuqa-build`: from a knowledge cutoff to a CuQA dataset, stage by stage."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from pathlib import Path

from cuqa_builder import __version__
from cuqa_builder.llm.settings import add_llm_arguments
from cuqa_builder.run import RunContext, load_run_info, save_run_info
from cuqa_builder.window import Window, WindowError

STAGES = ("fetch", "events", "generate", "validate", "release")
EPILOG = """\
stages (each reads the previous stage's file in --out, so any can be re-run alone):
  fetch     Wikipedia pages of the window -> OUT/pages/ + OUT/manifest.json
  events    pages -> OUT/events.jsonl (parsed, dated, entities filled); fetches first
            unless --source is given
  generate  events -> OUT/candidates.jsonl (Algorithm 1 of the Self-DC paper)
  validate  candidates -> verdicts on each candidate + OUT/cuqa.jsonl (items that passed)
  release   reviewed items -> output/NAME/ (cuqa.jsonl, schema.json, README.md card, stats)
  all       (fetch unless --source,) events, generate and validate, and release when
            --name is given

A killed run resumes: run the same command again.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuqa-build",
        description="Build CuQA compositional unknown questions from Wikipedia events dated "
        "after a model's knowledge cutoff.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    _add_window_arguments(parser)
    _add_run_arguments(parser)
    _add_source_arguments(parser)
    add_llm_arguments(parser)
    _add_check_arguments(parser)
    _add_release_arguments(parser)
    return parser


def _add_window_arguments(parser: argparse.ArgumentParser) -> None:
    window = parser.add_argument_group("window")
    window.add_argument(
        "--cutoff",
        help="the model's knowledge cutoff: YYYY-MM (end of that month) or YYYY-MM-DD; events "
        "dated after it are unknown (required for a new run, recorded in OUT/run.json)",
    )
    window.add_argument("--until", help="last day of the window, YYYY-MM[-DD] (default: today)")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    run = parser.add_argument_group("run")
    run.add_argument("--out", type=Path, required=True, help="run directory")
    run.add_argument(
        "--stage", choices=(*STAGES, "all"), default="all", help="stage to run (default: all)"
    )
    run.add_argument("--limit", type=_count, help="generate from at most N events")
    run.add_argument(
        "--seed", type=int, help="base random seed (default: the run's recorded seed, else 0)"
    )
    run.add_argument(
        "--hard", type=_count, default=0, help="also merge N pairs of easy items into hard ones"
    )
    run.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _add_source_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("Wikipedia source")
    where = source.add_mutually_exclusive_group()
    where.add_argument(
        "--source", type=Path, help="read a snapshot directory (NAME.wiki + NAME.json) offline"
    )
    where.add_argument(
        "--wiki-api",
        default="https://en.wikipedia.org/w/api.php",
        help="MediaWiki api.php URL (default: English Wikipedia)",
    )
    source.add_argument(
        "--sources",
        default="year,portal",
        help="page kinds: year articles, Current events portal pages (default: year,portal)",
    )
    source.add_argument(
        "--revisions", type=Path, help="manifest.json of an earlier run: fetch those revisions"
    )
    source.add_argument(
        "--contact",
        help="contact put in the User-Agent (default: $CUQA_CONTACT or the project's URL)",
    )
    source.add_argument(
        "--wiki-interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="minimum pause between two MediaWiki API requests (default: 1.0)",
    )
    source.add_argument(
        "--spacy-model",
        default="en_core_web_sm",
        help="spaCy pipeline for NER (default: %(default)s)",
    )


def _add_check_arguments(parser: argparse.ArgumentParser) -> None:
    checks = parser.add_argument_group("validation and probes")
    checks.add_argument("--probe-model", help="target model asked closed-book by the probes "
                        "(local[:NAME]: an embedded model)")
    checks.add_argument(
        "--probe-base-url", help="endpoint of the probe model (default: --base-url)"
    )
    checks.add_argument(
        "--judge-model", help="LLM judge for probe answers (default: normalised match)"
    )
    checks.add_argument("--min-question-words", type=int, metavar="N", default=4,
                        help="shortest question kept, in words (default: 4)")
    checks.add_argument("--max-question-words", type=int, metavar="N", default=60,
                        help="longest question kept, in words (default: 60)")
    checks.add_argument("--max-answer-words", type=int, metavar="N", default=10,
                        help="longest answer kept, in words (default: 10)")


def _add_release_arguments(parser: argparse.ArgumentParser) -> None:
    release = parser.add_argument_group("release")
    release.add_argument("--name", help="dataset name: writes output/NAME/")
    release.add_argument(
        "--output-root",
        type=Path,
        default=Path("output"),
        help="where releases go (default: output)",
    )


def _count(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {value}")
    return value


def _window(args: argparse.Namespace) -> Window:
    recorded = load_run_info(args.out)
    cutoff = args.cutoff or recorded.get("cutoff")
    if not cutoff:
        raise WindowError("--cutoff is required for a new run directory")
    return Window.parse(cutoff, args.until or recorded.get("until"))


def _stage_runner(name: str) -> Callable[[RunContext], str]:
    # Imported lazily so `--help` and the events stage never load the LLM stack.
    from importlib import import_module

    return import_module(f"cuqa_builder.stages.{name}").run


def _plan(args: argparse.Namespace) -> list[str]:
    if args.stage == "events":
        return ["events"] if args.source else ["fetch", "events"]
    if args.stage != "all":
        return [args.stage]
    plan = (
        ["events", "generate", "validate"]
        if args.source
        else [
            "fetch",
            "events",
            "generate",
            "validate",
        ]
    )
    return [*plan, "release"] if args.name else plan


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    # The HTTP clients log every request at INFO, which would drown the progress bars.
    for client_logger in ("httpx", "httpx2"):  # the names the openai client's HTTP stack uses
        logging.getLogger(client_logger).setLevel(
            logging.DEBUG if args.verbose else logging.WARNING
        )
    try:
        window = _window(args)
    except WindowError as exc:
        print(f"cuqa-build: error: {exc}", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    if args.seed is None:  # a resumed run keeps the seed it started with
        args.seed = load_run_info(args.out).get("seed", 0)
    save_run_info(args.out, cutoff=window.label, until=window.until.isoformat(), seed=args.seed)
    ctx = RunContext(out=args.out, window=window, options=args)
    for stage in _plan(args):
        try:
            summary = _stage_runner(stage)(ctx)
        except KeyboardInterrupt:
            print(
                f"\ncuqa-build: interrupted in {stage}; run the same command to resume",
                file=sys.stderr,
            )
            return 130
        except Exception as exc:  # a stage failed for good: one clear line, no traceback
            if args.verbose:
                raise
            print(f"cuqa-build: {stage} failed: {exc}", file=sys.stderr)
            return 1
        print(summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
