"""Where a model's knowledge ends, estimated from its closed-book accuracy by event month.

The probe (`cuqa-eval cutoff`, `evaluation/cutoff_probe.py`) asks a model one-hop questions
about a run's events and counts, per month, how many it answers right. This module holds the
records of that result (`cutoff.json`, also recorded in run.json when `--cutoff auto:MODEL`
uses it), the Wilson interval, the estimation rule, and where results are kept so that
`cuqa-build --cutoff auto:MODEL` can find them. No LLM and no heavy import here.

The rule (ESTIMATION_RULE, written into every result): fit a step to the monthly counts, one
accuracy level for the months up to M ("known") and another after M ("unseen"), choosing the M
with the highest binomial likelihood among the steps that go down (ties: the later month). M is
the estimated cutoff when the drop is at least `margin` and the 95% Wilson intervals of the two
pooled levels do not overlap; otherwise no cutoff is found in the window, and the result says
why. Months without questions are left out; the window must hold clearly unseen months (a run
built with a cutoff well before the model's claimed one, up to recent days).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field

from cuqa_builder.errors import CuqaError, UsageError
from cuqa_builder.jsonio import read_model

Z_95 = 1.959964  # two-sided 95 %
DEFAULT_MARGIN = 0.10
RESULT_FILE = "cutoff.json"
AUTO_PREFIX = "auto:"
ESTIMATION_RULE = (
    "a step fitted to the monthly counts (one accuracy up to month M, another after it, M of "
    "highest binomial likelihood among downward steps); M is the cutoff when the drop is at "
    "least the margin and the two levels' 95% Wilson intervals do not overlap"
)


class CutoffProbeError(CuqaError, ValueError):
    """No usable probe result for `--cutoff auto:...`."""


class CutoffProbeOptions(BaseModel):
    """The probe's own flags (`cuqa-eval cutoff`); the LLM flags are the shared LLMOptions."""

    model_config = ConfigDict(frozen=True)

    per_month: int = Field(30, ge=1, description="events asked about per month",
                           json_schema_extra={"flag": {"metavar": "N"}})
    seed: int = Field(0, description="seed of the sample and of generated questions")
    candidates: Path | None = Field(
        None, description="candidates.jsonl whose unknown sub-questions are asked (default: the "
        "one beside --events, if any)", json_schema_extra={"flag": {"metavar": "FILE"}},
    )
    question_model: str | None = Field(
        None, description="model that writes the questions the candidates lack, at the same "
        "endpoint (default: --model)",
    )
    judge_model: str | None = Field(
        None, description="LLM judge of the answers, at the same endpoint (default: normalised "
        "match)",
    )
    margin: float = Field(
        DEFAULT_MARGIN, ge=0, le=1, description="smallest drop in accuracy (a fraction) that "
        "counts as the cutoff", json_schema_extra={"flag": {"metavar": "FRACTION"}},
    )


class MonthAccuracy(BaseModel):
    month: str = Field(description="YYYY-MM of the events asked about")
    asked: int
    correct: int
    accuracy: float
    low: float = Field(description="95% Wilson interval, lower bound")
    high: float = Field(description="95% Wilson interval, upper bound")


class Level(BaseModel):
    """One side of the fitted step: the months it pools and their accuracy."""

    first: str
    last: str
    asked: int
    correct: int
    accuracy: float
    low: float
    high: float


class CutoffEstimate(BaseModel):
    cutoff: str | None = Field(description="last month the model knows (YYYY-MM); None: not found")
    reason: str = Field(description="how the estimate was reached, or why there is none")
    known: Level | None = None
    unseen: Level | None = None
    margin: float
    rule: str = ESTIMATION_RULE


class CutoffProbeResult(BaseModel):
    """`cutoff.json`: the probe's figures and its estimate."""

    model: str
    judge: str = Field(description="LLM judge, or `normalised match`")
    events: str = Field(description="the events file the questions came from")
    per_month: int
    seed: int
    events_sampled: int
    questions_from_candidates: int
    questions_generated: int
    unusable: int = Field(description="sampled events left out: the question written for "
                          "them was unusable or named its own answer")
    failed: int = Field(description="sampled events left out: their calls failed for good")
    months: list[MonthAccuracy]
    estimate: CutoffEstimate
    probed: str = Field(description="ISO time of the probe, UTC")


class ProbeModelCheck(BaseModel):
    """The build's check that its --probe-model is a model of the cutoff (`stages/
    probe_check.py`), recorded in run.json and the card: closed-book questions about the run's
    first events after the cutoff, and how many the probe model answered."""

    model: str
    judge: str
    events: str = Field(description="the days the events asked about fall in")
    asked: int
    correct: int
    limit: float = Field(description="the share answered from which the model knows the events")
    outcome: Literal["passed", "too few questions", "knows the events", "allowed", "skipped"]
    note: str = ""

    def line(self) -> str:
        if self.outcome == "skipped":
            return f"probe model check of {self.model}: skipped ({self.note})"
        share = f" ({self.correct / self.asked:.0%})" if self.asked else ""
        return (f"probe model check: {self.model} answered {self.correct} of {self.asked} "
                f"closed-book questions about events of {self.events}{share} (judge: "
                f"{self.judge}; {self.limit:.0%} or more: it knew them): {self.outcome}"
                + (f"; {self.note}" if self.note else ""))


def wilson_interval(correct: int, asked: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (sensible at 0 %, 100 % and small n)."""
    if asked == 0:
        return 0.0, 1.0
    share = correct / asked
    denominator = 1 + z * z / asked
    centre = (share + z * z / (2 * asked)) / denominator
    half = z * math.sqrt(share * (1 - share) / asked + z * z / (4 * asked * asked)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def month_accuracy(month: str, asked: int, correct: int) -> MonthAccuracy:
    low, high = wilson_interval(correct, asked)
    return MonthAccuracy(month=month, asked=asked, correct=correct,
                         accuracy=correct / asked if asked else 0.0, low=low, high=high)


def _level(months: list[MonthAccuracy]) -> Level:
    asked = sum(m.asked for m in months)
    correct = sum(m.correct for m in months)
    low, high = wilson_interval(correct, asked)
    return Level(first=months[0].month, last=months[-1].month, asked=asked, correct=correct,
                 accuracy=correct / asked, low=low, high=high)


def _log_likelihood(level: Level) -> float:
    """Binomial log-likelihood of the pooled counts at their own rate (0 log 0 = 0)."""
    total = 0.0
    for hits, rate in ((level.correct, level.accuracy), (level.asked - level.correct,
                                                          1 - level.accuracy)):
        if hits:
            total += hits * math.log(rate)
    return total


@dataclass(frozen=True)
class _Step:
    known: Level
    unseen: Level
    log_likelihood: float


def _best_downward_step(months: list[MonthAccuracy]) -> _Step | None:
    best: _Step | None = None
    for split in range(1, len(months)):
        known, unseen = _level(months[:split]), _level(months[split:])
        if known.accuracy <= unseen.accuracy:
            continue
        step = _Step(known, unseen, _log_likelihood(known) + _log_likelihood(unseen))
        if best is None or step.log_likelihood >= best.log_likelihood:
            best = step
    return best


def estimate_cutoff(months: list[MonthAccuracy], margin: float = DEFAULT_MARGIN) -> CutoffEstimate:
    """The last month the model knows, by ESTIMATION_RULE (see the module's docstring)."""
    asked = [m for m in sorted(months, key=lambda m: m.month) if m.asked]
    if len(asked) < 2:
        return CutoffEstimate(cutoff=None, margin=margin,
                              reason="fewer than two months have questions: nothing to compare")
    step = _best_downward_step(asked)
    if step is None:
        return CutoffEstimate(cutoff=None, margin=margin,
                              reason="accuracy never drops from one month to a later one")
    known, unseen = step.known, step.unseen
    found = (f"accuracy {known.accuracy:.0%} over {known.first}..{known.last} and "
             f"{unseen.accuracy:.0%} over {unseen.first}..{unseen.last}")
    if known.accuracy - unseen.accuracy < margin:
        reason = f"the best step ({found}) drops less than the margin of {margin:.0%}"
        return CutoffEstimate(cutoff=None, reason=reason, known=known, unseen=unseen,
                              margin=margin)
    if known.low <= unseen.high:
        reason = f"the best step ({found}) is within the 95% intervals' overlap"
        return CutoffEstimate(cutoff=None, reason=reason, known=known, unseen=unseen,
                              margin=margin)
    return CutoffEstimate(cutoff=known.last, reason=found, known=known, unseen=unseen,
                          margin=margin)


# --- where results are kept, for `cuqa-build --cutoff auto:MODEL` ------------------------------


def results_dir() -> Path:
    """`$CUQA_CUTOFFS_DIR`, default `~/.cache/cuqa-builder/cutoffs` (beside the models)."""
    configured = os.environ.get("CUQA_CUTOFFS_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "cuqa-builder" / "cutoffs"


def registry_path(model: str) -> Path:
    return results_dir() / f"{quote(model, safe='-_.')}.json"


def read_result(path: Path) -> CutoffProbeResult:
    return read_model(path, CutoffProbeResult, "a cutoff probe result", error=CutoffProbeError)


def find_result(spec: str) -> CutoffProbeResult:
    """The result `auto:SPEC` names: a `cutoff.json`, a probe's output directory, or a model
    whose latest probe result is in `results_dir()`."""
    given = Path(spec)
    if given.is_dir():
        given = given / RESULT_FILE
    if given.is_file():
        return read_result(given)
    path = registry_path(spec)
    if not path.is_file():
        raise CutoffProbeError(
            f"no cutoff probe result for {spec!r} (looked for {path}): run `cuqa-eval cutoff "
            f"--model {spec} --events RUN/events.jsonl --out DIR` first, or give auto:DIR"
        )
    return read_result(path)


def resolve_cutoff(text: str) -> tuple[str, CutoffProbeResult | None]:
    """`auto:MODEL` -> the probe's estimated month and its result; any other text as given."""
    text = text.strip()
    if not text.startswith(AUTO_PREFIX):
        return text, None
    spec = text.removeprefix(AUTO_PREFIX).strip()
    if not spec:
        raise UsageError("--cutoff auto: needs a model name or a probe directory (auto:MODEL)")
    result = find_result(spec)
    if result.estimate.cutoff is None:
        raise CutoffProbeError(
            f"the cutoff probe of {result.model} found no cutoff ({result.estimate.reason}); "
            "give --cutoff YYYY-MM"
        )
    return result.estimate.cutoff, result
