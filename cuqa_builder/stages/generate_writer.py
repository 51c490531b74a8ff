"""What the generate stage writes as it goes: each finished candidate appended and flushed
(a killed run loses nothing), each failure and each event not tried to
`generation-failures.jsonl`, each event's pool record to `pool.jsonl`; and the tally kept."""

from __future__ import annotations

from pydantic import BaseModel

from cuqa_builder.generation.algorithm import Made
from cuqa_builder.generation.seeding import candidate_id
from cuqa_builder.generation.steps import GenerationError
from cuqa_builder.generation.yield_report import SKIPPED, short
from cuqa_builder.jsonio import JsonlAppender, atomic_write_text, keep_latest
from cuqa_builder.llm.types import BatchCallFailed, LLMError
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.records.pool import PoolRecord
from cuqa_builder.run import CANDIDATES, GENERATION_FAILURES, POOL, RunContext, save_run_info
from cuqa_builder.stages.generate_jobs import Job
from cuqa_builder.stages.generate_tally import Tally


class Writer:
    """Appends finished candidates and failures as they come, and keeps the tally."""

    def __init__(self, ctx: RunContext, tally: Tally) -> None:
        self.tally = tally
        self.out = ctx.out
        self.seed = ctx.options.generate.seed
        self.candidates = JsonlAppender(ctx.path(CANDIDATES))
        atomic_write_text(ctx.path(GENERATION_FAILURES), "")  # the failures of this run only
        self.failures = JsonlAppender(ctx.path(GENERATION_FAILURES))
        self.pool_path = ctx.path(POOL)
        self.pool_size = ctx.options.generate.pool_size
        keep_latest(self.pool_path, PoolKey, _event_of)  # a record a kill left torn, too
        self.pools = JsonlAppender(self.pool_path)
        self._skipped_written = 0
        self.write_skipped()

    def write_skipped(self) -> None:
        """The events not tried, with why: every event of the window ends in one file."""
        for event_id, why in self.tally.skipped[self._skipped_written:]:
            self.failures.append(GenerationFailure(
                candidate_id=candidate_id(self.seed, event_id), event_id=event_id,
                step=SKIPPED, reason=why))
        self._skipped_written = len(self.tally.skipped)

    def done(self, made: Made | Candidate) -> None:
        made = made if isinstance(made, Made) else Made([made])
        if not self.tally.written and made.items:  # the seed is the candidates': recorded
            save_run_info(self.out, seed=made.items[0].seed)  # with the first one
        self.candidates.append_all(made.items)
        if made.pool is not None:  # after the items: a pool record says the event is done
            self.pool(made.pool)
        self.tally.count_made(made)

    def pool(self, record: PoolRecord) -> None:
        """An event's pool record, with the --pool-size it was screened with."""
        self.pools.append(record.model_copy(update={"pool_size": self.pool_size}))

    def failed(self, job: Job, error: GenerationError) -> None:
        unanswered = _caused_by(error, LLMError)
        self.failures.append(GenerationFailure(
            candidate_id=job.candidate_id, event_id=job.event_id, sub_items=list(job.sub_items),
            step=error.step, reason=error.reason, branch=error.branch, calls=error.attempts,
            unanswered=unanswered,
        ))
        if error.pool is not None:
            self.pool(error.pool)
        self.tally.refused += sum(call.rejected is not None for call in error.attempts)
        if job.sub_items:
            self.tally.hard_failed += 1
        else:
            self.tally.failed += 1
        self.tally.reasons.add(f"{error.step}: {short(error.reason)}")
        self.tally.unanswered += unanswered
        self.tally.given_up += _caused_by(error, BatchCallFailed)
        if error.unasked is not None:
            self.tally.unasked[error.unasked] += 1

    def close(self) -> None:
        self.candidates.close()
        self.failures.close()
        self.pools.close()
        keep_latest(self.pool_path, PoolKey, _event_of)  # an event tried again: its latest


class PoolKey(BaseModel):
    event_id: str


def _event_of(key: PoolKey) -> str:
    return key.event_id


def _caused_by(error: BaseException, kind: type[LLMError]) -> bool:
    """Whether the failure was a call the endpoint did not answer (somewhere in its causes),
    of this kind."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, kind):
            return True
        cause = cause.__cause__
    return False
