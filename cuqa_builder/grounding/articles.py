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
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import date
from pathlib import Path

from tqdm import tqdm

from cuqa_builder.grounding.article_text import ArticleText, article_text
from cuqa_builder.grounding.keys import entity_key
from cuqa_builder.grounding.lookups import (
    ArticleLookup,
    LookupCounts,
    by_lookup_key,
    cutoff_moment,
    found_lookup,
    lookup_kind,
    redirect_loop,
    through_redirects,
)
from cuqa_builder.grounding.snapshot_articles import SnapshotArticles
from cuqa_builder.jsonio import JsonlAppender, read_jsonl
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import Evidence
from cuqa_builder.records.pages import Page
from cuqa_builder.run import ARTICLES, RunContext, built_from_snapshot
from cuqa_builder.snapshot import (
    SnapshotError,
    articles_dir,
    page_path,
    read_page,
    write_page,
)
from cuqa_builder.wiki.api import WikiError
from cuqa_builder.wiki.client import MediaWikiClient
from cuqa_builder.wiki.wikitext import revision_url

log = logging.getLogger(__name__)

# Why an article was read from its wikitext, in the summary's words (the warnings name them).
DAMAGED_RENDERING = ("the rendering stored beside the wikitext (NAME.html) is missing, changed "
                     "or not UTF-8")
UNSOUND_RENDERING = "MediaWiki's rendering could not be read soundly"


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
        self._snapshot = SnapshotArticles(self.folder, cutoff)
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
            for key, entity in by_lookup_key(entities).items():
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
            return self.source is None or not self._snapshot.look_up(lookup.key, entity).found
        page = self.page(lookup)
        if page is not None and page.html_unread and self.source is None:
            log.warning("article %s: %s: fetching it again", page.meta.title, page.html_unread)
            return False
        return page is not None

    def ensure_shown(self, entities: Iterable[Entity], what: str, quiet: bool) -> LookupCounts:
        """`ensure` under a progress bar (unless `quiet`) of the distinct entities, which it
        counts: a bar of every mention stopped short ("articles: 88% 23/26")."""
        distinct = list(by_lookup_key(entities).values())
        with tqdm(total=len(distinct), desc=what, unit="entity",
                  disable=quiet or not distinct) as bar:
            return self.ensure(distinct, progress=bar.update)

    def _look_up(
        self, key: str, entity: Entity, counts: LookupCounts, appender: JsonlAppender
    ) -> None:
        try:
            lookup = (self._snapshot.look_up(key, entity) if self.source
                      else self._fetch(key, entity))
        except WikiError as exc:
            log.warning("article of %s: %s", entity.text, exc)
            counts.failed += 1
            return
        self.lookups[key] = lookup
        appender.append(lookup)
        counts.looked_up[lookup.status] += 1

    def _fetch(self, key: str, entity: Entity) -> ArticleLookup:
        client = self._wiki()
        by = lookup_kind(key)
        title: str | None = key
        if by == "search":
            title = client.search_title(entity.text)
            if title is None:
                return ArticleLookup(key=key, by=by, status="unresolved", searched_for=entity.text,
                                     reason=f"a search for {entity.text!r} found no article")
        assert title is not None
        searched = entity.text if by == "search" else None
        found, loop = through_redirects(
            title, client.revision_at(title, self.moment),
            lambda target: client.revision_at(target, self.moment))
        if loop:
            return redirect_loop(key, by, title, loop, searched)
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
        return found_lookup(key, by, page, searched)

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

    def _wiki(self) -> MediaWikiClient:
        if self._client is None:
            if self._client_factory is None:
                raise WikiError("no MediaWiki client to look articles up with")
            self._client = self._client_factory()
        return self._client


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
