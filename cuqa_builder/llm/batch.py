"""Batch rounds: many calls answered together, by a provider's Batch API or an offline engine.

In batch mode the gateway does not send a call when it is asked: the caller's coroutine waits on
a future here. When no new call has come for a moment, every coroutine of the run is waiting on
an answer (all of Algorithm 1's first step for every event, then the next step, and so on), and
the waiting calls are flushed as one round. Work that runs off the event loop and leads to a call
(spaCy on a known passage) says so with `outside_work()`, and the round waits for it.

1. Calls that a batch recorded in the cache already holds (a killed process asked them before)
   wait for that batch instead of being sent again.
2. The rest are written as batch input JSONL (`custom_id` = the call's cache key), split at the
   provider's limits (requests and bytes per file), and submitted: uploaded and created through
   the Batch API (`--batch`), or left in `DIR/round-NNN.input.jsonl` for an offline engine
   (`--batch-files DIR`). Each submission and its keys are recorded in the cache first: an
   uploaded file before its batch is created, so a process killed while creating it finds the
   batch by its input file on the next run (or creates it then), never a second one.
3. Answers (the output file; failures in the error file, or in the output file as vLLM writes
   them) go into the call cache, and the waiting coroutines go on, asking the next round's calls.

Failed lines are never retried live: a transient failure (429, 5xx, timeout, an expired or
cancelled batch, a line with no answer) joins the next round, up to `--max-retries` times; a
refused request (another 4xx) fails at once, like a refused live call. An expired batch thus
resubmits only what it did not answer. With `--batch-files` the run stops with `Paused` (exit
75) whenever a round's output file is missing, saying what to run, and also when one answers
only part of its round: an engine may still be writing it (`accept_partial` takes what it has and
asks the rest again), and a file that answers none of its requests is most likely the wrong one.
An input file deleted before it was answered is written again from the requests the cache keeps.
A malformed line is one failed line (asked again); an output file that is no UTF-8 text stops the
run with `RoundFileError`.

This module never imports `openai`: the Batch API is reached through `BatchService`, which
`gateway.py` implements with the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import re
import shlex
import tempfile
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field, ValidationError, model_validator
from tqdm import tqdm

from cuqa_builder.errors import CuqaError, Paused, describe_validation_error
from cuqa_builder.jsonio import atomic_write_text
from cuqa_builder.llm.cache import CallCache, CallRow, FailedLine, Submission, SubmittedRequest
from cuqa_builder.llm.types import (
    BatchCallFailed,
    ChatRequest,
    ChatResult,
    GatewayStats,
    LLMError,
)

log = logging.getLogger(__name__)

CHAT_URL = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"  # with `--api completions`
# A round is flushed once no new call has arrived for this long (every coroutine is waiting, or
# busy with work that takes longer; its calls then go into the next round).
QUIET_S = 0.1
_SPINS = 8  # event-loop passes without a new call before the quiet wait starts
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
_TRANSIENT_STATUS = frozenset({408, 409, 429})
_ROUND_FILE = re.compile(r"^round-(\d+)\.(?:input|output)\.jsonl$")
# The (kind, model) of the rounds this process settles (a probe and its judge side by side): an
# open round of any other model is an earlier command's, which only that model's command reads.
_SETTLED_HERE: Counter[tuple[str, str]] = Counter()
# A call that failed in every round it may have fails at once in the commands after (its step,
# planned again, would ask it in round after round): what asks it again.
ASK_AGAIN = " (asked again only with a larger --max-retries)"


class RoundFileError(CuqaError):
    """A round's output file that cannot be read at all: the round stays open."""


class BatchState(BaseModel):
    """A batch as the provider reports it (request counts drive the progress bar)."""

    id: str
    status: str
    output_file_id: str | None = None
    error_file_id: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    errors: list[str] = Field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


class BatchService(Protocol):
    """The Files and Batches endpoints, as the gateway reaches them."""

    async def upload(self, path: Path) -> str: ...

    async def create(self, file_id: str) -> BatchState: ...

    async def find(self, file_id: str) -> BatchState | None:
        """The batch created from input file `file_id`, if there is one."""
        ...

    async def retrieve(self, batch_id: str) -> BatchState: ...

    async def download(self, file_id: str) -> bytes: ...


class AnswerSink(Protocol):
    """Turns a batch's answer into the result and cache row a live call would have made."""

    def batch_answer(self, submitted: SubmittedRequest, body: dict[str, Any]) -> tuple[
        ChatResult, CallRow
    ]: ...


class InputLine(BaseModel):
    """One line of a batch input file (the OpenAI batch format, which vLLM reads too)."""

    custom_id: str
    method: Literal["POST"] = "POST"
    url: str = CHAT_URL
    body: dict[str, Any]


class LineResponse(BaseModel):
    status_code: int = 200
    request_id: str | None = None
    body: dict[str, Any] | None = None


class OutputLine(BaseModel):
    """One line of a batch output or error file."""

    id: str | None = None
    custom_id: str
    response: LineResponse | None = None
    error: Any = None


class _LineId(BaseModel):
    """Just the request a line answers: enough to ask it again when the rest is malformed."""

    custom_id: str


class _Usage(BaseModel):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message | None = None
    text: str | None = None
    finish_reason: str | None = None
    logprobs: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _message_or_text(self) -> _Choice:
        if self.message is None and self.text is None:
            raise ValueError("a choice needs a message or a text")
        return self


class AnswerBody(BaseModel):
    """The parts of a completion that its answer is read from (the body is stored whole): a
    line whose body lacks them, or holds `"usage": "lots"`, is a malformed line."""

    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


@dataclass
class OutputFile:
    """The typed lines of one output (or error) file."""

    lines: list[OutputLine]
    unreadable: int = 0  # whole lines that name no request (a torn last line is not one)


@dataclass(slots=True)
class _Waiting:
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


@dataclass(frozen=True)
class _Part:
    path: Path
    keys: list[str]


def _line_failure(line: OutputLine) -> tuple[bool, str] | None:
    """None for an answer; else (transient?, reason) for a failed line."""
    response = line.response
    if line.error is None and response is not None and response.status_code == 200 \
            and response.body is not None:
        return None
    status = response.status_code if response is not None else None
    error = line.error if isinstance(line.error, dict) else {"message": line.error}
    code = str(error.get("code") or "")
    message = str(error.get("message") or (response.body if response else "") or "no answer")
    transient = (status is None or status in _TRANSIENT_STATUS or status >= 500
                 or code in {"batch_expired", "batch_cancelled"})
    return transient, f"{f'HTTP {status}: ' if status else ''}{code + ': ' if code else ''}" \
                      f"{message[:200]}"


def read_output(text: str, source: str) -> OutputFile:
    """Typed output lines. A line with an unusable answer becomes a failed line of its request
    (named by file and line, so it is asked again); one that names no request is skipped with a
    warning (an engine killed mid-line leaves half a line at the end)."""
    read = OutputFile(lines=[])
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        if not line.strip():
            continue
        try:
            read.lines.append(_typed_line(line))
        except ValidationError as exc:
            where = f"{source}:{number}"
            try:
                request = _LineId.model_validate_json(line)
            except ValidationError:
                log.warning("%s: not a batch output line; skipped", where)
                read.unreadable += line.endswith("\n")
                continue
            reason = f"{where}: malformed line ({describe_validation_error(exc)})"
            log.warning("%s; its request is asked again", reason)
            read.lines.append(OutputLine(custom_id=request.custom_id,
                                         error={"message": reason}))
    return read


def _typed_line(text: str) -> OutputLine:
    line = OutputLine.model_validate_json(text)
    if line.response is not None and line.response.status_code == 200 \
            and line.response.body is not None:
        AnswerBody.model_validate(line.response.body)
    return line


def describe_batches(stats: GatewayStats) -> str:
    """The batch part of a run's summary ("" for a live run)."""
    if not stats.rounds:
        return ""
    text = f"; {stats.rounds} rounds, {stats.batches} batch files"
    if stats.batches:
        text += f" ({stats.batch_requests} requests)"
    if stats.batch_failed_lines:
        text += (f", {stats.batch_failed_lines} failed lines ({stats.batch_retried_lines} "
                 "asked again in the next round)")
    return text


@dataclass(frozen=True)
class FilesRead:
    """The batch files of some models whose answers the run's cache holds, over every command:
    per model, (files, requests written); and the requests they answered (the others failed)."""

    by_model: dict[str, tuple[int, int]]
    answered: int

    def describe(self) -> str:
        files = sum(f for f, _ in self.by_model.values())
        requests = sum(r for _, r in self.by_model.values())
        models = "" if len(self.by_model) < 2 else ": " + ", ".join(
            f"{model} {r} in {f}" for model, (f, r) in self.by_model.items())
        return (f"{files} batch files read ({requests} requests{models}; {self.answered} "
                f"answered, {requests - self.answered} failed)")


def files_read(cache_path: Path, models: Iterable[str]) -> FilesRead:
    cache = CallCache(cache_path)
    try:
        read = {model: cache.open_batches("files", model, state="closed") for model in models}
    finally:
        cache.close()
    return FilesRead(
        by_model={m: (len(s), sum(x.requests for x in s)) for m, s in read.items() if s},
        # A file closed by a version that did not count its answers: taken as all answered.
        answered=sum(x.requests if x.answered is None else x.answered
                     for s in read.values() for x in s))


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
        self.kind = "api" if service is not None else "files"
        self._model = model
        self._cache = cache
        self._sink = sink
        self._body_of = body_of  # a call as a batch line's body (what a live call would send)
        self._url = url
        self._stats = stats
        self._max_requests = max_requests
        self._max_bytes = max_bytes
        self._max_retries = max_retries
        self._service = service
        self._directory = directory
        self._accept_partial = accept_partial  # read an output file that answers only some
        self._poll_s = poll_s
        self._progress = progress
        self._quiet_s = quiet_s
        self._waiting: dict[str, _Waiting] = {}
        self._arrivals = 0
        self._flusher: asyncio.Task[None] | None = None
        self._stopped: BaseException | None = None
        self._outside = 0  # coroutines busy with work off the event loop
        self._warned: set[str] = set()  # other models' open submissions already told of
        self._any_failed = cache.any_batch_failure()  # else no call needs looking up
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
        if self._any_failed and (error := self._failed_for_good(key)) is not None:
            self._stats.failures += 1
            raise BatchCallFailed(error, model=self._model)
        future: asyncio.Future[ChatResult] = asyncio.get_running_loop().create_future()
        self._waiting[key] = _Waiting(key, canonical, request, future)
        self._arrivals += 1
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.get_running_loop().create_task(self._flush_rounds())
        return await future

    def _failed_for_good(self, key: str) -> str | None:
        """The error of a call that has failed in as many rounds as `--max-retries` allows, over
        every command (a step planned again asks it again): no new round is written for it."""
        failure = self._cache.batch_failure(key)
        if failure is None or failure[0] <= self._max_retries:
            return None
        rounds, error = failure
        return error or f"{self._model}: batch call failed after {rounds} rounds{ASK_AGAIN}"

    async def close(self) -> None:
        _SETTLED_HERE[(self.kind, self._model)] -= 1
        if self._flusher is not None and not self._flusher.done():
            self._flusher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._flusher

    # --- rounds ----------------------------------------------------------------------------

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
    def _fail(waiting: dict[str, _Waiting], error: BaseException) -> None:
        for item in waiting.values():
            if not item.future.done():
                # A copy each: one exception raised in thousands of coroutines would chain all
                # their frames into its traceback and keep them alive.
                item.future.set_exception(copy.copy(error))
                item.future.exception()  # its caller may be gone already: no warning

    async def _round(self, waiting: dict[str, _Waiting]) -> None:
        if self._service is not None:
            await self._create_uploaded()
        earlier = self._submissions_holding(waiting)
        if earlier:
            log.info("%d calls are in %d batches submitted before; waiting for those",
                     sum(len(keys) for _, keys in earlier), len(earlier))
            await self._settle([submission for submission, _ in earlier], waiting)
        rest = [item for key, item in waiting.items() if not item.future.done()
                and key not in self._waiting]
        if rest:
            await self._settle(await self._submit(rest), waiting)

    async def _create_uploaded(self) -> None:
        """Input files a killed process uploaded without seeing their batch created: the batch
        made from each, or a new one if none was (nothing was asked yet)."""
        assert self._service is not None
        for uploaded in self._cache.open_batches(self.kind, self._model, state="uploaded"):
            state = await self._service.find(uploaded.input)
            if state is None:
                state = await self._service.create(uploaded.input)
            else:
                log.info("batch %s of %s was created before the process stopped; waiting for it",
                         state.id, uploaded.input)
            self._cache.batch_created(uploaded.id, state.id)
            self._stats.batches += 1
            self._stats.batch_requests += uploaded.requests

    def _submissions_holding(
        self, waiting: dict[str, _Waiting]
    ) -> list[tuple[Submission, set[str]]]:
        found = []
        for submission in self._cache.open_batches(self.kind, self._model):
            keys = self._cache.batch_keys(submission.id) & waiting.keys()
            if keys:
                found.append((submission, keys))
        return found

    # --- writing and submitting ------------------------------------------------------------

    def _input_line(self, key: str, request: ChatRequest) -> str:
        return json.dumps(
            {"custom_id": key, "method": "POST", "url": self._url,
             "body": self._body_of(request)}, ensure_ascii=False, separators=(",", ":"),
        ) + "\n"

    def _parts(self, items: list[_Waiting], path_for: Callable[[int], Path]) -> list[_Part]:
        """Write the input files, a new one whenever the next line would pass a limit."""
        parts: list[_Part] = []
        handle = None
        size = 0
        try:
            for item in items:
                line = self._input_line(item.key, item.request).encode()
                if len(line) > self._max_bytes:
                    raise LLMError(f"{self._model}: one request is {len(line)} bytes, more "
                                   f"than a batch file may hold ({self._max_bytes})",
                                   model=self._model)
                if handle is None or len(parts[-1].keys) >= self._max_requests \
                        or size + len(line) > self._max_bytes:
                    if handle is not None:
                        handle.close()
                    path = path_for(len(parts))
                    path.parent.mkdir(parents=True, exist_ok=True)
                    handle = path.open("wb")
                    parts.append(_Part(path, []))
                    size = 0
                handle.write(line)
                size += len(line)
                parts[-1].keys.append(item.key)
        finally:
            if handle is not None:
                handle.close()
        return parts

    def _warn_of_other_models(self) -> None:
        """Before a new round: an earlier command's round for another --model is still open
        (answered, maybe), and this command will not read it; say how to go on with it."""
        for other in self._cache.open_batches(self.kind, None):
            if other.id in self._warned or _SETTLED_HERE[(self.kind, other.model)]:
                continue
            self._warned.add(other.id)
            name, answered = f"batch {other.id}", ""
            if self.kind == "files":
                name, output = other.input, _output_path(Path(other.input))
                answered = f", answered in {output.name}" if output.exists() else ""
            log.warning("%s is an open round of --model %s (%d requests%s), which this command "
                        "(--model %s) does not read: it writes a round of its own. To go on "
                        "with that round instead, run the command with --model %s", name,
                        other.model, other.requests, answered, self._model, other.model)

    async def _submit(self, items: list[_Waiting]) -> list[Submission]:
        self._warn_of_other_models()
        by_key = {item.key: item for item in items}
        if self._service is None:
            return self._write_round_files(items, by_key)
        submissions = []
        with tempfile.TemporaryDirectory(prefix="cuqa-batch-") as scratch:
            for part in self._parts(items, lambda i: Path(scratch) / f"part-{i + 1}.jsonl"):
                file_id = await self._service.upload(part.path)
                uploaded = Submission(id=file_id, kind="api", model=self._model, input=file_id,
                                      requests=len(part.keys), state="uploaded")
                # Recorded before the batch is made: a killed process finds it by its file.
                self._cache.open_batch(uploaded, [by_key[k].submitted for k in part.keys])
                state = await self._service.create(file_id)
                submissions.append(self._cache.batch_created(file_id, state.id))
        self._count_written(submissions)
        return submissions

    def _count_written(self, submissions: list[Submission]) -> None:
        self._stats.batches += len(submissions)
        self._stats.batch_requests += sum(s.requests for s in submissions)

    def _write_round_files(
        self, items: list[_Waiting], by_key: dict[str, _Waiting]
    ) -> list[Submission]:
        assert self._directory is not None
        first = _next_round_number(self._directory)
        try:
            parts = self._parts(
                items, lambda i: self._directory / f"round-{first + i:03d}.input.jsonl"
            )
        except OSError as exc:  # its calls were asked of no one: the next run writes them
            raise RoundFileError(
                f"cannot write the round file in {self._directory} ({exc.strerror}): "
                "--batch-files needs a directory this command may write"
            ) from exc
        submissions = []
        for part in parts:
            submission = Submission(id=str(part.path.resolve()), kind="files", model=self._model,
                                    input=str(part.path), requests=len(part.keys))
            self._cache.open_batch(submission, [by_key[k].submitted for k in part.keys])
            submissions.append(submission)
        self._count_written(submissions)
        return submissions

    # --- waiting and reading answers -------------------------------------------------------

    async def _settle(self, submissions: list[Submission], waiting: dict[str, _Waiting]) -> None:
        if self._service is None:
            self._settle_files(submissions, waiting)
            return
        states = await self._wait_for_batches(submissions)
        for submission in submissions:
            state = states[submission.id]
            if state.status == "failed":
                reason = "; ".join(state.errors) or "no reason given"
                self._close(submission, [], waiting,
                            refused=f"batch {state.id} failed: {reason}")
                continue
            lines: list[OutputLine] = []
            for file_id in (state.output_file_id, state.error_file_id):
                if file_id:
                    data = await self._service.download(file_id)
                    lines += read_output(_decoded(data, f"batch {state.id}"),
                                         f"batch {state.id}").lines
            self._close(submission, lines, waiting, missing=f"batch {state.status}")

    async def _wait_for_batches(self, submissions: list[Submission]) -> dict[str, BatchState]:
        assert self._service is not None
        states = {s.id: await self._service.retrieve(s.id) for s in submissions}
        total = sum(s.requests for s in submissions)
        with tqdm(total=total, desc=f"batch round {self._stats.rounds}", unit="req",
                  disable=not self._progress) as bar:
            while True:
                bar.n = sum(s.completed + s.failed for s in states.values())
                bar.set_postfix_str(", ".join(sorted({s.status for s in states.values()})))
                if all(state.finished for state in states.values()):
                    return states
                await asyncio.sleep(self._poll_s)
                for batch_id, state in states.items():
                    if not state.finished:
                        states[batch_id] = await self._service.retrieve(batch_id)

    def _settle_files(self, submissions: list[Submission], waiting: dict[str, _Waiting]) -> None:
        """Read each complete output file; stop (Paused) while any is missing or unfinished."""
        missing: list[Submission] = []
        unfinished: list[str] = []
        for submission in submissions:
            output = _output_path(Path(submission.input))
            if not output.exists():
                missing.append(submission)
                continue
            answers = read_output(_decoded(output.read_bytes(), output.name), output.name)
            problem = self._incomplete(submission, answers)
            if problem:
                unfinished.append(problem)
                continue
            self._close(submission, answers.lines, waiting,
                        missing=f"no answer in {output.name}")
        if missing or unfinished:
            waits = _waits_here()
            waits.notes += unfinished
            waits.notes += [self._write_again(s) for s in missing if not Path(s.input).exists()]
            waits.missing.update((s.id, s) for s in missing)
            raise RoundsWaiting(waits)

    def _incomplete(self, submission: Submission, answers: OutputFile) -> str | None:
        """Why a round's output file is not read yet, or None: every request has a line (an
        answer or a failure), or `accept_partial` takes some. One that answers none is most
        likely the wrong file."""
        source = Path(submission.input)
        output = _output_path(source)
        requests = self._cache.batch_keys(submission.id)
        answered = len({line.custom_id for line in answers.lines} & requests)
        if not answered:
            return (f"{output} answers 0 of its {len(requests)} requests (wrong file?): no "
                    "line holds one of their custom_ids. If the engine is still writing it, run "
                    "again once it has finished; else replace it with the engine's output for "
                    f"{source.name}")
        if answered + answers.unreadable >= len(requests) or self._accept_partial:
            return None
        return (f"{output.name}: {answered} of {len(requests)} answered; is the engine still "
                "writing? Run again once it has finished, or add --accept-partial-round to "
                "take these answers and ask the rest in the next round")

    def _write_again(self, submission: Submission) -> str:
        recorded = self._cache.batch_requests(submission.id)
        lines = [self._input_line(key, _recorded_request(request))
                 for key, request in recorded.items()]
        path = Path(submission.input)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(lines))
        return (f"{path} was gone: written again from the {len(lines)} requests the call "
                "cache recorded for it")

    def _close(
        self,
        submission: Submission,
        lines: Iterable[OutputLine],
        waiting: dict[str, _Waiting],
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
            failure = _line_failure(line)
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
        self._any_failed = self._any_failed or bool(rounds)
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
    def _answer(item: _Waiting | None, result: ChatResult) -> None:
        if item is not None and not item.future.done():
            item.future.set_result(result)

    def _failed(
        self, item: _Waiting | None, transient: bool, reason: str, rounds: int
    ) -> str | None:
        """A failed line: into the next round while its call has failed in at most
        `--max-retries` rounds (`rounds`, over every command), else the call fails; returns
        its error then."""
        self._stats.batch_failed_lines += 1
        if transient and rounds <= self._max_retries:
            if item is not None and not item.future.done():
                self._stats.batch_retried_lines += 1
                self._waiting[item.key] = item  # into the next round
                self._arrivals += 1
            return None
        tries = f" after {rounds} rounds" if transient else ""
        error = f"{self._model}: batch call failed{tries}: {reason}{ASK_AGAIN}"
        if item is not None and not item.future.done():
            self._stats.failures += 1
            item.future.set_exception(BatchCallFailed(error, model=self._model))
            item.future.exception()
        return error


@dataclass
class _Waits:
    """What the rounds of one stage wait for, every model's: the message of the stop names them
    all, whichever model's round stopped the stage first (another model's round may be written
    after it, before the stage ends)."""

    notes: list[str] = field(default_factory=list)  # unfinished outputs, inputs written again
    # rounds without an output file, by id (two gateways of one model may wait for one file)
    missing: dict[str, Submission] = field(default_factory=dict)

    def message(self) -> str:
        if not self.missing:
            return "\n".join(self.notes)
        missing = sorted(self.missing.values(), key=lambda s: s.input)
        calls: Counter[str] = Counter()
        for submission in missing:
            calls[submission.model] += submission.requests
        models = "" if len(calls) == 1 else (
            f" of {len(calls)} models ({', '.join(f'{m} {n}' for m, n in calls.items())})")
        commands = "\n".join(
            "  python -m vllm.entrypoints.openai.run_batch -i "
            f"{shlex.quote(s.input)} -o {shlex.quote(str(_output_path(Path(s.input))))} "
            f"--model {shlex.quote(s.model)}"
            for s in missing
        )
        files = f"{len(missing)} batch file{'s' if len(missing) > 1 else ''}"
        return "\n".join([
            *self.notes,
            f"waiting for the answers to {calls.total()} calls in {files}{models}; answer "
            f"{'them' if len(missing) > 1 else 'it'} with an offline engine, e.g. vLLM:\n"
            f"{commands}\nthen run this command again to read them and go on"])


class RoundsWaiting(Paused):
    """The stop of a stage whose rounds wait for an offline engine: its message, made when it is
    told, names every round the stage waits for."""

    def __init__(self, waits: _Waits) -> None:
        super().__init__(waits)
        self.waits = waits

    def __str__(self) -> str:
        return self.waits.message()


_WAITS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waits] = (
    weakref.WeakKeyDictionary())


def _waits_here() -> _Waits:
    """The waits of the stage on this event loop (one loop per stage)."""
    return _WAITS.setdefault(asyncio.get_running_loop(), _Waits())


def _recorded_request(submitted: SubmittedRequest) -> ChatRequest:
    """The call a recorded request was made from (its canonical JSON holds every sent field)."""
    request = ChatRequest.model_validate_json(submitted.request)
    return request.model_copy(update={"template": submitted.template,
                                      "template_hash": submitted.template_hash})


def _decoded(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RoundFileError(
            f"{source} is not UTF-8 text (byte {exc.start} cannot be read): batch output is "
            "UTF-8 JSONL; write it again as UTF-8, or delete it to answer its round again"
        ) from None


def _output_path(input_path: Path) -> Path:
    return input_path.with_name(input_path.name.replace(".input.jsonl", ".output.jsonl"))


def _next_round_number(directory: Path) -> int:
    numbers = [int(m.group(1)) for p in directory.glob("round-*.jsonl")
               if (m := _ROUND_FILE.match(p.name))]
    return max(numbers, default=0) + 1
