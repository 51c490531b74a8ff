"""`cuqa-eval sweep`: one run per value of alpha, beta, depth or top-k -> OUT/sweep.json."""

from __future__ import annotations

import argparse

from cuqa_builder.cli.eval.arguments import evaluation_arguments
from cuqa_builder.cli.eval.session import open_session
from cuqa_builder.evaluation.outputs import SWEEP
from cuqa_builder.evaluation.sweep import parse_values, sweep


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser("sweep", parents=[evaluation_arguments("self-dc")],
                                 help="sweep one parameter (the paper's section 6)")
    parser.add_argument("--param", choices=("alpha", "beta", "depth", "top-k"), required=True)
    parser.add_argument("--values", nargs="+", metavar="V",
                        help="values (default: the paper's grid for the parameter)")


async def command(args: argparse.Namespace) -> str:
    values = parse_values(args.param, args.values)
    async with open_session(args) as session:
        rows = await sweep(session.evaluation, session.items, args.out, args.param, values)
        session.finished += rows
    lines = [f"{args.param}={r.value:g}: cover-em {r.cover_em:.3f} em {r.em:.3f} f1 {r.f1:.3f}"
             + (f" acc {r.acc:.3f}" if r.acc is not None else "")
             + f", retrieval calls {r.retrieval_calls.total:g}" for r in rows]
    return "\n".join([*lines, f"-> {args.out / SWEEP}"])
