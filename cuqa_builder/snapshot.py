"""Snapshot directories: `NAME.wiki` (wikitext) + `NAME.json` (title, revid, timestamp, sha256).

The fetch stage writes a run's `pages/` in this format, so a run directory is itself a snapshot
that `--source` can read offline. Entity articles as of the cutoff (`"kind": "article"`) sit in
the snapshot's `articles/` folder, apart from the event pages the events stage parses (and so
that an article titled like a year article cannot overwrite it); an article fetched from the
API has MediaWiki's rendering of its revision beside it (`NAME.html`, read only when the
sidecar gives its sha256), so that an offline re-run reads what the first run read. The rendering
improves on the wikitext but is never a condition for having the page: one that is missing,
changed or not UTF-8 is left unread, and the page says why (`Page.html_unread`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from pydantic import ValidationError

from cuqa_builder.errors import CuqaError, describe_validation_error
from cuqa_builder.jsonio import atomic_write_json, atomic_write_text
from cuqa_builder.records.pages import Page, PageMeta

ARTICLES_SUBDIR = "articles"
_YEAR_TITLE = re.compile(r"^\d{4}$")
_PORTAL_TITLE = re.compile(r"^Portal:Current events/\d{4} [A-Z][a-z]+ \d{1,2}$")


class SnapshotError(CuqaError, ValueError):
    """A page in a snapshot directory that cannot be read (the message names it)."""


def page_kind(title: str) -> str | None:
    """`year` for a year article ("2023"), `portal` for a Current events day page."""
    if _YEAR_TITLE.match(title):
        return "year"
    if _PORTAL_TITLE.match(title):
        return "portal"
    return None


def page_filename(title: str) -> str:
    """File stem for a title: spaces as underscores, anything unsafe percent-encoded."""
    return quote(title.replace(" ", "_"), safe="-_.,()")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def snapshot_sha256(directory: Path) -> str:
    """The sha256 of a snapshot's content: each file's path inside it and sha256, in path
    order (pages, sidecars, renderings, articles; a copy elsewhere has the same hash)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(directory).as_posix()}\0{_file_sha256(path)}\n"
                      .encode())
    return digest.hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def write_page(directory: Path, page: Page) -> Path:
    stem = page_filename(page.meta.title)
    meta = page.meta.model_copy(update={
        "sha256": sha256_text(page.wikitext),
        "html_sha256": sha256_text(page.html) if page.html is not None else None,
    })
    atomic_write_text(directory / f"{stem}.wiki", page.wikitext)
    if page.html is not None:
        atomic_write_text(directory / f"{stem}.html", page.html)
    write_meta(directory, meta)
    if page.html is None:  # an older revision's rendering is not this one's
        (directory / f"{stem}.html").unlink(missing_ok=True)
    return directory / f"{stem}.wiki"


def write_meta(directory: Path, meta: PageMeta) -> None:
    """Replace a page's sidecar alone (its wikitext, and so its sha256, unchanged)."""
    # The article fields are written only when set: event pages' sidecars stay as they were.
    unset = {name for name in ("kind", "redirect", "api", "html_sha256")
             if getattr(meta, name) is None}
    atomic_write_json(directory / f"{page_filename(meta.title)}.json",
                      meta.model_dump(exclude=unset))


def page_path(directory: Path, title: str) -> Path:
    """Where `write_page` puts the wikitext of `title`."""
    return directory / f"{page_filename(title)}.wiki"


def articles_dir(snapshot: Path) -> Path:
    return snapshot / ARTICLES_SUBDIR


def read_page(wiki_path: Path) -> Page:
    sidecar = wiki_path.with_suffix(".json")
    if not sidecar.exists():
        raise SnapshotError(f"{wiki_path.name}: no sidecar {sidecar.name}")
    try:
        meta = PageMeta.model_validate_json(sidecar.read_bytes())
    except ValidationError as exc:
        raise SnapshotError(
            f"{sidecar.name}: invalid sidecar ({describe_validation_error(exc)})"
        ) from None
    text = _read_checked(wiki_path, meta.sha256)
    html, unread = _rendering(wiki_path.with_suffix(".html"), meta.html_sha256)
    return Page(meta=meta, wikitext=text, html=html, html_unread=unread)


def _rendering(path: Path, sha256: str | None) -> tuple[str | None, str | None]:
    """The rendering the sidecar names, or why it cannot be read (the page's wikitext is)."""
    if not sha256:  # only the rendering its sidecar names: any other `.html` there is unchecked
        return None, None
    if not path.exists():
        return None, f"{path.name} is missing (its sidecar gives its sha256)"
    try:
        return _read_checked(path, sha256), None
    except (SnapshotError, OSError) as exc:
        return None, str(exc)


def _read_checked(path: Path, sha256: str | None) -> str:
    """A page file's text, checked against the sha256 its sidecar gives (if any)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{path.name}: not UTF-8 text (byte {exc.start})") from None
    if sha256 and sha256 != sha256_text(text):
        raise SnapshotError(f"{path.name}: sha256 does not match its sidecar")
    return text


def iter_snapshot(directory: Path) -> Iterator[Page | SnapshotError]:
    """Every page of a snapshot, in file-name order; unreadable ones come back as errors."""
    if not directory.is_dir():
        raise SnapshotError(f"snapshot directory {directory} does not exist")
    for wiki_path in sorted(directory.glob("*.wiki")):
        try:
            yield read_page(wiki_path)
        except (SnapshotError, OSError, UnicodeDecodeError) as exc:
            yield (
                exc if isinstance(exc, SnapshotError) else SnapshotError(f"{wiki_path.name}: {exc}")
            )


