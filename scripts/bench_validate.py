"""Benchmark the validate stage's checks (no probes) on synthetic candidates.

Issue 4, Performance: validators over 10,000 candidates in under 10 s. The candidates mix easy
AAB and ABC items and hard items (two easy items merged), about one in ten with a defect a check
must catch (template residue, a leaked answer or bridge, an event before the cutoff, a
duplicate...). Two figures: the checks alone, in memory, and the whole stage (read
`candidates.jsonl`, check, write it back and write `cuqa.jsonl`). Run from the repository root:

    python scripts/bench_validate.py --candidates 10000
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

from bench_common import bench_arguments, judged

from cuqa_builder.cli.build import parse_options
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.candidates import Candidate, Intermediates, Pairing, PromptCall
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import EventRef, GeneratorInfo, SubQuestion
from cuqa_builder.run import CANDIDATES, RunContext
from cuqa_builder.stages import validate
from cuqa_builder.validation.checks import Limits, check_all
from cuqa_builder.window import Window

TARGET_S = 10.0
CUTOFF = "2023-04"
FIRST_DAY = date(2023, 5, 1)
SYLLABLES = ("pel", "dun", "osk", "var", "mer", "tal", "kor", "ben", "sil", "rad", "yon", "gar")
GENERATOR = GeneratorInfo(model="bench", prompts={"merge_questions": "0" * 64})
DEFECTS = (
    lambda c: c.model_copy(update={"question": f"Merged question: {c.question}"}),
    lambda c: c.model_copy(update={"question": f"Is {c.answer} the answer to this? {c.question}"}),
    lambda c: c.model_copy(update={"question": c.question.rstrip("?") + "."}),
    lambda c: c.model_copy(update={"answer": ""}),
    lambda c: c.model_copy(update={"event": c.event.model_copy(update={"date": date(2023, 1, 5)})}),
)


def name(rng: random.Random, words: int = 2) -> str:
    return " ".join(
        "".join(rng.choice(SYLLABLES) for _ in range(3)).capitalize() for _ in range(words)
    )


def easy(n: int, rng: random.Random) -> Candidate:
    """One easy item with made-up names: AAB (a shared answer) or ABC (a hidden bridge)."""
    branch = "AAB" if rng.randint(1, 9) < 5 else "ABC"  # Algorithm 1's 4/9
    cur, known, place = name(rng), name(rng), name(rng)
    day = FIRST_DAY + timedelta(days=n % 400)
    unknown_q = f"Which company opened a factory in {place} on {day:%B %d, %Y}?"
    if branch == "AAB":
        answer, known_q = cur, f"Which company was founded by the engineer {known}?"
        merged = f"Which company founded by the engineer {known} opened a factory in {place} in " \
                 f"{day:%B %Y}?"
    else:
        answer, known_q = known, f"Who founded the company {cur}?"
        merged = f"Who founded the company that opened a factory in {place} in {day:%B %Y}?"
    cur_ent = Entity(text=cur, label="ORG")
    return Candidate(
        id=f"cq-{n:016x}", question=merged, answer=answer, type=branch, difficulty="easy",
        sub_questions=[SubQuestion(question=unknown_q, answer=cur, kind="unknown"),
                       SubQuestion(question=known_q, answer=answer, kind="known")],
        event=EventRef(id=f"ev-{n:016x}", date=day, text=f"{cur} opened a factory in {place}.",
                       source_title=f"Portal:Current events/{day:%Y %B} {day.day}", revid=n),
        cutoff=CUTOFF, generator=GENERATOR, seed=0,
        intermediates=Intermediates(
            branch=branch, cur_ent=cur_ent,
            k_ent=None if branch == "AAB" else Entity(text=known, label="PERSON"),
            known_passage=f"{cur} is a company.", unknown_question=unknown_q,
            known_question=known_q, known_answer=answer, merged_question=merged,
        ),
    )


def hard(n: int, first: Candidate, second: Candidate) -> Candidate:
    merged = f"{second.question.rstrip('?')}, given what {first.answer} is known for?"
    merged = merged.replace(first.answer, "the one asked about first")
    call = PromptCall(function="MergeQuestions", template_hash="0" * 64, raw=merged,
                      parsed=merged)
    return Candidate(
        id=f"cqh-{n:016x}", question=merged, answer=second.answer, type="ABC",
        difficulty="hard", sub_questions=[*first.sub_questions, *second.sub_questions],
        event=second.event, cutoff=CUTOFF, generator=GENERATOR, seed=0,
        sub_items=[first, second],
        pairing=Pairing(link="question", bridge=first.answer, call=call),
    )


def synthetic_candidates(count: int, seed: int = 0) -> list[Candidate]:
    rng = random.Random(seed)
    items: list[Candidate] = []
    while len(items) < count:
        n = len(items)
        if n % 10 == 9:  # one hard item in ten
            items.append(hard(n, easy(n * 7 + 1, rng), easy(n * 7 + 2, rng)))
        elif n % 10 == 4:  # one defect in ten, or a copy of an earlier question
            victim = easy(n, rng)
            if n % 20 == 4 and items:
                items.append(victim.model_copy(update={"question": items[-1].question}))
            else:
                items.append(rng.choice(DEFECTS)(victim))
        else:
            items.append(easy(n, rng))
    return items


def bench_checks(candidates: list[Candidate]) -> tuple[float, Counter[str], int]:
    start = time.perf_counter()
    report = check_all(candidates, Limits())
    elapsed = time.perf_counter() - start
    return elapsed, report.failed, sum(v.passed for v in report.validations)


def bench_stage(candidates: list[Candidate]) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        write_jsonl(out / CANDIDATES, candidates)
        options = parse_options(["--out", tmp, "--quiet"])
        ctx = RunContext(out=out, window=Window.parse(CUTOFF, "2024-12"), options=options)
        start = time.perf_counter()
        validate.run(ctx)
        return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=10_000)
    args = bench_arguments(parser, candidates=200)
    candidates = synthetic_candidates(args.candidates)
    kinds = Counter(f"{c.difficulty} {c.type}" for c in candidates)
    print(f"{len(candidates)} synthetic candidates: "
          + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    checks_s, failed, passed = bench_checks(candidates)
    print(f"checks: {checks_s:.2f} s ({len(candidates) / checks_s:,.0f} candidates/s); "
          f"{passed} passed")
    print("  failed: " + ", ".join(f"{k} {v}" for k, v in failed.most_common()))
    stage_s = bench_stage(candidates)
    print(f"stage (read, check, write both files): {stage_s:.2f} s")
    ok = stage_s < TARGET_S
    print(f"target < {TARGET_S:.0f} s: {'met' if ok else 'MISSED'}")
    return judged(ok, args)


if __name__ == "__main__":
    sys.exit(main())
