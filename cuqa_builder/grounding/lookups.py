"""An entity's article lookup, the record of the run's `articles.jsonl`: what was looked up (a
wiki title, or a search), what was found, and how the page found becomes one (redirects
followed, loops caught)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from pydantic import Field

from cuqa_builder.grounding.keys import SEARCH_PREFIX, entity_key
from cuqa_builder.records.base import Record
from cuqa_builder.records.events import Entity
from cuqa_builder.records.pages import Page
from cuqa_builder.wiki.client import RevisionAt
from cuqa_builder.wiki.wikitext import article_title

# A page whose text is only "#REDIRECT [[Target]]" (any case, a colon allowed) is no article.
_REDIRECT = re.compile(r"\s*#redirect\s*:?\s*\[\[([^\]|#]+)", re.IGNORECASE)
_MAX_REDIRECTS = 5  # titles in a chain of redirects before it counts as going round

LookupKind = Literal["wiki_title", "search"]
LookupStatus = Literal["found", "missing", "created_later", "not_evidence", "unresolved"]


class ArticleLookup(Record):
    """One entity's article as of the cutoff (a line of `articles.jsonl`)."""

    key: str = Field(description="the entity's wiki title, or `search:` + its text")
    by: LookupKind
    status: LookupStatus
    reason: str = Field(description="for a person: what was found, or why there is no article")
    title: str | None = None
    revid: int | None = None
    timestamp: str | None = None
    redirect: str | None = None
    searched_for: str | None = None

    @property
    def found(self) -> bool:
        return self.status == "found"


def cutoff_moment(cutoff: date) -> str:
    """The end of the cutoff day, as the API's `rvstart` takes it."""
    return f"{cutoff.isoformat()}T23:59:59Z"


@dataclass
class LookupCounts:
    looked_up: Counter[str] = field(default_factory=Counter)  # status -> new lookups
    reused: int = 0
    failed: int = 0
    requests: int = 0

    def line(self) -> str:
        new = ", ".join(f"{n} {status}" for status, n in sorted(self.looked_up.items()))
        return (f"{sum(self.looked_up.values())} looked up ({new or 'none'}), {self.reused} "
                f"already known, {self.failed} failed (run again to retry); "
                f"{self.requests} API requests")


def through_redirects(
    asked: str, found: RevisionAt, look: Callable[[str], RevisionAt]
) -> tuple[RevisionAt, list[str]]:
    """`found`, or when its text is only a redirect (the API follows one; a page can still be a
    redirect to another, or back), the page it leads to. Returns the page (its `redirect` the
    title asked for) and, when the redirects go round in a loop or on for too long, the titles
    they went through (then there is no article)."""
    chain = [asked]
    while found.page is not None and (target := _redirect_target(found.page.wikitext)):
        if found.page.meta.title.casefold() != chain[-1].casefold():
            chain.append(found.page.meta.title)
        chain.append(target)
        if target.casefold() in {t.casefold() for t in chain[:-1]} \
                or len(chain) > _MAX_REDIRECTS:
            return found, chain
        found = look(target)
    if len(chain) > 1 and found.page is not None:  # went on from a redirect's page
        redirected = found.page.meta.model_copy(update={"redirect": asked})
        found = RevisionAt(asked, page=found.page.model_copy(update={"meta": redirected}))
    return found, []


def _redirect_target(wikitext: str) -> str | None:
    match = _REDIRECT.match(wikitext)
    return article_title(match[1]) if match else None


def redirect_loop(key: str, by: LookupKind, title: str, chain: list[str],
                   searched: str | None) -> ArticleLookup:
    return ArticleLookup(
        key=key, by=by, status="missing", title=title, searched_for=searched,
        reason=f"{title!r}: no article, its redirects go round ({' -> '.join(chain)})",
    )


def by_lookup_key(entities: Iterable[Entity]) -> dict[str, Entity]:
    """Each entity's lookup key -> its first mention: an article is looked up once."""
    keys: dict[str, Entity] = {}
    for entity in entities:
        keys.setdefault(entity_key(entity), entity)
    return keys


def lookup_kind(key: str) -> LookupKind:
    return "search" if key.startswith(SEARCH_PREFIX) else "wiki_title"


def found_lookup(key: str, by: LookupKind, page: Page,
           searched: str | None) -> ArticleLookup:
    meta = page.meta
    via = f" (redirect from {meta.redirect!r})" if meta.redirect else ""
    return ArticleLookup(
        key=key, by=by, status="found", title=meta.title, revid=meta.revid,
        timestamp=meta.timestamp, redirect=meta.redirect, searched_for=searched,
        reason=f"{meta.title!r} revision {meta.revid} of {meta.timestamp}{via}",
    )

