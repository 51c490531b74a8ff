"""`cuqa-eval reproduce TABLE`: a result table of the paper, every method with its
settings, one run each in OUT/ROW/ -> OUT/TABLE.md."""

from __future__ import annotations

import argparse

from cuqa_builder.cli.eval.arguments import evaluation_arguments
from cuqa_builder.cli.eval.session import open_session
from cuqa_builder.evaluation.reproduce import TABLES, reproduce
from cuqa_builder.jsonio import atomic_write_text


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "reproduce", parents=[evaluation_arguments("self-dc", with_method=False)],
        help="run a result table of the paper with its settings")
    parser.add_argument("table", choices=list(TABLES),
                        help="table1/table12: gpt-3.5-turbo-1106 on CuQA/FreshQA; "
                        "table2/table13: gpt-3.5-turbo-instruct (completions API)")
    # The paper retrieves the top 3 Google results (section 5.2).
    parser.set_defaults(retriever="web")


async def command(args: argparse.Namespace) -> str:
    from cuqa_builder.evaluation.report import table_report  # matplotlib: ~1 s to import

    spec = TABLES[args.table]
    args.api = args.api or spec.api
    async with open_session(args) as session:
        results = await reproduce(session.evaluation, session.items, args.out, spec)
        session.finished += [outcome.metrics for _, outcome in results]
    path = args.out / f"{args.table.upper()}.md"
    atomic_write_text(path, table_report(spec, [(row, o.metrics) for row, o in results]))
    failed = sum(o.failed for _, o in results)
    lines = [f"{row.label}: {o.summary(args.out / row.slug)}" for row, o in results]
    note = [f"{failed} items failed: run the same command again to retry them"] if failed else []
    return "\n".join([*lines, *note, f"{spec.name} -> {path}"])
