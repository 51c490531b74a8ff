"""Benchmark the BM25 retriever: index build time and queries per second over synthetic events.

    python scripts/bench_bm25.py [--events 100000] [--queries 2000] [--k 3]

Events are generated with a Zipf-distributed vocabulary (as natural text is: a few very common
words, a long tail of rare names) and realistic lengths; each query takes words from one event,
so it hits, plus common words, so scoring touches long posting lists too. Target: >= 500 q/s.
"""

from __future__ import annotations

import argparse
import itertools
import random
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from bench_common import bench_arguments

from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.retrieval.bm25 import BM25Retriever, event_passage

VOCABULARY = 60_000


def synthetic_events(n: int, rng: random.Random) -> list[Event]:
    words = [f"w{i}" for i in range(VOCABULARY)]
    # Zipf, exponent 1; cumulative once, or every draw would sum all the weights again.
    cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(VOCABULARY)))
    source = EventSource(title="2023", revid=1, url="https://en.wikipedia.org/wiki/2023")
    start = date(2023, 1, 1)
    events = []
    for i in range(n):
        text = " ".join(rng.choices(words, cum_weights=cumulative, k=rng.randint(12, 40)))
        topic = " ".join(rng.choices(words, cum_weights=cumulative, k=3))
        topics = [topic] if rng.random() < 0.5 else []
        events.append(Event(id=f"ev-{i}", date=start + timedelta(days=i % 700), text=text,
                            topics=topics, source=source))
    return events


def queries_from(events: list[Event], n: int, rng: random.Random) -> list[str]:
    queries = []
    for event in rng.sample(events, n):
        own = rng.sample(event.text.split(), k=min(5, len(event.text.split())))
        queries.append("What happened when " + " ".join(own) + " w1 w2?")
    return queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--k", type=int, default=3)
    args = bench_arguments(parser, events=2000, queries=50)
    rng = random.Random(0)
    events = synthetic_events(args.events, rng)
    queries = queries_from(events, args.queries, rng)

    started = time.perf_counter()
    retriever = BM25Retriever.build(event_passage(e) for e in events)
    build_s = time.perf_counter() - started
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        retriever.save(Path(scratch) / "index")
        save_s = time.perf_counter() - started
        started = time.perf_counter()
        retriever = BM25Retriever.load(Path(scratch) / "index")
        load_s = time.perf_counter() - started

    started = time.perf_counter()
    hits = [retriever.search(q, args.k) for q in queries]
    single_s = time.perf_counter() - started
    started = time.perf_counter()
    batch = retriever.search_many(queries, args.k)
    batch_s = time.perf_counter() - started
    assert batch == hits, "batch and single searches disagree"
    found = sum(1 for q, h in zip(queries, hits, strict=True) if h) / len(queries)

    print(f"events indexed     {args.events:,}")
    print(f"index build        {build_s:.2f} s (passages + tokenise + index)")
    print(f"save / load        {save_s:.2f} s / {load_s:.2f} s")
    print(f"search, one by one {len(queries) / single_s:,.0f} q/s (k={args.k})")
    print(f"search_many        {len(queries) / batch_s:,.0f} q/s")
    print(f"queries with hits  {found:.0%}")


if __name__ == "__main__":
    main()
