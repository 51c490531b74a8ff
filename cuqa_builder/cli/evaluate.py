"""`cuqa-eval`: run Self-DC and the baselines on a dataset and report as the Self-DC paper does.

`cuqa-eval --data FILE --method M --out DIR` runs one method (the `run` subcommand is implied);
`index`, `gap`, `sweep` and `report` are the other subcommands.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from cuqa_builder import __version__
from cuqa_builder.cli.flags import add_flags, add_wait_for_lock_flag, options_from, positive_int
from cuqa_builder.cli.shell import CommandParser, add_verbosity_flags, run_command
from cuqa_builder.cutoff_estimate import ESTIMATION_RULE, CutoffProbeOptions
from cuqa_builder.errors import UsageError
from cuqa_builder.evaluation.datasets import EvalItem, load_items
from cuqa_builder.evaluation.estimate import EvalCommand
from cuqa_builder.evaluation.gap import evaluate_gap
from cuqa_builder.evaluation.harness import Evaluation, evaluate
from cuqa_builder.evaluation.outputs import (
    GAP,
    METRICS,
    SWEEP,
    EvalSettings,
    RetrieverInfo,
    Scores,
    Scoring,
)
from cuqa_builder.evaluation.reproduce import TABLES, reproduce
from cuqa_builder.evaluation.sweep import parse_values, sweep
from cuqa_builder.jsonio import atomic_write_text
from cuqa_builder.judge import DEFAULT_JUDGE_PROMPT, JUDGE_PROMPTS
from cuqa_builder.llm.estimate import compare
from cuqa_builder.llm.settings import LLMOptions, LLMSettings, resolve_settings
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.retrieval.bm25 import BM25Retriever, CorpusError, event_passages, open_corpus
from cuqa_builder.retrieval.pages import PASSAGE_WORDS, read_page_corpus
from cuqa_builder.retrieval.search_cache import SearchCache
from cuqa_builder.retrieval.types import Retriever
from cuqa_builder.retrieval.web import (
    SERPER_COST,
    SERPER_KEY_ENV,
    SERPER_URL,
    SearchService,
    SearxNG,
    Serper,
    WebSearchRetriever,
)
from cuqa_builder.retrieval.wiki_search import WikiSearchRetriever
from cuqa_builder.run import LLM_CACHE
from cuqa_builder.run_lock import run_lock
from cuqa_builder.solvers import METHODS, NO_RETRIEVAL, get_solver
from cuqa_builder.solvers.base import SolverOptions
from cuqa_builder.wiki.client import MediaWikiClient

PROG = "cuqa-eval"
SUBCOMMANDS = ("run", "index", "gap", "sweep", "report", "reproduce", "cutoff")
# They resume from what OUT holds, so one at a time may write it (index and report replace
# their output whole).
WRITING_OUT = ("run", "gap", "sweep", "reproduce", "cutoff")
INDEX_CACHE = "index"  # OUT/index: the BM25 index built from an events.jsonl --corpus
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


# --- arguments ---------------------------------------------------------------------------



def _evaluation_arguments(
    method_default: str | None, with_method: bool = True
) -> argparse.ArgumentParser:
    """Flags shared by run, gap, sweep and reproduce (which sets the methods itself)."""
    parent = argparse.ArgumentParser(add_help=False)
    data = parent.add_argument_group("data")
    data.add_argument("--data", type=Path, required=True,
                      help="CuQA JSONL, FreshQA CSV, or JSONL with question + answers")
    data.add_argument("--split", choices=("test", "dev"), help="FreshQA split (default: both)")
    data.add_argument("--limit", type=positive_int, help="only the first N items (N >= 1)")
    data.add_argument("--out", type=Path, required=True, help="output directory")

    if with_method:
        _method_arguments(parent, method_default)
    else:
        parent.set_defaults(method=method_default, confidence=None, alpha=None, beta=None,
                            depth=None, self_dc_dependent=None, raisf_depth=None, top_k=None)

    _retrieval_arguments(parent)
    _scoring_and_judge_arguments(parent)
    add_flags(parent.add_argument_group("LLM"), LLMOptions)
    endpoint = parent.add_argument_group("LLM API")
    endpoint.add_argument("--api", choices=("chat", "completions"),
                          help="the endpoint's chat API, or the legacy completions API of "
                          "instruct models such as gpt-3.5-turbo-instruct, the paper's second "
                          "backbone (token logprobs for --confidence prob on both; default: "
                          "chat, or what the reproduced table used)")
    endpoint.add_argument("--judge-api", choices=("chat", "completions"), default="chat",
                          help="the API of --judge-model (default: chat; the paper always "
                          "judges with gpt-3.5-turbo-1106)")
    parent.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar and no INFO log lines")
    add_wait_for_lock_flag(parent)
    add_verbosity_flags(parent)
    return parent


def _method_arguments(parent: argparse.ArgumentParser, method_default: str | None) -> None:
    method = parent.add_argument_group("method")
    method.add_argument("--method", choices=list(METHODS), default=method_default,
                        required=method_default is None, help="solver")
    method.add_argument("--confidence", choices=("verb", "prob"), help="Self-DC confidence")
    method.add_argument("--alpha", type=float, help="Self-DC alpha (default: 0.4)")
    method.add_argument("--beta", type=float, help="Self-DC beta (default: 0.1)")
    method.add_argument("--depth", type=int, help="Self-DC max depth t (default: 3)")
    method.add_argument("--self-dc-dependent", choices=("fill", "literal"),
                        help="Self-DC sub-questions that refer to an earlier one's answer "
                        "(\"#1\"): fill, replace \"#k\" by sub-question k's answer before "
                        "asking and retrieving (default; our deviation: the paper's prompt asks "
                        "for independent parts, but models write dependent ones); literal, ask "
                        "them as written, as the paper's Figure 3 does")
    method.add_argument("--raisf-depth", type=int, help="RA-ISF depth threshold (default: 3)")
    method.add_argument("--top-k", type=int, help="passages per retrieval (default: 3)")


def _retrieval_arguments(parent: argparse.ArgumentParser) -> None:
    retrieval = parent.add_argument_group("retrieval")
    retrieval.add_argument("--retriever", choices=("bm25", "wiki", "web"), default="bm25",
                           help="BM25 over --corpus, live Wikipedia search, or web search "
                           "results like the paper's Google retriever (default: bm25; web "
                           "for reproduce)")
    retrieval.add_argument("--corpus", type=Path,
                           help="BM25 index directory, or an events.jsonl (indexed into OUT/index)")
    retrieval.add_argument("--exclude-source-event", action="store_true",
                           help="never retrieve a question's own source event from --corpus "
                           "(measures how much finding it helps; CuQA items name their event)")
    retrieval.add_argument("--wiki-api", default="https://en.wikipedia.org/w/api.php",
                           help="MediaWiki api.php for --retriever wiki")
    retrieval.add_argument("--contact", help="contact put in the User-Agent for --retriever wiki")
    retrieval.add_argument("--web-service", choices=("serper", "searxng"), default="serper",
                           help="--retriever web: Google results through Serper (key in "
                           f"${SERPER_KEY_ENV}), or a SearXNG instance's JSON API "
                           "(default: serper)")
    retrieval.add_argument("--web-api", metavar="URL",
                           help=f"the search API's base URL (default for serper: {SERPER_URL}; "
                           "required for searxng, e.g. http://127.0.0.1:8888)")
    retrieval.add_argument("--search-cost", type=float, metavar="USD",
                           help=f"price of one search (default: {SERPER_COST:g} for serper, "
                           "0 for searxng); searches are cached with the LLM calls")


def _scoring_and_judge_arguments(parent: argparse.ArgumentParser) -> None:
    scoring = parent.add_argument_group("scoring (cover-em, em, f1; see docs/evaluation.md)")
    scoring.add_argument("--no-aliases", dest="aliases", action="store_false",
                         help="score against a CuQA item's answer only, not its answer_aliases "
                         "(Wikipedia titles of the answer entity; counted by default)")
    scoring.add_argument("--yes-no-first-word", action="store_true",
                         help="em/f1: against a yes/no gold, read a prediction opening with yes "
                         "or no as that word (default: off, SQuAD's strict reading)")

    judge = parent.add_argument_group("judge")
    judge.add_argument("--judge-model",
                       help="model that judges Acc, at the same endpoint (default: no Acc)")
    judge.add_argument("--judge-prompt", choices=list(JUDGE_PROMPTS),
                       default=DEFAULT_JUDGE_PROMPT,
                       help="iter-retgen: ITER-RETGEN's prompt word for word, judging the "
                       "model's whole final output, as the paper's Acc (default); reworded: "
                       "our wording, judging the short answer")


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
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

    index = commands.add_parser(
        "index", help="build a BM25 index from events.jsonl and/or folders of pages")
    index.add_argument("--events", type=Path, help="a run's events.jsonl (one passage per event)")
    index.add_argument("--pages", type=Path, action="append", default=[], metavar="DIR",
                       help="a folder of pages in the snapshot format (NAME.wiki + NAME.json), "
                       "e.g. the entity articles as of the cutoff, split into passages: the "
                       "known hop's documents (repeatable)")
    index.add_argument("--passage-words", type=positive_int, default=PASSAGE_WORDS,
                       help=f"words per page passage (default: {PASSAGE_WORDS})")
    index.add_argument("--out", type=Path, required=True, help="index directory")

    reproduce = commands.add_parser(
        "reproduce", parents=[_evaluation_arguments("self-dc", with_method=False)],
        help="run a result table of the paper with its settings")
    reproduce.add_argument("table", choices=list(TABLES),
                           help="table1/table12: gpt-3.5-turbo-1106 on CuQA/FreshQA; "
                           "table2/table13: gpt-3.5-turbo-instruct (completions API)")
    # The paper retrieves the top 3 Google results (section 5.2).
    reproduce.set_defaults(retriever="web")

    report = commands.add_parser("report", help="Markdown report with tables and plots")
    report.add_argument("dirs", nargs="+", type=Path, metavar="RUN_DIR")
    report.add_argument("--out", type=Path, required=True, help="report file (.md)")

    _add_cutoff_parser(commands)
    return parser


def _add_cutoff_parser(commands: argparse._SubParsersAction) -> None:
    cutoff = commands.add_parser(
        "cutoff", help="estimate a model's knowledge cutoff from its accuracy by event month",
        description="Ask the model closed-book about a sample of each month's events and "
        f"estimate where its knowledge ends: {ESTIMATION_RULE}. `cuqa-build --cutoff "
        "auto:MODEL` then uses the estimate.",
    )
    cutoff.add_argument("--events", type=Path, required=True,
                        help="a run's events.jsonl (built with a cutoff well before the "
                        "model's claimed one)")
    cutoff.add_argument("--out", type=Path, required=True, help="output directory")
    add_flags(cutoff.add_argument_group("probe"), CutoffProbeOptions)
    add_flags(cutoff.add_argument_group("LLM"), LLMOptions)
    cutoff.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bar and no INFO log lines")
    add_wait_for_lock_flag(cutoff)
    add_verbosity_flags(cutoff)


def with_default_command(argv: list[str]) -> list[str]:
    """`cuqa-eval --data ...` means `cuqa-eval run --data ...`."""
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help", "--version"):
        return ["run", *argv]
    return argv


def solver_options(args: argparse.Namespace) -> SolverOptions:
    given = {"confidence": args.confidence, "alpha": args.alpha, "beta": args.beta,
             "depth": args.depth, "self_dc_dependent": args.self_dc_dependent,
             "raisf_depth": args.raisf_depth, "top_k": args.top_k}
    return SolverOptions.checked(**{k: v for k, v in given.items() if v is not None})


# --- resources: retriever and gateways ---------------------------------------------------


def open_retriever(
    args: argparse.Namespace, stack: AsyncExitStack, settings: LLMSettings
) -> tuple[Retriever | None, RetrieverInfo | None]:
    """The retriever the method needs (None for methods that never retrieve) and how it is
    recorded in the run settings; what it holds open is closed with `stack`."""
    if args.method in NO_RETRIEVAL:
        return None, None
    if args.exclude_source_event and args.retriever != "bm25":
        raise UsageError("--exclude-source-event needs a --corpus (BM25) retriever: search "
                         "results of a live service are not the dataset's events")
    if args.retriever == "wiki":
        client = MediaWikiClient(args.wiki_api, contact=args.contact)
        stack.callback(client.close)
        return WikiSearchRetriever(client), RetrieverInfo(name="wiki", api=args.wiki_api)
    if args.retriever == "web":
        web = web_retriever(args, settings, stack)
        return web, RetrieverInfo(name="web", service=web.service.name, api=web.service.endpoint)
    if args.corpus is None:
        who = (f"reproduce {args.table}: its methods retrieve" if "table" in args
               else f"--method {args.method} retrieves")
        raise CorpusError(f"{who}: give --corpus (an index directory or events.jsonl), or "
                          "--retriever wiki or web")
    retriever = open_corpus(args.corpus, cache_dir=args.out / INDEX_CACHE)
    return retriever, RetrieverInfo(name="bm25", corpus_sha256=retriever.corpus_sha256,
                                    exclude_source_event=args.exclude_source_event)


def search_service(args: argparse.Namespace) -> SearchService:
    if args.web_service == "searxng":
        if not args.web_api:
            raise UsageError("--web-service searxng needs --web-api URL (the instance)")
        return SearxNG(args.web_api, cost_per_search=args.search_cost or 0.0)
    key = os.environ.get(SERPER_KEY_ENV)
    if not key:
        raise UsageError(f"--retriever web with serper needs ${SERPER_KEY_ENV} in the "
                         "environment (or use --web-service searxng)")
    cost = SERPER_COST if args.search_cost is None else args.search_cost
    return Serper(args.web_api or SERPER_URL, key, cost_per_search=cost)


def web_retriever(
    args: argparse.Namespace, settings: LLMSettings, stack: AsyncExitStack
) -> WebSearchRetriever:
    """Searches are paid: they share the LLM calls' cache file (and --no-cache, --refresh)."""
    service = search_service(args)
    cache = None if settings.cache_path is None else SearchCache(settings.cache_path)
    if cache is not None:
        stack.callback(cache.close)
    return WebSearchRetriever(service, cache, refresh=settings.refresh,
                              max_retries=settings.max_retries)


def judge_settings(settings: LLMSettings, judge_model: str, api: str) -> LLMSettings:
    if settings.uses_local_model:
        return settings.model_copy(update={"local": judge_model, "api": api})
    return settings.model_copy(update={"model": judge_model, "api": api})


@dataclass
class Session:
    evaluation: Evaluation
    items: list[EvalItem]
    # The scores of every run the command finished, each over all its predictions (earlier
    # commands' too): the summary's figures for the whole run.
    finished: list[Scores] = field(default_factory=list)


@asynccontextmanager
async def open_session(args: argparse.Namespace) -> AsyncIterator[Session]:
    """Items, retriever, gateway (and the judge's) for one evaluation command."""
    # Imported here: `openai` takes ~1.5 s to import, which --help and index need not pay.
    from cuqa_builder.llm.gateway import open_gateway

    items = load_items(args.data, split=args.split, limit=args.limit, aliases=args.aliases)
    options = solver_options(args)
    args.out.mkdir(parents=True, exist_ok=True)
    settings = resolve_settings(args.llm_options, default_cache=args.out / LLM_CACHE,
                                progress=not args.quiet).model_copy(
        update={"api": args.api or "chat"})
    async with AsyncExitStack() as stack:
        retriever, retriever_info = open_retriever(args, stack, settings)
        gateway = await stack.enter_async_context(open_gateway(settings))
        judge_gateway = None
        if args.judge_model:
            same = (args.judge_model, args.judge_api) == (gateway.model, settings.api)
            judge_gateway = gateway if same else await stack.enter_async_context(
                open_gateway(judge_settings(settings, args.judge_model, args.judge_api))
            )
        run_settings = EvalSettings(
            method=args.method, options=options, model=gateway.model, api=settings.api,
            data=str(args.data.resolve()), split=args.split, retriever=retriever_info,
            judge_model=args.judge_model,
            judge_prompt=args.judge_prompt if args.judge_model else None,
            judge_api=args.judge_api if args.judge_model else None,
            scoring=Scoring(aliases=args.aliases, yes_no_first_word=args.yes_no_first_word),
        )
        evaluation = Evaluation(
            solver=get_solver(args.method), gateway=gateway, retriever=retriever,
            options=options, settings=run_settings, judge_gateway=judge_gateway,
            items_in_flight=settings.jobs_in_flight(4), progress=not args.quiet,
        )
        # What the run was expected to spend, for the summary (a dry run: no call).
        from cuqa_builder.evaluation.estimate import plan_evaluation

        plan = (await plan_evaluation(_asked(args), options, settings))[0]
        session = Session(evaluation, items)
        yield session
        print(_usage_line(gateway.stats), file=sys.stderr)
        print(_whole_run_line(session.finished), file=sys.stderr)
        # A --batch-files run is one of several commands (each replays the ones before): the
        # estimate of the whole run says nothing about one of them.
        if settings.batch_mode != "files":
            print(compare(plan, gateway.stats), file=sys.stderr)
        if isinstance(retriever, WebSearchRetriever):
            print(_search_line(retriever), file=sys.stderr)


def _asked(args: argparse.Namespace) -> EvalCommand:
    """The command's flags as `--estimate` and the summary's estimate read them."""
    return EvalCommand(
        command=args.command, method=args.method, data=args.data, split=args.split,
        limit=args.limit, aliases=args.aliases, judge_model=args.judge_model,
        judge_prompt=args.judge_prompt,
        sweep=(args.param, tuple(parse_values(args.param, args.values)))
        if args.command == "sweep" else None,
    )


def _usage_line(stats: GatewayStats) -> str:
    return (f"LLM, this command: {stats.calls} calls, {stats.cache_hits} cache hits, "
            f"{stats.failures} failures, {stats.prompt_tokens + stats.completion_tokens} "
            f"tokens, ${stats.cost:.4f}, {stats.wall_s:.1f} s")


def _whole_run_line(finished: list[Scores]) -> str:
    """What the method asked over every command of the run (a resumed or --batch-files run
    makes its earlier calls again from the cache), as metrics.json counts it."""
    questions = sum(scores.n for scores in finished)
    calls = round(sum(scores.llm_calls.total for scores in finished))
    tokens = round(sum(scores.tokens.total for scores in finished))
    return (f"LLM, the whole run: {calls} calls by the method for {questions} questions, "
            f"{tokens} tokens (as {METRICS} counts them; judge calls apart)")


def _search_line(web: WebSearchRetriever) -> str:
    stats = web.stats
    return (f"search ({web.service.name}): {stats.searches} searches, {stats.cache_hits} cache "
            f"hits, {stats.failures} failures, ${stats.cost:.4f}")


# --- commands ----------------------------------------------------------------------------


async def command_run(args: argparse.Namespace) -> str:
    async with open_session(args) as session:
        outcome = await evaluate(session.evaluation, session.items, args.out)
        session.finished.append(outcome.metrics)
    return outcome.summary(args.out)


async def command_gap(args: argparse.Namespace) -> str:
    async with open_session(args) as session:
        result, composed, parts = await evaluate_gap(session.evaluation, session.items, args.out)
        session.finished += [composed.metrics, parts.metrics]
    gap = "n/a (no item has all its sub-questions right)" if result.gap is None else (
        f"{100 * result.gap:.1f}%")
    return (f"compositionality gap {gap}: {result.subs_right_composed_wrong} of "
            f"{result.subs_all_right} items with every sub-question right were answered wrong "
            f"({result.items} items) -> {args.out / GAP}")


async def command_sweep(args: argparse.Namespace) -> str:
    values = parse_values(args.param, args.values)
    async with open_session(args) as session:
        rows = await sweep(session.evaluation, session.items, args.out, args.param, values)
        session.finished += rows
    lines = [f"{args.param}={r.value:g}: cover-em {r.cover_em:.3f} em {r.em:.3f} f1 {r.f1:.3f}"
             + (f" acc {r.acc:.3f}" if r.acc is not None else "")
             + f", retrieval calls {r.retrieval_calls.total:g}" for r in rows]
    return "\n".join([*lines, f"-> {args.out / SWEEP}"])


async def command_index(args: argparse.Namespace) -> str:
    if args.events is None and not args.pages:
        raise UsageError("index needs --events FILE, --pages DIR, or both")
    started = time.perf_counter()
    events = event_passages(args.events) if args.events is not None else []
    pages = read_page_corpus(args.pages, args.passage_words)
    retriever = BM25Retriever.build([*events, *pages.passages])
    retriever.save(args.out)
    what = f"{len(events)} events" if args.events is not None else ""
    if args.pages:
        what += (" and " if what else "") + (
            f"{len(pages.passages)} passages of {pages.pages} pages")
    notes = [f"{pages.event_pages} year/Current events pages skipped (index their events "
             "with --events)"] if pages.event_pages else []
    notes += [f"unreadable: {why}" for why in pages.unreadable]
    summary = f"indexed {what} in {time.perf_counter() - started:.1f} s -> {args.out}"
    return "\n".join([summary, *(f"  {note}" for note in notes)])


async def command_reproduce(args: argparse.Namespace) -> str:
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


async def command_report(args: argparse.Namespace) -> str:
    from cuqa_builder.evaluation.report import write_report  # matplotlib: ~1 s to import

    skipped = write_report(args.dirs, args.out)
    return "\n".join([f"report -> {args.out}", *(f"  skipped {why}" for why in skipped)])


async def command_cutoff(args: argparse.Namespace) -> str:
    from cuqa_builder.evaluation.cutoff_probe import probe_cutoff, summarize

    result = await probe_cutoff(args.events, args.out, args.probe_options, args.llm_options,
                                progress=not args.quiet)
    return summarize(result, args.out)


COMMANDS: dict[str, Callable[[argparse.Namespace], Awaitable[str]]] = {
    "run": command_run, "gap": command_gap, "sweep": command_sweep, "index": command_index,
    "report": command_report, "reproduce": command_reproduce, "cutoff": command_cutoff,
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
            print(asyncio.run(estimate_evaluation(_asked(args), solver_options(args), settings)))
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
