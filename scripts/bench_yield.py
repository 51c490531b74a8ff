"""Benchmark of the yield of generation (issue 10): how many items pass, for how much work,
with the paper's recipe (`--prompts paper`; the connected recipe's yield is read by hand, see
docs/items.md, "What the items are worth").

On the shipped snapshot `examples/wiki-sample` (events and entity articles, read offline), the
first N unknown events go through generate, ground and validate four times:

    known source    model | wiki          (--known-source)
    repair          off (--attempts 1) | on (--attempts 3)

Each known source starts in a fresh run directory with its own LLM cache, without repair; the
run with repair then starts from a copy of that cache, so it pays only for what repair adds
(the first attempts are the same calls: same prompts, same seeds). Its time is the sum of both
runs' wall times, so every figure is the full cost of making those items on this machine.

For each: candidates, items that passed every check (grounding included), the pass rate per
event, LLM calls and tokens per passed item (every call the run's gateway made, from its cache:
refused attempts and the calls of failed generations included) and minutes per passed item
(wall time of the three stages). Results go to BASE/results.json and a Markdown table on stdout;
the passed items are in BASE/<config>/cuqa.jsonl for reading. `--recount` recomputes the figures
of finished runs, keeping their recorded wall times.

    python scripts/bench_yield.py --base /tmp/yield [--events 8] [--llm local] [--concurrency 2]
                                  [--only model-norepair,model-repair] [--recount]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from bench_common import bench_arguments

from cuqa_builder.cli.build import main as build
from cuqa_builder.generation.yield_report import branch_yields
from cuqa_builder.jsonio import count_records, read_jsonl
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.run import CANDIDATES, EVENTS, GENERATION_FAILURES, LLM_CACHE

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wiki-sample"
CONFIGS = {  # name -> (known source, attempts); a repair run follows its no-repair run
    "model-norepair": ("model", 1),
    "model-repair": ("model", 3),
    "wiki-norepair": ("wiki", 1),
    "wiki-repair": ("wiki", 3),
}
WINDOW = ["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE), "--prompts",
    "paper"]


def _events(base: Path) -> Path:
    """The sample's events, parsed once and copied into every run directory."""
    shared = base / "events"
    if not (shared / EVENTS).exists():
        assert build([*WINDOW, "--stage", "events", "--out", str(shared), "-q"]) == 0
    return shared / EVENTS


def run_config(
    base: Path, name: str, args: argparse.Namespace, events: Path, walls: dict[str, float]
) -> dict:
    source, attempts = CONFIGS[name]
    out = base / name
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(events, out / EVENTS)
    before = 0.0
    if attempts > 1 and not args.recount:  # start from the no-repair run's calls
        first = f"{source}-norepair"
        shutil.copy(base / first / LLM_CACHE, out / LLM_CACHE)
        before = walls[first]
    common = [*WINDOW, "--out", str(out), "--limit", str(args.events), "--llm", args.llm,
              "--concurrency", str(args.concurrency), "--known-source", source,
              "--attempts", str(attempts), "-q"]
    if args.recount:
        wall = walls[name]
    else:
        started = time.perf_counter()
        for stage in ("generate", "ground", "validate"):
            code = build([*common, "--stage", stage])
            # 1 with no candidate: generation made nothing (its line says why) and the later
            # stages have nothing to read, a yield of 0; any other failure is a failure
            assert code == 0 or (code == 1 and not made_any(out)), f"{name}: {stage} exited {code}"
        wall = time.perf_counter() - started + before
        walls[name] = wall
    return figures(out, name, source, attempts, args.events, wall)


def made_any(out: Path) -> bool:
    """Whether generation wrote any candidate."""
    return count_records(out / CANDIDATES) > 0


def figures(out: Path, name: str, source: str, attempts: int, events: int, wall: float) -> dict:
    candidates = read_jsonl(out / CANDIDATES, Candidate)
    failures = read_jsonl(out / GENERATION_FAILURES, GenerationFailure)
    yields = branch_yields(candidates, failures)
    passed = sum(y.passed for y in yields.values())
    cache = CallCache(out / LLM_CACHE)
    made = cache.summary()  # every call of this run's work, the first attempts included
    cache.close()
    calls, tokens = made.calls, made.prompt_tokens + made.completion_tokens
    refused = sum(c.rejected is not None for item in candidates if item.intermediates
                  for c in item.intermediates.calls)
    refused += sum(c.rejected is not None for f in failures for c in f.calls)
    return {
        "config": name, "known_source": source, "attempts": attempts, "events": events,
        "candidates": len(candidates), "generation_failures": len(failures), "passed": passed,
        "pass_rate": passed / events, "calls": calls, "tokens": tokens,
        "refused_outputs": refused, "wall_s": round(wall, 1),
        "calls_per_passed": calls / passed if passed else None,
        "tokens_per_passed": tokens / passed if passed else None,
        "minutes_per_passed": wall / 60 / passed if passed else None,
        "by_branch": {b: {"items": y.items, "passed": y.passed,
                          "failed_generation": y.failed_generation, "calls": y.calls,
                          "tokens": y.tokens} for b, y in yields.items()},
        "failures": sorted({f"{c.check}" for item in candidates if item.validation
                            for c in item.validation.failures}),
    }


def _cell(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table(rows: list[dict]) -> str:
    lines = [
        "| config | candidates | gen. failures | passed | pass rate | calls | tokens | "
        "refused outputs | calls / passed | tokens / passed | min / passed |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['config']} | {r['candidates']} | {r['generation_failures']} | {r['passed']} | "
            f"{r['pass_rate']:.0%} | {r['calls']} | {r['tokens']} | {r['refused_outputs']} | "
            f"{_cell(r['calls_per_passed'])} | {_cell(r['tokens_per_passed'], 0)} | "
            f"{_cell(r['minutes_per_passed'], 2)} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="directory for the four runs")
    parser.add_argument("--events", type=int, default=6)
    parser.add_argument("--llm", default="local", help="local[:NAME] (default: the embedded "
                        "default model)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--only", default=",".join(CONFIGS), help="configs to run, in order")
    parser.add_argument("--recount", action="store_true",
                        help="recompute the figures of finished runs (no generation)")
    args = bench_arguments(parser, events=1, only="wiki-norepair,wiki-repair")
    args.base.mkdir(parents=True, exist_ok=True)
    events = _events(args.base)
    results_path = args.base / "results.json"
    rows = json.loads(results_path.read_text()) if results_path.exists() else []
    walls = {r["config"]: r["wall_s"] for r in rows}
    for name in args.only.split(","):
        rows = [r for r in rows if r["config"] != name]
        rows.append(run_config(args.base, name, args, events, walls))
        results_path.write_text(json.dumps(rows, indent=2))
        print(table(rows), flush=True)


if __name__ == "__main__":
    main()
