"""Requests and results of the LLM gateway: the one contract every stage and solver uses."""

from __future__ import annotations

from pydantic import BaseModel, Field

from cuqa_builder.errors import CuqaError


class TokenLogprob(BaseModel):
    token: str
    logprob: float
    top: list[tuple[str, float]] = Field(default_factory=list)


class ChatRequest(BaseModel):
    """One chat completion. `template`/`template_hash` are recorded, not sent."""

    messages: list[dict[str, str]]
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    template: str | None = None
    template_hash: str | None = None


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


class GatewayStats(BaseModel):
    calls: int = 0
    cache_hits: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    wall_s: float = 0.0
    # Batch mode (llm/batch.py): rounds flushed, batch files submitted, lines that failed in
    # them and how many of those were asked again in the next round.
    rounds: int = 0
    batches: int = 0
    batch_failed_lines: int = 0
    batch_retried_lines: int = 0


class LLMError(CuqaError, RuntimeError):
    """A call that failed for good (retries exhausted, refused, or unusable output)."""
