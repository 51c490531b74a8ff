"""The one way this project talks to a model: cached, retried, bounded, counted, and secret-free.

    async with open_gateway(settings) as gw:
        result = await gw.chat(ChatRequest(messages=[...], temperature=0.1))

Every call goes through the `openai` client to an OpenAI-compatible endpoint: a remote API, or
llama.cpp's server for the embedded model (started here, stopped on exit). Calls go to the chat
endpoint, or with `api="completions"` to the legacy completions endpoint of instruct models (the
messages' text as the prompt, token logprobs in either of the two shapes servers return). The
client's own retries are off because we retry ourselves: 408/409/429/5xx, timeouts, connection
errors and malformed bodies, with exponential back-off and jitter, waiting as long as
`Retry-After` asks (`retries.py`). The API key is scrubbed from every message we raise or log
(`secrets.py`). What every call goes through whatever its endpoint (the cache, identical
requests joined, slots, retries, counts) is `calls.py`; this module makes the attempts.

Calls are paced by `--rpm`/`--tpm` and the provider's `x-ratelimit-*` headers (`ratelimit.py`).
In batch mode (`--batch`, `--batch-files`) a call that is not cached waits for its round
(`batch/`) instead; `OpenAIBatches` below is how rounds reach the Files and Batches endpoints.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import openai

from cuqa_builder.llm.batch.answers import BatchAnswers
from cuqa_builder.llm.batch.rounds import Rounds
from cuqa_builder.llm.batch.service import BatchState, batch_state
from cuqa_builder.llm.batch.wire import CHAT_URL, COMPLETIONS_URL
from cuqa_builder.llm.bodies import (
    check_shape,
    completion_prompt,
    completion_sampling,
    request_body,
    sampling,
)
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.llm.calls import ModelCalls
from cuqa_builder.llm.local import SERVERS, LocalServer
from cuqa_builder.llm.local_registry import record_speed
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.retries import Retryable, backoff_s, retry_after_s, worth_retrying
from cuqa_builder.llm.secrets import read_api_key
from cuqa_builder.llm.settings import LOCAL_SLOTS_MAX, LLMSettings
from cuqa_builder.llm.types import ChatRequest, LLMError

log = logging.getLogger(__name__)

_LOCAL_KEY = "local"  # llama.cpp's server takes any key


class LocalEndpoint:
    """The embedded model's server, started by the first call the cache cannot answer: a
    re-run served from the cache, or a run with nothing to ask, never waits for the model to
    load. The server comes from the process's pool, so a later stage finds it running."""

    def __init__(self, server: LocalServer, timeout_s: float) -> None:
        self._wanted = server
        self._server: LocalServer | None = None
        self._client: openai.AsyncOpenAI | None = None
        self._timeout_s = timeout_s
        self._starting = asyncio.Lock()

    @property
    def started(self) -> bool:
        return self._client is not None

    async def client(self) -> openai.AsyncOpenAI:
        async with self._starting:
            if self._client is None:
                self._server = await asyncio.to_thread(SERVERS.acquire, self._wanted)
                self._client = openai.AsyncOpenAI(
                    base_url=self._server.base_url, api_key=_LOCAL_KEY, max_retries=0,
                    timeout=self._timeout_s,
                )
        return self._client

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
        if self._server is not None:
            SERVERS.release(self._server)


class Gateway(ModelCalls[openai.AsyncOpenAI | LocalEndpoint]):
    """A model at its OpenAI-compatible endpoint (or the embedded model's server): the calls of
    `ModelCalls` (llm/calls.py), each attempt made with the `openai` client."""

    async def _attempt(self, request: ChatRequest) -> tuple[dict[str, Any], str, float]:
        # The embedded model loads before the clock starts: a call's latency is the model's.
        client = (await self._client.client() if isinstance(self._client, LocalEndpoint)
                  else self._client)
        started = time.perf_counter()
        try:
            if self._settings.api == "completions":
                response = await client.completions.with_raw_response.create(
                    model=self.model, prompt=completion_prompt(request.messages),
                    **completion_sampling(request),
                )
            else:
                response = await client.chat.completions.with_raw_response.create(
                    model=self.model, messages=request.messages, **sampling(request)
                )
            self._limiter.observe(response.headers)
            raw = response.text
        except openai.APITimeoutError:
            raise Retryable(f"no answer within {self._settings.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            detail = str(cause) or type(cause).__name__
            raise Retryable(self.scrubber.scrub(f"connection failed: {detail}")) from None
        except openai.APIStatusError as exc:
            detail = exc.body.get("message") if isinstance(exc.body, dict) else None
            reason = self.scrubber.scrub(f"HTTP {exc.status_code}: {detail or exc.message}")
            self._limiter.observe(exc.response.headers, refused=exc.status_code == 429)
            if worth_retrying(exc.status_code):
                raise Retryable(reason, retry_after_s(exc.response.headers)) from None
            self._stats.failures += 1
            raise LLMError(f"{self.model}: the endpoint refused the call: {reason}",
                           model=self.model) from None
        latency = time.perf_counter() - started
        try:
            body = json.loads(raw)
            check_shape(body)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            reason = f"malformed response ({exc}): {raw[:120]!r}"
            raise Retryable(self.scrubber.scrub(reason)) from None
        return body, raw, latency


class OpenAIBatches:
    """The Files and Batches endpoints for `batch.Rounds`, retried like chat calls."""

    def __init__(self, client: openai.AsyncOpenAI, gateway: Gateway, max_retries: int) -> None:
        self._client = client
        self._gateway = gateway
        self._tries = max_retries + 1

    async def _retried(self, what: str, call: Any) -> Any:
        for attempt in range(self._tries):
            try:
                return await call()
            except (openai.APITimeoutError, openai.APIConnectionError) as exc:
                reason, wait = f"{what}: {type(exc).__name__}", None
            except openai.APIStatusError as exc:
                reason = self._gateway.scrubber.scrub(
                    f"{what}: HTTP {exc.status_code}: {exc.message}")
                if not worth_retrying(exc.status_code):
                    raise LLMError(f"{self._gateway.model}: {reason}",
                                   model=self._gateway.model) from None
                wait = retry_after_s(exc.response.headers)
            if attempt + 1 < self._tries:
                log.warning("%s; retrying", reason)
                await asyncio.sleep(backoff_s(attempt, wait))
        raise LLMError(f"{self._gateway.model}: {reason} (after {self._tries} tries)",
                       model=self._gateway.model)

    async def upload(self, path: Path) -> str:
        async def call() -> str:
            with path.open("rb") as data:
                return (await self._client.files.create(file=data, purpose="batch")).id

        return await self._retried(f"uploading {path.name}", call)

    async def create(self, file_id: str) -> BatchState:
        endpoint = COMPLETIONS_URL if self._gateway._settings.api == "completions" else CHAT_URL
        tried = False

        async def call() -> Any:
            nonlocal tried
            # A try that failed on the way back (a timeout) may have made the batch: look for it
            # before asking again, so the same requests are never in two batches.
            made = await self._find(file_id) if tried else None
            tried = True
            return made or await self._client.batches.create(
                input_file_id=file_id, endpoint=endpoint, completion_window="24h",
            )

        return batch_state(await self._retried("creating a batch", call))

    async def find(self, file_id: str) -> BatchState | None:
        made = await self._retried(f"looking for the batch of {file_id}",
                                   lambda: self._find(file_id))
        return None if made is None else batch_state(made)

    async def _find(self, file_id: str) -> Any:
        """The newest batch whose input is `file_id`: batches are listed newest first, and none
        made before the file was uploaded can hold it."""
        uploaded = (await self._client.files.retrieve(file_id)).created_at
        async for batch in self._client.batches.list(limit=100):
            if batch.input_file_id == file_id:
                return batch
            if batch.created_at < uploaded:
                return None
        return None

    async def retrieve(self, batch_id: str) -> BatchState:
        return batch_state(await self._retried(
            f"looking at batch {batch_id}", lambda: self._client.batches.retrieve(batch_id)
        ))

    async def download(self, file_id: str) -> bytes:
        response = await self._retried(
            f"downloading {file_id}", lambda: self._client.files.content(file_id)
        )
        return response.content


@asynccontextmanager
async def open_gateway(settings: LLMSettings) -> AsyncIterator[Gateway]:
    """Open the cache and yield a ready gateway (the embedded model, if selected, starts with
    the first call the cache cannot answer)."""
    async with AsyncExitStack() as stack:
        concurrency = settings.concurrency
        if settings.batch_mode == "api" and settings.uses_local_model:
            raise LLMError("the embedded model has no Batch API: give --base-url or "
                           "$OPENAI_API_KEY for --batch, or use --batch-files DIR")
        client: openai.AsyncOpenAI | LocalEndpoint
        secret: str | None = None  # llama.cpp's server is started without a key
        if settings.uses_local_model:
            assert settings.local is not None
            concurrency = min(settings.concurrency, LOCAL_SLOTS_MAX)
            client = LocalEndpoint(LocalServer(settings.local, threads=settings.threads,
                                               parallel=concurrency), settings.timeout_s)
            model = settings.local
        elif settings.model:
            model, api_key = settings.model, read_api_key(settings)
            # A placeholder ("none" for a self-hosted endpoint) is no secret to scrub from text.
            secret = api_key if api_key == os.environ.get("OPENAI_API_KEY") else None
            client = openai.AsyncOpenAI(base_url=settings.base_url, api_key=api_key,
                                        max_retries=0, timeout=settings.timeout_s)
        else:
            raise LLMError("no model name: pass --model NAME (the endpoint's model id), "
                           "or use the embedded model with --llm local[:NAME]")
        stack.push_async_callback(client.close)
        cache = None
        if settings.cache_path is not None:
            cache = CallCache(settings.cache_path)
            stack.callback(cache.close)
        prices = PriceTable.load(settings.prices_path)
        if prices.price(model) is None and cache is not None and cache.samples(model, limit=1):
            prices.said_before(model)  # an earlier command of the run paid for it, and warned
        gateway = Gateway(client, model, settings, cache, prices, secret, concurrency)
        if settings.uses_local_model:  # how fast it ran, for the next --estimate
            stack.callback(record_speed, model, gateway.speed)
        if settings.batched:
            gateway._rounds = _open_rounds(gateway, client, settings, cache, prices)
            stack.push_async_callback(gateway._rounds.close)
        try:
            yield gateway
        finally:
            await gateway.drain()  # before the cache closes


def _open_rounds(
    gateway: Gateway, client: openai.AsyncOpenAI | LocalEndpoint, settings: LLMSettings,
    cache: CallCache | None, prices: PriceTable,
) -> Rounds:
    if cache is None:
        raise LLMError("batch answers are kept in the call cache: drop --no-cache")
    to_files = settings.batch_mode == "files"
    return Rounds(
        model=gateway.model, cache=cache, body_of=partial(request_body, gateway.model, settings),
        sink=BatchAnswers(gateway.model, settings, prices, gateway.scrubber, gateway._stats),
        url=COMPLETIONS_URL if settings.api == "completions" else CHAT_URL,
        stats=gateway._stats,
        max_requests=settings.batch_max_requests, max_bytes=settings.batch_max_bytes,
        max_retries=settings.max_retries,
        service=None if to_files or isinstance(client, LocalEndpoint)
        else OpenAIBatches(client, gateway, settings.max_retries),
        directory=settings.batch_dir if to_files else None,
        poll_s=settings.batch_poll_s, progress=settings.progress,
        accept_partial=settings.accept_partial_round,
    )
