"""A local stand-in for MediaWiki's `api.php` (formatversion=2 JSON), for the real client.

`MediaWikiServer(pages)` answers `action=query&prop=revisions` on 127.0.0.1, by `titles` (with
title normalisation, redirects and missing pages) or by `revids` (older revisions are kept when
a page is edited with `edit`, or given as a list of revisions), and `prop=info` by `titles`
(each page's `lastrevid`, `touched` and `length`, as a refresh re-checks pages). With `rvstart`
and `rvdir=older` (one title only, like the real API) it serves the revision in force at that
moment, or the page without revisions when it was created later; `list=search` ranks titles by
the query's words in title and text. `action=parse&oldid=` answers with the revision's HTML as
MediaWiki renders it: the fixture given for that revid in `html`, else a much simplified
rendering of its wikitext (`mediawiki_render`); with `parse_refused="moduledisabled"` every
`action=parse` gets that API error instead, as from a wiki that disabled the module. Pages
change between two runs with `edit` (a new revision, or a new page: a new day) and `delete`.
Like the real API it refuses more than 50 titles or revids, and when `max_revisions_per_reply`
is set it answers only part of a batch with a `continue` block.

Every request is recorded (query parameters, headers, arrival time, requests in flight), and
failures are injected in order with `fail_next(...)`: a maxlag error with Retry-After, a 429
with Retry-After, a 500, a slow reply (to trip the client's timeout), a body that is not JSON.
"""

from __future__ import annotations

import gzip
import json
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cuqa_builder.testing.loopback import LoopbackServer, QuietHandler
from cuqa_builder.testing.mediawiki_answers import Revision, WikiAnswers

# wikitext, or (revid, timestamp, wikitext), or a list of those (oldest first); wikitext None is
# a revision-deleted (hidden) text
RevisionSpec = tuple[int, str, str | None]
PageSpec = str | RevisionSpec | list[RevisionSpec]
DEFAULT_TIMESTAMP = "2024-01-01T00:00:00Z"


@dataclass
class Fault:
    """One injected failure; `body=None` means the normal answer, sent after `delay_s`."""

    status: int = 200
    body: dict[str, Any] | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def maxlag(cls, retry_after: int = 1) -> Fault:
        # What Wikimedia sends: HTTP 200, an `error` object, Retry-After and the lag headers.
        error = {"code": "maxlag", "info": "Waiting for 10.64.0.1: 7 seconds lagged.",
                 "host": "10.64.0.1", "lag": 7, "type": "db"}
        headers = {"Retry-After": str(retry_after), "X-Database-Lag": "7",
                   "MediaWiki-API-Error": "maxlag"}
        return cls(body={"error": error, "servedby": "fake"}, headers=headers)

    @classmethod
    def too_many_requests(cls, retry_after: int = 1) -> Fault:
        return cls(status=429, body=b"Too many requests", headers={"Retry-After": str(retry_after)})

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls(status=status, body=b"<html><body>Internal Server Error</body></html>")

    @classmethod
    def slow(cls, delay_s: float) -> Fault:
        return cls(delay_s=delay_s)

    @classmethod
    def not_json(cls) -> Fault:
        return cls(body=b"<html><body>Something went wrong</body></html>")


@dataclass
class RecordedRequest:
    params: dict[str, str]
    headers: dict[str, str]
    arrived: float  # time.monotonic() on arrival
    in_flight: int  # requests being served at that moment, this one included

    @property
    def titles(self) -> list[str]:
        return self.params["titles"].split("|") if self.params.get("titles") else []


class MediaWikiServer(WikiAnswers, LoopbackServer):
    """`with MediaWikiServer({"2023": "wikitext", ...}) as wiki:` then `wiki.api_url`."""

    def __init__(
        self,
        pages: dict[str, PageSpec],
        *,
        redirects: dict[str, str] | None = None,
        max_revisions_per_reply: int | None = None,
        html: dict[int, str] | None = None,
        parse_refused: str | None = None,
    ) -> None:
        self.revisions: dict[int, Revision] = {}
        self.current: dict[str, int] = {}  # title -> latest revid
        self.history: dict[str, list[int]] = {}  # title -> revids, oldest first
        self.page_ids: dict[str, int] = {}
        self.redirects = dict(redirects or {})
        self.html = dict(html or {})  # revid -> the `parse.text` MediaWiki gives for it
        self.parse_refused = parse_refused  # the API error code every action=parse gets
        self.max_revisions_per_reply = max_revisions_per_reply
        self.requests: list[RecordedRequest] = []
        self._faults: deque[Fault] = deque()
        super().__init__(self._handler())
        for number, (title, spec) in enumerate(pages.items()):
            if isinstance(spec, str):
                spec = (1000 + number, DEFAULT_TIMESTAMP, spec)
            for revid, timestamp, text in spec if isinstance(spec, list) else [spec]:
                self._store(Revision(revid, title, timestamp, text))

    @property
    def api_url(self) -> str:
        return f"{self.origin}/w/api.php"

    def fail_next(self, *faults: Fault) -> None:
        """The next requests get these faults, one each, in order."""
        with self.lock:
            self._faults.extend(faults)

    def edit(self, title: str, text: str, timestamp: str = "2024-06-01T00:00:00Z") -> int:
        """A new latest revision of a page (the old one stays reachable by revid)."""
        with self.lock:
            revid = max(self.revisions, default=999) + 1
            self._store(Revision(revid, title, timestamp, text))
        return revid

    def delete(self, title: str) -> None:
        """The page is gone (its revisions stay reachable by revid, as for an admin)."""
        with self.lock:
            del self.current[title]

    def requests_for(self, prop: str) -> list[RecordedRequest]:
        """The recorded requests of one kind: `revisions` (content) or `info` (re-checks)."""
        return [r for r in self.requests if r.params.get("prop") == prop]

    def requests_for_html(self) -> list[RecordedRequest]:
        """The recorded `action=parse` requests (one per article looked up)."""
        return [r for r in self.requests if r.params.get("action") == "parse"]

    def _store(self, revision: Revision) -> None:
        self.revisions[revision.revid] = revision
        self.current[revision.title] = revision.revid
        self.history.setdefault(revision.title, []).append(revision.revid)
        self.page_ids.setdefault(revision.title, len(self.page_ids) + 1)

    def _arrive(self, params: dict[str, str], headers: dict[str, str]) -> Fault | None:
        in_flight = self.arrive()
        with self.lock:
            self.requests.append(RecordedRequest(params, headers, time.monotonic(), in_flight))
            return self._faults.popleft() if self._faults else None

    def _handler(self) -> type[QuietHandler]:
        fake = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query, keep_blank_values=True)
                params = {key: values[-1] for key, values in query.items()}
                fault = fake._arrive(params, dict(self.headers))
                try:
                    self._serve(params, fault or Fault())
                finally:
                    fake.leave()

            def _serve(self, params: dict[str, str], fault: Fault) -> None:
                if fault.delay_s:
                    time.sleep(fault.delay_s)
                body = fault.body if fault.body is not None else fake.answer(params)
                if isinstance(body, dict):
                    data, content_type = json.dumps(body).encode(), "application/json"
                else:
                    data, content_type = body, "text/html"
                self._send(fault.status, data, content_type, fault.headers)

            def _send(
                self, status: int, data: bytes, content_type: str, headers: dict[str, str]
            ) -> None:
                if "gzip" in self.headers.get("Accept-Encoding", ""):
                    data = gzip.compress(data)
                    headers = {**headers, "Content-Encoding": "gzip"}
                self.send_body(status, data, f"{content_type}; charset=utf-8", headers)

        return Handler
