"""The released items (SPEC 2.4): one line of `cuqa.jsonl` with its sub-questions, the event it
asks about, who generated it, its grounding verdicts with their evidence, and its review."""

from __future__ import annotations

from datetime import date
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuqa_builder.records.base import Record

QuestionType = Literal["AAB", "ABC"]
Difficulty = Literal["easy", "hard"]


class SubQuestion(Record):
    question: str
    answer: str
    kind: Literal["unknown", "known"]


class EventRef(Record):
    id: str
    date: date
    text: str
    source_title: str
    revid: int | None
    category: str | None = Field(
        default=None, description="the category line the event stood under on its page "
        "(`Sports`, `Disasters and accidents`), when it had one")


KnownSource = Literal["model", "wiki"]


Recipe = Literal["paper", "connected"]
KnownFrom = Literal["infobox", "article", "model"]


class GeneratorInfo(Record):
    model: str
    recipe: Recipe = Field(
        default="paper", description="how the item was composed (`--prompts`): the paper's "
        "Algorithm 1 as worded in its Tables 5-9, or the connected recipe",
    )
    known_source: KnownSource = Field(
        default="model", description="where the known passage came from: the generator's own "
        "knowledge (the paper's KnownEventsGen) or the pre-cutoff Wikipedia article",
    )
    prompts: dict[str, str] = Field(
        default_factory=dict, description="template name -> sha256 of the template text"
    )


class Review(BaseModel):
    """Human review outcome; extra keys (reasons, time per task...) are kept."""

    model_config = ConfigDict(extra="allow")

    status: Literal["unreviewed", "accepted"] = "unreviewed"
    annotators: list[str] = Field(default_factory=list)
    agreement: float | None = None
    rewritten: bool = False


class Evidence(Record):
    """Where a grounding verdict looked: one article revision in force at the cutoff."""

    title: str
    revid: int
    timestamp: str
    sentences: list[str] = Field(default_factory=list, description="the sentences found")
    url: str | None = Field(
        default=None, description="link to that revision (absent when the revid is a placeholder)"
    )
    via: str | None = Field(
        default=None, description="how the title was found when not by the entity's wikilink "
        "(`search: ...`, `redirect from ...`)",
    )


GroundingCheck = Literal["bridge_known_before_cutoff", "known_hop_grounded"]


class GroundingVerdict(Record):
    check: GroundingCheck
    passed: bool
    reason: str = Field(description="what was found, or what is missing where")
    evidence: list[Evidence] = Field(default_factory=list)
    item: str | None = Field(default=None, description="for hard items: the easy item judged")


class CuqaItem(Record):
    """One line of the released `cuqa.jsonl`."""

    id: str
    question: str
    answer: str
    answer_aliases: list[str] = Field(default_factory=list)
    type: QuestionType
    difficulty: Difficulty
    sub_questions: list[SubQuestion]
    event: EventRef
    cutoff: str
    generator: GeneratorInfo
    property: str | None = Field(
        default=None, description="what the known hop asks of the bridge (`birthplace`, "
        "`district`; `category` for an AAB item's category): the mix of a release is counted "
        "by it")
    grounding: list[GroundingVerdict] = Field(
        default_factory=list, description="the known hop checked against Wikipedia as of the "
        "cutoff, with evidence",
    )
    review: Review = Field(default_factory=Review)
