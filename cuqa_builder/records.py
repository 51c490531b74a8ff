"""Typed records that flow between the pipeline stages (SPEC 2.2, 2.4)."""

from __future__ import annotations

import hashlib
import re
from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Record(BaseModel):
    """Base of every record: unknown keys are an error, so typos surface early."""

    model_config = ConfigDict(extra="forbid")


# --- pages (fetch stage) ---------------------------------------------------------------


class PageMeta(Record):
    """Sidecar `NAME.json` of a snapshot page."""

    title: str = Field(min_length=1)
    revid: int = Field(description="MediaWiki revision id; hand-written pages use placeholders "
                       "from 1")
    timestamp: str
    sha256: str | None = None
    fetched: str | None = Field(
        None, description="when the fetch stage got this revision or last saw it was still the "
        "latest (ISO, UTC): a refresh re-checks pages fetched soon after their date"
    )
    kind: Literal["article"] | None = Field(
        default=None, description="`article`: an entity's article as of the cutoff (absent: an "
        "event page, a year article or a Current events day)",
    )
    redirect: str | None = Field(
        default=None, description="the title asked for, when a redirect led to this article"
    )
    api: str | None = Field(
        default=None, description="api.php the revision came from; absent for hand-written pages, "
        "whose revids are placeholders",
    )
    html_sha256: str | None = Field(
        default=None, description="sha256 of `NAME.html`, MediaWiki's rendering of the revision "
        "(`action=parse`), stored beside the wikitext of an article the ground stage fetched",
    )

    @field_validator("revid")
    @classmethod
    def _a_revision_id(cls, revid: int) -> int:
        if revid < 1:
            raise ValueError(f"a revision id is 1 or more, not {revid} (hand-written pages "
                             "number theirs from 1)")
        return revid


class Page(Record):
    meta: PageMeta
    wikitext: str
    html: str | None = None  # MediaWiki's rendering of the revision, when it was fetched
    # why the rendering its sidecar names was not read (missing, changed, not UTF-8): the page
    # is then read from its wikitext, as one stored without a rendering
    html_unread: str | None = None


# --- events (events + entities stages) -------------------------------------------------


class Link(Record):
    title: str
    text: str


class Entity(Record):
    text: str
    label: str
    wiki_title: str | None = None


_PARENTHETICAL = re.compile(r"\s*\([^)]*\)$")


def answer_aliases(entity: Entity) -> list[str]:
    """The entity's Wikipedia title (without a disambiguation suffix) when it reads differently:
    the other name an answer that is this entity may be given by (`CuqaItem.answer_aliases`)."""
    if not entity.wiki_title:
        return []
    title = _PARENTHETICAL.sub("", entity.wiki_title).strip()
    return [title] if title and title.casefold() != entity.text.casefold() else []


class EventSource(Record):
    title: str
    revid: int | None
    url: str


class Event(Record):
    id: str
    date: date
    end_date: date | None = None
    text: str
    links: list[Link] = Field(default_factory=list)
    category: str | None = None
    topics: list[str] = Field(default_factory=list)
    citations: list[str] = Field(default_factory=list)
    source: EventSource
    entities: list[Entity] = Field(default_factory=list)


def event_id(page_title: str, text: str) -> str:
    """Stable id: the same sentence on the same page gets the same id in every run."""
    digest = hashlib.sha256(f"{page_title}\n{text}".encode()).hexdigest()
    return f"ev-{digest[:16]}"


# --- released items (SPEC 2.4) ----------------------------------------------------------


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


# --- candidates (generate + validate stages) ---------------------------------------------


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


# --- the pool of an event (connected recipe, `pool.jsonl`) ---------------------------------


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
