"""A local OpenAI-compatible server with scripted answers, for the real `openai` client.

`ScriptedLLM` answers `POST /v1/chat/completions` and the legacy `POST /v1/completions` (the
prompt as plain text, logprobs in the endpoint's own token/token_logprobs shape) on 127.0.0.1
(the path of each request is recorded in `paths`). What it says is decided by a
`responder(body) -> Reply` callable; the default one matches rules (substring of the last user
message -> answer). Replies can inject failures: an HTTP status with headers (429 + Retry-After,
500), a delay (to trip timeouts or measure concurrency), empty or malformed content.
Every request body is recorded, so tests can count calls exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cuqa_builder.testing.loopback import LoopbackServer, QuietHandler

JSON = "application/json"


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: bytes | None = None  # sent verbatim instead of a completion (malformed replies)
    token_logprob: float = -0.1  # logprob given to every whitespace token of `text`
    finish_reason: str = "stop"


Responder = Callable[[dict[str, Any]], Reply]


def last_user_message(body: dict[str, Any]) -> str:
    """The last user message of a chat request, or a completions request's prompt."""
    if "prompt" in body:
        prompt = body["prompt"]
        return str(prompt[-1] if isinstance(prompt, list) else prompt)
    for message in reversed(body.get("messages", [])):
        if message.get("role") == "user":
            return str(message.get("content", ""))
    return ""


class RuleResponder:
    """Answer with the first rule whose key occurs in the last user message."""

    def __init__(self, rules: list[tuple[str, str | Reply]], default: str | Reply = "") -> None:
        self.rules = rules
        self.default = default

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        for key, answer in self.rules:
            if key in prompt:
                return answer if isinstance(answer, Reply) else Reply(text=answer)
        return self.default if isinstance(self.default, Reply) else Reply(text=self.default)


def _tokens(text: str) -> list[str]:
    """Whitespace tokens that join back into `text`."""
    tokens = [t + " " for t in text.split(" ")] if text else []
    if tokens:
        tokens[-1] = tokens[-1][:-1]
    return tokens


def _usage(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def _text_completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """A legacy completions answer; `logprobs: k` gets OpenAI's parallel-list shape."""
    tokens = _tokens(reply.text)
    logprobs = None
    if body.get("logprobs") is not None:
        logprobs = {
            "tokens": tokens,
            "token_logprobs": [reply.token_logprob] * len(tokens),
            "top_logprobs": [{t: reply.token_logprob} for t in tokens],
            "text_offset": [sum(map(len, tokens[:i])) for i in range(len(tokens))],
        }
    return {
        "id": f"cmpl-{time.monotonic_ns()}",
        "object": "text_completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "text": reply.text, "finish_reason": reply.finish_reason,
                     "logprobs": logprobs}],
        "usage": _usage(len(str(body.get("prompt", "")).split()), len(tokens)),
    }


def _completion(body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    tokens = _tokens(reply.text)
    prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": reply.text},
        "finish_reason": reply.finish_reason,
        "logprobs": None,
    }
    if body.get("logprobs"):
        k = int(body.get("top_logprobs") or 0)
        choice["logprobs"] = {
            "content": [
                {
                    "token": t,
                    "logprob": reply.token_logprob,
                    "bytes": list(t.encode()),
                    "top_logprobs": [
                        {"token": t, "logprob": reply.token_logprob, "bytes": list(t.encode())}
                    ][:k],
                }
                for t in tokens
            ]
        }
    return {
        "id": f"chatcmpl-{time.monotonic_ns()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "scripted"),
        "choices": [choice],
        "usage": _usage(prompt_tokens, len(tokens)),
    }


class ScriptedLLM(LoopbackServer):
    """Run with `with ScriptedLLM(responder) as llm:`; `llm.base_url` ends in `/v1`."""

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder: Responder = responder or RuleResponder([], default="ok")
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        super().__init__(self._handler())

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    @property
    def calls(self) -> int:
        return len(self.requests)

    def _record(self, body: dict[str, Any], headers: dict[str, str], path: str) -> None:
        with self.lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.paths.append(path)
        self.arrive()

    def _handler(self) -> type[QuietHandler]:
        fake = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # /v1/models, used by some clients as a health check
                self._send(200, {"object": "list", "data": [{"id": "scripted"}]})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                fake._record(body, dict(self.headers), self.path)
                try:
                    reply = fake.responder(body)
                    if reply.delay_s:
                        time.sleep(reply.delay_s)
                    if reply.raw_body is not None:
                        self.send_body(reply.status, reply.raw_body, JSON, reply.headers)
                    elif reply.status != 200:
                        error = {"error": {"message": reply.text or "injected", "type": "test"}}
                        self._send(reply.status, error, reply.headers)
                    elif self.path.rstrip("/").endswith("/v1/completions"):
                        self._send(200, _text_completion(body, reply), reply.headers)
                    else:
                        self._send(200, _completion(body, reply), reply.headers)
                finally:
                    fake.leave()

            def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None):
                self.send_body(status, json.dumps(payload).encode(), JSON, headers or {})

        return Handler
