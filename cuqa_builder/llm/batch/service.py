"""Rounds through a provider's Batch API (`--batch`): input files uploaded and their batches
created (each recorded in the cache first, so a killed process finds its batch again), polled
until finished, and their output and error files downloaded."""

from __future__ import annotations

import asyncio
import logging
import tempfile
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field
from tqdm import tqdm

from cuqa_builder.llm.batch.ledger import Sender, Waiting
from cuqa_builder.llm.batch.wire import OutputLine, decoded, read_output
from cuqa_builder.llm.cache_batches import Submission

log = logging.getLogger(__name__)

FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})


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


class ApiRounds(Sender):
    """Submits one model's rounds as Batch API batches and reads their answers."""

    kind = "api"

    def __init__(self, *, service: BatchService, poll_s: float, progress: bool,
                 **shared: Any) -> None:
        super().__init__(**shared)
        self._service = service
        self._poll_s = poll_s
        self._progress = progress

    async def before_round(self) -> None:
        """Input files a killed process uploaded without seeing their batch created: the batch
        made from each, or a new one if none was (nothing was asked yet)."""
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

    async def submit(self, items: list[Waiting]) -> list[Submission]:
        by_key = {item.key: item for item in items}
        submissions = []
        with tempfile.TemporaryDirectory(prefix="cuqa-batch-") as scratch:
            calls = [(item.key, item.request) for item in items]
            for part in self._writer.parts(calls, lambda i: Path(scratch) / f"part-{i + 1}.jsonl"):
                file_id = await self._service.upload(part.path)
                uploaded = Submission(id=file_id, kind="api", model=self._model, input=file_id,
                                      requests=len(part.keys), state="uploaded")
                # Recorded before the batch is made: a killed process finds it by its file.
                self._cache.open_batch(uploaded, [by_key[k].submitted for k in part.keys])
                state = await self._service.create(file_id)
                submissions.append(self._cache.batch_created(file_id, state.id))
        self._count_written(submissions)
        return submissions

    async def settle(self, submissions: list[Submission], waiting: dict[str, Waiting]) -> None:
        states = await self._wait_for_batches(submissions)
        for submission in submissions:
            state = states[submission.id]
            if state.status == "failed":
                reason = "; ".join(state.errors) or "no reason given"
                self._ledger.close(submission, [], waiting,
                                   refused=f"batch {state.id} failed: {reason}")
                continue
            lines: list[OutputLine] = []
            for file_id in (state.output_file_id, state.error_file_id):
                if file_id:
                    data = await self._service.download(file_id)
                    lines += read_output(decoded(data, f"batch {state.id}"),
                                         f"batch {state.id}").lines
            self._ledger.close(submission, lines, waiting, missing=f"batch {state.status}")

    async def _wait_for_batches(self, submissions: list[Submission]) -> dict[str, BatchState]:
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
def batch_state(batch: Any) -> BatchState:
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
