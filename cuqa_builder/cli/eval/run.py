"""`cuqa-eval run`: one method -> OUT/predictions.jsonl (traces, counts), OUT/metrics.json."""

from __future__ import annotations

import argparse

from cuqa_builder.cli.eval.arguments import evaluation_arguments
from cuqa_builder.cli.eval.session import open_session
from cuqa_builder.evaluation.harness import evaluate


def add_parser(commands: argparse._SubParsersAction) -> None:
    commands.add_parser("run", parents=[evaluation_arguments(None)], help="run one method")


async def command(args: argparse.Namespace) -> str:
    async with open_session(args) as session:
        outcome = await evaluate(session.evaluation, session.items, args.out)
        session.finished.append(outcome.metrics)
    return outcome.summary(args.out)
