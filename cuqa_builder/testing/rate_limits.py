"""A provider's rate limit for the scripted server: a responder wrapper that allows so many
requests per window, answers 429 beyond, and sends OpenAI's `x-ratelimit-*` headers on every
reply (limit, remaining, and the time until the window resets as "0.250s")."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

from cuqa_builder.testing.openai_server import Reply, Responder


class WindowLimit:
    def __init__(self, inner: Responder, requests: int, window_s: float) -> None:
        self.inner = inner
        self.requests = requests
        self.window_s = window_s
        self.refused = 0  # 429s answered
        self.answered = 0
        self.starts: list[float] = []  # monotonic arrival time of every request
        self._lock = threading.Lock()
        self._window_end = 0.0
        self._used = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            now = time.monotonic()
            self.starts.append(now)
            if now >= self._window_end:
                self._window_end, self._used = now + self.window_s, 0
            refused = self._used >= self.requests
            if not refused:
                self._used += 1
                self.answered += 1
            else:
                self.refused += 1
            headers = {
                "x-ratelimit-limit-requests": str(self.requests),
                "x-ratelimit-remaining-requests": str(self.requests - self._used),
                "x-ratelimit-reset-requests": f"{self._window_end - now:.3f}s",
            }
        if refused:
            return Reply(text="Rate limit reached for requests", status=429, headers=headers)
        reply = self.inner(body)
        return dataclasses.replace(reply, headers={**reply.headers, **headers})
