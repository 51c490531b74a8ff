"""Benchmark the events stage's work: parse N events from a snapshot and extract their entities.

Issue 2, Performance: 10,000 events in under 60 s on 2 cores, with our own overhead (everything
but spaCy's `nlp.pipe`) under 20 % of the total.

The synthetic snapshot is made from the shipped sample (`examples/wiki-sample`): one Current
events page per day holding the news of all its portal pages (alternating the older `content=`
wrapper and the newer top=yes/bottom=yes layout), plus the year article of every year touched,
re-dated. Run from the repository root (with the package installed, e.g. `pip install -e .`):

    python scripts/bench_events.py --events 10000 [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.ner import EntityExtractor
from cuqa_builder.records import Event, Page, PageMeta
from cuqa_builder.snapshot import SnapshotError, iter_snapshot, page_kind, write_page
from cuqa_builder.wiki.titles import portal_title

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wiki-sample"
SAMPLE_YEAR = "2023"
BELOW = "<!-- All news items below this line -->"
ABOVE = "<!-- All news items above this line -->"
FIRST_DAY = date(2023, 5, 1)
NLP_PIPE = "entities: nlp.pipe (NER)"


# --- the synthetic snapshot -------------------------------------------------------------


def sample_pages() -> tuple[str, list[str]]:
    """The sample's year article and the news part of each of its portal pages."""
    year_text, news = "", []
    for page in iter_snapshot(SAMPLE):
        if isinstance(page, SnapshotError):
            raise page
        if page_kind(page.meta.title) == "year":
            year_text = page.wikitext
        else:
            text = page.wikitext
            news.append(text[text.index(BELOW) + len(BELOW) : text.index(ABOVE)].strip("\n"))
    return year_text, news


def day_wikitext(day: date, news: list[str]) -> str:
    """One day's page: the sample's news in a rotated order, in one of the two layouts."""
    shift = day.toordinal() % len(news)
    body = "\n\n".join(news[shift:] + news[:shift])
    params = f"year={day.year}|month={day.month:02d}|day={day.day}"
    if day.toordinal() % 2:
        return f"{{{{Current events|{params}|content=\n{BELOW}\n{body}\n{ABOVE}}}}}\n"
    return (
        f"{{{{Current events|{params}|top=yes}}}}\n{BELOW}\n{body}\n{ABOVE}\n"
        f"{{{{Current events|{params}|bottom=yes}}}}\n"
    )


def synthetic_pages(days: int, year_text: str, news: list[str]) -> Iterator[Page]:
    """`days` consecutive portal pages and the year article of each year they touch."""
    all_days = [FIRST_DAY + timedelta(days=n) for n in range(days)]
    for year in sorted({day.year for day in all_days}):
        yield _page(str(year), year_text.replace(SAMPLE_YEAR, str(year)))
    for day in all_days:
        yield _page(portal_title(day), day_wikitext(day, news))


def _page(title: str, text: str) -> Page:
    meta = PageMeta(title=title, revid=1, timestamp="2024-01-01T00:00:00Z")
    return Page(meta=meta, wikitext=text)


def days_needed(events: int, news: list[str], parse_page: Callable[[Page], list[Event]]) -> int:
    per_day = len(parse_page(_page(portal_title(FIRST_DAY), day_wikitext(FIRST_DAY, news))))
    return math.ceil(events / per_day)


# --- measuring --------------------------------------------------------------------------


@dataclass
class Phase:
    name: str
    owner: str  # "ours" or "spaCy"
    seconds: float


@dataclass
class Report:
    phases: list[Phase] = field(default_factory=list)
    profiler: cProfile.Profile | None = None
    cpu_seconds: float = 0.0  # wall time misleads on a shared machine; CPU time does not

    @contextmanager
    def timed(self, name: str, owner: str = "ours") -> Iterator[None]:
        started, cpu_started = time.perf_counter(), time.process_time()
        if self.profiler:
            self.profiler.enable()
        try:
            yield
        finally:
            if self.profiler:
                self.profiler.disable()
            self.phases.append(Phase(name, owner, time.perf_counter() - started))
            self.cpu_seconds += time.process_time() - cpu_started

    def split_last(self, name: str, owner: str, seconds: float) -> None:
        """Move `seconds` of the last phase into a new phase (spaCy's share of a mixed phase)."""
        self.phases[-1].seconds -= seconds
        self.phases.append(Phase(name, owner, seconds))

    def seconds_in(self, name: str) -> float:
        return sum(phase.seconds for phase in self.phases if phase.name == name)

    def total(self) -> float:
        return sum(phase.seconds for phase in self.phases)

    def seconds_of(self, owner: str) -> float:
        return sum(phase.seconds for phase in self.phases if phase.owner == owner)


def load_parse_page() -> Callable[[Page], list[Event]]:
    try:
        from cuqa_builder.stages.events import parse_page
    except ImportError as exc:
        sys.exit(f"bench_events: cannot import cuqa_builder.stages.events.parse_page ({exc})")
    return parse_page


def run(events_wanted: int, spacy_model: str, workdir: Path, report: Report) -> dict[str, int]:
    parse_page = load_parse_page()
    year_text, news = sample_pages()
    for page in synthetic_pages(days_needed(events_wanted, news, parse_page), year_text, news):
        write_page(workdir / "pages", page)

    with report.timed("read snapshot"):
        pages = [page for page in iter_snapshot(workdir / "pages") if isinstance(page, Page)]
    with report.timed("parse pages (mwparserfromhell + ours)"):
        events = [event for page in pages for event in parse_page(page)]
    with report.timed("load spaCy pipeline", owner="spaCy"):
        extractor = EntityExtractor(spacy_model)
    with report.timed("entities: link merge, records"):
        events = extractor.for_events(events)
    report.split_last(NLP_PIPE, "spaCy", extractor.spacy_seconds)
    with report.timed("write events.jsonl"):
        write_jsonl(workdir / "events.jsonl", events)
    return {
        "pages": len(pages),
        "events": len(events),
        "entities": sum(len(event.entities) for event in events),
        "linked entities": sum(1 for e in events for ent in e.entities if ent.wiki_title),
    }


def print_report(counts: dict[str, int], report: Report) -> None:
    total = report.total()
    width = max(len(phase.name) for phase in report.phases) + 2
    print(f"\n{'phase':<{width}}{'owner':<8}{'seconds':>9}{'share':>8}")
    for phase in report.phases:
        share = phase.seconds / total
        print(f"{phase.name:<{width}}{phase.owner:<8}{phase.seconds:>9.2f}{share:>8.1%}")
    print(f"{'total':<{width}}{'':<8}{total:>9.2f}{1:>8.0%}\n")
    ours = report.seconds_of("ours")
    per_10k = total * 10_000 / counts["events"]
    cpu_per_10k = report.cpu_seconds * 10_000 / counts["events"]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB
    rows = [
        *(f"{name}: {value:,}" for name, value in counts.items()),
        f"events/s (all phases): {counts['events'] / total:,.0f}",
        f"time inside spaCy: {report.seconds_of('spaCy') / total:.1%} "
        f"(nlp.pipe alone {report.seconds_in(NLP_PIPE) / total:.1%})",
        f"our overhead: {ours / total:.1%} ({'met' if ours < 0.2 * total else 'MISSED'}: < 20%)",
        f"time per 10,000 events: {per_10k:.1f} s wall ({'met' if per_10k < 60 else 'MISSED'}: "
        f"< 60 s), {cpu_per_10k:.1f} s CPU",
        "load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        f"peak memory (max RSS): {peak_mb:,.0f} MiB",
    ]
    print("\n".join(rows))
    if report.profiler:
        print("\nprofile of the timed phases (top 25 by own time):")
        pstats.Stats(report.profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events (default 10000)")
    parser.add_argument("--spacy-model", default="en_core_web_sm", help="spaCy pipeline for NER")
    parser.add_argument("--keep", type=Path, help="build the snapshot here and keep it")
    parser.add_argument("--profile", action="store_true", help="cProfile the timed phases")
    args = parser.parse_args(argv)
    report = Report(profiler=cProfile.Profile() if args.profile else None)
    if args.keep:
        counts = run(args.events, args.spacy_model, args.keep, report)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
            counts = run(args.events, args.spacy_model, Path(tmp), report)
    print_report(counts, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
