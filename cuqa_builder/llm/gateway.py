"""The one way this project talks to a model: cached, retried, bounded, counted, and secret-free.

    async with open_gateway(settings) as gw:
        result = await gw.chat(ChatRequest(messages=[...], temperature=0.1))

Every call goes through the `openai` client to an OpenAI-compatible endpoint: a remote API, or
llama.cpp's server for the embedded model (started here, stopped on exit). Calls go to the chat
endpoint, or with `api="completions"` to the legacy completions endpoint of instruct models (the
messages' text as the prompt, token logprobs in either of the two shapes servers return). The
client's own retries are off because we retry ourselves: 408/409/429/5xx, timeouts, connection
errors and malformed bodies, with exponential back-off and jitter, waiting as long as
`Retry-After` asks. The API key is scrubbed from every message we raise or log.

Calls are paced by `--rpm`/`--tpm` and the provider's `x-ratelimit-*` headers (`ratelimit.py`).
In batch mode (`--batch`, `--batch-files`) a call that is not cached waits for its round
(`batch.py`) instead; `OpenAIBatches` below is how rounds reach the Files and Batches endpoints.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import random
import re
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import openai

from cuqa_builder.llm.batch.rounds import Rounds
from cuqa_builder.llm.batch.service import BatchState
from cuqa_builder.llm.batch.wire import CHAT_URL, COMPLETIONS_URL
from cuqa_builder.llm.cache import (
    CallCache,
    CallRow,
    SubmittedRequest,
    canonical_request,
    request_key,
)
from cuqa_builder.llm.client import prompt_request
from cuqa_builder.llm.local import SERVERS, LocalServer, record_speed
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.ratelimit import RateLimiter, reserved_tokens
from cuqa_builder.llm.settings import LOCAL_SLOTS_MAX, LLMSettings
from cuqa_builder.llm.types import (
    ChatRequest,
    ChatResult,
    GatewayStats,
    LLMError,
    SpeedSums,
    held_to_format,
)
from cuqa_builder.prompts import PromptTemplate

log = logging.getLogger(__name__)

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 20.0
RETRY_AFTER_CAP_S = 60.0
_RETRYABLE_STATUS = frozenset({408, 409, 429})
_LOCAL_KEY = "local"  # llama.cpp's server takes any key
_SECRET_PATTERNS = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+|//[^/\s:@]+:[^/\s@]+@)")


class _Retryable(Exception):
    """One failed attempt worth repeating; `wait_s` is the server's Retry-After, if any."""

    def __init__(self, reason: str, wait_s: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait_s = wait_s


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


class Gateway:
    def __init__(
        self,
        client: openai.AsyncOpenAI | LocalEndpoint,
        model: str,
        settings: LLMSettings,
        cache: CallCache | None,
        prices: PriceTable,
        secret: str | None,
        concurrency: int,
    ) -> None:
        self.model = model
        self._client = client
        self._settings = settings
        self._cache = cache
        self._prices = prices
        self._secret = secret
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
        stored = self._without_key(raw)
        if stored != raw:
            # An endpoint echoed our key in its answer: the caller gets what the cache keeps,
            # so the key reaches no output file and a replay reads the very same answer.
            body = json.loads(stored)
        result = ChatResult.from_body(body, self.model, latency_s=latency, cached=False)
        result.cost = self._prices.cost(self.model, result.prompt_tokens, result.completion_tokens)
        self._count(result)
        self.speed.add(result.prompt_tokens, result.completion_tokens, latency)
        if self._cache is not None:
            self._cache.put(CallRow(
                key=key, model=self.model, canonical_request=canonical, response_json=stored,
                prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
                latency_s=latency, cost=result.cost, template=request.template,
                template_hash=request.template_hash,
            ))
        return result

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        """The request as a batch line's body: what a live call would send."""
        if self._settings.api == "completions":
            return {"model": self.model, "prompt": completion_prompt(request.messages),
                    **_completion_sampling(request)}
        return {"model": self.model, "messages": request.messages, **_sampling(request)}

    def batch_answer(
        self, submitted: SubmittedRequest, body: dict[str, Any]
    ) -> tuple[ChatResult, CallRow]:
        """A batch line's answer as a live call's result (at batch prices) and its cache row;
        raises like `_check_shape` when the body is no chat completion."""
        _check_shape(body)
        raw = json.dumps(body, ensure_ascii=False)
        stored = self._without_key(raw)
        if stored != raw:
            body = json.loads(stored)  # the caller gets what the cache keeps (see above)
        result = ChatResult.from_body(body, self.model, latency_s=0.0, cached=False)
        if self._settings.batch_mode == "api":
            result.cost = self._prices.cost(
                self.model, result.prompt_tokens, result.completion_tokens, batch=True)
        # else an offline engine answered the files: it has no price, and its calls cost 0
        self._count(result)
        row = CallRow(
            key=submitted.key, model=self.model, canonical_request=submitted.request,
            response_json=stored,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            latency_s=0.0, cost=result.cost, template=submitted.template,
            template_hash=submitted.template_hash,
        )
        return result, row

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

    def _count(self, result: ChatResult) -> None:
        self._stats.calls += 1
        self._stats.prompt_tokens += result.prompt_tokens
        self._stats.completion_tokens += result.completion_tokens
        self._stats.cost += result.cost

    async def _call_with_retries(self, request: ChatRequest) -> tuple[dict[str, Any], str, float]:
        tries = self._settings.max_retries + 1
        attempt = 0
        while True:
            try:
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
            except _Retryable as failure:
                attempt += 1
                if attempt == tries or asyncio.current_task() in self._orphans:
                    self._stats.failures += 1
                    raise LLMError(
                        f"{self.model}: call failed after {tries} tries: {failure.reason}",
                        model=self.model,
                    ) from None
                wait = _backoff_s(attempt - 1, failure.wait_s)
                log.warning("%s: %s; retrying in %.1f s (try %d of %d)",
                            self.model, failure.reason, wait, attempt + 1, tries)
                await asyncio.sleep(wait)

    @contextmanager
    def _on_the_wire(self) -> Iterator[None]:
        task = asyncio.current_task()
        assert task is not None
        self._sending.add(task)
        try:
            yield
        finally:
            self._sending.discard(task)

    async def _attempt(self, request: ChatRequest) -> tuple[dict[str, Any], str, float]:
        # The embedded model loads before the clock starts: a call's latency is the model's.
        client = (await self._client.client() if isinstance(self._client, LocalEndpoint)
                  else self._client)
        started = time.perf_counter()
        try:
            if self._settings.api == "completions":
                response = await client.completions.with_raw_response.create(
                    model=self.model, prompt=completion_prompt(request.messages),
                    **_completion_sampling(request),
                )
            else:
                response = await client.chat.completions.with_raw_response.create(
                    model=self.model, messages=request.messages, **_sampling(request)
                )
            self._limiter.observe(response.headers)
            raw = response.text
        except openai.APITimeoutError:
            raise _Retryable(f"no answer within {self._settings.timeout_s:g} s") from None
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc
            detail = str(cause) or type(cause).__name__
            raise _Retryable(self._scrub(f"connection failed: {detail}")) from None
        except openai.APIStatusError as exc:
            detail = exc.body.get("message") if isinstance(exc.body, dict) else None
            reason = self._scrub(f"HTTP {exc.status_code}: {detail or exc.message}")
            self._limiter.observe(exc.response.headers, refused=exc.status_code == 429)
            if exc.status_code in _RETRYABLE_STATUS or exc.status_code >= 500:
                raise _Retryable(reason, _retry_after_s(exc.response.headers)) from None
            self._stats.failures += 1
            raise LLMError(f"{self.model}: the endpoint refused the call: {reason}",
                           model=self.model) from None
        latency = time.perf_counter() - started
        try:
            body = json.loads(raw)
            _check_shape(body)
        except (ValueError, TypeError, KeyError, IndexError) as exc:
            raise _Retryable(self._scrub(f"malformed response ({exc}): {raw[:120]!r}")) from None
        return body, raw, latency

    def _without_key(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _scrub(self, text: str) -> str:
        """For messages: our key, and anything shaped like a key, a bearer token or URL
        credentials (an endpoint may echo another secret). Never applied to model answers."""
        return _SECRET_PATTERNS.sub("***", self._without_key(text))


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
                reason = self._gateway._scrub(f"{what}: HTTP {exc.status_code}: {exc.message}")
                if exc.status_code not in _RETRYABLE_STATUS and exc.status_code < 500:
                    raise LLMError(f"{self._gateway.model}: {reason}",
                                   model=self._gateway.model) from None
                wait = _retry_after_s(exc.response.headers)
            if attempt + 1 < self._tries:
                log.warning("%s; retrying", reason)
                await asyncio.sleep(_backoff_s(attempt, wait))
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

        return _batch_state(await self._retried("creating a batch", call))

    async def find(self, file_id: str) -> BatchState | None:
        made = await self._retried(f"looking for the batch of {file_id}",
                                   lambda: self._find(file_id))
        return None if made is None else _batch_state(made)

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
        return _batch_state(await self._retried(
            f"looking at batch {batch_id}", lambda: self._client.batches.retrieve(batch_id)
        ))

    async def download(self, file_id: str) -> bytes:
        response = await self._retried(
            f"downloading {file_id}", lambda: self._client.files.content(file_id)
        )
        return response.content


def _batch_state(batch: Any) -> BatchState:
    counts = batch.request_counts
    errors = (batch.errors.data or []) if batch.errors else []
    return BatchState(
        id=batch.id, status=batch.status, output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        total=counts.total if counts else 0, completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        errors=[f"{e.code or 'error'}: {e.message or ''}"
                + (f" (line {e.line})" if e.line else "") for e in errors],
    )


def _sampling(request: ChatRequest) -> dict[str, Any]:
    """The request's sampling parameters that were set, as the client takes them."""
    params: dict[str, Any] = {
        name: value
        for name in ("temperature", "top_p", "seed", "max_tokens", "stop", "top_logprobs",
                     "response_format")
        if (value := getattr(request, name)) is not None
    }
    if request.logprobs:
        params["logprobs"] = True
    return params


def completion_prompt(messages: list[dict[str, str]]) -> str:
    """The prompt text of the completions endpoint: the messages' contents (one, in practice)."""
    return "\n\n".join(message["content"] for message in messages)


def _completion_sampling(request: ChatRequest) -> dict[str, Any]:
    """As `_sampling`, for the completions endpoint, whose `logprobs` is the number of top
    alternatives (0 would ask for none at all on llama.cpp)."""
    params = {name: value for name, value in _sampling(request).items()
              if name not in ("logprobs", "top_logprobs")}
    if request.logprobs:
        params["logprobs"] = max(1, request.top_logprobs or 1)
    return params


def _check_shape(body: Any) -> None:
    """Raise unless `body` is a completion with at least one choice: a chat message, or the
    completions endpoint's text."""
    choice = body["choices"][0]
    if "message" in choice:
        if not isinstance(choice["message"], dict):
            raise TypeError("the first choice has no message")
    elif not isinstance(choice["text"], str):
        raise TypeError("the first choice has no text")


def _retry_after_s(headers: Mapping[str, str]) -> float | None:
    """Seconds the server asked us to wait: `retry-after-ms`, or `Retry-After` (seconds/date)."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) * scale)
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return None


def _backoff_s(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None:
        return min(retry_after, RETRY_AFTER_CAP_S)
    # Full exponential step with jitter, so that many callers failing together spread out.
    return min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2**attempt) * random.uniform(0.5, 1.0)


def _api_key(settings: LLMSettings) -> str:
    if settings.batch_mode == "files":
        return "unused"  # an offline engine answers the files: no endpoint is called
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    if settings.base_url:
        return "none"  # self-hosted endpoints (vLLM, Ollama...) usually take any key
    raise LLMError("OPENAI_API_KEY is not set: set it, or give --base-url, or use --llm local")


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
            model, api_key = settings.model, _api_key(settings)
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
            gateway._rounds = _open_rounds(gateway, client, settings, cache)
            stack.push_async_callback(gateway._rounds.close)
        try:
            yield gateway
        finally:
            await gateway.drain()  # before the cache closes


def _open_rounds(
    gateway: Gateway, client: openai.AsyncOpenAI | LocalEndpoint, settings: LLMSettings,
    cache: CallCache | None,
) -> Rounds:
    if cache is None:
        raise LLMError("batch answers are kept in the call cache: drop --no-cache")
    to_files = settings.batch_mode == "files"
    return Rounds(
        model=gateway.model, cache=cache, sink=gateway, body_of=gateway._body,
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
