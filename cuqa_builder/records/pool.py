"""The pool of an event (the connected recipe, `pool.jsonl`): each bridge tried, each question
composed and what became of it."""

from __future__ import annotations

from pydantic import Field

from cuqa_builder.records.base import Record
from cuqa_builder.records.candidates import CheckerVerdict, PromptCall
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import KnownFrom, QuestionType


class BridgeTry(Record):
    """One named thing of an event considered as a bridge, and what became of it."""

    entity: Entity
    kind: str = Field(description="what it is, in a plain word (its infobox's kind, else NER's)")
    description: str | None = Field(
        default=None, description="how the questions name it, through the news only")
    set_aside: str | None = Field(
        default=None, description="why it has no description (the generator's SKIP with its "
        "reason, a description refused by its check, an unreadable line)")


class PoolMember(Record):
    """One question the event's pool held: a bridge, one known hop, the merged question, its
    rank, and the checks it met (`outcome`)."""

    id: str = Field(description="the candidate id it has (or would have had)")
    bridge: str
    property: str
    known_from: KnownFrom
    branch: QuestionType
    known_question: str
    answer: str
    question: str
    masked_question: str
    rank: float
    verdicts: list[CheckerVerdict] = Field(default_factory=list)
    outcome: str = Field(description="`survived` (a candidate), or which check failed it and "
                         "why, or `not screened` (ranked below --pool-size)")


class PoolRecord(Record):
    """What one event's pool held and why each member survived or failed; the last record of
    an event in `pool.jsonl` is its latest try."""

    event_id: str
    seed: int
    bridges: list[BridgeTry] = Field(default_factory=list)
    members: list[PoolMember] = Field(default_factory=list)
    refused: list[str] = Field(
        default_factory=list, description="known hops refused before ranking, and why")
    calls: list[PromptCall] = Field(default_factory=list)
    pool_size: int | None = Field(
        default=None, description="the --pool-size its questions were screened with")
