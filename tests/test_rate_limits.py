"""Client-side rate limits: --rpm/--tpm pacing and back-off read from x-ratelimit headers,
against the scripted server through the real `openai` client."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.ratelimit import RateLimiter, parse_reset, reserved_tokens
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import ChatRequest
from cuqa_builder.testing.openai_server import Reply, RuleResponder, ScriptedLLM
from cuqa_builder.testing.rate_limits import WindowLimit


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _ask_all(settings: LLMSettings, count: int, words: int = 3) -> RateLimiter:
    async def run() -> RateLimiter:
        async with open_gateway(settings) as gateway:
            await asyncio.gather(*(
                gateway.chat(ChatRequest(messages=[{"role": "user", "content": " ".join(
                    [f"question {i}"] * words)}], max_tokens=10))
                for i in range(count)
            ))
            return gateway.limiter

    return asyncio.run(run())


@pytest.mark.parametrize(("text", "seconds"), [
    ("1s", 1.0), ("6m0s", 360.0), ("20ms", 0.02), ("1h2m3.5s", 3723.5), ("0.250s", 0.25),
    ("2", 2.0), ("soon", None), ("", None), (None, None),
])
def test_reset_durations_in_the_providers_format(text: str | None, seconds: float | None) -> None:
    assert parse_reset(text) == seconds


def test_rpm_spaces_call_starts_evenly(tmp_path: Path) -> None:
    timing = WindowLimit(RuleResponder([], default="ok"), requests=10_000, window_s=60)
    with ScriptedLLM(timing) as llm:
        _ask_all(LLMSettings(model="m", base_url=llm.base_url, concurrency=8, rpm=600,
                             cache_path=None), count=12)
    gaps = [b - a for a, b in zip(timing.starts, timing.starts[1:], strict=False)]
    assert len(timing.starts) == 12
    # 600 per minute: one start every 0.1 s, never a burst (the first call also opens the
    # connection, so it reaches the server a little late).
    assert min(gaps[1:]) > 0.085
    assert timing.starts[-1] - timing.starts[0] == pytest.approx(1.1, abs=0.08)


def test_tpm_paces_by_reserved_tokens(tmp_path: Path) -> None:
    timing = WindowLimit(RuleResponder([], default="ok"), requests=10_000, window_s=60)
    with ScriptedLLM(timing) as llm:
        # Each call reserves its prompt (16 words = 175 chars -> 44 tokens) plus max_tokens 10.
        per_call = reserved_tokens(175, 10)
        _ask_all(LLMSettings(model="m", base_url=llm.base_url, concurrency=8,
                             tpm=per_call * 60 * 5, cache_path=None), count=6, words=8)
    # ~5 calls per second by reservation; the answer's real usage (17 tokens) gives most back,
    # so the pace is faster than the reservation alone but never a burst of all six at once.
    span = timing.starts[-1] - timing.starts[0]
    assert 0.15 < span < 1.1


def test_headers_stop_new_calls_before_the_provider_refuses(tmp_path: Path) -> None:
    limit = WindowLimit(RuleResponder([], default=Reply(text="ok", delay_s=0.02)),
                        requests=10, window_s=0.5)
    with ScriptedLLM(limit) as llm:
        limiter = _ask_all(LLMSettings(model="m", base_url=llm.base_url, concurrency=4,
                                       cache_path=None, max_retries=6), count=40)
    assert limit.answered == 40
    assert limit.refused == 0  # never asked past the window's budget
    assert limiter.header_waits > 0 and limiter.refusals == 0


def test_without_reading_headers_the_same_calls_meet_429s() -> None:
    """The stand-in's limit is real: a client that ignores the headers is refused."""
    limit = WindowLimit(RuleResponder([], default=Reply(text="ok", delay_s=0.02)),
                        requests=10, window_s=0.5)

    def blind(llm: ScriptedLLM, i: int) -> int:
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]})
        request = urllib.request.Request(f"{llm.base_url}/chat/completions", body.encode(),
                                         {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as refused:
            return refused.code

    with ScriptedLLM(limit) as llm, ThreadPoolExecutor(4) as pool:
        statuses = list(pool.map(lambda i: blind(llm, i), range(40)))
    assert statuses.count(429) == limit.refused > 0


def test_a_429_halves_the_cap_and_answers_raise_it_again() -> None:
    limiter = RateLimiter(concurrency=8)
    limiter.observe({}, refused=True)
    assert limiter.cap == 4 and limiter.refusals == 1
    for _ in range(4):
        limiter.observe({})
    assert limiter.cap == 5
