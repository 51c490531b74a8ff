"""`cuqa-eval`: run Self-DC and the baselines on a dataset and report as the Self-DC paper does.

`cuqa-eval --data FILE --method M --out DIR` runs one method (the `run` subcommand is implied);
`index`, `gap`, `sweep` and `report` are the other subcommands.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext

from cuqa_builder import __version__
from cuqa_builder.cli.eval import cutoff, gap, index, report, reproduce, run, sweep
from cuqa_builder.cli.eval.arguments import solver_options
from cuqa_builder.cli.eval.session import asked
from cuqa_builder.cli.flags import options_from
from cuqa_builder.cli.shell import CommandParser, run_command
from cuqa_builder.cutoff_estimate import CutoffProbeOptions
from cuqa_builder.llm.settings import LLMOptions, resolve_settings
from cuqa_builder.run import LLM_CACHE
from cuqa_builder.run_lock import run_lock

PROG = "cuqa-eval"
SUBCOMMANDS = ("run", "index", "gap", "sweep", "report", "reproduce", "cutoff")
# They resume from what OUT holds, so one at a time may write it (index and report replace
# their output whole).
WRITING_OUT = ("run", "gap", "sweep", "reproduce", "cutoff")
EPILOG = """\
subcommands (run is the default, so `cuqa-eval --data ... --method ... --out ...` works):
  run     one method -> OUT/predictions.jsonl (traces, counts), OUT/metrics.json
  index   events.jsonl -> a BM25 index directory (for --corpus)
  gap     compositionality gap: composed vs sub-questions -> OUT/gap.json
  sweep   alpha | beta | depth | top-k, one run per value in OUT/PARAM=VALUE/ -> OUT/sweep.json
  report  run, sweep and gap directories -> a Markdown report with tables and PNG plots
  reproduce TABLE  a result table of the paper (table1, table2, table12, table13): every
          method with the paper's settings, one run each in OUT/ROW/ -> OUT/TABLE.md
  cutoff  closed-book accuracy by event month -> the model's estimated knowledge cutoff

A killed run resumes: run the same command again. One command at a time writes an OUT: a
second one on it is refused (or waits, with --wait-for-lock). `cuqa-eval SUBCOMMAND -h` for
its flags.
"""



def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
        description="Evaluate Self-DC and the baselines of the Self-DC paper on CuQA, FreshQA "
        "or any question/answers file.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    for subcommand in (run, gap, sweep, index, reproduce, report, cutoff):
        subcommand.add_parser(commands)
    return parser


def with_default_command(argv: list[str]) -> list[str]:
    """`cuqa-eval --data ...` means `cuqa-eval run --data ...`."""
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        return ["run", *argv]
    return argv



COMMANDS: dict[str, Callable[[argparse.Namespace], Awaitable[str]]] = {
    "run": run.command, "gap": gap.command, "sweep": sweep.command, "index": index.command,
    "report": report.command, "reproduce": reproduce.command, "cutoff": cutoff.command,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    argv = with_default_command(sys.argv[1:] if argv is None else argv)
    if not argv:
        parser.print_help(sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if hasattr(args, "concurrency"):  # a command that calls an LLM: its flags checked up front
        args.llm_options = options_from(parser, LLMOptions, args)
    if args.command == "cutoff":
        args.probe_options = options_from(parser, CutoffProbeOptions, args)

    def evaluate_command(args: argparse.Namespace) -> int:
        if getattr(args, "llm_options", None) and args.llm_options.estimate:
            from cuqa_builder.evaluation.estimate import estimate_evaluation

            settings = resolve_settings(args.llm_options, default_cache=args.out / LLM_CACHE)
            print(asyncio.run(estimate_evaluation(asked(args), solver_options(args), settings)))
            return 0
        with _out_lock(args):
            print(asyncio.run(COMMANDS[args.command](args)))
        return 0

    return run_command(PROG, args, evaluate_command)


def _out_lock(args: argparse.Namespace) -> AbstractContextManager[None]:
    if args.command not in WRITING_OUT:
        return nullcontext()
    args.out.mkdir(parents=True, exist_ok=True)
    return run_lock(args.out, PROG, wait=args.wait_for_lock)


if __name__ == "__main__":
    sys.exit(main())
