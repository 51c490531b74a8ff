"""`cuqa-eval cutoff`: closed-book accuracy by event month -> the model's estimated cutoff."""

from __future__ import annotations

import argparse
from pathlib import Path

from cuqa_builder.cli.flags import add_flags, add_wait_for_lock_flag
from cuqa_builder.cli.shell import add_verbosity_flags
from cuqa_builder.cutoff_estimate import ESTIMATION_RULE, CutoffProbeOptions
from cuqa_builder.llm.settings import LLMOptions


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "cutoff", help="estimate a model's knowledge cutoff from its accuracy by event month",
        description="Ask the model closed-book about a sample of each month's events and "
        f"estimate where its knowledge ends: {ESTIMATION_RULE}. `cuqa-build --cutoff "
        "auto:MODEL` then uses the estimate.",
    )
    parser.add_argument("--events", type=Path, required=True,
                        help="a run's events.jsonl (built with a cutoff well before the "
                        "model's claimed one)")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    add_flags(parser.add_argument_group("probe"), CutoffProbeOptions)
    add_flags(parser.add_argument_group("LLM"), LLMOptions)
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar and no INFO log lines")
    add_wait_for_lock_flag(parser)
    add_verbosity_flags(parser)



async def command(args: argparse.Namespace) -> str:
    from cuqa_builder.evaluation.cutoff_probe import probe_cutoff, summarize

    result = await probe_cutoff(args.events, args.out, args.probe_options, args.llm_options,
                                progress=not args.quiet)
    return summarize(result, args.out)
