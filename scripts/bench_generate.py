"""Benchmark of the generate stage (issue 3, Performance).

1. 200 synthetic events against the scripted OpenAI-compatible server (in its own process, so
   its work is not counted as ours) answering every call after 200 ms, concurrency 16: wall time
   against the ideal (total calls x 0.2 s / 16; target <= 1.15x) and our CPU time per call.
2. The same command again: every event is done, so no call is made (target: under 5 s).
3. The same events into a fresh run directory sharing the LLM cache: every call is a cache hit.
4. With `--local NAME`: seconds per generated candidate on the embedded llama.cpp model.

    python scripts/bench_generate.py [--events 200] [--latency 0.2] [--concurrency 16]
                                     [--local smollm2-135m-instruct-q4_1 --local-events 3]

It uses the loopback stand-ins of `cuqa_builder/testing/`.
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.connection
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import bench_arguments

from cuqa_builder.cli.build import main as build
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.run import GENERATION_FAILURES as FAILURES
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM


class _TimedResponder(AlgorithmResponder):
    """Also notes when each request arrived (wall clock, comparable across processes)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s=delay_s)
        self.arrivals: list[float] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        self.arrivals.append(time.time())
        return super().__call__(body)


def _serve(conn: multiprocessing.connection.Connection, latency_s: float) -> None:
    """Child process: run the scripted server; answer "arrivals" with the request times."""
    responder = _TimedResponder(latency_s)
    with ScriptedLLM(responder) as llm:
        conn.send(llm.base_url)
        while conn.recv() == "arrivals":
            conn.send(list(responder.arrivals))


class ServerProcess:
    def __init__(self, latency_s: float) -> None:
        self._conn, child = multiprocessing.Pipe()
        self._process = multiprocessing.Process(target=_serve, args=(child, latency_s), daemon=True)

    def __enter__(self) -> ServerProcess:
        self._process.start()
        self.base_url: str = self._conn.recv()
        return self

    def arrivals(self) -> list[float]:
        self._conn.send("arrivals")
        return self._conn.recv()

    def __exit__(self, *exc: object) -> None:
        self._conn.send("stop")
        self._process.join(timeout=10)


def timed_build(argv: list[str]) -> tuple[float, float, float]:
    """Run `cuqa-build` in this process: (start time, wall seconds, CPU seconds used)."""
    start, wall, cpu = time.time(), time.perf_counter(), time.process_time()
    if build(argv) != 0:
        raise SystemExit(f"cuqa-build failed: {' '.join(argv)}")
    return start, time.perf_counter() - wall, time.process_time() - cpu


def cached_calls(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM calls").fetchone()[0]


def scripted(args: argparse.Namespace, root: Path) -> None:
    first, fresh = root / "run", root / "fresh"
    events = make_events(args.events)
    for out in (first, fresh):
        write_jsonl(out / "events.jsonl", events)
    cache = root / "llm-cache.sqlite"
    with ServerProcess(args.latency) as server:
        def argv(out: Path) -> list[str]:
            return ["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage",
                    "generate", "-q",
                    "--base-url", server.base_url, "--model", "scripted",
                    "--concurrency", str(args.concurrency), "--cache", str(cache)]

        start, wall, cpu = timed_build(argv(first))
        arrivals = server.arrivals()
        calls = len(arrivals)
        _, again_wall, _ = timed_build(argv(first))
        again_calls = len(server.arrivals()) - calls
        _, fresh_wall, _ = timed_build(argv(fresh))
        fresh_calls = len(server.arrivals()) - calls - again_calls
    made = len(read_jsonl(first / "candidates.jsonl", Candidate))
    ideal = calls * args.latency / args.concurrency
    startup = arrivals[0] - start
    calling = arrivals[-1] + args.latency - arrivals[0]
    print(f"## generate: {args.events} events, {args.latency * 1000:.0f} ms per call, "
          f"concurrency {args.concurrency}")
    print(f"first run:   {made} candidates, {calls} calls, wall {wall:.2f} s, "
          f"ideal {ideal:.2f} s -> {wall / ideal:.3f}x (target <= 1.15x)")
    print(f"             start-up before the first call {startup:.2f} s (imports; spaCy "
          f"loads beside the first calls); first call to last answer {calling:.2f} s "
          f"-> {calling / ideal:.3f}x")
    print(f"             CPU of this process {cpu:.2f} s = {cpu / calls * 1000:.2f} ms per call "
          "(start-up, gateway, client, parsing, spaCy on passages, JSONL)")
    print(f"same again:  {again_calls} calls, wall {again_wall:.2f} s (target: 0 calls, < 5 s)")
    print(f"fresh dir, shared cache: {fresh_calls} calls, {cached_calls(cache)} cached answers "
          f"served, wall {fresh_wall:.2f} s")


def local(args: argparse.Namespace, root: Path) -> None:
    out = root / "local"
    write_jsonl(out / "events.jsonl", make_events(args.local_events))
    _, wall, _ = timed_build(["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper",
                              "--stage", "generate",
                              "-q", "--llm", f"local:{args.local}", "--concurrency", "1"])
    made = len(read_jsonl(out / "candidates.jsonl", Candidate))
    failed = read_jsonl(out / FAILURES, GenerationFailure)
    steps = ", ".join(sorted({f.step for f in failed}))
    print(f"## embedded model {args.local}: {args.local_events} events in {wall:.1f} s "
          f"(model start included) -> {wall / args.local_events:.1f} s per event; "
          f"{made} candidates, {len(failed)} failed" + (f" at {steps}" if failed else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per scripted call")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--local", metavar="NAME", help="also time the embedded model NAME")
    parser.add_argument("--local-events", type=int, default=3)
    args = bench_arguments(parser, events=10, latency=0.01, concurrency=4)
    # The scripted server needs no key; never send a real one to it.
    os.environ.pop("OPENAI_API_KEY", None)
    os.environ.pop("OPENAI_BASE_URL", None)
    with tempfile.TemporaryDirectory(prefix="bench-generate-") as tmp:
        scripted(args, Path(tmp))
        if args.local:
            local(args, Path(tmp))


if __name__ == "__main__":
    main()
