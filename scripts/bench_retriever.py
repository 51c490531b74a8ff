"""Benchmark the `web` retriever against the loopback Serper stand-in.

    python scripts/bench_retriever.py [--queries 500] [--delay 0.05] [--threads 1]

Three figures:
- uncached searches: wall time per search against a stand-in that answers after `--delay`
  seconds; our overhead per uncached call is that time minus the delay (HTTP, JSON, the SQLite
  row, the passages), the same work a real service's answer costs us;
- the same queries again from the SQLite cache: queries per second (no HTTP at all);
- both with `--threads` searches at once, as `cuqa-eval` runs them (solvers search from
  worker threads).
Targets: overhead < 5 ms per uncached search; >= 1,000 cached queries/s.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench_common import bench_arguments

from cuqa_builder.retrieval.search_cache import SearchCache
from cuqa_builder.retrieval.web import Serper, WebSearchRetriever
from cuqa_builder.testing.search_servers import Hit, SearchStandIn

KEY = "bench-key-0123456789"


def hits(query: str) -> list[Hit]:
    """Ten results with snippets of a realistic length (about 30 words)."""
    words = " ".join(query.split()[:5])
    return [Hit(f"{words} result {n}", f"https://example.org/{abs(hash(query)) % 10**9}/{n}",
                f"{words} " + "and further words of a typical search snippet" * 3)
            for n in range(10)]


def timed(web: WebSearchRetriever, queries: list[str], threads: int) -> float:
    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        for passages in pool.map(lambda q: web.search(q, 3), queries):
            assert len(passages) == 3
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--delay", type=float, default=0.05, help="stand-in answer time, s")
    parser.add_argument("--threads", type=int, default=1)
    args = bench_arguments(parser, queries=20, delay=0.0)
    queries = [f"Which town elected the winner of chess open number {i} as mayor?"
               for i in range(args.queries)]
    with tempfile.TemporaryDirectory() as tmp, \
            SearchStandIn("serper", hits, api_key=KEY, delay_s=args.delay) as stand_in:
        cache = SearchCache(Path(tmp) / "llm-cache.sqlite")
        web = WebSearchRetriever(Serper(stand_in.origin, KEY), cache, concurrency=args.threads)
        uncached = timed(web, queries, args.threads)
        assert stand_in.searches == args.queries
        cached = timed(web, queries, args.threads)
        assert stand_in.searches == args.queries  # the second pass paid for nothing
        cache.close()
    per_call = uncached / args.queries * args.threads
    print(f"{args.queries} uncached searches, {args.threads} at once, stand-in delay "
          f"{1000 * args.delay:.0f} ms: {1000 * per_call:.2f} ms per search, overhead "
          f"{1000 * (per_call - args.delay):.2f} ms per call")
    print(f"{args.queries} cached searches: {cached:.3f} s, "
          f"{args.queries / cached:,.0f} queries/s")


if __name__ == "__main__":
    main()
