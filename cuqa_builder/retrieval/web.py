"""Web search as a retriever, like the paper's Google retriever (top-k results, section 5.2):
a Google results API (Serper, the service LangChain's `GoogleSerperAPIWrapper` calls) or a
self-hosted SearXNG instance's JSON API. Each result's snippet is a passage.

A search is paid (Serper bills per query), so every search goes through a SQLite cache kept
beside the LLM calls: a repeated search is answered from it and counted as a hit; identical
searches made at the same time are paid once. Failures are retried (429 and 5xx, `Retry-After`
honoured, timeouts, connection errors, malformed answers); a search that fails for good is a
`RetrievalError`, which ends the one question. Keys come from the environment only and are
scrubbed from everything stored or raised. HTTP goes through the standard library.
"""

from __future__ import annotations

import json
import random
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from pydantic import BaseModel

from cuqa_builder import __version__
from cuqa_builder.retrieval.search_cache import SearchCache, search_key
from cuqa_builder.retrieval.types import Passage, RetrievalError
from cuqa_builder.wiki.api import parse_retry_after

SERPER_URL = "https://google.serper.dev"
SERPER_KEY_ENV = "SERPER_API_KEY"
# USD per search: Serper's list price for its smallest pack when this was written ($1 per
# 1,000 queries; larger packs cost less): override with --search-cost.
SERPER_COST = 0.001
RETRYABLE = frozenset({408, 429})
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
RETRY_AFTER_CAP_S = 60.0


@dataclass(frozen=True)
class HttpRequest:
    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None


class SearchService(Protocol):
    """One search API: how a query becomes a request, and its answer passages."""

    name: str
    endpoint: str
    cost_per_search: float
    secret: str | None

    def identity(self, query: str, k: int) -> dict[str, Any]: ...

    def request(self, query: str, k: int) -> HttpRequest: ...

    def passages(self, answer: dict[str, Any], k: int) -> list[Passage]: ...

    def advice(self, status: int) -> str: ...


class Serper:
    """Google results through Serper: `POST /search` with `{"q", "num", "gl", "hl"}` and the key
    in `X-API-KEY`; `organic` holds the results (title, link, snippet, date)."""

    name = "serper"

    def __init__(self, endpoint: str, api_key: str, *, cost_per_search: float = SERPER_COST,
                 gl: str = "us", hl: str = "en") -> None:
        self.endpoint = endpoint.rstrip("/")
        self.secret = api_key
        self.cost_per_search = cost_per_search
        self.gl, self.hl = gl, hl

    def identity(self, query: str, k: int) -> dict[str, Any]:
        return {"service": self.name, "endpoint": self.endpoint, "q": query, "num": k,
                "gl": self.gl, "hl": self.hl}

    def request(self, query: str, k: int) -> HttpRequest:
        body = json.dumps({"q": query, "num": k, "gl": self.gl, "hl": self.hl}).encode()
        headers = {"X-API-KEY": self.secret or "", "Content-Type": "application/json"}
        return HttpRequest("POST", f"{self.endpoint}/search", headers, body)

    def passages(self, answer: dict[str, Any], k: int) -> list[Passage]:
        found = []
        for hit in answer.get("organic") or []:
            snippet = str(hit.get("snippet") or "").strip()
            if not snippet:
                continue
            text = f"{hit['date']}: {snippet}" if hit.get("date") else snippet
            found.append(Passage(id=str(hit.get("link") or f"serper:{len(found)}"),
                                 title=hit.get("title") or None, text=text))
        return found[:k]

    def advice(self, status: int) -> str:
        if status in (401, 403):
            return f"check {SERPER_KEY_ENV}"
        return "the query was refused"


class SearxNG:
    """A SearXNG instance: `GET /search?q=...&format=json`; `results` hold url, title, content.
    The instance must list `json` in `search.formats` of its settings.yml (else 403)."""

    name = "searxng"
    cost_per_search = 0.0
    secret = None

    def __init__(self, endpoint: str, *, language: str = "en", cost_per_search: float = 0.0):
        self.endpoint = endpoint.rstrip("/")
        self.language = language
        self.cost_per_search = cost_per_search

    def identity(self, query: str, k: int) -> dict[str, Any]:
        # SearXNG returns a page of results whatever k is: k is applied when reading.
        return {"service": self.name, "endpoint": self.endpoint, "q": query,
                "language": self.language}

    def request(self, query: str, k: int) -> HttpRequest:
        params = urllib.parse.urlencode({"q": query, "format": "json", "language": self.language})
        return HttpRequest("GET", f"{self.endpoint}/search?{params}")

    def passages(self, answer: dict[str, Any], k: int) -> list[Passage]:
        found = [
            Passage(id=str(hit.get("url") or f"searxng:{n}"), title=hit.get("title") or None,
                    text=str(hit.get("content") or "").strip())
            for n, hit in enumerate(answer.get("results") or [])
        ]
        return [p for p in found if p.text][:k]

    def advice(self, status: int) -> str:
        if status == 403:
            return "enable the json format in the instance's settings.yml (search: formats)"
        return "the query was refused"


class SearchStats(BaseModel):
    searches: int = 0  # paid: sent to the service
    cache_hits: int = 0
    failures: int = 0
    cost: float = 0.0


class _Retryable(Exception):
    def __init__(self, reason: str, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait_s = wait_s


class WebSearchRetriever:
    """`search(query, k)` over a web search service; safe to call from many threads."""

    name = "web"

    def __init__(self, service: SearchService, cache: SearchCache | None = None, *,
                 refresh: bool = False, timeout_s: float = 30.0, max_retries: int = 4,
                 concurrency: int = 4) -> None:
        self.service = service
        self.cache = cache
        self.refresh = refresh
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.stats = SearchStats()
        self._slots = threading.BoundedSemaphore(concurrency)
        self._stats_lock = threading.Lock()
        self._key_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
        self._user_agent = f"cuqa-builder/{__version__} (research evaluation)"

    def search(self, query: str, k: int) -> list[Passage]:
        if not query.strip() or k <= 0:
            return []
        canonical, key = search_key(self.service.identity(query, k))
        with self._stats_lock:
            key_lock = self._key_locks[key]
        with key_lock:  # a search already under way for the same request is waited for
            answer = None
            if self.cache is not None and not self.refresh:
                answer = self.cache.get(key)
            if answer is not None:
                self._count(cache_hits=1)
            else:
                answer = self._paid_search(query, k, key, canonical)
        return self.service.passages(answer, k)

    def _paid_search(self, query: str, k: int, key: str, canonical: str) -> dict[str, Any]:
        raw, latency = self._fetch(self.service.request(query, k))
        stored = self._scrub(raw)
        answer = json.loads(stored)
        self._count(searches=1, cost=self.service.cost_per_search)
        if self.cache is not None:
            self.cache.put(key, service=self.service.name, canonical_request=canonical,
                           response_json=stored, latency_s=latency,
                           cost=self.service.cost_per_search)
        return answer

    def _count(self, **add: float) -> None:
        with self._stats_lock:
            for name, value in add.items():
                setattr(self.stats, name, getattr(self.stats, name) + value)

    def _fetch(self, request: HttpRequest) -> tuple[str, float]:
        tries = self.max_retries + 1
        for attempt in range(tries):
            try:
                with self._slots:
                    return self._attempt(request)
            except _Retryable as failure:
                if attempt + 1 == tries:
                    self._count(failures=1)
                    raise RetrievalError(f"{self.service.name}: search failed after {tries} "
                                         f"tries: {failure.reason}") from None
                time.sleep(_backoff_s(attempt, failure.wait_s))
        raise AssertionError("unreachable")

    def _attempt(self, request: HttpRequest) -> tuple[str, float]:
        headers = {"User-Agent": self._user_agent, "Accept": "application/json",
                   **request.headers}
        http = urllib.request.Request(request.url, data=request.body, headers=headers,
                                      method=request.method)
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(http, timeout=self.timeout_s) as response:
                raw = response.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            self._refuse_or_retry(exc)
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise _Retryable(self._scrub(f"connection failed: {reason}")) from None
        try:
            answer = json.loads(raw)
            if not isinstance(answer, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            raise _Retryable(self._scrub(f"malformed answer ({exc}): {raw[:120]!r}")) from None
        return raw, time.perf_counter() - started

    def _refuse_or_retry(self, exc: urllib.error.HTTPError) -> NoReturn:
        reason = f"HTTP {exc.code}"
        if exc.code in RETRYABLE or exc.code >= 500:
            raise _Retryable(reason, parse_retry_after(exc.headers.get("Retry-After"))) from None
        self._count(failures=1)
        raise RetrievalError(f"{self.service.name} refused the search ({reason}): "
                             f"{self.service.advice(exc.code)}") from None

    def _scrub(self, text: str) -> str:
        secret = self.service.secret
        return text.replace(secret, "***") if secret else text


def _backoff_s(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP_S)
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * random.uniform(0.5, 1.0)
