"""`cuqa-eval gap`: the compositionality gap, composed vs sub-questions -> OUT/gap.json."""

from __future__ import annotations

import argparse

from cuqa_builder.cli.eval.arguments import evaluation_arguments
from cuqa_builder.cli.eval.session import open_session
from cuqa_builder.evaluation.gap import evaluate_gap
from cuqa_builder.evaluation.outputs import GAP


def add_parser(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("gap", parents=[evaluation_arguments(None)],
                        help="compositionality gap of a method")


async def command(args: argparse.Namespace) -> str:
    async with open_session(args) as session:
        result, composed, parts = await evaluate_gap(session.evaluation, session.items, args.out)
        session.finished += [composed.metrics, parts.metrics]
    gap = "n/a (no item has all its sub-questions right)" if result.gap is None else (
        f"{100 * result.gap:.1f}%")
    return (f"compositionality gap {gap}: {result.subs_right_composed_wrong} of "
            f"{result.subs_all_right} items with every sub-question right were answered wrong "
            f"({result.items} items) -> {args.out / GAP}")
