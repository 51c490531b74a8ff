"""What one evaluation command opens: its items, the retriever, the gateway (and the judge's),
and the lines its summary ends with."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from cuqa_builder.cli.eval.arguments import solver_options
from cuqa_builder.errors import UsageError
from cuqa_builder.evaluation.datasets import EvalItem, load_items
from cuqa_builder.evaluation.estimate import EvalCommand
from cuqa_builder.evaluation.harness import Evaluation
from cuqa_builder.evaluation.outputs import (
    METRICS,
    EvalSettings,
    RetrieverInfo,
    Scores,
    Scoring,
)
from cuqa_builder.evaluation.sweep import parse_values
from cuqa_builder.llm.estimate import compare
from cuqa_builder.llm.settings import LLMSettings, resolve_settings
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.retrieval.bm25 import CorpusError, open_corpus
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
from cuqa_builder.solvers import NO_RETRIEVAL, get_solver
from cuqa_builder.wiki.client import MediaWikiClient

INDEX_CACHE = "index"  # OUT/index: the BM25 index built from an events.jsonl --corpus


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

        plan = (await plan_evaluation(asked(args), options, settings))[0]
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


def asked(args: argparse.Namespace) -> EvalCommand:
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
