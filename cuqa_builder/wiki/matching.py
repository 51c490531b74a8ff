"""The pages of an api.php answer mapped back to what was asked for: by title (normalisations
and redirects followed) or by revision id, and each revision's page record."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from cuqa_builder.records.pages import Page, PageMeta

REVISION_PARAMS = {"prop": "revisions", "rvprop": "ids|timestamp|content", "rvslots": "main"}


def page_from_revision(title: str, revision: dict[str, Any]) -> tuple[Page | None, str]:
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



class Matcher(Protocol):
    """Maps the pages of an answer back to what was requested (title or revid)."""

    def learn(self, query: dict[str, Any]) -> None: ...

    def missing(self, query: dict[str, Any]) -> dict[str, str]: ...

    def revisions(self, query: dict[str, Any]) -> Iterable[tuple[str, dict[str, Any]]]: ...


class TitleMatcher:
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


class RevisionMatcher:
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
