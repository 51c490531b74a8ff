"""The batch part of a run's summary: rounds and batch files of this command, and the files
read over every command whose answers the run's cache holds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cuqa_builder.llm.cache import CallCache
from cuqa_builder.llm.types import GatewayStats


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
