"""Loopback stand-ins of two web search APIs, for the `web` retriever's tests and benchmark.

`SearchStandIn("serper", ...)` answers like Serper's Google results API: `POST /search` with a
JSON body `{"q", "num", "gl", "hl"}`, the key in `X-API-KEY` (403 without the right one), and
`organic` results. `SearchStandIn("searxng", ...)` answers like a SearXNG instance:
`GET /search?q=...&format=json` (403 when the json format is not enabled), a page of `results`
whatever the number wanted. What is found for a query comes from `hits(query)`; `failures` are
answered first, one per request (a status and headers: 429 with Retry-After, 500...). Every
request is recorded, so tests count searches exactly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, urlparse

from cuqa_builder.testing.loopback import LoopbackServer, QuietHandler

SEARXNG_PAGE = 20  # results per page, as SearXNG returns them


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str
    date: str | None = None


@dataclass
class SearchRequest:
    method: str
    path: str
    query: str
    num: int | None
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case


class SearchStandIn(LoopbackServer):
    """Run with `with SearchStandIn(...) as search:`; `search.origin` is the API's base URL."""

    def __init__(self, flavour: Literal["serper", "searxng"],
                 hits: Callable[[str], list[Hit]], *, api_key: str | None = None,
                 json_enabled: bool = True, delay_s: float = 0.0) -> None:
        self.flavour = flavour
        self.hits = hits
        self.api_key = api_key
        self.json_enabled = json_enabled
        self.delay_s = delay_s
        self.failures: list[tuple[int, dict[str, str]]] = []
        self.requests: list[SearchRequest] = []
        super().__init__(self._handler())

    @property
    def searches(self) -> int:
        return len(self.requests)

    def answer(self, method: str, path: str, body: bytes,
               headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        url = urlparse(path)
        if self.flavour == "serper":
            request = json.loads(body or b"{}") if method == "POST" else {}
            query, num = str(request.get("q", "")), int(request.get("num", 10))
        else:
            params = {k: v[0] for k, v in parse_qs(url.query).items()}
            query, num = params.get("q", ""), None
        with self.lock:
            self.requests.append(SearchRequest(method, url.path, query, num, headers))
            failure = self.failures.pop(0) if self.failures else None
        if self.delay_s:
            time.sleep(self.delay_s)
        if failure is not None:
            return failure[0], failure[1], {"message": "injected failure"}
        if url.path != "/search":
            return 404, {}, {"message": "not found"}
        if self.flavour == "serper":
            return self._serper(query, num, method, headers)
        return self._searxng(query, params)

    def _serper(self, query: str, num: int, method: str,
                headers: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        if method != "POST":
            return 405, {}, {"message": "POST only"}
        if self.api_key is not None and headers.get("x-api-key") != self.api_key:
            return 403, {}, {"message": "Unauthorized.", "statusCode": 403}
        organic = [
            {"title": hit.title, "link": hit.url, "snippet": hit.snippet, "position": n,
             **({"date": hit.date} if hit.date else {})}
            for n, hit in enumerate(self.hits(query)[:num], start=1)
        ]
        return 200, {}, {"searchParameters": {"q": query, "num": num, "type": "search"},
                         "organic": organic, "credits": 1}

    def _searxng(self, query: str, params: dict[str, str]) -> tuple[int, dict[str, str], Any]:
        if params.get("format") != "json" or not self.json_enabled:
            return 403, {}, "Forbidden"
        results = [
            {"url": hit.url, "title": hit.title, "content": hit.snippet, "engine": "stand-in",
             "engines": ["stand-in"], "score": 1.0 / n, "category": "general"}
            for n, hit in enumerate(self.hits(query)[:SEARXNG_PAGE], start=1)
        ]
        return 200, {}, {"query": query, "number_of_results": len(results), "results": results,
                         "answers": [], "infoboxes": [], "suggestions": []}

    def _handler(self) -> type[QuietHandler]:
        stand_in = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(length) if length else b""
                stand_in.arrive()
                try:
                    # Header names are case-insensitive: recorded in lower case.
                    received = {k.lower(): v for k, v in self.headers.items()}
                    status, headers, payload = stand_in.answer(method, self.path, body,
                                                               received)
                    data = payload.encode() if isinstance(payload, str) else json.dumps(
                        payload).encode()
                    kind = "text/html" if isinstance(payload, str) else "application/json"
                    self.send_body(status, data, kind, headers)
                finally:
                    stand_in.leave()

        return Handler
