"""Entity articles as of the cutoff: looked up once, kept in the run, read offline from a snapshot.

Every lookup (found, or the finding that there was no article at the cutoff) is appended to the
run's `articles.jsonl`, so a re-run asks the wiki nothing twice; the articles themselves go to
`pages/articles/` in the snapshot format (`"kind": "article"`, the redirect they came through, the
api.php they came from), each with MediaWiki's rendering of its revision (`NAME.html`, one more
request). With `--source DIR` they are read from `DIR/articles/` and nothing is fetched: a
snapshot article written after the cutoff is kept out, with a reason saying so, and a finding of
no article is looked up again once the snapshot holds one. A request that fails for good is not
recorded, so the next run asks again.

The rendering improves on the wikitext but is never a condition for having the article: when the
wiki will not render a revision, or the stored rendering is damaged or cannot be read soundly,
the article is read from its wikitext, and the store counts it by reason for the summary.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Literal

from pydantic import Field
from tqdm import tqdm

from cuqa_builder.grounding.article_text import ArticleText, article_text
from cuqa_builder.grounding.keys import SEARCH_PREFIX, entity_key
from cuqa_builder.jsonio import JsonlAppender, read_jsonl
from cuqa_builder.records import Entity, Evidence, Page, Record
from cuqa_builder.run import ARTICLES, RunContext, built_from_snapshot
from cuqa_builder.snapshot import (
    SnapshotError,
    articles_dir,
    iter_snapshot,
    page_path,
    read_page,
    write_page,
)
from cuqa_builder.wiki.api import WikiError
from cuqa_builder.wiki.client import MediaWikiClient, RevisionAt
from cuqa_builder.wiki.wikitext import article_title, revision_url

log = logging.getLogger(__name__)

# A page whose text is only "#REDIRECT [[Target]]" (any case, a colon allowed) is no article.
_REDIRECT = re.compile(r"\s*#redirect\s*:?\s*\[\[([^\]|#]+)", re.IGNORECASE)
_MAX_REDIRECTS = 5  # titles in a chain of redirects before it counts as going round

LookupKind = Literal["wiki_title", "search"]
LookupStatus = Literal["found", "missing", "created_later", "not_evidence", "unresolved"]
ABSENT_STATUSES: dict[LookupStatus, str] = {
    "missing": "no such article",
    "created_later": "article created after the cutoff",
    "not_evidence": "snapshot article newer than the cutoff",
    "unresolved": "no title found",
}
# Why an article was read from its wikitext, in the summary's words (the warnings name them).
DAMAGED_RENDERING = ("the rendering stored beside the wikitext (NAME.html) is missing, changed "
                     "or not UTF-8")
UNSOUND_RENDERING = "MediaWiki's rendering could not be read soundly"


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


ClientFactory = Callable[[], MediaWikiClient]


class ArticleStore:
    """Articles in force at the cutoff, by entity; `ensure` looks up the ones not known yet."""

    def __init__(
        self, index: Path, pages: Path, cutoff: date, *, source: Path | None = None,
        client: ClientFactory | None = None,
    ) -> None:
        self.index = index
        self.cutoff = cutoff
        self.moment = cutoff_moment(cutoff)
        self.source = source
        self.folder = articles_dir(source) if source else articles_dir(pages)
        self._client_factory = client
        self._client: MediaWikiClient | None = None
        self.lookups = {lookup.key: lookup for lookup in read_jsonl(index, ArticleLookup)}
        self._snapshot: dict[str, Page] | None = None
        self._pages: dict[str, Page] = {}  # title -> article read (each file read once)
        self.from_wikitext: dict[str, str] = {}  # title -> why its rendering was not read

    # --- reading ------------------------------------------------------------------------

    def lookup(self, entity: Entity) -> ArticleLookup | None:
        return self.lookups.get(entity_key(entity))

    def page(self, lookup: ArticleLookup | None) -> Page | None:
        """The stored article of a found lookup (None if absent or unreadable); a damaged
        rendering beside it is left unread, and `html_unread` says why."""
        if lookup is None or not lookup.found or lookup.title is None:
            return None
        if lookup.title not in self._pages:
            try:
                self._pages[lookup.title] = read_page(page_path(self.folder, lookup.title))
            except (SnapshotError, OSError, UnicodeDecodeError) as exc:
                log.warning("article %s cannot be read: %s", lookup.title, exc)
                return None
        return self._pages[lookup.title]

    def text(self, lookup: ArticleLookup | None) -> ArticleText | None:
        """A found article as a reader sees it (None if absent or unreadable): from its
        rendering, else from its wikitext, counted with the reason."""
        page = self.page(lookup)
        if page is None:
            return None
        if page.html_unread and page.meta.title not in self.from_wikitext:
            log.warning("article %s: %s: read from its wikitext", page.meta.title,
                        page.html_unread)
            self.from_wikitext[page.meta.title] = DAMAGED_RENDERING
        text = article_text(page)
        if text.rendering_unread:  # article_text has warned, naming it
            self.from_wikitext.setdefault(page.meta.title, UNSOUND_RENDERING)
        return text

    def wikitext_lines(self) -> list[str]:
        """One line per reason articles were read from their wikitext: "N articles read from
        wikitext: why"."""
        counts = Counter(self.from_wikitext.values())
        return [f"{n} article{'' if n == 1 else 's'} read from wikitext: {why}"
                for why, n in counts.items()]

    def evidence(self, lookup: ArticleLookup, sentences: Iterable[str] = ()) -> Evidence:
        """Evidence from a found lookup; the revision link only when the revid is a real one."""
        assert lookup.title is not None and lookup.revid is not None
        page = self.page(lookup)
        api = page.meta.api if page else None
        url = revision_url(lookup.title, lookup.revid, _index_url(api)) if api else None
        via = None
        if lookup.by == "search":
            via = f"search: {lookup.searched_for}"
        elif lookup.redirect:
            via = f"redirect from {lookup.redirect}"
        return Evidence(title=lookup.title, revid=lookup.revid, timestamp=lookup.timestamp or "",
                        sentences=list(sentences), url=url, via=via)

    # --- looking up -------------------------------------------------------------------------

    def ensure(self, entities: Iterable[Entity], progress: Callable[[], None] | None = None,
               ) -> LookupCounts:
        """Look up every entity not known yet (one API request per title, one per search)."""
        counts = LookupCounts()
        appender = JsonlAppender(self.index)
        try:
            for key, entity in _distinct(entities).items():
                if key in self.lookups and self._still_true(self.lookups[key], entity):
                    counts.reused += 1
                else:
                    self._look_up(key, entity, counts, appender)
                if progress:
                    progress()
        finally:
            appender.close()
            if self._client is not None:
                counts.requests = self._client.requests_made
                self._client.close()
                self._client = None
        return counts

    def _still_true(self, lookup: ArticleLookup, entity: Entity) -> bool:
        """Whether a recorded lookup stands: an article that can be read (a run that fetches its
        articles fetches one again whose stored rendering is damaged); a finding of no article
        from the wiki; offline, while the snapshot still holds no article for it."""
        if not lookup.found:
            return self.source is None or not self._from_snapshot(lookup.key, entity).found
        page = self.page(lookup)
        if page is not None and page.html_unread and self.source is None:
            log.warning("article %s: %s: fetching it again", page.meta.title, page.html_unread)
            return False
        return page is not None

    def ensure_shown(self, entities: Iterable[Entity], what: str, quiet: bool) -> LookupCounts:
        """`ensure` under a progress bar (unless `quiet`) of the distinct entities, which it
        counts: a bar of every mention stopped short ("articles: 88% 23/26")."""
        distinct = list(_distinct(entities).values())
        with tqdm(total=len(distinct), desc=what, unit="entity",
                  disable=quiet or not distinct) as bar:
            return self.ensure(distinct, progress=bar.update)

    def _look_up(
        self, key: str, entity: Entity, counts: LookupCounts, appender: JsonlAppender
    ) -> None:
        try:
            lookup = self._from_snapshot(key, entity) if self.source else self._fetch(key, entity)
        except WikiError as exc:
            log.warning("article of %s: %s", entity.text, exc)
            counts.failed += 1
            return
        self.lookups[key] = lookup
        appender.append(lookup)
        counts.looked_up[lookup.status] += 1

    def _fetch(self, key: str, entity: Entity) -> ArticleLookup:
        client = self._wiki()
        by = _lookup_kind(key)
        title: str | None = key
        if by == "search":
            title = client.search_title(entity.text)
            if title is None:
                return ArticleLookup(key=key, by=by, status="unresolved", searched_for=entity.text,
                                     reason=f"a search for {entity.text!r} found no article")
        assert title is not None
        searched = entity.text if by == "search" else None
        found, loop = _through_redirects(
            title, client.revision_at(title, self.moment),
            lambda target: client.revision_at(target, self.moment))
        if loop:
            return _redirect_loop(key, by, title, loop, searched)
        if found.page is None:
            exists = "does not exist" not in (found.absent or "")
            return ArticleLookup(
                key=key, by=by, status="created_later" if exists else "missing", title=title,
                searched_for=searched,
                reason=f"{title!r} had no article on {self.cutoff}: {found.absent}",
            )
        page = found.page.model_copy(update={"html": self._rendering(client, found.page)})
        write_page(self.folder, page)
        self._pages[page.meta.title] = page
        return _found(key, by, page, searched)

    def _rendering(self, client: MediaWikiClient, page: Page) -> str | None:
        """MediaWiki's rendering of the page's revision (what the wikitext reader only
        approximates), kept beside the wikitext; None when the wiki gives none: the article is
        then read from its wikitext, and the first time for each reason a warning says so."""
        try:
            return client.rendered_html(page.meta.title, page.meta.revid)
        except WikiError as exc:
            why = (f"the wiki refused action=parse (error code {exc.code})" if exc.code
                   else f"action=parse failed ({exc.reason})")
            if why not in self.from_wikitext.values():
                log.warning("%s: this article and any other the wiki does not render are read "
                            "from their wikitext", exc)
            self.from_wikitext[page.meta.title] = why
            return None

    def _from_snapshot(self, key: str, entity: Entity) -> ArticleLookup:
        """Offline: the snapshot's article by title or redirect; by name for a search."""
        pages = self._snapshot_pages()
        by = _lookup_kind(key)
        wanted = entity.text if by == "search" else key
        searched = entity.text if by == "search" else None

        def look(title: str) -> RevisionAt:
            return RevisionAt(title, page=pages.get(title.casefold()))

        found, loop = _through_redirects(wanted, look(wanted), look)
        if loop:
            return _redirect_loop(key, by, wanted, loop, searched)
        page = found.page
        if page is None:
            return ArticleLookup(
                key=key, by=by, status="missing" if by == "wiki_title" else "unresolved",
                title=wanted if by == "wiki_title" else None, searched_for=searched,
                reason=f"{wanted!r}: no article in the snapshot's {self.folder} (none at the "
                "cutoff, or not collected)",
            )
        if page.meta.timestamp > self.moment:
            return ArticleLookup(
                key=key, by=by, status="not_evidence", title=page.meta.title,
                revid=page.meta.revid, timestamp=page.meta.timestamp, searched_for=searched,
                reason=f"the snapshot's {page.meta.title!r} is revision {page.meta.revid} of "
                f"{page.meta.timestamp}, after the cutoff {self.cutoff}: not evidence",
            )
        return _found(key, by, page, searched)

    def _snapshot_pages(self) -> dict[str, Page]:
        """The snapshot's articles by title and by the redirect they came through (casefolded)."""
        if self._snapshot is None:
            self._snapshot = {}
            if self.folder.is_dir():
                for page in iter_snapshot(self.folder):
                    if isinstance(page, SnapshotError):
                        log.warning("snapshot article skipped: %s", page)
                        continue
                    for name in (page.meta.title, page.meta.redirect):
                        if name:
                            self._snapshot.setdefault(name.casefold(), page)
        return self._snapshot

    def _wiki(self) -> MediaWikiClient:
        if self._client is None:
            if self._client_factory is None:
                raise WikiError("no MediaWiki client to look articles up with")
            self._client = self._client_factory()
        return self._client


def _through_redirects(
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


def _redirect_loop(key: str, by: LookupKind, title: str, chain: list[str],
                   searched: str | None) -> ArticleLookup:
    return ArticleLookup(
        key=key, by=by, status="missing", title=title, searched_for=searched,
        reason=f"{title!r}: no article, its redirects go round ({' -> '.join(chain)})",
    )


def _distinct(entities: Iterable[Entity]) -> dict[str, Entity]:
    """Each entity's lookup key -> its first mention: an article is looked up once."""
    keys: dict[str, Entity] = {}
    for entity in entities:
        keys.setdefault(entity_key(entity), entity)
    return keys


def _lookup_kind(key: str) -> LookupKind:
    return "search" if key.startswith(SEARCH_PREFIX) else "wiki_title"


def _found(key: str, by: LookupKind, page: Page,
           searched: str | None) -> ArticleLookup:
    meta = page.meta
    via = f" (redirect from {meta.redirect!r})" if meta.redirect else ""
    return ArticleLookup(
        key=key, by=by, status="found", title=meta.title, revid=meta.revid,
        timestamp=meta.timestamp, redirect=meta.redirect, searched_for=searched,
        reason=f"{meta.title!r} revision {meta.revid} of {meta.timestamp}{via}",
    )


def _index_url(api: str) -> str:
    return api.removesuffix("api.php") + "index.php" if api.endswith("api.php") else api


def open_article_store(ctx: RunContext) -> ArticleStore:
    """The run's articles: `--source DIR/articles/` offline (DIR defaults to the snapshot the
    run was built from), else fetched from `--wiki-api` into the run's `pages/articles/` with
    the fetch stage's politeness."""
    options = ctx.options.source

    def client() -> MediaWikiClient:
        return MediaWikiClient(
            options.wiki_api, contact=options.contact, min_interval_s=options.wiki_interval
        )

    return ArticleStore(ctx.path(ARTICLES), ctx.pages_dir, ctx.window.cutoff,
                        source=article_snapshot(ctx), client=client)


def article_snapshot(ctx: RunContext) -> Path | None:
    """`--source DIR`, else the snapshot the run was built from: such a run fetched no
    article, so reading its own `pages/articles/` instead would fail every grounding check.
    None for a run that fetched its pages."""
    if ctx.options.source.source is not None:
        return ctx.options.source.source
    built_from = built_from_snapshot(ctx.out)
    if built_from is not None:
        log.info("articles: from %s, the snapshot the run was built from", built_from)
    return built_from
