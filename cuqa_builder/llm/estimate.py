"""Know the bill first: calls, tokens, cost and time of a command before it runs (`--estimate`).

A stage plans its calls without making any: the prompts it would send, rendered from the real
templates and inputs (events, questions), with later steps' inputs (a known passage, a question)
stood in by text of the expected length. Then, offline:

- **tokens in** = the prompt's characters / characters per token, plus 7 tokens per message (the
  chat format's overhead). Characters per token is 4.0 (English text in OpenAI's tokenizers)
  until the call cache holds answered calls of the model: then it is measured on those (the
  cache's prompts' characters over their prompt tokens, per template when it has 5 calls of
  it), which calibrates it for any model and tokenizer.
- **tokens out** = the mean completion of the same template in the cache (5 calls or more), else
  the planner's default for the step (a question ~30 tokens, a passage ~300); the upper bound
  assumes every call writes its `max_tokens`.
- **cost** from the price table (`prices.py`), live and through the Batch API.
- **time** live = calls x latency / concurrency, or the `--rpm`/`--tpm` pace if slower; latency
  is the cache's mean for the model, else 0.5 s + 20 ms per output token. The embedded model
  runs on this machine's CPU, where a call's time grows with its prompt as well as its output:
  its latency is seconds per prompt token and per output token, fitted on the cache's timed
  calls of it, else on its record of timed calls on this machine (`local.machine_speed`, kept
  by every run), else its speed on 2 cores (10 and 400 ms). In batch mode a step waits
  for the step before it: the number of rounds, each within the provider's 24 h window.

So a small pilot run (`--limit 20`) before `--estimate` makes the figures the model's own.

A call the run's cache already answers costs nothing and takes no time: a stage that knows its
exact request (`PlanningGateway`) counts it apart (`CallPlan.cached`), so an estimate of a
finished run says 0 calls, and why.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from cuqa_builder.llm.cache import CallCache, CallSample, canonical_request, request_key
from cuqa_builder.llm.local_registry import machine_speed
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import (
    ChatRequest,
    ChatResult,
    GatewayStats,
    Speed,
    SpeedSums,
    TokenLogprob,
    held_to_format,
)

CHARS_PER_TOKEN = 4.0
MESSAGE_OVERHEAD_TOKENS = 7
MIN_SAMPLES = 5
API_LATENCY_S, API_S_PER_TOKEN = 0.5, 0.02
# The embedded 1.5B model on 2 cores, 4 calls sharing its slots (fitted on the 92 calls of a
# run on examples/heldout-2023): seconds per prompt token and per output token of one call.
LOCAL_SPEED = Speed(per_prompt_token=0.010, per_output_token=0.40, calls=0)


@dataclass
class Calibration:
    """What the cache says about a model: characters per prompt token, mean completion tokens
    per template, mean latency (defaults when it knows nothing)."""

    chars_per_token: float = CHARS_PER_TOKEN
    overhead: int = MESSAGE_OVERHEAD_TOKENS
    out_tokens: dict[str, float] = field(default_factory=dict)
    template_ratio: dict[str, float] = field(default_factory=dict)  # chars per token
    latency_s: float | None = None
    speed: Speed | None = None  # the embedded model's, fitted on timed calls
    samples: int = 0

    @classmethod
    def from_cache(cls, cache: CallCache | None, model: str) -> Calibration:
        samples = cache.samples(model) if cache is not None else []
        answered = [s for s in samples if s.prompt_tokens > 0]
        if len(answered) < MIN_SAMPLES:
            return cls()
        by_template: dict[str, list[CallSample]] = {}
        for sample in answered:
            by_template.setdefault(sample.template or "", []).append(sample)
        enough = {t: v for t, v in by_template.items() if len(v) >= MIN_SAMPLES}
        timed = [s.latency_s for s in answered if s.latency_s > 0]
        return cls(
            # The measured ratio already holds the chat format's overhead.
            chars_per_token=sum(s.prompt_chars for s in answered)
            / sum(s.prompt_tokens for s in answered),
            overhead=0,
            out_tokens={t: sum(s.completion_tokens for s in v) / len(v)
                        for t, v in enough.items()},
            template_ratio={t: sum(s.prompt_chars for s in v) / sum(s.prompt_tokens for s in v)
                            for t, v in enough.items()},
            latency_s=sum(timed) / len(timed) if timed else None,
            speed=_timed(answered),
            samples=len(answered),
        )

    def tokens_in(self, prompt_chars: int, template: str | None = None) -> float:
        """One message's prompt tokens (a template's own ratio when the cache has one)."""
        ratio = self.template_ratio.get(template or "", self.chars_per_token)
        return prompt_chars / ratio + self.overhead

    def tokens_out(self, template: str, default: float) -> float:
        return self.out_tokens.get(template, default)

    def chars(self, tokens: float) -> int:
        """Text of about `tokens` tokens, in characters (to stand in for a step's output)."""
        return round(tokens * self.chars_per_token)


def _timed(samples: list[CallSample]) -> Speed | None:
    sums = SpeedSums()
    for sample in samples:
        if sample.latency_s > 0:
            sums.add(sample.prompt_tokens, sample.completion_tokens, sample.latency_s)
    return sums.fit() if sums.calls >= MIN_SAMPLES else None


def calibration(settings: LLMSettings, model: str) -> Calibration:
    """The calibration for `model` from the settings' cache file (defaults without one: none
    is created); for the embedded model, its speed on this machine when the cache has none."""
    path = settings.cache_path
    found = Calibration()
    if path is not None and path.exists():
        cache = CallCache(path, read_only=True)
        try:
            found = Calibration.from_cache(cache, model)
        finally:
            cache.close()
    if settings.uses_local_model and found.speed is None:
        measured = machine_speed(model)
        found.speed = measured.fit() if measured.calls >= MIN_SAMPLES else None
        found.speed = found.speed or LOCAL_SPEED
    return found


@dataclass
class StepPlan:
    calls: float = 0.0  # expected calls: a step asked again after a refusal counts its share
    tokens_in: float = 0.0
    tokens_out: float = 0.0
    max_out: float = 0.0


@dataclass
class CallPlan:
    """The calls one model would get from one command, by step (template)."""

    model: str
    calibration: Calibration
    steps: dict[str, StepPlan] = field(default_factory=dict)
    rounds: int = 0  # dependent steps: batch rounds
    notes: list[str] = field(default_factory=list)
    items: int = 0  # what the plan makes, for the stages after it (generation: candidates)
    cached: int = 0  # calls the run's cache answers: no cost, no time (not in `steps`)

    def add(self, step: str, prompt_chars: int, max_tokens: int, expected_out: float,
            template: str | None = None, times: float = 1.0) -> float:
        """Plan one call (`times` of it: a share of an expected retry, or more); returns its
        expected output tokens (for later steps' inputs)."""
        planned = self.steps.setdefault(step, StepPlan())
        out = self.calibration.tokens_out(template or step, expected_out)
        planned.calls += times
        planned.tokens_in += times * self.calibration.tokens_in(prompt_chars, template or step)
        planned.tokens_out += times * min(out, max_tokens)
        planned.max_out += times * max_tokens
        return min(out, max_tokens)

    @property
    def calls(self) -> int:
        return round(sum(s.calls for s in self.steps.values()))

    @property
    def tokens_in(self) -> int:
        return round(sum(s.tokens_in for s in self.steps.values()))

    @property
    def tokens_out(self) -> int:
        return round(sum(s.tokens_out for s in self.steps.values()))


def reads_a_cache(settings: LLMSettings) -> bool:
    """Whether a run would find answers in a call cache: not without a cache file yet, with
    --no-cache, or with --refresh (every call anew)."""
    path = settings.cache_path
    return path is not None and not settings.refresh and path.exists()


@contextmanager
def cache_to_read(settings: LLMSettings) -> Iterator[CallCache | None]:
    """The call cache a run would read, opened read-only (an estimate writes nothing); None
    when it would read none (`reads_a_cache`)."""
    if not reads_a_cache(settings):
        yield None
        return
    assert settings.cache_path is not None
    cache = CallCache(settings.cache_path, read_only=True)
    try:
        yield cache
    finally:
        cache.close()


@dataclass(frozen=True)
class StandIn:
    """What a call the cache cannot answer is planned as (its step, its expected output
    tokens), and the text it is answered with."""

    step: str
    out_tokens: float
    text: str


class PlanningGateway:
    """Plans each call in `plan` instead of making it: calls nothing, writes nothing. A request
    the call cache holds is counted in `plan.cached` and answered as the cache answers it, so
    the calls after it are the ones a re-run makes; any other is planned and answered by
    `stand_in`. A request planned before (`seen`, by cache key) is planned once, as the cache
    would answer it then."""

    def __init__(self, plan: CallPlan, stand_in: Callable[[ChatRequest], StandIn],
                 cache: CallCache | None = None, seen: set[str] | None = None,
                 api: str = "chat", held: bool = False) -> None:
        self.plan = plan
        self.model = plan.model
        self._stand_in = stand_in
        self._cache = cache
        self._seen = set() if seen is None else seen
        self._api = api
        self._held = held  # held to each prompt's reply format, as the gateway would be
        self.planned = 0  # the calls it answered with stand-in text (none from the cache)

    async def chat(self, request: ChatRequest) -> ChatResult:
        request = held_to_format(request, self._held)
        key = request_key(canonical_request(self.model, request, self._api))
        hit = self._cache.get(key) if self._cache is not None else None
        if hit is not None:
            self.plan.cached += 1
            return ChatResult.from_body(hit.response, self.model, latency_s=0.0, cached=True)
        planned = self._stand_in(request)
        self.planned += 1
        out = 0.0
        if key not in self._seen:
            self._seen.add(key)
            chars = sum(len(m.get("content") or "") for m in request.messages)
            out = self.plan.add(planned.step, chars, request.max_tokens or 256,
                                planned.out_tokens, template=request.template)
        logprobs = [TokenLogprob(token=t, logprob=-0.1) for t in planned.text.split()] \
            if request.logprobs else None
        return ChatResult(text=planned.text, model=self.model, logprobs=logprobs,
                          completion_tokens=round(out))


def _calls_seconds(plan: CallPlan, settings: LLMSettings) -> float:
    """The plan's calls' latencies added up."""
    speed = plan.calibration.speed
    if settings.uses_local_model and speed is not None:
        return speed.seconds(plan.tokens_in, plan.tokens_out)
    if plan.calibration.latency_s is not None:
        return plan.calls * plan.calibration.latency_s
    return plan.calls * API_LATENCY_S + API_S_PER_TOKEN * plan.tokens_out


def live_seconds(plan: CallPlan, settings: LLMSettings, concurrency: int) -> tuple[float, str]:
    """Wall time of the calls made live, and what bounds it."""
    bounds = [(_calls_seconds(plan, settings) / concurrency, f"concurrency {concurrency}")]
    if settings.rpm:
        bounds.append((plan.calls / settings.rpm * 60, f"--rpm {settings.rpm:g}"))
    if settings.tpm:
        bounds.append(((plan.tokens_in + plan.tokens_out) / settings.tpm * 60,
                       f"--tpm {settings.tpm:g}"))
    return max(bounds)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def describe(plan: CallPlan, settings: LLMSettings, prices: PriceTable, concurrency: int) -> str:
    """The estimate for one model, as a table and three lines; one line when it asks
    nothing."""
    if not plan.calls:
        why = (f"all {plan.cached:,} calls are in the cache (a re-run reads them there)"
               if plan.cached else "nothing to ask")
        return "\n".join([f"model {plan.model}: 0 calls, 0 min: {why}",
                          *(f"  note: {note}" for note in plan.notes)])
    calibration = plan.calibration
    source = (f"calibrated on {calibration.samples} cached calls: "
              f"{calibration.chars_per_token:.2f} characters per token"
              if calibration.samples else
              f"no cached calls of this model: {CHARS_PER_TOKEN:g} characters per token and "
              "default output lengths")
    width = max([len("total"), *(len(name) for name in plan.steps)])
    speed = calibration.speed
    if settings.uses_local_model and speed is not None:
        source += "; its time " + (
            f"from {speed.calls} timed calls" if speed.calls else "at a default speed")
        source += (f" ({_per_second(speed.per_prompt_token)} prompt and "
                   f"{_per_second(speed.per_output_token)} output tokens/s a call)")
    lines = [f"model {plan.model} ({source})",
             f"  {'step':<{width}}  {'calls':>9}  {'tokens in':>12}  {'tokens out':>12}  "
             f"{'(at most)':>12}"]
    for name, step in plan.steps.items():
        lines.append(f"  {name:<{width}}  {round(step.calls):>9,}  {round(step.tokens_in):>12,}  "
                     f"{round(step.tokens_out):>12,}  {round(step.max_out):>12,}")
    max_out = round(sum(s.max_out for s in plan.steps.values()))
    lines.append(f"  {'total':<{width}}  {plan.calls:>9,}  {plan.tokens_in:>12,}  "
                 f"{plan.tokens_out:>12,}  {max_out:>12,}")
    price = prices.price(plan.model)
    if price is None:
        lines.append(f"  cost: unknown (no price for {plan.model!r}; add it with --prices FILE)")
    else:
        live = prices.cost(plan.model, plan.tokens_in, plan.tokens_out)
        batch = prices.cost(plan.model, plan.tokens_in, plan.tokens_out, batch=True)
        most = prices.cost(plan.model, plan.tokens_in, max_out)
        lines.append(f"  cost: ${live:,.4f} live (at most ${most:,.4f}), ${batch:,.4f} through "
                     f"the Batch API (USD per 1M tokens in/out: {price.input:g}/"
                     f"{price.output:g} live, {price.per_million(True)[0]:g}/"
                     f"{price.per_million(True)[1]:g} batch)")
    seconds, bound = live_seconds(plan, settings, concurrency)
    lines.append(f"  time: about {_duration(seconds)} live (bound by {bound}); in batch mode "
                 f"{plan.rounds} round(s), each answered within the provider's 24 h window")
    if plan.cached:
        lines.append(f"  cache: {plan.cached:,} more calls are in the cache (no cost, no time)")
    lines += [f"  note: {note}" for note in plan.notes]
    return "\n".join(lines)


def _per_second(seconds_per_token: float) -> str:
    if seconds_per_token <= 0:
        return "any"
    rate = 1 / seconds_per_token
    return f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"  # a slow model is no "0 tokens/s"


def one_per_model(plans: list[CallPlan]) -> list[CallPlan]:
    """The plans to describe, one per model: a stage's plan that asks a model nothing (the
    embedded model composes from structure) gives its notes to a later plan of the same model
    instead of a line "0 calls: nothing to ask" beside that plan's calls."""
    kept: list[CallPlan] = []
    for plan in plans:
        later = [other for other in plans if other is not plan and other.model == plan.model
                 and (other.calls or other.cached)]
        if plan.calls or plan.cached or not later:
            kept.append(plan)
        else:
            later[0].notes[:0] = plan.notes
    return kept


def compare(plan: CallPlan, stats: GatewayStats) -> str:
    """One line: what was estimated before the run against what it spent."""
    def change(spent: int, planned: int) -> str:
        return f"{100 * (spent - planned) / planned:+.0f}%" if planned else "n/a"

    return (f"  estimate {plan.calls} calls, {plan.tokens_in} tokens in, {plan.tokens_out} out; "
            f"spent {stats.calls} calls ({stats.cache_hits} cache hits), "
            f"{stats.prompt_tokens} in ({change(stats.prompt_tokens, plan.tokens_in)}), "
            f"{stats.completion_tokens} out ({change(stats.completion_tokens, plan.tokens_out)})")
