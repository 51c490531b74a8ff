"""The events stage's records (`events.jsonl`): an event with its source, links and named
entities, and the names an entity answers to."""

from __future__ import annotations

import hashlib
import re
from datetime import date

from pydantic import Field

from cuqa_builder.records.base import Record


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
