"""The events stage: snapshot pages -> `OUT/events.jsonl`, dated, linked, entities filled.

Pages come from `--source DIR` or the run's own `pages/`. A page that cannot be read or parsed
is a warning naming it and the reason; the run goes on and the summary counts it. Parsing
(`parse_page`) is kept apart from NER so each can be measured alone; in a run, pages are parsed
as NER's worker processes (one per core) ask for more events, so both run at once.

Run again over newer pages (a refresh), events keep the ids of the previous `events.jsonl`, a
reworded one included (`refresh.py` says how), and `refresh.json` records what was added,
changed and removed.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

from tqdm import tqdm
from tqdm.contrib.logging import logging_redirect_tqdm

from cuqa_builder.jsonio import JsonlError, atomic_write_json, iter_jsonl, read_jsonl, write_jsonl
from cuqa_builder.ner import EntityExtractor, default_processes
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page
from cuqa_builder.refresh import (
    RefreshReport,
    carry_ids,
    compare_events,
    revised_pages,
    stale_candidates,
    summarize_changes,
)
from cuqa_builder.run import (
    CANDIDATES,
    EVENTS,
    MANIFEST,
    REFRESH,
    Manifest,
    NothingProducedError,
    RunContext,
    check_replacement,
    index_url_for,
    load_run_info,
)
from cuqa_builder.snapshot import SnapshotError, iter_snapshot, page_kind, snapshot_sha256
from cuqa_builder.stages.fetch import now
from cuqa_builder.wiki.portal import SkipSection, parse_portal, portal_day
from cuqa_builder.wiki.titles import parse_sources
from cuqa_builder.wiki.wikitext import WIKIPEDIA_INDEX, ParseError, Warn
from cuqa_builder.wiki.year_article import parse_year_article
from cuqa_builder.window import Window

log = logging.getLogger(__name__)

NO_CATEGORY = "(none)"
_TOP_CATEGORIES = 12  # the summary lists this many categories, then "N more"
MIB = 1024 * 1024
# Wikipedia refuses to save wikitext over 2 MiB, so a bigger page is not a real one; parsing
# costs ~90 bytes of memory per character, so this also bounds the stage's memory.
MAX_PAGE_BYTES = 2 * MIB
# A news line is a few hundred characters; spaCy refuses texts of 1,000,000 and more.
MAX_EVENT_CHARS = 10_000


def parse_page(
    page: Page,
    index_url: str = WIKIPEDIA_INDEX,
    warn: Warn = log.warning,
    skip_section: SkipSection | None = None,
) -> list[Event]:
    """Events of one year article or Current events day page, in page order (no entities yet).

    Raises ParseError with a readable reason for a page that holds no events.
    """
    _check_size(page)
    page = _without_nul_lines(page, warn)
    kind = page_kind(page.meta.title)
    if kind == "year":
        return parse_year_article(page, index_url, warn)
    if kind == "portal":
        return parse_portal(page, index_url, warn, skip_section)
    raise ParseError("neither a year article nor a Current events day page")


def _check_size(page: Page) -> None:
    text = page.wikitext
    if len(text) * 4 <= MAX_PAGE_BYTES:  # UTF-8 takes at most 4 bytes a character
        return
    size = len(text.encode("utf-8"))
    if size > MAX_PAGE_BYTES:
        raise ParseError(f"{size / MIB:.1f} MiB of wikitext, more than the {MAX_PAGE_BYTES // MIB} "
                         "MiB Wikipedia allows a page: not parsed")


def _without_nul_lines(page: Page, warn: Warn) -> Page:
    """The page without its lines holding NUL characters, each named in a warning: no wikitext
    has them, and the wikitext parser stops reading at the first one (the rest of the page,
    its closing templates too, would be lost)."""
    if "\0" not in page.wikitext:
        return page
    lines = page.wikitext.split("\n")
    for number, line in enumerate(lines, start=1):
        if "\0" in line:
            shown = line.replace("\0", "")[:80]
            warn(f"{page.meta.title}: line {number} dropped: it holds NUL characters, which no "
                 f"wikitext has ({shown!r})")
    kept = "\n".join(line for line in lines if "\0" not in line)
    return page.model_copy(update={"wikitext": kept})


@dataclass
class ParseReport:
    """What happened to each page, for the summary."""

    pages_read: int = 0
    pages_outside: int = 0  # day pages not parsed: their day is outside the window
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> pages
    sections_skipped: Counter[str] = field(default_factory=Counter)  # reason -> sections
    lines_skipped: Counter[str] = field(default_factory=Counter)  # reason -> their lines
    revisions: dict[str, int] = field(default_factory=dict)  # title -> revid of pages read
    warnings: int = 0

    def skip(self, name: str, reason: str, counted_as: str | None = None) -> None:
        log.warning("skipping %s: %s", name, reason)
        self.skipped[counted_as or reason] += 1

    def skip_section(self, reason: str, lines: int) -> None:
        """A section of a page that is not news (holidays...): counted, not warned about."""
        self.sections_skipped[reason] += 1
        self.lines_skipped[reason] += lines

    def warn(self, message: str) -> None:
        log.warning("%s", message)
        self.warnings += 1


@dataclass
class EventCounts:
    """What became of the parsed events, for the summary."""

    outside: int = 0  # dated outside the window
    too_long: int = 0
    duplicates: int = 0


def iter_snapshot_events(
    directory: Path,
    kinds: Iterable[str],
    report: ParseReport,
    window: Window | None = None,
    index_url: str = WIKIPEDIA_INDEX,
    quiet: bool = True,
) -> Iterator[Event]:
    """Events of every readable page of the selected kinds, page by page; what happened to
    each page goes to `report`. A page is parsed when its events are asked for, and with a
    `window` a day page outside it is not parsed at all (a snapshot may span years)."""
    wanted = set(kinds)
    total = sum(1 for _ in directory.glob("*.wiki")) if directory.is_dir() else None
    pages = tqdm(iter_snapshot(directory), total=total, unit="page", desc="parsing",
                 disable=quiet or not total)
    with logging_redirect_tqdm():  # warnings print above the progress bar, not through it
        for page in pages:
            yield from _parse_one(page, wanted, window, index_url, report)


def _parse_one(
    page: Page | SnapshotError,
    wanted: set[str],
    window: Window | None,
    index_url: str,
    report: ParseReport,
) -> list[Event]:
    """The page's events, or none with the reason recorded in `report`."""
    if isinstance(page, SnapshotError):
        name, _, reason = str(page).partition(": ")
        report.skip(name, reason, counted_as="unreadable files")
        return []
    title = page.meta.title
    kind = page_kind(title)
    if kind is not None and kind not in wanted:
        report.skip(title, f"{kind} pages not selected by --sources")
        return []
    if window is not None and kind == "portal" and not _day_in_window(title, window):
        report.pages_outside += 1
        return []
    try:
        found = parse_page(page, index_url, report.warn, report.skip_section)
    except ParseError as exc:
        report.skip(title, str(exc))
        return []
    except Exception as exc:  # a page the parser chokes on must not end a long run
        report.skip(title, f"unexpected {type(exc).__name__}: {exc}")
        return []
    report.pages_read += 1
    report.revisions[title] = page.meta.revid
    return found


def _day_in_window(title: str, window: Window) -> bool:
    try:
        return window.contains(portal_day(title))
    except ParseError:
        return True  # let the parser report the bad title


def select_events(
    events: Iterable[Event], window: Window, report: ParseReport, counts: EventCounts
) -> Iterator[Event]:
    """Events dated in the window, each id once, none too long to be a news line."""
    seen: set[str] = set()
    for event in events:
        if not window.contains(event.date):
            counts.outside += 1
        elif len(event.text) > MAX_EVENT_CHARS:
            counts.too_long += 1
            report.warn(f"{event.source.title}: skipping an event of {len(event.text):,} "
                        f"characters (a news line has at most {MAX_EVENT_CHARS:,})")
        elif event.id in seen:
            counts.duplicates += 1
        else:
            seen.add(event.id)
            yield event


@functools.lru_cache(maxsize=1)
def entity_extractor(model_name: str) -> EntityExtractor:
    """Loading a pipeline takes seconds: a process that runs the stage again reuses it."""
    return EntityExtractor(model_name)


def with_entities(
    events: Iterable[Event], model_name: str, processes: int, quiet: bool = True
) -> list[Event]:
    """The events with their entities, in order; spaCy is loaded only when there is an event."""
    stream = iter(events)
    first = next(stream, None)
    if first is None:
        return []
    extractor = entity_extractor(model_name)
    with tqdm(unit="event", desc="entities", disable=quiet) as bar:
        return list(extractor.annotate(chain([first], stream), processes, progress=bar.update))


def pages_source(ctx: RunContext) -> Path:
    """Where the stage reads its pages: --source DIR, else the run's fetched pages."""
    return ctx.options.source.source or ctx.pages_dir


def extract_events(ctx: RunContext, report: ParseReport, counts: EventCounts) -> list[Event]:
    """The window's events of the pages, entities filled, in page order: what the stage writes
    (`by_day`) before an earlier events.jsonl's ids are carried over. What happened to each
    page goes to `report`, to the events `counts`."""
    options = ctx.options.source
    parsed = iter_snapshot_events(
        pages_source(ctx), parse_sources(options.sources), report, ctx.window,
        index_url_for(options.wiki_api), ctx.options.quiet,
    )
    selected = select_events(parsed, ctx.window, report, counts)
    return with_entities(selected, options.spacy_model, default_processes(), ctx.options.quiet)


def by_day(events: list[Event]) -> list[Event]:
    # A stable sort after page-order parsing keeps each page's own order within a day.
    return sorted(events, key=lambda event: (event.date, event.source.title))


def run(ctx: RunContext) -> str:
    options = ctx.options.source
    source = pages_source(ctx)
    report, counts = ParseReport(), EventCounts()
    # NER does not look at ids, so they are carried over once all events are in.
    previous = _previous_events(ctx)
    kept = by_day(carry_ids(previous, extract_events(ctx, report, counts)))
    if not kept:
        raise NothingProducedError(_why_no_events(source, report, counts.outside))
    summary = summarize(ctx, report, kept, counts)
    check_replacement(ctx.path(EVENTS), len(kept), "events", ctx.options.force)
    write_jsonl(ctx.path(EVENTS), kept)
    if options.source:  # a fetched run already has the manifest of what it fetched
        _save_snapshot_manifest(ctx, report)
    if previous:
        summary += "\n" + _record_refresh(ctx, previous, kept)
    return summary


def _why_no_events(source: Path, report: ParseReport, outside: int) -> str:
    pages = report.pages_read + sum(report.skipped.values()) + report.pages_outside
    if not pages:
        return f"{source} holds no pages (a snapshot is NAME.wiki + NAME.json pairs); " \
            "nothing written"
    return (
        f"no events in the window from {source}: {report.pages_read} pages read, "
        f"{sum(report.skipped.values())} skipped{_reasons(report.skipped)}, "
        f"{report.pages_outside} day pages outside the window, {outside} events outside it; "
        "nothing written"
    )


def _previous_events(ctx: RunContext) -> list[Event]:
    """The events.jsonl this run replaces, whose ids the new events keep."""
    try:
        return read_jsonl(ctx.path(EVENTS), Event)
    except JsonlError as exc:
        log.warning("%s; event ids are not carried over from it", exc)
        return []


def _record_refresh(ctx: RunContext, previous: list[Event], current: list[Event]) -> str:
    """Write refresh.json when anything changed (a re-run over the same pages keeps the
    record of the last real change); returns the summary's lines."""
    added, changed, removed, by_month = compare_events(previous, current)
    if not (added or changed or removed):
        return "refresh: no event added, changed or removed since the previous events.jsonl"
    extensions = load_run_info(ctx.out).extensions
    until = ctx.window.until.isoformat()
    previous_until = next((e.previous_until for e in reversed(extensions) if e.until == until),
                          None)
    stale = stale_candidates(iter_jsonl(ctx.path(CANDIDATES), Candidate),
                             {event.id: event for event in current})
    report = RefreshReport(
        refreshed=now(), cutoff=ctx.window.label, previous_until=previous_until, until=until,
        events_before=len(previous), events_after=len(current), added=added, changed=changed,
        removed=removed, by_month=by_month, pages_revised=revised_pages(previous, current),
        stale_candidates=sorted(c for c, why in stale.items() if why.kind == "reworded"),
        orphaned_candidates=sorted(c for c, why in stale.items() if why.kind == "removed"),
    )
    atomic_write_json(ctx.path(REFRESH), report.model_dump(mode="json"))
    return summarize_changes(report) + f" -> {ctx.path(REFRESH)}"


def _save_snapshot_manifest(ctx: RunContext, report: ParseReport) -> None:
    """Which page revisions the snapshot held, so `--revisions` can fetch the same ones."""
    source = ctx.options.source.source.resolve()
    manifest = Manifest(  # read from disk: no wiki, no fetch
        api=None, fetched=None, pages=dict(sorted(report.revisions.items())),
        # absolute: a later command from another directory finds it again
        snapshot=str(source), snapshot_sha256=snapshot_sha256(source),
    )
    atomic_write_json(ctx.path(MANIFEST), manifest.model_dump())


def summarize(
    ctx: RunContext, report: ParseReport, events: list[Event], counts: EventCounts
) -> str:
    window = ctx.window
    lines = [
        f"events: {report.pages_read} pages read, {report.pages_outside} day pages outside the "
        f"window, {sum(report.skipped.values())} skipped"
        + _reasons(report.skipped)
        + (f", {report.warnings} warnings" if report.warnings else ""),
    ]
    if report.sections_skipped:
        lines.append("non-event sections skipped: " + ", ".join(
            f"{sections} {reason} ({report.lines_skipped[reason]} lines)"
            for reason, sections in report.sections_skipped.most_common()
        ))
    lines.append(
        f"events: {len(events)} kept (after {window.cutoff} up to {window.until}), "
        f"{counts.outside} outside the window, {counts.duplicates} duplicates dropped"
        + (f", {counts.too_long} too long to be news" if counts.too_long else "")
    )
    if events:
        months = Counter(event.date.strftime("%Y-%m") for event in events)
        lines.append("per month: " + ", ".join(f"{m} {n}" for m, n in sorted(months.items())))
        lines.append("per category: " + _top_categories(events))
        entities = sum(len(event.entities) for event in events)
        lines.append(f"entities: {entities} ({entities / len(events):.1f} per event)")
    lines.append(f"-> {ctx.path(EVENTS)}")
    return "\n".join(lines)


def _reasons(skipped: Counter[str]) -> str:
    if not skipped:
        return ""
    return " (" + "; ".join(f"{n} {reason}" for reason, n in skipped.most_common()) + ")"


def _top_categories(events: list[Event]) -> str:
    counts = Counter(event.category or NO_CATEGORY for event in events)
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))  # ties by name
    shown = ", ".join(f"{name} {n}" for name, n in ranked[:_TOP_CATEGORIES])
    rest = len(ranked) - _TOP_CATEGORIES
    return shown + (f", and {rest} more" if rest > 0 else "")
