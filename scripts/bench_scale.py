"""Benchmark of scale (issue 13): batch-file rounds at 100,000 events, and live calls under --rpm.

1. `--batch-files`: N synthetic events (default 100,000) through the generate stage; each run
   of `cuqa-build` writes a round's batch files and stops (exit 75); a scripted engine in this
   process answers them (the OpenAI batch output format, as vLLM's run_batch writes it), and
   the command runs again until it finishes. The engine's known passages differ from event to
   event (each names its request's seed), as a real model's do: NER runs on every one, once.
   Each run is a child process measured by `wait4`:
   peak memory (max RSS; target < 500 MB) and CPU time (target < 1 ms per request: everything
   the command did, start-up, cache and rounds included, over the requests; spaCy's thread, NER
   on the known passages, is measured from /proc and reported apart as a library's time).
   Peak memory is each child's VmHWM, polled from /proc.
   Every input file is checked against the limits given (`--max-requests`, `--max-mb`).
2. Live, `--rpm R`: generate on 200 events against the scripted server (its own process)
   answering after 200 ms at concurrency 16; the ideal wall time is the slower of
   calls x 0.2 s / 16 and calls / R minutes (target <= 1.15x); the limit is checked on the
   server's arrival times: the rate over the run, and the most arrivals in any 5 s against
   5 R/60 plus one (any one second is reported too; arrivals jitter by a few ms).

    python scripts/bench_scale.py [--events 100000] [--max-requests 50000] [--max-mb 200]
                                  [--live-events 200] [--rpm 3000] [--skip-files|--skip-live]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench_common import bench_arguments, judged
from bench_generate import ServerProcess, timed_build

from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.batch_server import answer_batch_file
from cuqa_builder.testing.openai_server import Reply, last_user_message

REPO = Path(__file__).resolve().parents[1]
PAUSED = 75
MODEL = "Qwen/Qwen2.5-7B-Instruct"


class ChildWatch:
    """Polls /proc for a child's peak memory (VmHWM: since its exec, unlike wait4's max RSS,
    which also holds the pages the child had as a fork of this process) and the CPU time of
    its threads other than the main one: the generate stage's only such thread runs spaCy on
    known passages (a library's time, reported apart from ours)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kib = 0
        self.seconds: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._tick = os.sysconf("SC_CLK_TCK")

    def _poll(self) -> None:
        proc = Path(f"/proc/{self.pid}")
        while not self._stop.wait(0.05):
            try:
                status = (proc / "status").read_text()
                if "python" not in (proc / "comm").read_text():
                    continue  # not exec'd yet
                hwm = next(line for line in status.splitlines() if line.startswith("VmHWM"))
                self.peak_kib = max(self.peak_kib, int(hwm.split()[1]))
                for task in (proc / "task").iterdir():
                    if task.name == str(self.pid):
                        continue
                    fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
                    self.seconds[task.name] = (int(fields[11]) + int(fields[12])) / self._tick
            except (OSError, StopIteration):
                continue  # a thread (or the process) just ended

    def __enter__(self) -> ChildWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def other_threads_s(self) -> float:
        return sum(self.seconds.values())


def _run_measured(argv: list[str]) -> tuple[int, float, float, int, str]:
    """(exit status, CPU seconds, of which off the main thread, peak memory in KiB, stderr) of
    one `cuqa-build` child."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env["PYTHONPATH"] = str(REPO)
    with tempfile.TemporaryFile() as err:
        child = subprocess.Popen([sys.executable, "-m", "cuqa_builder.cli.build", *argv],
                                 cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=err)
        with ChildWatch(child.pid) as watch:
            _, status, usage = os.wait4(child.pid, 0)
        err.seek(0)
        message = err.read().decode()
    return (os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime,
            watch.other_threads_s, watch.peak_kib, message)


class DistinctPassages:
    """The scripted model, with a known passage that names its request's seed: the scripted
    passages depend on the entity alone (seven in all), where a real model's differ per event."""

    def __init__(self) -> None:
        self._model = AlgorithmResponder()

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = self._model(body)
        if last_user_message(body).startswith("Generate a detailed passage about "):
            reply = replace(reply, text=f"{reply.text} Its archive holds file {body['seed']}.")
        return reply


def answer_round_files(directory: Path, engine: DistinctPassages) -> tuple[int, int, float]:
    """Answer every input file without an output: (files, requests, largest file in MB)."""
    files = requests = 0
    largest = 0.0
    for source in sorted(directory.glob("round-*.input.jsonl")):
        target = source.with_name(source.name.replace(".input.", ".output."))
        if target.exists():
            continue
        lines = source.read_text(encoding="utf-8").splitlines()
        target.write_text("\n".join(answer_batch_file(lines, engine)) + "\n", encoding="utf-8")
        files += 1
        requests += len(lines)
        largest = max(largest, source.stat().st_size / 1e6)
    return files, requests, largest


def bench_files(args: argparse.Namespace, root: Path) -> bool:
    out, rounds = root / "run", root / "rounds"
    write_jsonl(out / "events.jsonl", make_events(args.events))
    argv = ["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage", "generate",
            "-q",
            "--model", MODEL, "--batch-files", str(rounds),
            "--batch-max-requests", str(args.max_requests), "--batch-max-mb", str(args.max_mb)]
    engine = DistinctPassages()
    cpu = spacy = 0.0
    peak_kib = 0
    requests = files = 0
    largest_mb = 0.0
    started = time.perf_counter()
    print(f"## --batch-files: {args.events:,} events, at most {args.max_requests:,} requests "
          f"and {args.max_mb:g} MB per file")
    for run in range(1, 50):
        status, run_cpu, run_spacy, rss, message = _run_measured(argv)
        cpu += run_cpu
        spacy += run_spacy
        peak_kib = max(peak_kib, rss)
        if status not in (0, PAUSED):
            raise SystemExit(f"cuqa-build failed ({status}): {message}")
        print(f"  run {run}: exit {status}, CPU {run_cpu:.1f} s (spaCy {run_spacy:.1f} s), "
              f"peak {rss / 1024:.0f} MiB")
        if status == 0:
            break
        new_files, new_requests, big = answer_round_files(rounds, engine)
        files, requests, largest_mb = files + new_files, requests + new_requests, max(
            largest_mb, big)
    made = len(read_jsonl(out / "candidates.jsonl", Candidate))
    inputs = sorted(rounds.glob("round-*.input.jsonl"))
    most_lines = max(sum(1 for _ in p.open(encoding="utf-8")) for p in inputs)
    per_request_ms = (cpu - spacy) / requests * 1000
    wall = time.perf_counter() - started
    print(f"  {made:,} candidates from {requests:,} requests in {files} batch files "
          f"({run} runs of the command); wall {wall:.0f} s with the engine")
    print(f"  files: at most {most_lines:,} requests and {largest_mb:.1f} MB each "
          f"(limits {args.max_requests:,} and {args.max_mb:g} MB)")
    print(f"  peak memory (VmHWM of any run): {peak_kib / 1024:.0f} MiB (target < 500 MB)")
    print(f"  CPU of the command, all runs: {cpu:.1f} s, of which spaCy's thread {spacy:.1f} s; "
          f"ours {cpu - spacy:.1f} s = {per_request_ms:.3f} ms per request (target < 1 ms)")
    within_limits = most_lines <= args.max_requests and largest_mb <= args.max_mb
    return peak_kib * 1024 < 500e6 and per_request_ms < 1.0 and within_limits and made > 0


def _busiest(starts: list[float], window_s: float) -> int:
    """The most requests that arrived within any `window_s` seconds."""
    starts = sorted(starts)
    return max(bisect_left(starts, t + window_s) - i for i, t in enumerate(starts))


def bench_live(args: argparse.Namespace, root: Path) -> bool:
    out = root / "live"
    write_jsonl(out / "events.jsonl", make_events(args.live_events))
    os.environ["OPENAI_API_KEY"] = "sk-bench-unused"
    with ServerProcess(args.latency) as server:
        start, wall, _ = timed_build([
            "--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage", "generate",
                "-q",
            "--base-url", server.base_url, "--model", "scripted",
            "--concurrency", str(args.concurrency), "--rpm", str(args.rpm)])
        arrivals = server.arrivals()
    calls = len(arrivals)
    ideal = max(calls * args.latency / args.concurrency, calls / args.rpm * 60)
    calling = arrivals[-1] + args.latency - arrivals[0]
    busiest = _busiest(arrivals, 1.0)
    busiest_5 = _busiest(arrivals, 5.0)
    allowed = args.rpm / 60
    rate = (calls - 1) / (arrivals[-1] - arrivals[0]) * 60
    print(f"## live: {args.live_events} events, {calls} calls, {args.latency * 1000:.0f} ms per "
          f"call, concurrency {args.concurrency}, --rpm {args.rpm:g}")
    print(f"  ideal {ideal:.2f} s; first call to last answer {calling:.2f} s -> "
          f"{calling / ideal:.3f}x; whole command (imports, spaCy load) {wall:.2f} s -> "
          f"{wall / ideal:.3f}x (target <= 1.15x)")
    print(f"  measured rate {rate:.0f} requests/min over the run (limit {args.rpm:g}); busiest "
          f"5 s {busiest_5} arrivals (limit {5 * allowed:.0f} + 1); busiest second {busiest} "
          f"(limit {allowed:.0f} + 1; arrivals jitter with connection set-up)")
    return calling / ideal <= 1.15 and rate <= args.rpm and busiest_5 <= 5 * allowed + 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--max-requests", type=int, default=50_000)
    parser.add_argument("--max-mb", type=float, default=200.0)
    parser.add_argument("--live-events", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rpm", type=float, default=3000)
    parser.add_argument("--skip-files", action="store_true")
    parser.add_argument("--skip-live", action="store_true")
    args = bench_arguments(parser, events=100, max_requests=100, live_events=20, latency=0.01,
                           concurrency=4, rpm=60_000)
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        if not args.skip_files:
            ok &= bench_files(args, Path(tmp))
        if not args.skip_live:
            ok &= bench_live(args, Path(tmp))
    print("all targets met" if ok else "a target was missed")
    print(json.dumps({"ok": ok}))
    return judged(ok, args)


if __name__ == "__main__":
    sys.exit(main())
