"""Run one method over a dataset: concurrent, traced, scored, resumable.

Each finished item is appended (and flushed) to `predictions.jsonl` at once, so a killed run
loses nothing and a re-run skips every id already there. `metrics.json` is rewritten at the end
from every prediction of the items asked for. `eval.json` records what the directory holds; a
re-run with other settings is refused rather than mixed into it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from cuqa_builder.errors import CuqaError
from cuqa_builder.evaluation.datasets import EvalItem, freshqa_groups, source_event_ids
from cuqa_builder.evaluation.metrics import cover_match, exact_match, f1_score, metrics
from cuqa_builder.evaluation.outputs import (
    METRICS,
    PREDICTIONS,
    SETTINGS,
    EvalSettings,
    MetricsFile,
    Prediction,
    read_output,
    write_output,
)
from cuqa_builder.jsonio import JsonlAppender, iter_jsonl
from cuqa_builder.judge import judge, judge_prompt
from cuqa_builder.llm.client import LLMClient
from cuqa_builder.llm.types import LLMError
from cuqa_builder.retrieval.types import RetrievalError, Retriever, WithoutPassages
from cuqa_builder.solvers.base import Solver, SolverOptions, SolverRun

log = logging.getLogger(__name__)


class EvalError(CuqaError, RuntimeError):
    pass


@dataclass
class Evaluation:
    """One method over one dataset; `settings` describe the run (method, options, model...)."""

    solver: Solver
    gateway: LLMClient
    retriever: Retriever | None
    options: SolverOptions
    settings: EvalSettings
    judge_gateway: LLMClient | None = None
    items_in_flight: int = 32  # enough items to keep the gateway's concurrency busy
    progress: bool = True


@dataclass
class Outcome:
    metrics: MetricsFile
    new: int
    resumed: int
    failed: int

    def summary(self, out: Path) -> str:
        m = self.metrics
        acc = f" acc {m.acc:.3f}" if m.acc is not None else ""
        failed = f", {self.failed} failed (re-run to retry)" if self.failed else ""
        return (
            f"{m.run.method}: n {m.n} cover-em {m.cover_em:.3f} em {m.em:.3f} f1 {m.f1:.3f}{acc}; "
            f"retrieval calls {m.retrieval_calls.mean:.2f}/question; "
            f"{self.new} new, {self.resumed} resumed{failed} -> {out / METRICS}"
        )


async def evaluate(evaluation: Evaluation, items: Sequence[EvalItem], out: Path) -> Outcome:
    out.mkdir(parents=True, exist_ok=True)
    _claim_directory(out, evaluation.settings)
    done = {p.id: p for p in iter_jsonl(out / PREDICTIONS, Prediction)}
    todo = [item for item in items if item.id not in done]
    failed = 0
    gate = asyncio.Semaphore(evaluation.items_in_flight)
    bar = tqdm(total=len(items), initial=len(items) - len(todo), unit="q",
               desc=evaluation.settings.method,
               disable=not evaluation.progress)

    async def one(item: EvalItem, appender: JsonlAppender) -> None:
        nonlocal failed
        async with gate:
            try:
                prediction = await predict(evaluation, item)
            except (LLMError, RetrievalError) as exc:
                failed += 1
                log.warning("%s: gave up on this item: %s", item.id, exc)
                bar.update()  # a lost item is done with too: the bar ends at 100 %
                return
            bar.update()  # not for an item cancelled by Ctrl-C: the bar shows what was done
        appender.append(prediction)  # the event loop is single-threaded: no interleaving
        done[item.id] = prediction

    try:
        with JsonlAppender(out / PREDICTIONS) as appender:
            await asyncio.gather(*(one(item, appender) for item in todo))
    finally:
        bar.close()
    finished = [done[item.id] for item in items if item.id in done]
    report = metrics(finished, evaluation.settings, complete=len(finished) == len(items))
    write_output(out / METRICS, report)
    return Outcome(report, new=len(todo) - failed, resumed=len(items) - len(todo), failed=failed)


async def predict(evaluation: Evaluation, item: EvalItem) -> Prediction:
    run = SolverRun(evaluation.gateway, _retriever_for(evaluation, item), evaluation.options)
    answer = (await evaluation.solver(item.question, run)).strip()
    output = answer if run.output is None else run.output.strip()
    yes_no = evaluation.settings.scoring.yes_no_first_word
    acc = None
    if evaluation.judge_gateway is not None:
        name = evaluation.settings.judge_prompt or "iter-retgen"
        judged = output if judge_prompt(name).full_output else answer
        acc = await judge(evaluation.judge_gateway, item.question, judged, item.answers, name)
    decisions = [step for step in run.trace if step.kind == "route"]
    effective_year, hops = freshqa_groups(item)
    return Prediction(
        id=item.id, question=item.question, answers=item.answers, type=item.type,
        difficulty=item.difficulty, prediction=answer, output=output,
        cover_em=cover_match(answer, item.answers),
        em=exact_match(answer, item.answers, yes_no_first_word=yes_no),
        f1=f1_score(answer, item.answers, yes_no_first_word=yes_no), acc=acc,
        routes=dict(Counter(step.decision for step in decisions)),
        route=decisions[0].decision if decisions else None,
        confidence=decisions[0].data.get("confidence") if decisions else None,
        effective_year=effective_year, hops=hops,
        retrieval_calls=run.retrieval_calls, llm_calls=run.llm_calls,
        prompt_tokens=run.prompt_tokens, completion_tokens=run.completion_tokens,
        cost=run.cost, trace=run.trace,
    )


def _retriever_for(evaluation: Evaluation, item: EvalItem) -> Retriever | None:
    info = evaluation.settings.retriever
    if evaluation.retriever is None or info is None or not info.exclude_source_event:
        return evaluation.retriever
    return WithoutPassages(evaluation.retriever, source_event_ids(item))


def _claim_directory(out: Path, settings: EvalSettings) -> None:
    path = out / SETTINGS
    if path.exists():
        recorded = read_output(path, EvalSettings).model_dump(mode="json")
        wanted = settings.model_dump(mode="json")
        if recorded != wanted:
            changed = sorted(k for k in recorded.keys() | wanted.keys()
                             if recorded.get(k) != wanted.get(k))
            raise EvalError(
                f"{out} holds a run with other settings ({', '.join(changed)} differ); "
                "use another --out"
            )
    else:
        write_output(path, settings)


def load_predictions(out: Path) -> list[Prediction]:
    return list(iter_jsonl(out / PREDICTIONS, Prediction))
