"""Requests and results of the LLM gateway: the one contract every stage and solver uses."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from cuqa_builder.errors import CuqaError


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    top: list[tuple[str, float]] = Field(default_factory=list)


class ChatRequest(BaseModel):
    """One chat completion. `template`/`template_hash` are recorded, not sent; `reply_schema`
    (the template's reply format as a JSON schema, JSON text) is sent as `response_format` only
    to a model that is held to it (`held_to_format`)."""

    messages: list[dict[str, str]]
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None
    template: str | None = None
    template_hash: str | None = None
    reply_schema: str | None = None


def held_to_format(request: ChatRequest, held: bool) -> ChatRequest:
    """The request as sent to a model that is (`held`) or is not held to its template's reply
    format. The embedded model keeps to a prompt's lines only when llama.cpp constrains its
    output to the format's JSON schema; a remote model is asked in words, as the papers do."""
    if not held or request.reply_schema is None or request.response_format is not None:
        return request
    schema = json.loads(request.reply_schema)
    return request.model_copy(update={"response_format": {
        "type": "json_schema",
        "json_schema": {"name": request.template or "reply", "schema": schema}}})


class ChatResult(BaseModel):
    text: str
    model: str
    finish_reason: str | None = None
    logprobs: list[TokenLogprob] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    latency_s: float = 0.0
    cached: bool = False

    @classmethod
    def from_body(cls, body: dict[str, Any], model: str, *, latency_s: float,
                  cached: bool) -> ChatResult:
        """The result an endpoint's JSON answer (chat or completions) stands for, as the call
        cache keeps it."""
        choice = body["choices"][0]
        usage = body.get("usage") or {}
        return cls(
            text=_choice_text(choice),
            model=model,
            finish_reason=choice.get("finish_reason"),
            logprobs=_logprobs(choice.get("logprobs")),
            prompt_tokens=usage.get("prompt_tokens") or 0,
            completion_tokens=usage.get("completion_tokens") or 0,
            latency_s=latency_s,
            cached=cached,
        )


def _choice_text(choice: dict[str, Any]) -> str:
    if "message" in choice:
        return choice["message"].get("content") or ""
    return choice.get("text") or ""


def _logprobs(data: dict[str, Any] | None) -> list[TokenLogprob] | None:
    if data and "token_logprobs" in data:
        return _legacy_logprobs(data)
    if not data or data.get("content") is None:
        return None
    return [
        TokenLogprob(
            token=item["token"],
            logprob=item["logprob"],
            top=[(alt["token"], alt["logprob"]) for alt in item.get("top_logprobs") or []],
        )
        for item in data["content"]
    ]


def _legacy_logprobs(data: dict[str, Any]) -> list[TokenLogprob]:
    """The completions endpoint's own shape: parallel lists of tokens, their logprobs and
    {token: logprob} alternatives (a null logprob, as for an echoed first token, is skipped)."""
    tops = data.get("top_logprobs") or [None] * len(data["tokens"])
    return [
        TokenLogprob(token=token, logprob=logprob, top=list((top or {}).items()))
        for token, logprob, top in zip(data["tokens"], data["token_logprobs"], tops, strict=True)
        if logprob is not None
    ]


class GatewayStats(BaseModel):
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    wall_s: float = 0.0
    # Batch mode (llm/batch/): rounds flushed, batch files submitted and the requests written
    # in them, lines that failed in them and how many of those were asked again in the next round.
    rounds: int = 0
    batches: int = 0
    batch_requests: int = 0
    batch_failed_lines: int = 0
    batch_retried_lines: int = 0

    def count(self, result: ChatResult) -> None:
        """One call answered (live or in a batch): its tokens and cost."""
        self.calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost += result.cost


class Speed(BaseModel):
    """What a call of a model takes: seconds per prompt token and per output token, each call
    sharing the server's parallel slots as it did when measured."""

    per_prompt_token: float
    per_output_token: float
    calls: int = Field(description="the timed calls it was measured on (0: a default)")

    def seconds(self, tokens_in: float, tokens_out: float) -> float:
        return tokens_in * self.per_prompt_token + tokens_out * self.per_output_token


class SpeedSums(BaseModel):
    """Timed calls of a model summed as a least-squares fit of latency = a x prompt tokens +
    b x output tokens needs them (kept per model on this machine: `local.speed_record`)."""

    calls: int = 0
    pp: float = 0.0  # sum of prompt tokens squared
    oo: float = 0.0  # output tokens squared
    po: float = 0.0  # prompt x output tokens
    pl: float = 0.0  # prompt tokens x latency
    ol: float = 0.0  # output tokens x latency

    def add(self, prompt_tokens: int, output_tokens: int, latency_s: float) -> None:
        self.calls += 1
        self.pp += prompt_tokens * prompt_tokens
        self.oo += output_tokens * output_tokens
        self.po += prompt_tokens * output_tokens
        self.pl += prompt_tokens * latency_s
        self.ol += output_tokens * latency_s

    def merged(self, other: SpeedSums) -> SpeedSums:
        return SpeedSums(**{name: getattr(self, name) + getattr(other, name)
                            for name in SpeedSums.model_fields})

    def fit(self) -> Speed | None:
        """Both rates by least squares; where one would come out below 0, the other alone
        (non-negative least squares of two rates). None without a timed call."""
        det = self.pp * self.oo - self.po * self.po
        if det > 0:
            a = (self.pl * self.oo - self.ol * self.po) / det
            b = (self.ol * self.pp - self.pl * self.po) / det
            if a >= 0 and b >= 0:
                return Speed(per_prompt_token=a, per_output_token=b, calls=self.calls)
            if b < 0:
                return Speed(per_prompt_token=self.pl / self.pp, per_output_token=0.0,
                             calls=self.calls)
        if self.oo > 0:
            return Speed(per_prompt_token=0.0, per_output_token=self.ol / self.oo,
                         calls=self.calls)
        if self.pp > 0:
            return Speed(per_prompt_token=self.pl / self.pp, per_output_token=0.0,
                         calls=self.calls)
        return None


class LLMError(CuqaError, RuntimeError):
    """A call that failed for good (retries exhausted, refused, or unusable output). `model`:
    the model whose call it was, when one was asked (a stage that asks several names its
    role)."""

    def __init__(self, message: str, *, model: str | None = None) -> None:
        super().__init__(message)
        self.model = model


class BatchCallFailed(LLMError):
    """A batch call that failed in every round `--max-retries` allows, counted over every
    command: it fails at once until a larger `--max-retries` gives it more rounds."""
