"""The yield of generation: items that passed validation per LLM call and per 1,000 tokens.

Calls are counted from the records (every attempt of every step, refused ones included, and the
calls of items whose generation failed), not from the gateway, so the figure describes the work
an item takes whether or not its calls were answered from the cache.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from textwrap import shorten

from cuqa_builder.records.candidates import Candidate, GenerationFailure, PromptCall

# The step of an event not tried (skipped: no entity, none with an article): not a failure.
SKIPPED = "Select"
NO_BRANCH = "none"  # an event that failed before its branch was drawn (no usable bridge)
# What a reason quotes of its own case: a name, a model's output, a number.
# A quote opens after no letter ("the event's first sentence" holds an apostrophe, not one).
_QUOTE = re.compile(r"(?<!\w)'(?:[^'\\]|\\.)*'(?!\w)|(?<!\w)\"(?:[^\"\\]|\\.)*\"")
_PARTICULARS = re.compile(_QUOTE.pattern + r"|\d+(?:[.,]\d+)*")


def short(reason: str, quoted: int = 80) -> str:
    """A reason on one line, what it quotes (a model's output, a long name) cut to `quoted`
    characters: its own words are kept whole, so a summary never ends it mid-phrase."""
    return _QUOTE.sub(lambda quote: shorten(quote[0], quoted, placeholder="…"),
                      " ".join(reason.split()))


@dataclass
class Reasons:
    """Failures (or refused outputs) counted by their reason, what a reason quotes of its own
    case set aside: "no relation of the infobox of 'Turkey' ..." and "... of 'Wagner Group' ..."
    are one reason, shown in the words of its first case."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    varied: set[str] = field(default_factory=set)  # reasons met with other particulars

    def add(self, reason: str, count: int = 1) -> None:
        key = _PARTICULARS.sub("…", reason)
        if self.examples.setdefault(key, reason) != reason:
            self.varied.add(key)
        self.counts[key] += count

    def merge(self, other: Reasons) -> None:
        for key, count in other.counts.items():
            self.add(other.examples[key], count)
        self.varied |= other.varied

    def total(self) -> int:
        return sum(self.counts.values())

    def top(self) -> tuple[str, int, bool]:
        """The most common reason in its first case's words, how many have it, and whether
        some of them quote other names or numbers."""
        (key, count), = self.counts.most_common(1)
        return self.examples[key], count, key in self.varied

    def most_common(self, what: str = "failures") -> str:
        example, count, varied = self.top()
        others = "; the same reason for other names" if varied else ""
        return f"{example} ({count} of {self.total()} {what}{others})"


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
    refusals: Reasons = field(default_factory=Reasons)  # "Step: why" of the outputs refused

    def add_calls(self, calls: Sequence[PromptCall]) -> None:
        self.calls += len(calls)
        self.tokens += sum(c.prompt_tokens + c.completion_tokens for c in calls)
        for call in calls:
            if call.rejected:
                self.refusals.add(f"{call.function}: {call.rejected}")

    def add(self, other: BranchYield) -> None:
        self.items += other.items
        self.passed += other.passed
        self.failed_generation += other.failed_generation
        self.calls += other.calls
        self.tokens += other.tokens
        self.refusals.merge(other.refusals)

    def line(self, name: str) -> str:
        made = (f"  {name:<5} {self.passed:>4} passed of {self.items + self.failed_generation:>4} "
                f"({self.failed_generation} failed in generation); ")
        if not self.calls:
            # Composed from structure (the embedded model): no call, so no rate to give.
            return made + "no generation calls (composed from structure)"
        per_kilotoken = 1000 * self.passed / self.tokens if self.tokens else 0.0
        return (f"{made}{self.calls} calls, {self.tokens} tokens: "
                f"{self.passed / self.calls:.3f} items per call, {per_kilotoken:.3f} per "
                "1,000 tokens")


def branch_yields(
    candidates: Iterable[Candidate], failures: Iterable[GenerationFailure]
) -> dict[str, BranchYield]:
    yields: defaultdict[str, BranchYield] = defaultdict(BranchYield)
    for item in candidates:
        entry = yields[branch_of(item)]
        entry.items += 1
        entry.passed += bool(item.validation and item.validation.passed)
        entry.add_calls(item_calls(item))
    for failure in failures:
        if failure.step == SKIPPED:
            continue
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
    return ["yield (generation calls, refused attempts included):",
            *(entry.line(name) for name, entry in yields.items()), _total(yields).line("all")]


def _total(yields: dict[str, BranchYield]) -> BranchYield:
    total = BranchYield()
    for entry in yields.values():
        total.add(entry)
    return total


def stage_line(candidates: Iterable[Candidate], failures: Iterable[GenerationFailure]) -> str:
    """The generate stage as a whole, from its records: what every command that worked on it
    made and spent (a run of batch-file rounds ends with a command that made only the last)."""
    yields = branch_yields(candidates, failures)
    total = _total(yields)
    made = ", ".join(f"{name} {entry.items}" for name, entry in yields.items() if entry.items)
    refused = total.refusals.total()
    why = ""
    if refused:
        reason, count, varied = total.refusals.top()
        others = "; the same reason for other names" if varied else ""
        why = (f", most commonly {short(reason)} "
               f"({count}{others})")
    return (f"  the stage as a whole: {total.items} candidates ({made or 'none'}), "
            f"{total.failed_generation} failed; {total.calls} calls, {total.tokens} tokens; "
            f"{refused} outputs refused by their step check{why}")
