"""Client-side rate limits: `--rpm` and `--tpm` pacing, and back-off read from the provider's
`x-ratelimit-*` headers before it has to refuse a call with 429.

- `--rpm R` spaces call starts 60/R seconds apart (no bursts: providers enforce a per-minute limit
  over shorter slices too), so any second sees at most R/60 starts (plus one at its edge).
- `--tpm T` does the same with tokens: a call reserves its prompt (estimated from its length) plus
  `max_tokens`; what it did not use is given back when its answer comes.
- Headers (OpenAI's names; other providers copy them): when `x-ratelimit-remaining-requests`
  (or `-tokens`) says the calls already in flight would use up what is left, new calls wait until
  `x-ratelimit-reset-requests` (`-tokens`) has passed. Calls in flight are also capped adaptively:
  a 429 halves the cap, and each full cap's worth of answers without one raises it by one again,
  up to `--concurrency`.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager

# English text runs at about four characters per token in OpenAI's tokenizers.
CHARS_PER_TOKEN = 4.0
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_reset(value: str | None) -> float | None:
    """`x-ratelimit-reset-*` as seconds: "1s", "6m0s", "20ms", "1h2m3.5s", or a bare number."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(value)
    if not parts or "".join(n + u for n, u in parts) != value:
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in parts)


def _header_int(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


def reserved_tokens(prompt_chars: int, max_tokens: int | None) -> int:
    """What a call may use, as providers count it against a token limit before answering."""
    return math.ceil(prompt_chars / CHARS_PER_TOKEN) + (max_tokens or 0)


class _Pace:
    """Evenly spaced starts: each start reserves `cost` units of a `per_minute` budget."""

    def __init__(self, per_minute: float) -> None:
        self.seconds_per_unit = 60.0 / per_minute
        self.next_at = 0.0

    def reserve(self, now: float, cost: float) -> float:
        """When this start may happen (now or later); the budget after it is taken."""
        start = max(now, self.next_at)
        self.next_at = start + cost * self.seconds_per_unit
        return start

    def give_back(self, now: float, cost: float) -> None:
        self.next_at = max(now, self.next_at - cost * self.seconds_per_unit)


class RateLimiter:
    """Shared by every call of one gateway; all methods run on the event loop's thread."""

    def __init__(
        self,
        concurrency: int,
        rpm: float | None = None,
        tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_in_flight = concurrency
        self.cap = concurrency  # adaptive: halved by a 429, raised again by answers
        self.in_flight = 0
        self.refusals = 0  # 429s seen
        self.header_waits = 0  # times the headers made new calls wait
        self._requests = _Pace(rpm) if rpm else None
        self._tokens = _Pace(tpm) if tpm else None
        self._clock = clock
        self._blocked_until = 0.0
        self._last_start = float("-inf")  # when the latest call actually started (--rpm)
        self._answers_since_cut = 0
        self._last_reserved = 0  # tokens the latest call reserved: what the next may need
        self._room = asyncio.Condition()

    @asynccontextmanager
    async def call(self, tokens: int) -> AsyncIterator[None]:
        """Hold one call's place: wait for pace, headroom and the adaptive cap."""
        async with self._room:
            await self._room.wait_for(lambda: self.in_flight < self.cap)
            self.in_flight += 1
        self._last_reserved = tokens
        try:
            await self._wait_for_pace(tokens)
            yield
        finally:
            async with self._room:
                self.in_flight -= 1
                self._room.notify_all()

    async def _wait_for_pace(self, tokens: int) -> None:
        now = self._clock()
        start = max(now, self._blocked_until)
        if self._requests is not None:
            start = max(start, self._requests.reserve(start, 1))
        if self._tokens is not None:
            start = max(start, self._tokens.reserve(start, tokens))
        if start > now:
            await asyncio.sleep(start - now)
        if self._requests is not None:
            # A busy event loop wakes sleepers late and then several at once: keep even the
            # actual starts apart (checked and set without an await in between: atomic).
            while (gap := self._last_start + self._requests.seconds_per_unit
                   - self._clock()) > 0:
                await asyncio.sleep(gap)
            self._last_start = self._clock()

    def used(self, reserved: int, actual: int) -> None:
        """A call's answer came with its real token count: give back what it did not use."""
        if self._tokens is not None and actual < reserved:
            self._tokens.give_back(self._clock(), reserved - actual)

    def observe(self, headers: Mapping[str, str], refused: bool = False) -> None:
        """Read the provider's rate-limit headers after an answer (or a 429)."""
        if refused:
            self.refusals += 1
            self.cap = max(1, self.cap // 2)
            self._answers_since_cut = 0
        else:
            self._answers_since_cut += 1
            if self._answers_since_cut >= self.cap and self.cap < self.max_in_flight:
                self.cap += 1
                self._answers_since_cut = 0
        others = self.in_flight - 1  # calls already sent that will draw on what is left
        for kind in ("requests", "tokens"):
            remaining = _header_int(headers, f"x-ratelimit-remaining-{kind}")
            if remaining is None:
                continue
            # One call more than those in flight: headers arrive late on a busy machine, and
            # a call answered meanwhile has drawn on what they say is left.
            needed = (others + 2) * (1 if kind == "requests" else self._last_reserved)
            if refused or remaining <= needed:
                reset = parse_reset(headers.get(f"x-ratelimit-reset-{kind}"))
                if reset is not None:
                    self._blocked_until = max(self._blocked_until, self._clock() + reset)
                    self.header_waits += 1
