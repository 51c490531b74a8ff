"""The fetch stage: the window's Wikipedia pages -> OUT/pages/ (a snapshot) + OUT/manifest.json.

Resumable: a page already in `pages/` with a valid sidecar is not fetched again (with
`--revisions`, only if it is the revision asked for). The manifest (title -> revid) is rewritten
atomically after every batch, so it always describes the pages on disk.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pydantic import ValidationError
from tqdm import tqdm

from cuqa_builder.errors import describe_validation_error
from cuqa_builder.jsonio import atomic_write_json
from cuqa_builder.records import Record
from cuqa_builder.run import MANIFEST, RunContext
from cuqa_builder.snapshot import SnapshotError, page_path, read_page, write_page
from cuqa_builder.wiki.client import BatchResult, MediaWikiClient
from cuqa_builder.wiki.titles import window_titles

log = logging.getLogger(__name__)


class Manifest(Record):
    """`manifest.json`: which revision of each page a run used, to fetch the same ones later."""

    api: str
    fetched: str  # ISO time of the fetch (or of reading a snapshot), UTC
    pages: dict[str, int]  # title -> revid
    snapshot: str | None = None  # the --source directory, when the pages came from one


@dataclass
class FetchCounts:
    fetched: int = 0
    present: int = 0
    missing: int = 0
    failed: int = 0

    def add(self, batch: BatchResult) -> None:
        self.fetched += len(batch.pages)
        self.missing += len(batch.missing)
        self.failed += len(batch.failed)


def read_manifest(path: Path) -> dict[str, int]:
    """Title -> revid of an earlier run's manifest, for `--revisions`."""
    try:
        return Manifest.model_validate_json(path.read_text(encoding="utf-8")).pages
    except OSError as exc:
        raise ValueError(f"cannot read --revisions {path}: {exc.strerror}") from None
    except ValidationError as exc:
        raise ValueError(
            f"--revisions {path} is not a manifest.json ({describe_validation_error(exc)})"
        ) from None


def run(ctx: RunContext) -> str:
    options = ctx.options.source
    if options.source:
        # --source promises an offline run: never reach for the network behind the user's back.
        raise ValueError("fetch downloads pages from --wiki-api; with --source DIR the pages "
                         "are already on disk (run --stage events)")
    wanted = _wanted(ctx)
    ctx.pages_dir.mkdir(parents=True, exist_ok=True)
    on_disk = _pages_on_disk(ctx.pages_dir, wanted)
    todo = [title for title in wanted if title not in on_disk]
    counts = FetchCounts(present=len(on_disk))
    manifest = Manifest(api=options.wiki_api, fetched=now(), pages=on_disk)
    _save_manifest(ctx, manifest, wanted)
    requests_made = 0
    if todo:
        client = MediaWikiClient(
            options.wiki_api, contact=options.contact, min_interval_s=options.wiki_interval
        )
        bar = tqdm(total=len(todo), unit="page", desc="fetch", disable=ctx.options.quiet)
        with client, bar:
            batches = (
                client.fetch_revisions({title: wanted[title] for title in todo})
                if options.revisions
                else client.fetch_titles(todo)
            )
            for batch in batches:
                _store(ctx, batch, manifest)
                _save_manifest(ctx, manifest, wanted)
                counts.add(batch)
                bar.update(len(batch.requested))
            requests_made = client.requests_made
    return (
        f"fetch: {len(wanted)} pages: {counts.fetched} fetched, {counts.present} already present, "
        f"{counts.missing} missing, {counts.failed} failed; {requests_made} API requests "
        f"-> {ctx.pages_dir}"
    )


def _wanted(ctx: RunContext) -> dict[str, int | None]:
    """Title -> the revid to fetch (None: the latest), in fetch order."""
    options = ctx.options.source
    if options.revisions:
        return dict(read_manifest(options.revisions))
    return dict.fromkeys(window_titles(ctx.window, options.sources))


def _pages_on_disk(pages_dir: Path, wanted: dict[str, int | None]) -> dict[str, int]:
    """Title -> revid of the wanted pages already stored intact (and of the wanted revision)."""
    present: dict[str, int] = {}
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
            present[title] = meta.revid
    return present


def _store(ctx: RunContext, batch: BatchResult, manifest: Manifest) -> None:
    for page in batch.pages:
        write_page(ctx.pages_dir, page)
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
