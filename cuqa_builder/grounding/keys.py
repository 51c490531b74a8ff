"""How an entity's article is named in `articles.jsonl` (kept light: generation imports it)."""

from __future__ import annotations

from cuqa_builder.records.events import Entity

SEARCH_PREFIX = "search:"


def entity_key(entity: Entity) -> str:
    """Its wikilink's title (spaces, first letter upper-case, no section), else a search for
    its text."""
    title = " ".join((entity.wiki_title or "").split("#", 1)[0].replace("_", " ").split())
    return title[:1].upper() + title[1:] if title else f"{SEARCH_PREFIX}{entity.text}"
