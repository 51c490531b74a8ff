"""The generate and validate stages' records (`candidates.jsonl`, `generation-failures.jsonl`):
a candidate with every intermediate and prompt call kept, how a hard item composes, the
failures of generation, and every check's verdict."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from cuqa_builder.records.base import Record
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import CuqaItem, Evidence, KnownFrom, KnownSource, QuestionType


class PromptCall(Record):
    """One LLM call made while generating: which template, its hash, raw and parsed output.

    A step retried after its check failed keeps every attempt, the rejected ones with `rejected`.
    """

    function: str
    template_hash: str
    raw: str
    parsed: str
    attempt: int = 0
    seed: int | None = None
    rejected: str | None = Field(default=None, description="why the step check refused it")
    prompt_tokens: int = 0
    completion_tokens: int = 0


class Intermediates(Record):
    """Everything Algorithm 1 produced on the way to the merged question."""

    branch: QuestionType
    cur_ent: Entity
    k_ent: Entity | None = None
    known_passage: str
    unknown_question: str
    known_question: str
    known_answer: str
    merged_question: str
    calls: list[PromptCall] = Field(default_factory=list)
    fallback: str | None = Field(
        default=None, description="why an ABC draw became AAB (no known entity in the passage)"
    )
    known_source: KnownSource = "model"
    known_article: Evidence | None = Field(
        default=None, description="with --known-source wiki: the article whose lead is the passage"
    )
    bridge_description: str | None = Field(
        default=None, description="connected recipe: the bridge described only through the event"
    )
    category: str | None = Field(
        default=None, description="connected recipe, AAB: the known category holding the answer"
    )
    masked_question: str | None = Field(
        default=None, description="the question with the event masked, as the `connected` "
        "check asks it closed-book",
    )
    known_from: KnownFrom | None = Field(
        default=None, description="connected recipe: where the known hop came from: a relation "
        "of the bridge's infobox (a templated question, no call), its article's lead (the "
        "generator's question about a linked thing), the generator's own knowledge",
    )
    rank: float | None = Field(
        default=None, description="connected recipe: how likely the item was to survive the "
        "checks, as ranked before any check (higher first); picks the kept items of an event",
    )
    screening: list[CheckerVerdict] = Field(
        default_factory=list, description="connected recipe: the checker's verdicts given while "
        "composing (the event's questions asked together); validate takes them as they are",
    )


class Pairing(Record):
    """How a hard item composes its two easy items, and the MergeQuestions call joining them."""

    link: Literal["question", "entities", "answer"]
    bridge: str = Field(description="the first item's answer, which the second item builds on")
    call: PromptCall
    rejected: list[PromptCall] = Field(
        default_factory=list, description="earlier merges the step check refused"
    )


class GenerationFailure(Record):
    """One item the last run could not generate; the next run retries it."""

    candidate_id: str
    event_id: str | None = None
    sub_items: list[str] = Field(default_factory=list, description="hard items: the pair")
    step: str
    reason: str
    branch: QuestionType | None = Field(None, description="the branch drawn (easy items)")
    calls: list[PromptCall] = Field(
        default_factory=list, description="the item's calls up to the failure, the failed "
        "step's refused attempts included",
    )
    unanswered: bool = Field(
        False, description="the failure was a call the endpoint did not answer (a re-run asks "
        "it again); else every call was answered and is in the cache",
    )


class CheckFailure(Record):
    check: str
    reason: str


class CriticVerdict(Record):
    """The critic model's verdict on one criterion."""

    passed: bool
    note: str = ""


CheckerCheck = Literal["connected", "unknown_before_cutoff", "answered_with_event", "one_answer",
                       "one_thing"]
CheckerKnowledge = Literal["told", "cutoff"]


class CheckerVerdict(Record):
    """One of the checks a checker model answers about an item (`verification/`).

    Without the event, the checker makes its best guesses: at the question with the event masked
    (`connected`) and at the whole question (`unknown_before_cutoff`); an item whose answer is
    among the guesses counted is guessable. With the event's text (open book), it answers the
    question (`answered_with_event`: it must give the item's answer) and says what else fits
    (`one_answer`: nothing else may)."""

    check: CheckerCheck = "connected"
    question: str = Field(description="what the checker was asked")
    reply: str
    model: str
    passed: bool = Field(description="the check holds for the item")
    item: str | None = Field(default=None, description="for hard items: the easy item asked")
    guesses: list[str] = Field(
        default_factory=list, description="the checker's guesses, most likely first"
    )
    counted: int | None = Field(
        default=None, description="how many of the guesses counted (`--guesses`)"
    )
    knowledge: CheckerKnowledge | None = Field(
        default=None, description="the guessing checker: `cutoff`, a model whose knowledge ends "
        "at the cutoff (--probe-model); `told`, a model told to know nothing after it",
    )
    answer: str | None = Field(default=None, description="open book: the checker's answer")
    others: list[str] = Field(
        default_factory=list, description="open book: what else the checker said fits, or "
        "other right answers",
    )
    matched: str | None = Field(
        default=None, description="the guess or answer that named the item's answer, and how "
        "(`alias`, `judge`)",
    )
    unreadable: str | None = Field(
        default=None, description="why the reply could not be read (a refusal, a missing "
        "line, a judge with no verdict): the check measured nothing and fails the item",
    )


class Validation(Record):
    passed: bool
    failures: list[CheckFailure] = Field(default_factory=list)
    connected: list[CheckerVerdict] = Field(
        default_factory=list, description="the checker's verdicts (`CheckerVerdict`): guesses "
        "without the event, masked and whole, and the open-book answer with it",
    )
    probes: dict[str, Any] = Field(default_factory=dict)
    critic: dict[str, CriticVerdict] = Field(
        default_factory=dict, description="criterion -> the critic model's verdict"
    )
    advisories: list[CheckFailure] = Field(
        default_factory=list, description="failures that do not fail the item (--critic-advisory)"
    )


class Candidate(CuqaItem):
    """A generated item with every intermediate kept (`candidates.jsonl`)."""

    intermediates: Intermediates | None = None
    sub_items: list[Candidate] = Field(
        default_factory=list, description="for hard items: the two easy items merged"
    )
    seed: int
    validation: Validation | None = None
    pairing: Pairing | None = Field(default=None, description="for hard items: how they compose")

    def to_item(self) -> CuqaItem:
        fields = set(CuqaItem.model_fields)
        return CuqaItem.model_validate(self.model_dump(include=fields))
