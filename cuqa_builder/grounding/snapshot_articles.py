"""Articles read offline from a snapshot (`--source DIR`): found by title, by the redirect they
came through, or by name for a search; an article written after the cutoff is no evidence."""

from __future__ import annotations

import logging
from datetime import date
from pathlib import Path

from cuqa_builder.grounding.lookups import (
    ArticleLookup,
    cutoff_moment,
    found_lookup,
    lookup_kind,
    redirect_loop,
    through_redirects,
)
from cuqa_builder.records.events import Entity
from cuqa_builder.records.pages import Page
from cuqa_builder.snapshot import SnapshotError, iter_snapshot
from cuqa_builder.wiki.client import RevisionAt

log = logging.getLogger(__name__)


class SnapshotArticles:
    """The articles of a snapshot's folder, read once, looked up by entity."""

    def __init__(self, folder: Path, cutoff: date) -> None:
        self.folder = folder
        self.cutoff = cutoff
        self.moment = cutoff_moment(cutoff)
        self._snapshot: dict[str, Page] | None = None

    def look_up(self, key: str, entity: Entity) -> ArticleLookup:
        """Offline: the snapshot's article by title or redirect; by name for a search."""
        pages = self._snapshot_pages()
        by = lookup_kind(key)
        wanted = entity.text if by == "search" else key
        searched = entity.text if by == "search" else None

        def look(title: str) -> RevisionAt:
            return RevisionAt(title, page=pages.get(title.casefold()))

        found, loop = through_redirects(wanted, look(wanted), look)
        if loop:
            return redirect_loop(key, by, wanted, loop, searched)
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
        return found_lookup(key, by, page, searched)

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
