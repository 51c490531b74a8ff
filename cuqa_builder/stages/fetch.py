"""The fetch stage: the window's Wikipedia pages -> OUT/pages/ (a snapshot) + OUT/manifest.json.

Resumable: a page already in `pages/` with a valid sidecar is not fetched again (with
`--revisions`, only if it is the revision asked for). The manifest (title -> revid) is rewritten
atomically after every batch, so it always describes the pages on disk.

Refreshing: day pages keep being edited for days after their date, and a year article all year.
A stored page fetched less than `--settle` days after its date is re-checked (`prop=info`, 50
titles per request, no content) and fetched again only if its latest revision changed; a page
found unchanged records the time of the check, so once settled it is never asked about again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

from tqdm import tqdm

from cuqa_builder.errors import UsageError
from cuqa_builder.jsonio import JsonFileError, atomic_write_json, read_model
from cuqa_builder.records.pages import PageMeta
from cuqa_builder.run import MANIFEST, Manifest, RunContext
from cuqa_builder.snapshot import (
    SnapshotError,
    page_kind,
    page_path,
    read_page,
    write_meta,
    write_page,
)
from cuqa_builder.wiki.api import WikiUnreachable
from cuqa_builder.wiki.client import BatchResult, MediaWikiClient
from cuqa_builder.wiki.portal import portal_day
from cuqa_builder.wiki.titles import window_titles
from cuqa_builder.wiki.wikitext import ParseError

log = logging.getLogger(__name__)


@dataclass
class FetchCounts:
    fetched: int = 0
    present: int = 0
    missing: int = 0
    failed: int = 0
    rechecked: int = 0  # stored pages asked about by prop=info
    changed: int = 0  # of those, with a newer revision: fetched again
    gone: int = 0  # of those, deleted from the wiki: the stored copy is kept

    def add(self, batch: BatchResult) -> None:
        self.fetched += len(batch.pages)
        self.missing += len(batch.missing)
        self.failed += len(batch.failed)

    def describe_rechecks(self) -> str:
        if not self.rechecked:
            return ""
        gone = f", {self.gone} deleted from the wiki (stored copy kept)" if self.gone else ""
        return (f"; {self.rechecked} recent pages re-checked: {self.changed} changed "
                f"(fetched again){gone}")


def read_manifest(path: Path) -> dict[str, int]:
    """Title -> revid of an earlier run's manifest, for `--revisions`."""
    return read_model(path, Manifest, "a manifest.json", shown=f"--revisions {path}").pages


def run(ctx: RunContext) -> str:
    options = ctx.options.source
    if options.source:
        # --source promises an offline run: never reach for the network behind the user's back.
        raise UsageError("fetch downloads pages from --wiki-api; with --source DIR the pages "
                         "are already on disk (run --stage events)")
    wanted = _wanted(ctx)
    ctx.pages_dir.mkdir(parents=True, exist_ok=True)
    counts = FetchCounts()
    client = MediaWikiClient(
        options.wiki_api, contact=options.contact, min_interval_s=options.wiki_interval
    )
    try:
        requests_made = _fetch_window(ctx, client, wanted, counts)
    except WikiUnreachable as exc:  # one line, not a warning for each of the window's pages
        raise WikiUnreachable(f"{exc.reason}; no page was fetched: check the network and "
                              "--wiki-api, or build from pages on disk with --source DIR "
                              "(a snapshot directory)") from exc
    return (
        f"fetch: {len(wanted)} pages: {counts.fetched} fetched, {counts.present} already present, "
        f"{counts.missing} missing, {counts.failed} failed{counts.describe_rechecks()}; "
        f"{requests_made} API requests -> {ctx.pages_dir}"
    )


def _fetch_window(
    ctx: RunContext, client: MediaWikiClient, wanted: dict[str, int | None], counts: FetchCounts
) -> int:
    """Re-check the stored pages that may have changed, fetch the others; returns the number
    of API requests made."""
    options = ctx.options.source
    on_disk = _pages_on_disk(ctx.pages_dir, wanted)
    last_fetch = _last_fetch(ctx)
    todo = [title for title in wanted if title not in on_disk]
    with client:
        if not options.revisions:  # exact revisions never change: nothing to re-check
            unsettled = [meta for title, meta in on_disk.items()
                         if not _settled(title, meta.fetched or last_fetch, options.settle)]
            changed = _recheck(ctx, client, unsettled, counts)
            todo += [title for title in wanted if title in changed]
            on_disk = {t: meta for t, meta in on_disk.items() if t not in changed}
        counts.present = len(on_disk)
        pages = {title: meta.revid for title, meta in on_disk.items()}
        manifest = Manifest(api=options.wiki_api, fetched=now(), pages=pages)
        _save_manifest(ctx, manifest, wanted)
        if todo:
            _fetch(ctx, client, wanted, todo, manifest, counts)
        return client.requests_made


def _fetch(
    ctx: RunContext, client: MediaWikiClient, wanted: dict[str, int | None], todo: list[str],
    manifest: Manifest, counts: FetchCounts,
) -> None:
    bar = tqdm(total=len(todo), unit="page", desc="fetch", disable=ctx.options.quiet)
    with bar:
        batches = (
            client.fetch_revisions({title: revid for title in todo if (revid := wanted[title])})
            if ctx.options.source.revisions
            else client.fetch_titles(todo)
        )
        try:
            for batch in batches:
                _store(ctx, batch, manifest)
                _save_manifest(ctx, manifest, wanted)
                counts.add(batch)
                bar.update(len(batch.requested))
        except WikiUnreachable:
            bar.leave = False  # a bar at 0 % says nothing the error does not
            raise


def page_date(title: str) -> date | None:
    """The day a page is about: a day page's day; for a year article, its last day."""
    kind = page_kind(title)
    if kind == "year":
        return date(int(title), 12, 31)
    if kind == "portal":
        try:
            return portal_day(title)
        except ParseError:
            return None
    return None


def _settled(title: str, fetched: str | None, settle_days: int) -> bool:
    """Whether the stored copy was fetched (or checked) at least `settle_days` after the
    page's date, so later edits are not expected. Unknown times and pages are re-checked."""
    day = page_date(title)
    if fetched is None or day is None:
        return False
    return datetime.fromisoformat(fetched).date() >= day + timedelta(days=settle_days)


def _recheck(
    ctx: RunContext, client: MediaWikiClient, stored: list[PageMeta], counts: FetchCounts
) -> set[str]:
    """The stored pages with a newer revision on the wiki; the unchanged ones are stamped with
    the time of this check."""
    if not stored:
        return set()
    latest = client.latest_revids([meta.title for meta in stored])
    checked_at = now()
    changed: set[str] = set()
    for meta in stored:
        if meta.title not in latest:  # its batch failed: checked again next time
            continue
        counts.rechecked += 1
        revid = latest[meta.title]
        if revid is None:
            counts.gone += 1
            log.warning("fetch: %s no longer exists on the wiki; its stored copy is kept",
                        meta.title)
        elif revid != meta.revid:
            counts.changed += 1
            changed.add(meta.title)
        else:
            write_meta(ctx.pages_dir, meta.model_copy(update={"fetched": checked_at}))
    return changed


def _last_fetch(ctx: RunContext) -> str | None:
    """When the run last fetched, from its manifest: the fetch time of pages stored before
    sidecars recorded their own."""
    try:
        return read_model(ctx.path(MANIFEST), Manifest, "a manifest.json").fetched
    except JsonFileError:
        return None


def _wanted(ctx: RunContext) -> dict[str, int | None]:
    """Title -> the revid to fetch (None: the latest), in fetch order."""
    options = ctx.options.source
    if options.revisions:
        return dict(read_manifest(options.revisions))
    return dict.fromkeys(window_titles(ctx.window, options.sources))


def _pages_on_disk(pages_dir: Path, wanted: dict[str, int | None]) -> dict[str, PageMeta]:
    """Title -> sidecar of the wanted pages already stored intact (and of the wanted revision)."""
    present: dict[str, PageMeta] = {}
    for title, revid in wanted.items():
        path = page_path(pages_dir, title)
        if not path.exists():
            continue
        try:
            meta = read_page(path).meta
        except (SnapshotError, OSError, UnicodeDecodeError) as exc:
            log.info("fetch: %s is fetched again (%s)", title, exc)
            continue
        if revid is None or meta.revid == revid:
            present[title] = meta
    return present


def _store(ctx: RunContext, batch: BatchResult, manifest: Manifest) -> None:
    fetched = now()
    for page in batch.pages:
        write_page(ctx.pages_dir, page.model_copy(
            update={"meta": page.meta.model_copy(update={"fetched": fetched})}
        ))
        manifest.pages[page.meta.title] = page.meta.revid
    for problem in batch.missing:
        log.warning("fetch: %s: missing (%s)", problem.title, problem.reason)
    for problem in batch.failed:
        log.warning("fetch: %s: failed (%s)", problem.title, problem.reason)


def _save_manifest(ctx: RunContext, manifest: Manifest, wanted: dict[str, int | None]) -> None:
    # Pages in the order they were wanted, so two runs of one window give the same file.
    ordered = {title: manifest.pages[title] for title in wanted if title in manifest.pages}
    data = manifest.model_copy(update={"pages": ordered}).model_dump()
    atomic_write_json(ctx.path(MANIFEST), data)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
