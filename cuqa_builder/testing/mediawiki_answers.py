"""What the api.php stand-in (`mediawiki_server.py`) answers: `action=query&prop=revisions` by
titles (normalised, redirected, missing) or by revids, with `rvstart` the revision in force at a
moment, `prop=info`, `list=search` and `action=parse`; more than 50 titles or revids refused as
the real API does, and with `max_revisions_per_reply` part of a batch with a `continue` block."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from cuqa_builder.testing.mediawiki_render import render_page

LIMIT = 50
PORTAL_NAMESPACE = 100


@dataclass(frozen=True)
class Revision:
    revid: int
    title: str
    timestamp: str
    text: str | None


def _normalise(title: str) -> str:
    """What MediaWiki does to a title: underscores to spaces, first letters upper-case."""
    title = " ".join(title.replace("_", " ").split())
    namespace, colon, rest = title.partition(":")
    if colon and namespace.lower() == "portal":
        return f"Portal:{rest[:1].upper()}{rest[1:]}"
    return title[:1].upper() + title[1:]


class WikiAnswers:
    """`MediaWikiServer`'s answers, from its pages and revisions (under its lock)."""

    revisions: dict[int, Revision]
    current: dict[str, int]
    history: dict[str, list[int]]
    page_ids: dict[str, int]
    redirects: dict[str, str]
    html: dict[int, str]
    parse_refused: str | None
    max_revisions_per_reply: int | None
    lock: threading.Lock

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        """The JSON a real api.php would send for these parameters (no faults)."""
        if params.get("format") != "json" or params.get("formatversion") != "2":
            return _error("badvalue", "This fake only speaks format=json&formatversion=2.")
        if params.get("action") == "query" and params.get("list") == "search":
            with self.lock:
                return self._search(params)
        if params.get("action") == "parse":
            with self.lock:
                return self._parse(params)
        if params.get("action") != "query" or params.get("prop") not in ("revisions", "info"):
            return _error("badvalue", "This fake only answers action=query&prop=revisions|info, "
                          "list=search and action=parse.")
        single = [key for key in ("rvlimit", "rvstart", "rvdir") if key in params]
        if single and len(params.get("titles", "").split("|")) > 1:
            return _error("multpages", f"The {', '.join(single)} parameters may only be used on "
                          "a single page.")
        for key in ("titles", "revids"):
            values = params.get(key, "").split("|") if params.get(key) else []
            if len(values) > LIMIT:
                return _error(
                    "toomanyvalues",
                    f'Too many values supplied for parameter "{key}". The limit is {LIMIT}.',
                )
        with self.lock:
            if params["prop"] == "info":
                return self._info(params)
            if params.get("revids"):
                return self._by_revids(params)
            return self._by_titles(params)

    def _info(self, params: dict[str, str]) -> dict[str, Any]:
        query, finals = self._resolve_titles(params)
        query["pages"] = [self._info_entry(title) for title in finals]
        return {"batchcomplete": True, "query": query}

    def _info_entry(self, title: str) -> dict[str, Any]:
        namespace = PORTAL_NAMESPACE if title.startswith("Portal:") else 0
        if title not in self.current:
            return {"ns": namespace, "title": title, "missing": True}
        latest = self.revisions[self.current[title]]
        return {"pageid": self.page_ids[title], "ns": namespace, "title": title,
                "contentmodel": "wikitext", "pagelanguage": "en", "touched": latest.timestamp,
                "lastrevid": latest.revid, "length": len((latest.text or "").encode())}

    def _by_titles(self, params: dict[str, str]) -> dict[str, Any]:
        query, finals = self._resolve_titles(params)
        units = sorted(
            (self.page_ids[title], self.revisions[revid])
            for title in finals
            if (revid := self._revision_for(title, params)) is not None
        )
        served, continuation = self._slice(units, params.get("rvcontinue"))
        query["pages"] = [self._page_entry(title, served) for title in finals]
        return _with_continuation({"query": query}, continuation)

    def _resolve_titles(self, params: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        """The `normalized`/`redirects` blocks of the answer and the final titles, in order."""
        query: dict[str, Any] = {}
        normalized, redirected, finals = [], [], []
        for asked in params.get("titles", "").split("|"):
            title = _normalise(asked)
            if title != asked:
                normalized.append({"fromencoded": False, "from": asked, "to": title})
            if "redirects" in params and title in self.redirects:
                redirected.append({"from": title, "to": self.redirects[title]})
                title = self.redirects[title]
            if title not in finals:
                finals.append(title)
        if normalized:
            query["normalized"] = normalized
        if redirected:
            query["redirects"] = redirected
        return query, finals

    def _revision_for(self, title: str, params: dict[str, str]) -> int | None:
        """The latest revision, or with `rvstart` (rvdir=older) the last one at or before it."""
        if title not in self.current:
            return None
        start = params.get("rvstart")
        if start is None or params.get("rvdir", "older") != "older":
            return self.current[title]
        before = [r for r in self.history[title] if self.revisions[r].timestamp <= start]
        return before[-1] if before else None

    def _search(self, params: dict[str, str]) -> dict[str, Any]:
        """The title equal to the query first, then titles sharing the most query words with
        their title (counted twice) and text."""
        query = params.get("srsearch", "").casefold()
        words = set(query.split())
        scores = []
        for title, revid in self.current.items():
            text = (self.revisions[revid].text or "").casefold()
            score = sum(2 * (w in title.casefold()) + (w in text) for w in words)
            score += 100 * (title.casefold() == query)
            if score:
                scores.append((-score, title))
        limit = int(params.get("srlimit", "10"))
        hits = [{"ns": 0, "title": title} for _, title in sorted(scores)[:limit]]
        return {"batchcomplete": True, "query": {"searchinfo": {"totalhits": len(scores)},
                                                 "search": hits}}

    def _parse(self, params: dict[str, str]) -> dict[str, Any]:
        """`action=parse&oldid=N&prop=text`: the revision's HTML, as formatversion=2 gives it."""
        if self.parse_refused:
            return _error(self.parse_refused, 'The "parse" module has been disabled.')
        oldid = params.get("oldid", "")
        revision = self.revisions.get(int(oldid)) if oldid.isdigit() else None
        if revision is None:
            return _error("nosuchrevid", f"There is no revision with ID {oldid}.")
        if revision.text is None:
            return _error("permissiondenied", "You don't have permission to view deleted text "
                          "or changes between deleted revisions.")
        text = self.html.get(revision.revid) or render_page(revision.text)
        return {"parse": {"title": revision.title, "pageid": self.page_ids[revision.title],
                          "revid": revision.revid, "text": text}}

    def _by_revids(self, params: dict[str, str]) -> dict[str, Any]:
        query: dict[str, Any] = {}
        asked = [int(value) for value in params["revids"].split("|")]
        bad = {str(r): {"revid": r, "missing": True} for r in asked if r not in self.revisions}
        if bad:
            query["badrevids"] = bad
        units = sorted((r, self.revisions[r]) for r in set(asked) if r in self.revisions)
        served, continuation = self._slice(units, params.get("rvcontinue"))
        titles = list(dict.fromkeys(revision.title for revision in served))
        query["pages"] = [self._page_entry(title, served) for title in titles]
        return _with_continuation({"query": query}, continuation)

    def _slice(
        self, units: list[tuple[int, Revision]], rvcontinue: str | None
    ) -> tuple[list[Revision], str | None]:
        """The revisions this reply carries, and the `rvcontinue` for the rest (if any)."""
        start = int(rvcontinue.split("|")[0]) if rvcontinue else 0
        pending = [(key, revision) for key, revision in units if key >= start]
        limit = self.max_revisions_per_reply or len(pending)
        rest = pending[limit:]
        continuation = f"{rest[0][0]}|{rest[0][1].revid}" if rest else None
        return [revision for _, revision in pending[:limit]], continuation

    def _page_entry(self, title: str, served: list[Revision]) -> dict[str, Any]:
        namespace = PORTAL_NAMESPACE if title.startswith("Portal:") else 0
        if title not in self.current:
            return {"ns": namespace, "title": title, "missing": True}
        entry: dict[str, Any] = {"pageid": self.page_ids[title], "ns": namespace, "title": title}
        revisions = [_revision_json(r) for r in served if r.title == title]
        if revisions:
            entry["revisions"] = revisions
        return entry


def _error(code: str, info: str) -> dict[str, Any]:
    return {"error": {"code": code, "info": info}, "servedby": "fake"}


def _revision_json(revision: Revision) -> dict[str, Any]:
    main: dict[str, Any] = {"contentmodel": "wikitext", "contentformat": "text/x-wiki"}
    if revision.text is None:
        main["texthidden"] = True
    else:
        main["content"] = revision.text
    return {"revid": revision.revid, "parentid": 0, "timestamp": revision.timestamp,
            "slots": {"main": main}}


def _with_continuation(data: dict[str, Any], rvcontinue: str | None) -> dict[str, Any]:
    if rvcontinue:
        data["continue"] = {"rvcontinue": rvcontinue, "continue": "||"}
    else:
        data["batchcomplete"] = True
    return data
