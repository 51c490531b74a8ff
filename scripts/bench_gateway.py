"""Benchmark the LLM gateway (issue 3, Performance).

Scripted endpoint (default): N calls at concurrency C against the local scripted server answering
each call after 200 ms, run in a child process so that this process's CPU time is the gateway's
own (openai client, asyncio, cache, parsing). Targets: wall time within 1.15x of the ideal
(N x 0.2 s / C), our CPU time per call under 5 ms, and a second identical run making 0 calls.

Embedded model (`--local NAME`): generation speed seen through the gateway against llama.cpp's
own `timings` for the same calls (target >= 0.95x). The gateway's latency also holds the prompt
evaluation, so the net figure subtracts llama.cpp's reported prompt time; the end-to-end figures
compare whole calls with llama.cpp's prompt + generation time.

    python scripts/bench_gateway.py [--calls 800] [--concurrency 16]
    python scripts/bench_gateway.py --local smollm2-135m-instruct-q4_1 [--prompts 6]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path

from bench_common import bench_arguments, judged

from cuqa_builder.llm.cache import CallCache, canonical_request, request_key
from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import ChatRequest, ChatResult

LATENCY_S = 0.2
# About the size of a generation prompt (an event and its instructions) and of its answer.
PROMPT_WORDS = 250
ANSWER = "What did the city council approve on the same day the new bridge opened to traffic?"


def serve_scripted(pipe: Connection) -> None:
    """Child process: the scripted server until told to stop; reports how many calls it got."""
    from cuqa_builder.testing.openai_server import Reply, RuleResponder, ScriptedLLM

    with ScriptedLLM(RuleResponder([], default=Reply(text=ANSWER, delay_s=LATENCY_S))) as llm:
        pipe.send(llm.base_url)
        pipe.recv()
        pipe.send(llm.calls)


def scripted_requests(count: int) -> list[ChatRequest]:
    filler = " ".join(["context"] * PROMPT_WORDS)
    return [
        ChatRequest(
            messages=[{"role": "user", "content": f"Event {i}: {filler}\nQuestion:"}],
            temperature=0.7, top_p=0.9, seed=i, max_tokens=128,
            template="Bench", template_hash="0" * 64,
        )
        for i in range(count)
    ]


async def run_batch(settings: LLMSettings, requests: list[ChatRequest]) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) to answer every request through one gateway."""
    async with open_gateway(settings) as gw:
        wall, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(gw.chat(request) for request in requests))
        return time.perf_counter() - wall, time.process_time() - cpu


def bench_scripted(calls: int, concurrency: int) -> bool:
    parent, child = multiprocessing.Pipe()
    server = multiprocessing.get_context("spawn").Process(target=serve_scripted, args=(child,))
    server.start()
    try:
        base_url = parent.recv()
        requests = scripted_requests(calls)
        with tempfile.TemporaryDirectory() as scratch:
            settings = LLMSettings(
                model="bench", base_url=base_url, cache_path=Path(scratch) / "c.sqlite",
                concurrency=concurrency,
            )
            wall, cpu = asyncio.run(run_batch(settings, requests))
            rerun_wall, _ = asyncio.run(run_batch(settings, requests))
        parent.send("stop")
        served = parent.recv()
    finally:
        server.join(timeout=10)
    ideal = calls * LATENCY_S / concurrency
    cpu_ms = cpu / calls * 1000
    print(f"scripted endpoint, {LATENCY_S * 1000:.0f} ms per call, {calls} calls at "
          f"concurrency {concurrency}")
    print(f"  wall {wall:.2f} s, ideal {ideal:.2f} s: {wall / ideal:.3f}x (target <= 1.15x)")
    print(f"  our CPU {cpu_ms:.2f} ms per call (target < 5 ms)")
    print(f"  identical re-run: {served - calls} calls to the server, {rerun_wall:.2f} s "
          f"(target 0 calls)")
    return wall / ideal <= 1.15 and cpu_ms < 5 and served == calls


LOCAL_PROMPTS = [
    "Write two sentences about the history of the bicycle.",
    "Explain in three sentences why the sky looks blue.",
    "List four uses of copper and say why each one suits it.",
    "Describe a busy train station at dawn in three sentences.",
    "Summarise how a bill becomes law in a parliament, in three sentences.",
    "Give three tips for keeping houseplants healthy, one sentence each.",
]


async def run_local(name: str, prompts: list[str], cache: Path, max_tokens: int) -> tuple[
    float, list[tuple[ChatResult, str]]
]:
    settings = LLMSettings(local=name, cache_path=cache, concurrency=1)
    started = time.perf_counter()
    async with open_gateway(settings) as gw:
        load_s = time.perf_counter() - started
        done = []
        for prompt in prompts:
            request = ChatRequest(
                messages=[{"role": "user", "content": prompt}], temperature=0.0,
                max_tokens=max_tokens,
            )
            done.append((await gw.chat(request), request_key(canonical_request(gw.model, request))))
        return load_s, done


def bench_local(name: str, count: int, max_tokens: int) -> bool:
    prompts = (LOCAL_PROMPTS * (count // len(LOCAL_PROMPTS) + 1))[:count]
    with tempfile.TemporaryDirectory() as scratch:
        cache_path = Path(scratch) / "c.sqlite"
        load_s, done = asyncio.run(run_local(name, prompts, cache_path, max_tokens))
        cache = CallCache(cache_path)
        timings = []
        for _, key in done:
            row = cache.get(key)
            assert row is not None, "every finished call is cached"
            timings.append(row.response["timings"])
        cache.close()
    tokens = sum(result.completion_tokens for result, _ in done)
    latency = sum(result.latency_s for result, _ in done)
    prompt_s = sum(t["prompt_ms"] for t in timings) / 1000
    generate_s = sum(t["predicted_ms"] for t in timings) / 1000
    llama_generation = sum(t["predicted_n"] for t in timings) / generate_s
    through_gateway = tokens / (latency - prompt_s)
    llama_whole = sum(t["predicted_n"] for t in timings) / (prompt_s + generate_s)
    gateway_whole = tokens / latency
    ratio = through_gateway / llama_generation
    print(f"embedded {name}: {len(done)} calls, {tokens} tokens generated, "
          f"server start {load_s:.1f} s")
    print(f"  llama.cpp generation {llama_generation:.1f} tokens/s; through the gateway "
          f"(net of prompt time) {through_gateway:.1f} tokens/s: {ratio:.3f}x (target >= 0.95x)")
    print(f"  whole calls: llama.cpp {llama_whole:.1f} tokens/s, gateway {gateway_whole:.1f} "
          f"tokens/s: {gateway_whole / llama_whole:.3f}x")
    print(f"  {latency / len(done):.2f} s per call on average")
    return ratio >= 0.95


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=800, help="200 events x 4 prompts")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--local", metavar="NAME", help="benchmark this embedded model instead")
    parser.add_argument("--prompts", type=int, default=6, help="calls to the embedded model")
    parser.add_argument("--max-tokens", type=int, default=64)
    args = bench_arguments(parser, calls=40, concurrency=4)
    if args.local:
        ok = bench_local(args.local, args.prompts, args.max_tokens)
    else:
        ok = bench_scripted(args.calls, args.concurrency)
    print("all targets met" if ok else "a target was missed")
    return judged(ok, args)


if __name__ == "__main__":
    sys.exit(main())
