"""Benchmark `cuqa-eval`: all eleven methods over synthetic CuQA items against the scripted
OpenAI-compatible server answering every call after a fixed latency.

    python scripts/bench_eval.py [--items 200] [--latency 0.2] [--concurrency 16]

For each method it reports the calls the server saw, the wall time of the whole `cuqa-eval`
command, and the ideal time `calls x latency / concurrency` (the gateway never waits on
anything but the model); the target is wall <= 1.2 x ideal. It also prints retrieval calls per
question, the quantity of the Self-DC paper's claim (Self-DC under n, iterative baselines at 2n
or more).

The scripted model behaves like a model facing compositional unknown questions: 30% of the
questions it is sure of (confidence 90%), 30% it is unsure of (40%: Self-DC decomposes them)
and 40% it does not know (0%); of each question's two sub-questions it knows one and not the
other; it reads passages honestly; Self-Ask asks two follow-ups; IRCoT reasons two sentences
before its answer sentence; RA-ISF says it knows what it is sure of and finds a retrieved
passage relevant only when it holds the fact.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

from bench_common import bench_arguments

from cuqa_builder.cli.evaluate import main as cuqa_eval
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.records.items import CuqaItem, EventRef, GeneratorInfo, SubQuestion
from cuqa_builder.solvers import METHODS
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message

SOURCE = EventSource(title="2024", revid=1, url="https://en.wikipedia.org/wiki/2024")
_QUESTION = re.compile(r"Question: (.*)")


class World:
    """The synthetic facts: item i has an unknown fact (founder of Corp i) and a known one."""

    def __init__(self, n: int) -> None:
        self.composed: dict[str, int] = {}
        self.unknown_sub: dict[str, int] = {}
        self.known_sub: dict[str, int] = {}
        for i in range(n):
            self.composed[self.question(i)] = i
            self.unknown_sub[f"Who founded Corp{i} in 2024?"] = i
            self.known_sub[f"Which prize did Person{i} win in 1990?"] = i

    @staticmethod
    def question(i: int) -> str:
        return f"Which prize did the founder of Corp{i}, set up in 2024, win in 1990?"

    def item(self, i: int) -> CuqaItem:
        unknown, known = (q for table in (self.unknown_sub, self.known_sub)
                          for q, j in table.items() if j == i)
        return CuqaItem(
            id=f"bench-{i}", question=self.question(i), answer=f"Prize{i}", type="ABC",
            difficulty="easy",
            sub_questions=[SubQuestion(question=unknown, answer=f"Person{i}", kind="unknown"),
                           SubQuestion(question=known, answer=f"Prize{i}", kind="known")],
            event=EventRef(id=f"ev-{i}", date=date(2024, 3, 1), text=self.fact(i),
                           source_title="2024", revid=1),
            cutoff="2023-12", generator=GeneratorInfo(model="bench"),
        )

    @staticmethod
    def fact(i: int) -> str:
        return f"Person{i} founds the company Corp{i}."

    def confidence(self, question: str) -> int:
        if question in self.composed:
            return (90, 90, 90, 40, 40, 40, 0, 0, 0, 0)[self.composed[question] % 10]
        return 90 if question in self.known_sub else 0

    def sub_questions(self, question: str) -> list[str]:
        i = self.composed.get(question)
        if i is None:
            return [question]  # a sub-question does not divide further
        return [f"Who founded Corp{i} in 2024?", f"Which prize did Person{i} win in 1990?"]

    def answer(self, question: str, passage: str = "") -> str:
        """Closed book it knows the known sub-question; with a passage, what the passage holds."""
        for table in (self.composed, self.unknown_sub, self.known_sub):
            if question in table:
                i = table[question]
                if question in self.known_sub or (question in self.composed and
                                                  self.confidence(question) == 90):
                    return f"Prize{i}"
                if self.fact(i) in passage:
                    return f"Person{i}" if question in self.unknown_sub else f"Prize{i}"
        return "unknown"


def respond(world: World, latency_s: float):
    def reply(body: dict[str, Any]) -> Reply:
        return Reply(answer(world, last_user_message(body)), delay_s=latency_s)

    return reply


def answer(world: World, prompt: str) -> str:
    questions = _QUESTION.findall(prompt)
    question = questions[-1].strip() if questions else prompt.splitlines()[-1].strip()
    if "indicate your level of confidence" in prompt:
        confidence = world.confidence(question)
        return f"Answer: {world.answer(question)}\nConfidence (0-100): {confidence}%"
    if prompt.startswith("Generate a background document"):
        question = prompt.splitlines()[-1]
        i = {**world.composed, **world.known_sub, **world.unknown_sub}.get(question)
        return world.fact(i) if i is not None and world.confidence(question) else "No idea."
    if "divide the question into smaller" in prompt or "break down this question" in prompt:
        return ", ".join(f"#{n}: {q}" for n, q in enumerate(world.sub_questions(question), 1))
    if "Are follow up questions needed here:" in prompt:
        return self_ask_step(world, prompt, question)
    if "Let’s think step by step" in prompt and "Passage:" in prompt:
        return ircot_or_iter_retgen_step(world, prompt, question)
    if prompt.startswith("Can you use your own knowledge base"):
        question = prompt.split("The problem is: ")[-1].strip()
        return "Yes" if world.confidence(question) == 90 else "No"
    if "Please assess whether this paragraph is relevant" in prompt:
        # Only a one-hop question is answered by one event; a composed one needs two facts.
        i = world.unknown_sub.get(question)
        passage = prompt.split("[1] ")[-1]
        return f"[1] {world.fact(i)}" if i is not None and world.fact(i) in passage else "No."
    if "Here are all related sub-questions" in prompt or "Sub-answer:" in prompt:
        return world.answer(world.sub_questions(question)[-1], prompt)
    passage = prompt.split("Passage: ")[-1] if "Passage: " in prompt else ""
    passage += prompt.split("Relevant paragraphs: ")[-1] if "Relevant paragraphs" in prompt else ""
    return world.answer(question, passage)


def self_ask_step(world: World, prompt: str, question: str) -> str:
    asked = prompt.split("Are follow up questions needed here:")[-1].count("Intermediate answer:")
    subs = world.sub_questions(question)
    if asked < len(subs):
        lead = " Yes.\n" if asked == 0 else ""
        return f"{lead}Follow up: {subs[asked]}\nIntermediate answer: (the model would guess)"
    return f"So the final answer is: {world.answer(subs[-1], prompt)}"


def ircot_or_iter_retgen_step(world: World, prompt: str, question: str) -> str:
    """ITER-RETGEN's prompt ends at "step by step": it answers at once. IRCoT's goes on with the
    reasoning so far: two sentences, then the answer sentence that stops it."""
    reasoning = prompt.split("Let’s think step by step")[-1].strip()
    sentences = reasoning.count(".")
    if prompt.endswith("step by step") or sentences >= 2:
        return f"So the answer is {world.answer(question, prompt)}."
    return "Corp founders are listed in the passages." if sentences == 0 else (
        "The founder won a prize in 1990.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=200)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per call")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    args = bench_arguments(parser, items=3, latency=0.005, concurrency=4)
    world = World(args.items)
    rows = []
    with tempfile.TemporaryDirectory() as scratch, \
            ScriptedLLM(respond(world, args.latency)) as llm:
        work = Path(scratch)
        write_jsonl(work / "cuqa.jsonl", (world.item(i) for i in range(args.items)))
        events = [Event(id=f"ev-{i}", date=date(2024, 3, 1 + i % 28), text=world.fact(i),
                        source=SOURCE) for i in range(args.items)]
        write_jsonl(work / "events.jsonl", events)
        assert cuqa_eval(["index", "--events", str(work / "events.jsonl"),
                          "--out", str(work / "index")]) == 0
        for method in args.methods:
            before = llm.calls
            started = time.perf_counter()
            code = cuqa_eval([
                "--data", str(work / "cuqa.jsonl"), "--method", method, "--corpus",
                str(work / "index"), "--model", "bench", "--base-url", llm.base_url,
                "--concurrency", str(args.concurrency), "--out", str(work / method), "-q",
            ])
            wall = time.perf_counter() - started
            if code != 0:
                return code
            metrics = json.loads((work / method / "metrics.json").read_text())
            calls = llm.calls - before
            rows.append((method, calls, wall, calls * args.latency / args.concurrency,
                         metrics["retrieval_calls"]["total"], metrics["em"]))
    print_table(rows, args)
    return 0


def print_table(rows: list[tuple[str, int, float, float, float, float]],
                args: argparse.Namespace) -> None:
    n = args.items
    print(f"\n{n} items, {args.latency * 1000:.0f} ms per call, concurrency {args.concurrency}")
    print(f"{'method':<12} {'calls':>6} {'wall s':>7} {'ideal s':>8} {'ratio':>6} "
          f"{'retrievals':>10} {'per q':>6} {'EM':>5}")
    for method, calls, wall, ideal, retrievals, em in rows:
        print(f"{method:<12} {calls:>6} {wall:>7.1f} {ideal:>8.1f} {wall / ideal:>6.2f} "
              f"{retrievals:>10g} {retrievals / n:>5.2f}n {em:>5.2f}")
    calls = sum(r[1] for r in rows)
    wall = sum(r[2] for r in rows)
    ideal = sum(r[3] for r in rows)
    print(f"{'all':<12} {calls:>6} {wall:>7.1f} {ideal:>8.1f} {wall / ideal:>6.2f}")


if __name__ == "__main__":
    sys.exit(main())
