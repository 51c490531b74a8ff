"""`cuqa-eval report`: run, sweep and gap directories -> a Markdown report with plots."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("report", help="Markdown report with tables and plots")
    parser.add_argument("dirs", nargs="+", type=Path, metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, required=True, help="report file (.md)")


async def command(args: argparse.Namespace) -> str:
    from cuqa_builder.evaluation.report import write_report  # matplotlib: ~1 s to import

    skipped = write_report(args.dirs, args.out)
    return "\n".join([f"report -> {args.out}", *(f"  skipped {why}" for why in skipped)])
