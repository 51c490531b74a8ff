"""The calls to a model, whatever its endpoint: answered from the call cache when it can; an
identical request made while the first is running waits for its answer; a call on the wire when
its caller is cancelled (Ctrl-C) goes on until its answer is cached; calls take a concurrency
slot, are paced by the rate limits (`ratelimit.py`) and retried (`retries.py`), and counted; in
batch mode a call not cached waits for its round (`batch/`)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any, Generic, TypeVar

from cuqa_builder.llm.batch.rounds import Rounds
from cuqa_builder.llm.cache import CallCache, CallRow, canonical_request, request_key
from cuqa_builder.llm.client import prompt_request
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.ratelimit import RateLimiter, reserved_tokens
from cuqa_builder.llm.retries import call_with_retries
from cuqa_builder.llm.secrets import Scrubber
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import (
    ChatRequest,
    ChatResult,
    GatewayStats,
    LLMError,
    SpeedSums,
    held_to_format,
)
from cuqa_builder.prompts import PromptTemplate

log = logging.getLogger("cuqa_builder.llm.gateway")  # the gateway's calls: its name in the log


ClientT = TypeVar("ClientT")


class ModelCalls(ABC, Generic[ClientT]):
    """What every call to a model goes through, whatever its endpoint: the call cache,
    identical requests joined, the calls Ctrl-C left on the wire kept until cached, the
    concurrency slots, the rate limits, the retries and the counts. `Gateway` (gateway.py)
    makes the attempts with the `openai` client."""

    def __init__(
        self,
        client: ClientT,
        model: str,
        settings: LLMSettings,
        cache: CallCache | None,
        prices: PriceTable,
        secret: str | None,
        concurrency: int,
    ) -> None:
        self.model = model
        self._client = client  # what `_attempt` sends with
        self._settings = settings
        self._cache = cache
        self._prices = prices
        self.scrubber = Scrubber(secret)
        self._slots = asyncio.Semaphore(concurrency)
        self._limiter = RateLimiter(concurrency, settings.rpm, settings.tpm)
        self._rounds: Rounds | None = None  # batch mode: set by open_gateway
        self._stats = GatewayStats()
        self.speed = SpeedSums()  # the live calls' times, for the embedded model's record
        self._started = time.monotonic()
        # Identical requests made while the first is still running wait for its answer
        # instead of paying for the same call again.
        self._pending: dict[str, asyncio.Future[ChatResult]] = {}
        # Answer from the cache alone (a record rebuilt from it): a call it lacks fails, unpaid.
        self.cache_only = False
        # Calls whose request is on the wire (an answer on its way, paid whether read or not),
        # and of those the ones whose caller was cancelled (Ctrl-C): kept running until their
        # answer is cached (`drain`), never retried.
        self._sending: set[asyncio.Task[Any]] = set()
        self._orphans: set[asyncio.Task[Any]] = set()

    @property
    def stats(self) -> GatewayStats:
        self._stats.wall_s = time.monotonic() - self._started
        return self._stats

    async def prompt(
        self, template: PromptTemplate, values: Mapping[str, str], **sampling: Any
    ) -> ChatResult:
        """Render `template` as one user message and send it, recording the template used."""
        return await self.chat(prompt_request(template, values, **sampling))

    async def chat(self, request: ChatRequest) -> ChatResult:
        request = held_to_format(request, self._settings.held_to_format)
        canonical = canonical_request(self.model, request, self._settings.api)
        key = request_key(canonical)
        if self._cache is not None and not self._settings.refresh:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.count_hit(key)
                self._stats.cache_hits += 1
                # A hit costs nothing and takes no model time; the answer and its usage are kept.
                return ChatResult.from_body(hit.response, self.model, latency_s=0.0, cached=True)
        if self.cache_only:
            raise LLMError(f"{self.model}: the call is not in the call cache, and only the cache "
                           "is read here", model=self.model)
        pending = self._pending.get(key)
        if pending is not None:
            result = await asyncio.shield(pending)
            self._stats.cache_hits += 1
            return result.model_copy(update={"cached": True, "cost": 0.0, "latency_s": 0.0})
        self._pending[key] = asyncio.get_running_loop().create_future()
        call = asyncio.ensure_future(self._call_and_store(key, canonical, request))
        call.add_done_callback(lambda done: self._settle(key, done))
        try:
            return await asyncio.shield(call)
        except asyncio.CancelledError:
            # Ctrl-C: a call not sent yet is dropped; one on the wire goes on until its answer
            # is in the cache, so that a resumed run does not pay for it again.
            if call in self._sending:
                self._orphans.add(call)
                call.add_done_callback(self._orphans.discard)
            else:
                call.cancel()
            raise

    def _settle(self, key: str, call: asyncio.Task[ChatResult]) -> None:
        future = self._pending.pop(key)
        if call.cancelled():
            future.cancel()
        elif call.exception() is not None:
            future.set_exception(call.exception())
            future.exception()  # nobody may be waiting: do not warn "never retrieved"
        else:
            future.set_result(call.result())

    async def drain(self) -> None:
        """Wait for the calls on the wire whose callers were cancelled (Ctrl-C), each until it
        is answered and cached or its timeout ends it; a second Ctrl-C drops them."""
        if self._orphans:
            log.warning("%s: keeping the answers of %d calls in flight (Ctrl-C again to drop "
                        "them)", self.model, len(self._orphans))
            await asyncio.wait(set(self._orphans))

    async def _call_and_store(
        self, key: str, canonical: str, request: ChatRequest
    ) -> ChatResult:
        if self._rounds is not None:  # batch mode: stored with its round's answers
            return await self._rounds.ask(key, canonical, request)
        body, raw, latency = await self._call_with_retries(request)
        stored = self.scrubber.without_key(raw)
        if stored != raw:
            # An endpoint echoed our key in its answer: the caller gets what the cache keeps,
            # so the key reaches no output file and a replay reads the very same answer.
            body = json.loads(stored)
        result = ChatResult.from_body(body, self.model, latency_s=latency, cached=False)
        result.cost = self._prices.cost(self.model, result.prompt_tokens, result.completion_tokens)
        self._stats.count(result)
        self.speed.add(result.prompt_tokens, result.completion_tokens, latency)
        if self._cache is not None:
            self._cache.put(CallRow(
                key=key, model=self.model, canonical_request=canonical, response_json=stored,
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                latency_s=latency, cost=result.cost, template=request.template,
                template_hash=request.template_hash,
            ))
        return result

    @asynccontextmanager
    async def outside_work(self) -> AsyncIterator[None]:
        """Around work off the event loop that leads to a call (see `batch.Rounds`)."""
        if self._rounds is None:
            yield
        else:
            async with self._rounds.outside_work():
                yield

    @property
    def limiter(self) -> RateLimiter:
        return self._limiter

    async def _call_with_retries(self, request: ChatRequest) -> tuple[dict[str, Any], str, float]:
        async def once() -> tuple[dict[str, Any], str, float]:
            async with self._slots:
                reserved = reserved_tokens(
                    sum(len(m.get("content") or "") for m in request.messages),
                    request.max_tokens,
                )
                async with self._limiter.call(reserved):
                    with self._on_the_wire():
                        body, raw, latency = await self._attempt(request)
                usage = body.get("usage") or {}
                self._limiter.used(reserved, int(usage.get("total_tokens") or reserved))
                return body, raw, latency

        return await call_with_retries(
            once, tries=self._settings.max_retries + 1, model=self.model, stats=self._stats,
            stop=lambda: asyncio.current_task() in self._orphans)

    @contextmanager
    def _on_the_wire(self) -> Iterator[None]:
        task = asyncio.current_task()
        assert task is not None
        self._sending.add(task)
        try:
            yield
        finally:
            self._sending.discard(task)

    @abstractmethod
    async def _attempt(self, request: ChatRequest) -> tuple[dict[str, Any], str, float]:
        """One try at the endpoint: the answer's body, its raw text and the seconds it took;
        raises `Retryable` for a failure worth another try, `LLMError` for one that is not."""
