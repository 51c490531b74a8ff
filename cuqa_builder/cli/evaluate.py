"""`cuqa-eval`: run Self-DC and the baselines on a dataset and report as the Self-DC paper does.

`cuqa-eval --data FILE --method M --out DIR` runs one method (the `run` subcommand is implied);
`index`, `gap`, `sweep` and `report` are the other subcommands.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cuqa_builder import __version__
from cuqa_builder.cli.flags import add_flags, options_from
from cuqa_builder.cli.shell import add_verbosity_flags, run_command
from cuqa_builder.evaluation.datasets import load_items
from cuqa_builder.evaluation.gap import GAP, evaluate_gap
from cuqa_builder.evaluation.harness import Evaluation, evaluate
from cuqa_builder.evaluation.records import EvalItem
from cuqa_builder.evaluation.sweep import SWEEP, parse_values, sweep
from cuqa_builder.llm.estimate import compare
from cuqa_builder.llm.settings import LLMOptions, LLMSettings, resolve_settings
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.retrieval.bm25 import BM25Retriever, CorpusError, open_corpus
from cuqa_builder.retrieval.wiki_search import WikiSearchRetriever
from cuqa_builder.run import LLM_CACHE
from cuqa_builder.solvers import METHODS, NO_RETRIEVAL, get_solver
from cuqa_builder.solvers.base import Retriever, SolverOptions
from cuqa_builder.wiki.client import MediaWikiClient

SUBCOMMANDS = ("run", "index", "gap", "sweep", "report")
INDEX_CACHE = "index"  # OUT/index: the BM25 index built from an events.jsonl --corpus
EPILOG = """\
subcommands (run is the default, so `cuqa-eval --data ... --method ... --out ...` works):
  run     one method -> OUT/predictions.jsonl (traces, counts), OUT/metrics.json
  index   events.jsonl -> a BM25 index directory (for --corpus)
  gap     compositionality gap: composed vs sub-questions -> OUT/gap.json
  sweep   alpha | beta | depth | top-k, one run per value in OUT/PARAM=VALUE/ -> OUT/sweep.json
  report  run, sweep and gap directories -> a Markdown report with tables and PNG plots

A killed run resumes: run the same command again. `cuqa-eval SUBCOMMAND -h` for its flags.
"""


# --- arguments ---------------------------------------------------------------------------


def _evaluation_arguments(method_default: str | None) -> argparse.ArgumentParser:
    """Flags shared by run, gap and sweep."""
    parent = argparse.ArgumentParser(add_help=False)
    data = parent.add_argument_group("data")
    data.add_argument("--data", type=Path, required=True,
                      help="CuQA JSONL, FreshQA CSV, or JSONL with question + answers")
    data.add_argument("--split", choices=("test", "dev"), help="FreshQA split (default: both)")
    data.add_argument("--limit", type=int, help="only the first N items")
    data.add_argument("--out", type=Path, required=True, help="output directory")

    method = parent.add_argument_group("method")
    method.add_argument("--method", choices=list(METHODS), default=method_default,
                        required=method_default is None, help="solver")
    method.add_argument("--confidence", choices=("verb", "prob"), help="Self-DC confidence")
    method.add_argument("--alpha", type=float, help="Self-DC alpha (default: 0.4)")
    method.add_argument("--beta", type=float, help="Self-DC beta (default: 0.1)")
    method.add_argument("--depth", type=int, help="Self-DC max depth t (default: 3)")
    method.add_argument("--raisf-depth", type=int, help="RA-ISF depth threshold (default: 3)")
    method.add_argument("--top-k", type=int, help="passages per retrieval (default: 3)")

    retrieval = parent.add_argument_group("retrieval")
    retrieval.add_argument("--retriever", choices=("bm25", "wiki"), default="bm25",
                           help="BM25 over --corpus, or live Wikipedia search (default: bm25)")
    retrieval.add_argument("--corpus", type=Path,
                           help="BM25 index directory, or an events.jsonl (indexed into OUT/index)")
    retrieval.add_argument("--wiki-api", default="https://en.wikipedia.org/w/api.php",
                           help="MediaWiki api.php for --retriever wiki")
    retrieval.add_argument("--contact", help="contact put in the User-Agent for --retriever wiki")

    judge = parent.add_argument_group("judge")
    judge.add_argument("--judge-model",
                       help="model that judges Acc, at the same endpoint (default: no Acc)")
    add_flags(parent.add_argument_group("LLM"), LLMOptions)
    parent.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    add_verbosity_flags(parent)
    return parent


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuqa-eval",
        description="Evaluate Self-DC and the baselines of the Self-DC paper on CuQA, FreshQA "
        "or any question/answers file.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="SUBCOMMAND")
    commands.add_parser("run", parents=[_evaluation_arguments(None)], help="run one method")
    commands.add_parser("gap", parents=[_evaluation_arguments(None)],
                        help="compositionality gap of a method")
    sweep = commands.add_parser("sweep", parents=[_evaluation_arguments("self-dc")],
                                help="sweep one parameter (the paper's section 6)")
    sweep.add_argument("--param", choices=("alpha", "beta", "depth", "top-k"), required=True)
    sweep.add_argument("--values", nargs="+", metavar="V",
                       help="values (default: the paper's grid for the parameter)")

    index = commands.add_parser("index", help="build a BM25 index from events.jsonl")
    index.add_argument("--events", type=Path, required=True, help="a run's events.jsonl")
    index.add_argument("--out", type=Path, required=True, help="index directory")

    report = commands.add_parser("report", help="Markdown report with tables and plots")
    report.add_argument("dirs", nargs="+", type=Path, metavar="RUN_DIR")
    report.add_argument("--out", type=Path, required=True, help="report file (.md)")
    return parser


def with_default_command(argv: list[str]) -> list[str]:
    """`cuqa-eval --data ...` means `cuqa-eval run --data ...`."""
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        return ["run", *argv]
    return argv


def solver_options(args: argparse.Namespace) -> SolverOptions:
    given = {"confidence": args.confidence, "alpha": args.alpha, "beta": args.beta,
             "depth": args.depth, "raisf_depth": args.raisf_depth, "top_k": args.top_k}
    return SolverOptions.checked(**{k: v for k, v in given.items() if v is not None})


# --- resources: retriever and gateways ---------------------------------------------------


def open_retriever(
    args: argparse.Namespace, stack: AsyncExitStack
) -> tuple[Retriever | None, dict[str, Any] | None]:
    """The retriever the method needs (None for methods that never retrieve) and how it is
    recorded in the run settings; what it holds open is closed with `stack`."""
    if args.method in NO_RETRIEVAL:
        return None, None
    if args.retriever == "wiki":
        client = MediaWikiClient(args.wiki_api, contact=args.contact)
        stack.callback(client.close)
        return WikiSearchRetriever(client), {"name": "wiki", "api": args.wiki_api}
    if args.corpus is None:
        raise CorpusError(f"--method {args.method} retrieves: give --corpus (an index "
                          "directory or events.jsonl) or --retriever wiki")
    retriever = open_corpus(args.corpus, cache_dir=args.out / INDEX_CACHE)
    return retriever, {"name": "bm25", "corpus_sha256": retriever.corpus_sha256}


def judge_settings(settings: LLMSettings, judge_model: str) -> LLMSettings:
    if settings.uses_local_model:
        return settings.model_copy(update={"local": judge_model})
    return settings.model_copy(update={"model": judge_model})


@dataclass
class Session:
    evaluation: Evaluation
    items: list[EvalItem]


@asynccontextmanager
async def open_session(args: argparse.Namespace) -> AsyncIterator[Session]:
    """Items, retriever, gateway (and the judge's) for one evaluation command."""
    # Imported here: `openai` takes ~1.5 s to import, which --help and index need not pay.
    from cuqa_builder.llm.gateway import open_gateway

    items = load_items(args.data, split=args.split, limit=args.limit)
    options = solver_options(args)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = resolve_settings(args.llm_options, default_cache=args.out / LLM_CACHE,
                                progress=not args.quiet)
    async with AsyncExitStack() as stack:
        retriever, retriever_info = open_retriever(args, stack)
        gateway = await stack.enter_async_context(open_gateway(settings))
        judge_gateway = None
        if args.judge_model:
            judge_gateway = gateway if args.judge_model == gateway.model else (
                await stack.enter_async_context(
                    open_gateway(judge_settings(settings, args.judge_model))
                )
            )
        run_settings = {
            "method": args.method, "options": options.model_dump(), "model": gateway.model,
            "data": str(args.data.resolve()), "split": args.split, "retriever": retriever_info,
            "judge_model": args.judge_model,
        }
        evaluation = Evaluation(
            solver=get_solver(args.method), gateway=gateway, retriever=retriever,
            options=options, settings=run_settings, judge_gateway=judge_gateway,
            items_in_flight=settings.jobs_in_flight(4), progress=not args.quiet,
        )
        # What the run was expected to spend, for the summary (a dry run: no call).
        from cuqa_builder.evaluation.estimate import plan_evaluation

        plan = (await plan_evaluation(args, options, settings))[0]
        yield Session(evaluation, items)
        print(_usage_line(gateway.stats), file=sys.stderr)
        print(compare(plan, gateway.stats), file=sys.stderr)


def _usage_line(stats: GatewayStats) -> str:
    return (f"LLM: {stats.calls} calls, {stats.cache_hits} cache hits, {stats.failures} "
            f"failures, {stats.prompt_tokens + stats.completion_tokens} tokens, "
            f"${stats.cost:.4f}, {stats.wall_s:.1f} s")


# --- commands ----------------------------------------------------------------------------


async def command_run(args: argparse.Namespace) -> str:
    async with open_session(args) as session:
        outcome = await evaluate(session.evaluation, session.items, args.out)
    return outcome.summary(args.out)


async def command_gap(args: argparse.Namespace) -> str:
    async with open_session(args) as session:
        result, _, _ = await evaluate_gap(session.evaluation, session.items, args.out)
    gap = "n/a (no item has all its sub-questions right)" if result.gap is None else (
        f"{100 * result.gap:.1f}%")
    return (f"compositionality gap {gap}: {result.subs_right_composed_wrong} of "
            f"{result.subs_all_right} items with every sub-question right were answered wrong "
            f"({result.items} items) -> {args.out / GAP}")


async def command_sweep(args: argparse.Namespace) -> str:
    values = parse_values(args.param, args.values)
    async with open_session(args) as session:
        rows = await sweep(session.evaluation, session.items, args.out, args.param, values)
    lines = [f"{args.param}={r['value']:g}: em {r['em']:.3f} f1 {r['f1']:.3f}"
             + (f" acc {r['acc']:.3f}" if r["acc"] is not None else "")
             + f", retrieval calls {r['retrieval_calls']['total']:g}" for r in rows]
    return "\n".join([*lines, f"-> {args.out / SWEEP}"])


async def command_index(args: argparse.Namespace) -> str:
    started = time.perf_counter()
    retriever = BM25Retriever.from_events(args.events)
    retriever.save(args.out)
    return (f"indexed {len(retriever.passages)} events in {time.perf_counter() - started:.1f} s "
            f"-> {args.out}")


async def command_report(args: argparse.Namespace) -> str:
    from cuqa_builder.evaluation.report import write_report  # matplotlib: ~1 s to import

    skipped = write_report(args.dirs, args.out)
    return "\n".join([f"report -> {args.out}", *(f"  skipped {why}" for why in skipped)])


COMMANDS: dict[str, Callable[[argparse.Namespace], Awaitable[str]]] = {
    "run": command_run, "gap": command_gap, "sweep": command_sweep, "index": command_index,
    "report": command_report,
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

    def evaluate_command(args: argparse.Namespace) -> int:
        if getattr(args, "llm_options", None) and args.llm_options.estimate:
            from cuqa_builder.evaluation.estimate import estimate_evaluation

            print(asyncio.run(estimate_evaluation(args, solver_options(args))))
            return 0
        print(asyncio.run(COMMANDS[args.command](args)))
        return 0

    return run_command("cuqa-eval", args, evaluate_command)


if __name__ == "__main__":
    sys.exit(main())
