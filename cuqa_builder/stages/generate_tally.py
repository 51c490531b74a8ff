"""What the generate stage counts as it works, and the summary it prints from that."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from cuqa_builder.cutoff_estimate import ProbeModelCheck
from cuqa_builder.generation.algorithm import Made
from cuqa_builder.generation.bridges import RENAMED
from cuqa_builder.generation.pool_report import PoolTally
from cuqa_builder.generation.yield_report import Reasons, item_calls, stage_line
from cuqa_builder.jsonio import iter_jsonl
from cuqa_builder.llm.batch.summary import describe_batches, files_read
from cuqa_builder.llm.estimate import CallPlan, compare
from cuqa_builder.llm.gateway import Gateway
from cuqa_builder.llm.types import GatewayStats
from cuqa_builder.records.candidates import Candidate, GenerationFailure, PromptCall
from cuqa_builder.run import CANDIDATES, GENERATION_FAILURES, LLM_CACHE, RunContext
from cuqa_builder.verification.checker import ItemChecker

T = TypeVar("T")


@dataclass
class Tally:
    selected: int = 0
    stale: int = 0  # candidates taken out to be made again: their event changed
    no_entities: int = 0
    outside_window: int = 0
    already_done: int = 0
    events_made: int = 0  # events that gave at least one new candidate
    aab: int = 0
    abc: int = 0
    fallbacks: int = 0
    failed: int = 0
    hard_requested: int = 0
    hard_written: int = 0
    hard_failed: int = 0
    no_article: int = 0  # --known-source wiki: no entity of the event had an article then
    refused: int = 0  # outputs a step check refused (asked again, or the step failed)
    repaired: int = 0  # items written after at least one refused output
    articles: str = ""  # --known-source wiki: what the article lookups did
    others: list[str] = field(default_factory=list)  # the checker's and the guesser's calls
    set_aside: Counter[str] = field(default_factory=Counter)  # entities no bridge, by reason
    reasons: Reasons = field(default_factory=Reasons)  # "step: reason" of each failure
    unanswered: int = 0  # failures of a call to the endpoint: a re-run asks it again
    given_up: int = 0  # of those, batch calls that failed in every round they may have
    unasked: Counter[str] = field(default_factory=Counter)  # events a checker left unchecked
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (event id, why) not tried
    pools: PoolTally = field(default_factory=PoolTally)
    pool_records: str = ""  # what rebuilding the records pool.jsonl lacked did, if it was needed
    notes: list[str] = field(default_factory=list)  # flags that could not change what was done
    probe_check: ProbeModelCheck | None = None  # is --probe-model a model of the cutoff?

    @property
    def written(self) -> int:
        return self.aab + self.abc + self.hard_written

    def most_common_failure(self) -> str:
        return self.reasons.most_common()

    def retry(self) -> str:
        """What trying the failures again takes. A re-run asks again only the calls the endpoint
        did not answer, and batch calls that failed in every round --max-retries allows only
        with a larger one; the answers it gave are cached, so their failures come back alike."""
        failed = self.reasons.total()
        again = self.unanswered - self.given_up
        notes = [
            *([f"the {again} whose call was not answered are asked again"] if again else []),
            *([f"the {self.given_up} whose batch call failed in every round --max-retries "
               "allows are asked again with a larger --max-retries"] if self.given_up else []),
        ]
        if self.unanswered == failed:
            if not self.given_up:
                return "their calls were not answered: the same command asks them again"
            if not again:
                return ("their batch calls failed in every round --max-retries allows: a larger "
                        "--max-retries asks them again")
            return "; ".join(notes)
        return ("a re-run replays the cached answers and fails them alike: a larger --attempts "
                "asks a refused step again, --refresh asks every call anew, another --model or "
                "--seed takes another way" + "".join(f"; {note}" for note in notes))

    def count_made(self, made: Made) -> None:
        self.events_made += any(item.difficulty == "easy" for item in made.items)
        for item in made.items:
            self.count(item)

    def count(self, item: Candidate) -> None:
        calls = item_calls(item)
        refused = sum(call.rejected is not None for call in calls)
        self.refused += refused
        self.repaired += refused > 0
        if item.difficulty == "hard":
            self.hard_written += 1
            return
        if item.type == "AAB":
            self.aab += 1
        else:
            self.abc += 1
        if item.intermediates and item.intermediates.fallback:
            self.fallbacks += 1


def summary_of(
    ctx: RunContext, tally: Tally, model: str, stats: GatewayStats, wall: float,
    plan: CallPlan | None,
) -> str:
    reasons = [(n, why) for n, why in (
        (tally.no_entities, "without entities"), (tally.outside_window, "outside the window"),
        (tally.no_article, "without an entity that had an article at the cutoff"),
    ) if n]
    skipped = (f"{reasons[0][0]} skipped ({reasons[0][1]}), " if len(reasons) == 1 else
               f"{sum(n for n, _ in reasons)} skipped ("
               f"{', '.join(f'{n} {why}' for n, why in reasons)}), " if reasons else "")
    # Events as events (each skipped, done before, made anew or failed), then what the events
    # made anew gave, in candidates.
    lines = [
        f"generate: {tally.selected} events: {skipped}{tally.already_done} already done, "
        f"{tally.events_made} gave {tally.aab + tally.abc} new candidates "
        f"(AAB {tally.aab}, ABC {tally.abc}"
        + (f"; {tally.fallbacks} took the other branch" if tally.fallbacks else "")
        + f"), {tally.failed} failed"
        + (f"; {tally.stale} of them stale (their event was reworded), made again"
           if tally.stale else ""),
    ]
    if tally.probe_check is not None:
        lines.append(f"  {tally.probe_check.line()}")
    if tally.hard_requested:
        lines.append(f"  hard: {tally.hard_written} new (requested {tally.hard_requested}), "
                     f"{tally.hard_failed} failed")
    if tally.failed or tally.hard_failed:
        lines.append(f"  most common failure: {tally.most_common_failure()}")
        lines.append(f"  failures: {ctx.path(GENERATION_FAILURES)} ({tally.retry()})")
    lines.append(f"  repair (--attempts {ctx.options.generate.attempts}): {tally.refused} outputs "
                 f"refused by their step check; {tally.repaired} items written after a retry")
    if tally.articles:
        lines.append(f"  articles at the cutoff (this command's lookups): {tally.articles}")
    lines += tally.pools.lines()
    lines += [f"  {line}" for line in (tally.pool_records, *tally.notes) if line]
    renamed = tally.set_aside.pop(RENAMED, 0)
    if tally.set_aside:
        reasons = "; ".join(f"{n} {why}" for why, n in tally.set_aside.most_common())
        lines.append(f"  entities set aside as bridges (this command's events): {reasons}")
    if renamed:
        lines.append(f"  {renamed} bridges named by their article's title (this command's events): "
                     f"{RENAMED}")
    lines.append(
        f"  LLM {model}: {stats.calls} calls, {stats.cache_hits} cache hits, "
        f"{stats.prompt_tokens} tokens in, {stats.completion_tokens} out, ${stats.cost:.4f}"
        f"{describe_batches(stats)}; wall {wall:.1f} s -> {ctx.path(CANDIDATES)}"
    )
    lines += [f"  {other}" for other in tally.others]
    if plan is not None:
        lines.append(compare(plan, stats))
    return "\n".join(lines)


def asked_while_composing(other: Gateway, checker: ItemChecker | None) -> str:
    """What another model than the generator did while composing, in the summary's words."""
    assert checker is not None  # only a checker asks other models
    roles = [role for role, asked in (("(the checker) checked the items", checker.client),
                                      ("(a model of the cutoff) guessed at the whole questions",
                                       checker.guesser)) if other is asked]
    stats = other.stats
    return (f"{other.model} {' and '.join(roles)}: {stats.calls} calls, {stats.cache_hits} "
            f"cache hits{describe_batches(stats)}")


def whole_stage(ctx: RunContext, models: list[str]) -> str:
    """The stage over every command of a --batch-files run: its records, and the batch files of
    every model it asked. The records count a call for each item it served, the files an answer
    for each request: when they differ, the line says by how much and why."""
    calls = 0

    def counted(records: Iterator[T], calls_of: Callable[[T], Sequence[PromptCall]]
                ) -> Iterator[T]:
        nonlocal calls
        for record in records:
            calls += len(calls_of(record))
            yield record

    records = stage_line(
        counted(iter_jsonl(ctx.path(CANDIDATES), Candidate), item_calls),
        counted(iter_jsonl(ctx.path(GENERATION_FAILURES), GenerationFailure),
                lambda failure: failure.calls))
    read = files_read(ctx.path(LLM_CACHE), models)
    differ = ""
    if calls > read.answered:
        differ = (f"; the records count {calls - read.answered} calls more than the answers "
                  "read: an answer that several items share (the same request), or that the "
                  "cache held before the rounds, counts for each item")
    elif calls < read.answered:
        differ = (f"; {read.answered - calls} answers read are in no item's record (the "
                  f"records count {calls} calls)")
    return f"{records}; {read.describe()}{differ}"
