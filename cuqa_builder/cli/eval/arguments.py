"""The flags that run, gap, sweep and reproduce share, and the solver options they give."""

from __future__ import annotations

import argparse
from pathlib import Path

from cuqa_builder.cli.flags import add_flags, add_wait_for_lock_flag, positive_int
from cuqa_builder.cli.shell import add_verbosity_flags
from cuqa_builder.judge import DEFAULT_JUDGE_PROMPT, JUDGE_PROMPTS
from cuqa_builder.llm.settings import LLMOptions
from cuqa_builder.retrieval.web import (
    SERPER_COST,
    SERPER_KEY_ENV,
    SERPER_URL,
)
from cuqa_builder.solvers import METHODS
from cuqa_builder.solvers.base import SolverOptions


def evaluation_arguments(
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



def solver_options(args: argparse.Namespace) -> SolverOptions:
    given = {"confidence": args.confidence, "alpha": args.alpha, "beta": args.beta,
             "depth": args.depth, "self_dc_dependent": args.self_dc_dependent,
             "raisf_depth": args.raisf_depth, "top_k": args.top_k}
    return SolverOptions.checked(**{k: v for k, v in given.items() if v is not None})
