"""The round loop: calls wait on a future here until no new call has come for a moment, then
the waiting calls are flushed as one round, through the Batch API (`service.py`) or as round
files (`round_files.py`), and settled (`ledger.py`). See the package's docstring."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from cuqa_builder.errors import CuqaError
from cuqa_builder.llm.batch.ledger import AnswerSink, Ledger, Waiting
from cuqa_builder.llm.batch.round_files import FileRounds, output_path
from cuqa_builder.llm.batch.service import ApiRounds, BatchService
from cuqa_builder.llm.batch.wire import CHAT_URL, InputWriter
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.llm.cache_batches import Submission
from cuqa_builder.llm.types import (
    BatchCallFailed,
    ChatRequest,
    ChatResult,
    GatewayStats,
    LLMError,
)

log = logging.getLogger(__name__)

# A round is flushed once no new call has arrived for this long (every coroutine is waiting, or
# busy with work that takes longer; its calls then go into the next round).
QUIET_S = 0.1
_SPINS = 8  # event-loop passes without a new call before the quiet wait starts
# The (kind, model) of the rounds this process settles (a probe and its judge side by side): an
# open round of any other model is an earlier command's, which only that model's command reads.
_SETTLED_HERE: Counter[tuple[str, str]] = Counter()


class Rounds:
    """Collects the calls waiting for an answer and settles them a round at a time."""

    def __init__(
        self,
        *,
        model: str,
        cache: CallCache,
        sink: AnswerSink,
        body_of: Callable[[ChatRequest], dict[str, Any]],
        stats: GatewayStats,
        url: str = CHAT_URL,
        max_requests: int,
        max_bytes: int,
        max_retries: int,
        service: BatchService | None = None,
        directory: Path | None = None,
        poll_s: float = 30.0,
        progress: bool = True,
        quiet_s: float = QUIET_S,
        accept_partial: bool = False,
    ) -> None:
        if (service is None) == (directory is None):
            raise ValueError("rounds go to a Batch API service or to a directory, not both")
        self._model = model
        self._cache = cache
        self._stats = stats
        self._quiet_s = quiet_s
        self._waiting: dict[str, Waiting] = {}
        self._arrivals = 0
        self._flusher: asyncio.Task[None] | None = None
        self._stopped: BaseException | None = None
        self._outside = 0  # coroutines busy with work off the event loop
        self._warned: set[str] = set()  # other models' open submissions already told of
        self._ledger = Ledger(model=model, cache=cache, sink=sink, stats=stats,
                              max_retries=max_retries, ask_again=self._ask_again)
        writer = InputWriter(model=model, url=url, body_of=body_of, max_requests=max_requests,
                             max_bytes=max_bytes)
        shared = {"model": model, "cache": cache, "stats": stats, "writer": writer,
                  "ledger": self._ledger}
        self._to: ApiRounds | FileRounds
        if service is not None:
            self._to = ApiRounds(service=service, poll_s=poll_s, progress=progress, **shared)
        else:
            assert directory is not None
            self._to = FileRounds(directory=directory, accept_partial=accept_partial, **shared)
        self.kind = self._to.kind
        _SETTLED_HERE[(self.kind, model)] += 1

    @contextlib.asynccontextmanager
    async def outside_work(self) -> AsyncIterator[None]:
        """Around work in a thread whose result leads to a call: the round waits for it."""
        self._outside += 1
        try:
            yield
        finally:
            self._outside -= 1
            self._arrivals += 1  # the quiet period starts again when it ends

    async def ask(
        self, key: str, canonical: str, request: ChatRequest
    ) -> ChatResult:
        """The answer to one call, once its round is settled."""
        if self._stopped is not None:
            raise copy.copy(self._stopped)
        if self._ledger.any_failed and (error := self._ledger.failed_for_good(key)) is not None:
            self._stats.failures += 1
            raise BatchCallFailed(error, model=self._model)
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._waiting[key] = Waiting(key, canonical, request, future)
        self._arrivals += 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_rounds())
        return await future

    def _ask_again(self, item: Waiting) -> None:
        self._waiting[item.key] = item  # into the next round
        self._arrivals += 1

    async def close(self) -> None:
        _SETTLED_HERE[(self.kind, self._model)] -= 1
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher

    async def _until_quiet(self) -> None:
        while True:
            seen = self._arrivals
            for _ in range(_SPINS):
                await asyncio.sleep(0)
            if self._arrivals != seen:
                continue
            await asyncio.sleep(self._quiet_s)
            if self._arrivals == seen and not self._outside:
                return

    async def _flush_rounds(self) -> None:
        while self._waiting:
            await self._until_quiet()
            waiting, self._waiting = self._waiting, {}
            self._stats.rounds += 1
            try:
                await self._round(waiting)
            except LLMError as exc:  # this round could not be sent: its calls fail, not later ones
                self._fail(waiting, exc)
            except CuqaError as stop:  # Paused, or a round file to fix: the run stops here
                self._stopped = stop
                self._fail(waiting, stop)
                self._fail(self._waiting, stop)
                return
            except Exception as exc:  # a bug: nobody may wait for ever
                log.debug("batch rounds stopped", exc_info=True)  # -v shows where
                self._stopped = exc
                self._fail(waiting, exc)
                self._fail(self._waiting, exc)
                return  # the callers raise it; raised here, nobody would ever retrieve it

    @staticmethod
    def _fail(waiting: dict[str, Waiting], error: BaseException) -> None:
        for item in waiting.values():
            if not item.future.done():
                # A copy each: one exception raised in thousands of coroutines would chain all
                # their frames into its traceback and keep them alive.
                item.future.set_exception(copy.copy(error))
                item.future.exception()  # its caller may be gone already: no warning

    async def _round(self, waiting: dict[str, Waiting]) -> None:
        await self._to.before_round()
        earlier = self._submissions_holding(waiting)
        if earlier:
            log.info("%d calls are in %d batches submitted before; waiting for those",
                     sum(len(keys) for _, keys in earlier), len(earlier))
            await self._to.settle([submission for submission, _ in earlier], waiting)
        rest = [item for key, item in waiting.items() if not item.future.done()
                and key not in self._waiting]
        if rest:
            self._warn_of_other_models()
            await self._to.settle(await self._to.submit(rest), waiting)

    def _submissions_holding(
        self, waiting: dict[str, Waiting]
    ) -> list[tuple[Submission, set[str]]]:
        found = []
        for submission in self._cache.open_batches(self.kind, self._model):
            keys = self._cache.batch_keys(submission.id) & waiting.keys()
            if keys:
                found.append((submission, keys))
        return found

    def _warn_of_other_models(self) -> None:
        """Before a new round: an earlier command's round for another --model is still open
        (answered, maybe), and this command will not read it; say how to go on with it."""
        for other in self._cache.open_batches(self.kind, None):
            if other.id in self._warned or _SETTLED_HERE[(self.kind, other.model)]:
                continue
            self._warned.add(other.id)
            name, answered = f"batch {other.id}", ""
            if self.kind == "files":
                name, output = other.input, output_path(Path(other.input))
                answered = f", answered in {output.name}" if output.exists() else ""
            log.warning("%s is an open round of --model %s (%d requests%s), which this command "
                        "(--model %s) does not read: it writes a round of its own. To go on "
                        "with that round instead, run the command with --model %s", name,
                        other.model, other.requests, answered, self._model, other.model)
