"""The yield of generation: items that passed validation per LLM call and per 1,000 tokens.

Calls are counted from the records (every attempt of every step, refused ones included, and the
calls of items whose generation failed), not from the gateway, so the figure describes the work
an item takes whether or not its calls were answered from the cache.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from cuqa_builder.records import Candidate, GenerationFailure, PromptCall

NO_BRANCH = "none"  # an event that failed before its branch was drawn (no usable bridge)


def item_calls(item: Candidate) -> list[PromptCall]:
    """The LLM calls made for this item itself (a hard item: its merges, not its easy items')."""
    if item.pairing is not None:
        return [*item.pairing.rejected, item.pairing.call]
    return item.intermediates.calls if item.intermediates else []


def branch_of(item: Candidate) -> str:
    return "hard" if item.difficulty == "hard" else item.type


@dataclass
class BranchYield:
    items: int = 0
    passed: int = 0
    failed_generation: int = 0
    calls: int = 0
    tokens: int = 0

    def add_calls(self, calls: Sequence[PromptCall]) -> None:
        self.calls += len(calls)
        self.tokens += sum(c.prompt_tokens + c.completion_tokens for c in calls)

    def line(self, name: str) -> str:
        per_call = self.passed / self.calls if self.calls else 0.0
        per_kilotoken = 1000 * self.passed / self.tokens if self.tokens else 0.0
        return (f"  {name:<5} {self.passed:>4} passed of {self.items + self.failed_generation:>4} "
                f"({self.failed_generation} failed in generation); {self.calls} calls, "
                f"{self.tokens} tokens: {per_call:.3f} items per call, {per_kilotoken:.3f} per "
                "1,000 tokens")


def branch_yields(
    candidates: Sequence[Candidate], failures: Sequence[GenerationFailure]
) -> dict[str, BranchYield]:
    yields: defaultdict[str, BranchYield] = defaultdict(BranchYield)
    for item in candidates:
        entry = yields[branch_of(item)]
        entry.items += 1
        entry.passed += bool(item.validation and item.validation.passed)
        entry.add_calls(item_calls(item))
    for failure in failures:
        entry = yields["hard" if failure.sub_items else (failure.branch or NO_BRANCH)]
        entry.failed_generation += 1
        entry.add_calls(failure.calls)
    return dict(sorted(yields.items()))


def yield_lines(
    candidates: Sequence[Candidate], failures: Sequence[GenerationFailure]
) -> list[str]:
    yields = branch_yields(candidates, failures)
    if not yields:
        return []
    total = BranchYield()
    for entry in yields.values():
        total.items += entry.items
        total.passed += entry.passed
        total.failed_generation += entry.failed_generation
        total.calls += entry.calls
        total.tokens += entry.tokens
    return ["yield (generation calls, refused attempts included):",
            *(entry.line(name) for name, entry in yields.items()), total.line("all")]
