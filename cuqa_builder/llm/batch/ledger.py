"""Settling a finished batch submission: its answers into the call cache and to the calls waiting
for them, its failed lines into the next round or failed for good (`--max-retries`, counted
over every command)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from cuqa_builder.llm.batch.wire import InputWriter, OutputLine, line_failure
from cuqa_builder.llm.cache import CallCache, CallRow
from cuqa_builder.llm.cache_batches import FailedLine, Submission, SubmittedRequest
from cuqa_builder.llm.types import BatchCallFailed, ChatRequest, ChatResult, GatewayStats

# A call that failed in every round it may have fails at once in the commands after (its step,
# planned again, would ask it in round after round): what asks it again.
ASK_AGAIN = " (asked again only with a larger --max-retries)"


class AnswerSink(Protocol):
    """Turns a batch's answer into the result and cache row a live call would have made."""

    def batch_answer(self, submitted: SubmittedRequest, body: dict[str, Any]) -> tuple[
        ChatResult, CallRow
    ]: ...


@dataclass(slots=True)
class Waiting:
    """A call waiting for its round (kept small: a round holds tens of thousands)."""

    key: str
    canonical: str
    request: ChatRequest
    future: asyncio.Future[ChatResult]

    @property
    def submitted(self) -> SubmittedRequest:
        return SubmittedRequest(key=self.key, request=self.canonical,
                                template=self.request.template,
                                template_hash=self.request.template_hash)


class Ledger:
    """The answers and failures of one model's submissions, and what is asked again."""

    def __init__(self, *, model: str, cache: CallCache, sink: AnswerSink, stats: GatewayStats,
                 max_retries: int, ask_again: Callable[[Waiting], None]) -> None:
        self._model = model
        self._cache = cache
        self._sink = sink
        self._stats = stats
        self._max_retries = max_retries
        self._ask_again = ask_again  # puts a call into the next round
        self.any_failed = cache.any_batch_failure()  # else no call needs looking up

    def failed_for_good(self, key: str) -> str | None:
        """The error of a call that has failed in as many rounds as `--max-retries` allows, over
        every command (a step planned again asks it again): no new round is written for it."""
        failure = self._cache.batch_failure(key)
        if failure is None or failure[0] <= self._max_retries:
            return None
        rounds, error = failure
        return error or f"{self._model}: batch call failed after {rounds} rounds{ASK_AGAIN}"

    def close(
        self,
        submission: Submission,
        lines: Iterable[OutputLine],
        waiting: dict[str, Waiting],
        *,
        missing: str = "no answer",
        refused: str | None = None,
    ) -> None:
        """Store a finished submission's answers, settle its waiting calls, forget its keys."""
        submitted = self._cache.batch_requests(submission.id)
        rows: list[CallRow] = []
        answered: set[str] = set()
        failures: dict[str, tuple[bool, str]] = {}  # key -> (transient?, reason)
        for line in lines:
            request = submitted.get(line.custom_id)
            if request is None or line.custom_id in failures or line.custom_id in answered:
                continue  # not ours (a hand-written file may hold anything), or a duplicate
            failure = line_failure(line)
            if failure is None:
                assert line.response is not None and line.response.body is not None
                try:
                    result, row = self._sink.batch_answer(request, line.response.body)
                except (KeyError, IndexError, TypeError, ValueError) as exc:
                    failure = (True, f"malformed answer ({exc})")
                else:
                    rows.append(row)
                    answered.add(line.custom_id)
                    self._answer(waiting.get(line.custom_id), result)
                    continue
            failures[line.custom_id] = failure
        for key in submitted.keys() - failures.keys() - answered:
            failures[key] = (False, refused) if refused is not None else (True, missing)
        # A refused call uses up every round it may have: asked again, it is refused again.
        rounds = self._cache.batch_failed([
            FailedLine(key, 1 if transient else self._max_retries + 1)
            for key, (transient, _) in failures.items()])
        self.any_failed = self.any_failed or bool(rounds)
        given_up = {}
        for key, (transient, reason) in failures.items():
            error = self._failed(waiting.get(key), transient, reason, rounds[key])
            if error is not None:
                given_up[key] = error
        self._cache.batch_failed_for_good(given_up)
        self._cache.put_many(rows)
        self._cache.forget_batch_failures(list(answered))
        self._cache.close_batch(submission.id, len(answered))

    @staticmethod
    def _answer(item: Waiting | None, result: ChatResult) -> None:
        if item is not None and not item.future.done():
            item.future.set_result(result)

    def _failed(
        self, item: Waiting | None, transient: bool, reason: str, rounds: int
    ) -> str | None:
        """A failed line: into the next round while its call has failed in at most
        `--max-retries` rounds (`rounds`, over every command), else the call fails; returns
        its error then."""
        self._stats.batch_failed_lines += 1
        if transient and rounds <= self._max_retries:
            if item is not None and not item.future.done():
                self._stats.batch_retried_lines += 1
                self._ask_again(item)
            return None
        tries = f" after {rounds} rounds" if transient else ""
        error = f"{self._model}: batch call failed{tries}: {reason}{ASK_AGAIN}"
        if item is not None and not item.future.done():
            self._stats.failures += 1
            item.future.set_exception(BatchCallFailed(error, model=self._model))
            item.future.exception()
        return error


class Sender:
    """What the two ways of sending one model's rounds share (the Batch API's, round files')."""

    def __init__(self, *, model: str, cache: CallCache, stats: GatewayStats, writer: InputWriter,
                 ledger: Ledger) -> None:
        self._model = model
        self._cache = cache
        self._stats = stats
        self._writer = writer
        self._ledger = ledger

    def _count_written(self, submissions: list[Submission]) -> None:
        self._stats.batches += len(submissions)
        self._stats.batch_requests += sum(s.requests for s in submissions)
