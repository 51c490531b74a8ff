"""A well-behaved MediaWiki API client (SPEC 2.1): page wikitext by title or by revision id, and
MediaWiki's rendering of a revision, up to 50 titles per request, continuation followed. Each
request goes through `api.py`'s politeness, retries and errors.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from cuqa_builder.records.pages import Page
from cuqa_builder.wiki.api import ApiSession, WikiError, WikiUnreachable, log_warnings
from cuqa_builder.wiki.matching import (
    REVISION_PARAMS,
    Matcher,
    RevisionMatcher,
    TitleMatcher,
    page_from_revision,
)

log = logging.getLogger(__name__)

MAX_TITLES = 50  # the API's per-request limit for ordinary (non-bot) users


@dataclass(frozen=True)
class PageProblem:
    """A requested page that did not come back: the title asked for and why."""

    title: str
    reason: str


@dataclass
class BatchResult:
    """One batch of up to 50 requested pages, continuation included."""

    requested: list[str]
    pages: list[Page] = field(default_factory=list)
    missing: list[PageProblem] = field(default_factory=list)  # the wiki has no such page/revision
    # no content came back: the request failed for good (after its retries) or content is hidden
    failed: list[PageProblem] = field(default_factory=list)


@dataclass(frozen=True)
class RevisionAt:
    """The revision of one title in force at a moment: the page, or why there is none."""

    asked: str
    page: Page | None = None
    absent: str | None = None  # "page does not exist", "no revision before ...": a finding


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class MediaWikiClient(ApiSession):
    """The queries of the pipeline, on one polite api.php session."""

    def __enter__(self) -> MediaWikiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- pages --------------------------------------------------------------------------

    def fetch_titles(self, titles: Sequence[str]) -> Iterator[BatchResult]:
        """Latest revision of each title, 50 per request; pages keep the title asked for.

        A batch that fails for good comes back with its pages in `failed` (with the reason)
        and the next batch is tried; a wiki never reached raises WikiUnreachable instead.
        """
        for batch in chunks(list(titles), MAX_TITLES):
            params = {**REVISION_PARAMS, "titles": "|".join(batch), "redirects": "1"}
            yield self._collect(batch, params, TitleMatcher(batch))

    def fetch_revisions(self, wanted: Mapping[str, int]) -> Iterator[BatchResult]:
        """Exact revisions (title -> revid, as in a manifest), 50 per request.

        Pages keep the manifest's title even if the page has been moved since. Failures are
        reported as in `fetch_titles`.
        """
        items = list(wanted.items())
        for batch in chunks(items, MAX_TITLES):
            params = {**REVISION_PARAMS, "revids": "|".join(str(revid) for _, revid in batch)}
            titles = [title for title, _ in batch]
            yield self._collect(titles, params, RevisionMatcher(dict(batch)))

    def revision_at(self, title: str, moment: str) -> RevisionAt:
        """The revision of `title` in force at `moment` (ISO, UTC), redirects followed.

        One title per request: `rvstart` with `rvlimit` only works on a single page. The page
        keeps the title it has now (where its revision history lives) and, when a redirect led
        there, the title asked for in `redirect`. Raises WikiError when the request fails.
        """
        params = {
            **REVISION_PARAMS, "titles": title, "redirects": "1", "rvlimit": "1",
            "rvdir": "older", "rvstart": moment,
        }
        query = self.query(params).get("query", {})
        matcher = TitleMatcher([title])
        matcher.learn(query)
        if reason := matcher.missing(query).get(title):
            return RevisionAt(title, absent=reason)
        for _, revision in matcher.revisions(query):
            page, problem = page_from_revision(title, revision)
            if page is None:
                raise WikiError(problem, [title])
            final = matcher.final(title)
            meta = page.meta.model_copy(update={
                "title": final, "redirect": title if final != matcher.normalised(title) else None,
                "kind": "article", "api": self.api_url,
            })
            return RevisionAt(title, page=Page(meta=meta, wikitext=page.wikitext))
        return RevisionAt(title, absent=f"no revision at or before {moment} (created later)")

    def rendered_html(self, title: str, revid: int) -> str:
        """MediaWiki's own rendering of one revision (`action=parse&oldid=`): the HTML of its
        content, every template rendered as readers see it. Raises WikiError when the request
        fails or the answer renders another revision."""
        data = self._call({"action": "parse", "oldid": str(revid), "prop": "text",
                           "disableeditsection": "1", "disablelimitreport": "1"}, [title])
        parsed = data.get("parse", {})
        if parsed.get("revid") not in (None, revid) or not isinstance(parsed.get("text"), str):
            raise WikiError("the API's rendering came back without its HTML, or for another "
                            "revision", [f"{title} (revision {revid})"])
        return str(parsed["text"])

    def search_title(self, text: str) -> str | None:
        """The first article title `list=search` finds for `text`, if any."""
        found = self.query({"list": "search", "srsearch": text, "srlimit": "1",
                            "srnamespace": "0", "srprop": ""})
        hits = found.get("query", {}).get("search", [])
        return str(hits[0]["title"]) if hits else None

    def latest_revids(self, titles: Sequence[str]) -> dict[str, int | None]:
        """Each title's latest revision id by `prop=info`, 50 titles per request and no
        content: a cheap way to see which stored pages changed. None for a page that no longer
        exists; a title whose batch failed for good (logged) is left out, to be checked later
        (a wiki never reached raises WikiUnreachable).
        """
        latest: dict[str, int | None] = {}
        for batch in chunks(list(titles), MAX_TITLES):
            try:
                data = self.query({"prop": "info", "titles": "|".join(batch), "redirects": "1"})
            except WikiUnreachable:
                raise
            except WikiError as exc:
                log.warning("MediaWiki API: could not re-check %s", exc)
                continue
            log_warnings(data)
            query = data.get("query", {})
            matcher = TitleMatcher(batch)
            matcher.learn(query)
            latest.update(dict.fromkeys(matcher.missing(query)))
            for page in query.get("pages", []):
                if isinstance(page.get("lastrevid"), int):
                    latest.update(dict.fromkeys(matcher.asked_as(page["title"]), page["lastrevid"]))
        return latest

    def _collect(
        self, requested: list[str], params: dict[str, str], matcher: Matcher
    ) -> BatchResult:
        result = BatchResult(requested=requested)
        found: dict[str, Page] = {}
        missing: dict[str, str] = {}
        failed: dict[str, str] = {}
        try:
            for data in self.iter_query(params):
                log_warnings(data)
                query = data.get("query", {})
                matcher.learn(query)
                missing.update(matcher.missing(query))
                for title, revision in matcher.revisions(query):
                    page, problem = page_from_revision(title, revision)
                    if page:
                        found[title] = page
                    else:
                        failed[title] = problem
        except WikiUnreachable:
            raise  # every batch would fail alike
        except WikiError as exc:
            # One bad batch must not end the run: report its pages as failed and go on.
            result.failed = [PageProblem(title, exc.reason) for title in requested]
            return result
        for title in requested:
            if title in found:
                result.pages.append(found[title])
            elif title in missing:
                result.missing.append(PageProblem(title, missing[title]))
            else:
                result.failed.append(
                    PageProblem(title, failed.get(title, "no revision in the API's answer"))
                )
        return result
