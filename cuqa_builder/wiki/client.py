"""A well-behaved MediaWiki API client (SPEC 2.1): page wikitext by title or by revision id, and
MediaWiki's rendering of a revision.

Politeness, as Wikimedia asks of API users: a descriptive User-Agent with a contact, `maxlag=5`,
gzip, up to 50 titles per request, continuation followed, one request at a time with a minimum
interval, `Retry-After` honoured (else exponential back-off) on 429, 5xx and maxlag errors,
timeouts, and a bounded number of retries ending in a `WikiError` that names the pages (a
`WikiUnreachable` after a few quick ones while no request has been answered yet).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Protocol

import requests

from cuqa_builder import __version__
from cuqa_builder.errors import CuqaError
from cuqa_builder.records import Page, PageMeta

log = logging.getLogger(__name__)

PROJECT_URL = "https://github.com/cuqa-builder/cuqa-builder"
MAX_TITLES = 50  # the API's per-request limit for ordinary (non-bot) users
MAXLAG_S = 5
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Retries of a request no answer ever came back to (a closed port, no network, a wrong host):
# a blip gets these; the full back-off (31 s at the defaults) is for a wiki that was reached.
FIRST_CONTACT_RETRIES = 2
_NAMED_IN_ERRORS = 3  # an error lists this many page titles, then "and N more"


class WikiError(CuqaError, RuntimeError):
    """A request that failed for good (after the bounded retries, or at once if not retryable);
    `code` is the API's error code when the wiki refused it (`moduledisabled`, `nosuchrevid`)."""

    def __init__(self, reason: str, titles: Sequence[str] = (), code: str | None = None) -> None:
        self.reason = reason
        self.titles = list(titles)
        self.code = code
        super().__init__(f"{reason} (pages: {describe_titles(titles)})" if titles else reason)


class WikiUnreachable(WikiError):
    """No request of this client has been answered, and this one could not connect either:
    the wiki cannot be reached (offline, a wrong --wiki-api), so every other request would fail
    alike. Those who would go on page by page stop instead."""


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


@dataclass(frozen=True)
class _Failure:
    reason: str
    retryable: bool
    retry_after_s: float | None = None
    code: str | None = None  # the API's error code, when it answered with one
    unanswered: bool = False  # no HTTP answer came back: no connection, or a timeout


def describe_titles(titles: Sequence[str]) -> str:
    named = ", ".join(titles[:_NAMED_IN_ERRORS])
    rest = len(titles) - _NAMED_IN_ERRORS
    return f"{named} and {rest} more" if rest > 0 else named


def resolve_contact(contact: str | None) -> str:
    """`--contact`, else $CUQA_CONTACT, else the project's URL."""
    for candidate in (contact, os.environ.get("CUQA_CONTACT")):
        if candidate and candidate.strip():
            return candidate.strip()
    return PROJECT_URL


def user_agent(contact: str | None = None) -> str:
    """`tool/version (contact) library/version`, the form Wikimedia's User-Agent policy asks for."""
    library = f"python-requests/{requests.__version__}"
    return f"cuqa-builder/{__version__} ({resolve_contact(contact)}) {library}"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class MediaWikiClient:
    """Synchronous and serial on purpose: a lock makes even threaded callers take turns."""

    def __init__(
        self,
        api_url: str,
        *,
        contact: str | None = None,
        min_interval_s: float = 1.0,
        timeout_s: float = 30.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_wait_s: float = 120.0,
    ) -> None:
        self.api_url = api_url
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self.requests_made = 0
        self.answered = 0  # requests the server answered (with any HTTP status)
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": user_agent(contact), "Accept-Encoding": "gzip"})
        self._lock = threading.Lock()
        self._not_before = 0.0  # monotonic time before which no request may start

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> MediaWikiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- generic calls ------------------------------------------------------------------

    def query(self, params: Mapping[str, str]) -> dict[str, Any]:
        """One `action=query` request with the client's politeness, retries and errors."""
        return self._call({**params, "action": "query"})

    def iter_query(self, params: Mapping[str, str]) -> Iterator[dict[str, Any]]:
        """`query`, then every continuation of it until the API says it is complete."""
        continuation: dict[str, str] = {}
        while True:
            data = self.query({**params, **continuation})
            yield data
            if "continue" not in data:
                return
            continuation = {key: str(value) for key, value in data["continue"].items()}

    # --- pages --------------------------------------------------------------------------

    def fetch_titles(self, titles: Sequence[str]) -> Iterator[BatchResult]:
        """Latest revision of each title, 50 per request; pages keep the title asked for.

        A batch that fails for good comes back with its pages in `failed` (with the reason)
        and the next batch is tried; a wiki never reached raises WikiUnreachable instead.
        """
        for batch in chunks(list(titles), MAX_TITLES):
            params = {**_REVISION_PARAMS, "titles": "|".join(batch), "redirects": "1"}
            yield self._collect(batch, params, _TitleMatcher(batch))

    def fetch_revisions(self, wanted: Mapping[str, int]) -> Iterator[BatchResult]:
        """Exact revisions (title -> revid, as in a manifest), 50 per request.

        Pages keep the manifest's title even if the page has been moved since. Failures are
        reported as in `fetch_titles`.
        """
        items = list(wanted.items())
        for batch in chunks(items, MAX_TITLES):
            params = {**_REVISION_PARAMS, "revids": "|".join(str(revid) for _, revid in batch)}
            titles = [title for title, _ in batch]
            yield self._collect(titles, params, _RevisionMatcher(dict(batch)))

    def revision_at(self, title: str, moment: str) -> RevisionAt:
        """The revision of `title` in force at `moment` (ISO, UTC), redirects followed.

        One title per request: `rvstart` with `rvlimit` only works on a single page. The page
        keeps the title it has now (where its revision history lives) and, when a redirect led
        there, the title asked for in `redirect`. Raises WikiError when the request fails.
        """
        params = {
            **_REVISION_PARAMS, "titles": title, "redirects": "1", "rvlimit": "1",
            "rvdir": "older", "rvstart": moment,
        }
        query = self.query(params).get("query", {})
        matcher = _TitleMatcher([title])
        matcher.learn(query)
        if reason := matcher.missing(query).get(title):
            return RevisionAt(title, absent=reason)
        for _, revision in matcher.revisions(query):
            page, problem = _page_from_revision(title, revision)
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
            _log_warnings(data)
            query = data.get("query", {})
            matcher = _TitleMatcher(batch)
            matcher.learn(query)
            latest.update(dict.fromkeys(matcher.missing(query)))
            for page in query.get("pages", []):
                if isinstance(page.get("lastrevid"), int):
                    latest.update(dict.fromkeys(matcher.asked_as(page["title"]), page["lastrevid"]))
        return latest

    def _collect(
        self, requested: list[str], params: dict[str, str], matcher: _Matcher
    ) -> BatchResult:
        result = BatchResult(requested=requested)
        found: dict[str, Page] = {}
        missing: dict[str, str] = {}
        failed: dict[str, str] = {}
        try:
            for data in self.iter_query(params):
                _log_warnings(data)
                query = data.get("query", {})
                matcher.learn(query)
                missing.update(matcher.missing(query))
                for title, revision in matcher.revisions(query):
                    page, problem = _page_from_revision(title, revision)
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

    # --- one request, politely ------------------------------------------------------------

    def _call(self, params: dict[str, str], pages: Sequence[str] = ()) -> dict[str, Any]:
        """One request; a WikiError names `pages`, else the titles asked for."""
        full = {**params, "format": "json", "formatversion": "2", "maxlag": str(MAXLAG_S)}
        titles = list(pages) or (params["titles"].split("|") if params.get("titles") else [])
        retries = 0
        while True:
            outcome = self._attempt(full)
            if not isinstance(outcome, _Failure):
                return outcome
            if not outcome.retryable:
                raise WikiError(outcome.reason, titles, outcome.code)
            if outcome.unanswered and not self.answered and retries == min(
                    self.max_retries, FIRST_CONTACT_RETRIES):
                raise WikiUnreachable(f"the wiki cannot be reached at {self.api_url}: gave up "
                                      f"after {retries + 1} attempts: {outcome.reason}", titles)
            if retries == self.max_retries:
                raise WikiError(f"gave up after {retries + 1} attempts: {outcome.reason}", titles)
            wait = self._retry_wait(retries, outcome.retry_after_s)
            # Before any answer, the quick retries end in the one error that counts them.
            log.log(logging.INFO if self.answered else logging.DEBUG,
                    "MediaWiki API: %s; retrying in %.1f s", outcome.reason, wait)
            self._defer(wait)
            retries += 1

    def _retry_wait(self, attempt: int, retry_after_s: float | None) -> float:
        wait = retry_after_s if retry_after_s is not None else self.backoff_s * 2**attempt
        return min(wait, self.max_wait_s)

    def _defer(self, wait_s: float) -> None:
        with self._lock:
            self._not_before = max(self._not_before, time.monotonic() + wait_s)

    def _attempt(self, params: dict[str, str]) -> dict[str, Any] | _Failure:
        with self._lock:
            delay = self._not_before - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                response = self.session.get(self.api_url, params=params, timeout=self.timeout_s)
            except requests.Timeout:
                return _Failure(f"no answer within {self.timeout_s:g} s", retryable=True,
                                unanswered=True)
            except requests.ConnectionError as exc:
                return _Failure(f"connection failed ({_os_reason(exc)})", retryable=True,
                                unanswered=True)
            finally:
                self.requests_made += 1
                self._not_before = time.monotonic() + self.min_interval_s
            self.answered += 1
        return _interpret(response)


def _interpret(response: requests.Response) -> dict[str, Any] | _Failure:
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    if response.status_code in RETRY_STATUSES:
        return _Failure(f"HTTP {response.status_code}", retryable=True, retry_after_s=retry_after)
    if response.status_code != 200:
        return _Failure(f"HTTP {response.status_code} from the API", retryable=False)
    try:
        data = response.json()
    except ValueError:
        return _Failure("the answer is not JSON", retryable=True, retry_after_s=retry_after)
    if not isinstance(data, dict):
        return _Failure("the answer is not a JSON object", retryable=True)
    error = data.get("error")
    if isinstance(error, dict):
        code, info = error.get("code", "?"), error.get("info", "")
        # maxlag comes as HTTP 200 with Retry-After: the servers are lagging, wait and retry.
        return _Failure(f"API error {code}: {info}", retryable=code == "maxlag",
                        retry_after_s=retry_after, code=str(code))
    return data


def _os_reason(exc: BaseException) -> str:
    """The operating system's words ("Connection refused") from requests' wrapped errors."""
    cause: object = exc
    for _ in range(8):  # requests -> urllib3 -> socket: a few levels at most
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        if not isinstance(cause, BaseException):
            break
        wrapped = cause.args[0] if cause.args else None
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "reason", None) or wrapped
    return type(exc).__name__


_REVISION_PARAMS = {"prop": "revisions", "rvprop": "ids|timestamp|content", "rvslots": "main"}


def _page_from_revision(title: str, revision: dict[str, Any]) -> tuple[Page | None, str]:
    main = revision.get("slots", {}).get("main", {})
    content = main.get("content")
    if not isinstance(content, str):
        reason = "content hidden" if main.get("texthidden") else "revision without content"
        return None, reason
    revid, timestamp = revision.get("revid"), revision.get("timestamp")
    if not isinstance(revid, int) or not isinstance(timestamp, str):
        return None, "revision without id or timestamp in the API's answer"
    meta = PageMeta(title=title, revid=revid, timestamp=timestamp)
    return Page(meta=meta, wikitext=content), ""


def _log_warnings(data: dict[str, Any]) -> None:
    for module, warning in data.get("warnings", {}).items():
        text = warning.get("warnings", warning) if isinstance(warning, dict) else warning
        log.warning("MediaWiki API warning (%s): %s", module, text)


class _Matcher(Protocol):
    """Maps the pages of an answer back to what was requested (title or revid)."""

    def learn(self, query: dict[str, Any]) -> None: ...

    def missing(self, query: dict[str, Any]) -> dict[str, str]: ...

    def revisions(self, query: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]: ...


class _TitleMatcher:
    def __init__(self, requested: Sequence[str]) -> None:
        self.requested = list(requested)
        self.renamed: dict[str, str] = {}  # from -> to, normalisations and redirects alike
        self.normalisations: set[str] = set()  # the `from` titles that were only normalised

    def learn(self, query: dict[str, Any]) -> None:
        """Take note of title normalisations and redirects."""
        for key in ("normalized", "redirects"):
            for entry in query.get(key, []):
                self.renamed[entry["from"]] = entry["to"]
                if key == "normalized":
                    self.normalisations.add(entry["from"])

    def asked_as(self, api_title: str) -> list[str]:
        return [title for title in self.requested if self.final(title) == api_title]

    def final(self, title: str) -> str:
        """The title after every normalisation and redirect."""
        seen = {title}
        while title in self.renamed and self.renamed[title] not in seen:
            title = self.renamed[title]
            seen.add(title)
        return title

    def normalised(self, title: str) -> str:
        """The title after normalisation only (no redirect)."""
        return self.renamed[title] if title in self.normalisations else title

    def missing(self, query: dict[str, Any]) -> dict[str, str]:
        problems: dict[str, str] = {}
        for page in query.get("pages", []):
            if page.get("missing"):
                reason = "page does not exist"
            elif page.get("invalid"):
                reason = f"invalid title ({page.get('invalidreason', 'no reason given')})"
            else:
                continue
            for title in self.asked_as(page.get("title", "")):
                problems[title] = reason
        return problems

    def revisions(self, query: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
        for page in query.get("pages", []):
            for revision in page.get("revisions", [])[:1]:
                for title in self.asked_as(page.get("title", "")):
                    yield title, revision


class _RevisionMatcher:
    def __init__(self, wanted: dict[str, int]) -> None:
        self.title_of = {revid: title for title, revid in wanted.items()}

    def learn(self, query: dict[str, Any]) -> None:
        """Nothing to learn: revids are never normalised or redirected."""

    def missing(self, query: dict[str, Any]) -> dict[str, str]:
        bad = query.get("badrevids", {})
        entries = bad.values() if isinstance(bad, dict) else bad
        return {
            self.title_of[entry["revid"]]: f"revision {entry['revid']} does not exist"
            for entry in entries
            if entry.get("revid") in self.title_of
        }

    def revisions(self, query: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]:
        for page in query.get("pages", []):
            for revision in page.get("revisions", []):
                if revision.get("revid") in self.title_of:
                    yield self.title_of[revision["revid"]], revision
