"""Benchmark the events stage's work: parse N events from a snapshot and extract their entities.

Issue 2, Performance: 10,000 events in under 60 s on 2 cores, with our own overhead (everything
but spaCy's `nlp.pipe`) under 20 % of the total (with one NER process the parent's CPU share
is that overhead plus spaCy's loading). Issue 9: both cores used (NER in one worker
process per core while the pages are parsed), 10,000 events in at most 20 s on 2 cores with at
most 600 MB of memory in all processes together.

The synthetic snapshot is made from the shipped sample (`examples/wiki-sample`): one Current
events page per day holding the news of all its portal pages (alternating the older `content=`
wrapper and the newer top=yes/bottom=yes layout), plus the year article of every year touched,
re-dated. Run from the repository root (with the package installed, e.g. `pip install -e .`):

    python scripts/bench_events.py --events 10000 [--processes N] [--profile]

Memory is reported three ways: the parent's peak RSS, the largest worker's peak RSS, and the
peak of all processes together (sum of their proportional set sizes, sampled every 0.5 s, so
pages the workers share with the parent count once).
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
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

from bench_common import bench_arguments

from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.ner import EntityExtractor, default_processes
from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.snapshot import SnapshotError, iter_snapshot, page_kind, write_page
from cuqa_builder.wiki.titles import portal_title

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wiki-sample"
SAMPLE_YEAR = "2023"
BELOW = "<!-- All news items below this line -->"
ABOVE = "<!-- All news items above this line -->"
FIRST_DAY = date(2023, 5, 1)


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
    owner: str  # "ours", "spaCy" or "mixed" (both at once)
    seconds: float


@dataclass
class Report:
    phases: list[Phase] = field(default_factory=list)
    profiler: cProfile.Profile | None = None
    cpu_seconds: float = 0.0  # wall time misleads on a shared machine; CPU time does not
    waiting_on_spacy: float = 0.0  # parent's time blocked on nlp.pipe (parsing included)
    peak_all_bytes: int = 0

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

    def total(self) -> float:
        return sum(phase.seconds for phase in self.phases)



def load_stage() -> tuple[Callable[[Page], list[Event]], Callable[..., Iterator[Event]]]:
    try:
        from cuqa_builder.stages.events import ParseReport, iter_snapshot_events, parse_page
    except ImportError as exc:
        sys.exit(f"bench_events: cannot import the events stage ({exc})")

    def stream(directory: Path) -> Iterator[Event]:
        return iter_snapshot_events(directory, ("year", "portal"), ParseReport())

    return parse_page, stream


class MemorySampler:
    """Peak of the sum of the proportional set sizes of this process and its children."""

    def __init__(self, interval: float = 0.5) -> None:  # one sample costs ~2 ms of CPU
        self.interval = interval
        self.peak_bytes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            pids = [os.getpid(), *_children(os.getpid())]
            self.peak_bytes = max(self.peak_bytes, sum(_pss_bytes(pid) for pid in pids))


def _children(pid: int) -> list[int]:
    try:
        tasks = Path(f"/proc/{pid}/task").iterdir()
        return [int(child) for task in tasks
                for child in (task / "children").read_text().split()]
    except OSError:
        return []


def _pss_bytes(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def run(
    events_wanted: int, spacy_model: str, processes: int, workdir: Path, report: Report
) -> dict[str, int]:
    parse_page, stream = load_stage()
    year_text, news = sample_pages()
    for page in synthetic_pages(days_needed(events_wanted, news, parse_page), year_text, news):
        write_page(workdir / "pages", page)

    with report.timed("load spaCy pipeline", owner="spaCy"):
        extractor = EntityExtractor(spacy_model)
    # As in the stage: pages are read and parsed as NER's workers ask for more events.
    with report.timed(f"read + parse pages, entities ({processes} NER processes)", owner="mixed"):
        events = list(extractor.annotate(stream(workdir / "pages"), processes))
    with report.timed("write events.jsonl"):
        write_jsonl(workdir / "events.jsonl", events)
    report.waiting_on_spacy = extractor.spacy_seconds
    return {
        "pages": sum(1 for _ in (workdir / "pages").glob("*.wiki")),
        "events": len(events),
        "entities": sum(len(event.entities) for event in events),
        "linked entities": sum(1 for e in events for ent in e.entities if ent.wiki_title),
    }


def print_report(counts: dict[str, int], report: Report, processes: int) -> None:
    total = report.total()
    width = max(len(phase.name) for phase in report.phases) + 2
    print(f"\n{'phase':<{width}}{'owner':<8}{'seconds':>9}{'share':>8}")
    for phase in report.phases:
        share = phase.seconds / total
        print(f"{phase.name:<{width}}{phase.owner:<8}{phase.seconds:>9.2f}{share:>8.1%}")
    print(f"{'total':<{width}}{'':<8}{total:>9.2f}{1:>8.0%}\n")
    per_10k = total * 10_000 / counts["events"]
    workers = resource.getrusage(resource.RUSAGE_CHILDREN)
    workers_cpu = workers.ru_utime + workers.ru_stime
    mib = 1024 * 1024
    rows = [
        *(f"{name}: {value:,}" for name, value in counts.items()),
        f"events/s (all phases): {counts['events'] / total:,.0f}",
        f"NER processes: {processes}; parent blocked on nlp.pipe {report.waiting_on_spacy:.1f} s",
        f"time per 10,000 events: {per_10k:.1f} s wall ({'met' if per_10k <= 20 else 'MISSED'}: "
        "<= 20 s on 2 cores)",
        f"CPU: parent {report.cpu_seconds:.1f} s, NER workers {workers_cpu:.1f} s; the parent's "
        f"share (parsing, merging, receiving docs) "
        f"{report.cpu_seconds / (report.cpu_seconds + workers_cpu):.1%}",
        "load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()),
        "peak memory: parent "
        f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB RSS, "  # KiB
        f"largest worker {workers.ru_maxrss / 1024:,.0f} MiB RSS, all processes together "
        f"{report.peak_all_bytes / mib:,.0f} MiB PSS "
        f"({'met' if report.peak_all_bytes <= 600 * 1000 * 1000 else 'MISSED'}: <= 600 MB)",
    ]
    print("\n".join(rows))
    if report.profiler:
        print("\nprofile of the timed phases in the parent (top 25 by own time):")
        pstats.Stats(report.profiler).sort_stats("tottime").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000, help="events (default 10000)")
    parser.add_argument("--spacy-model", default="en_core_web_sm", help="spaCy pipeline for NER")
    parser.add_argument("--keep", type=Path, help="build the snapshot here and keep it")
    parser.add_argument("--processes", type=int, default=default_processes(),
                        help="NER worker processes (default: one per core, as the stage)")
    parser.add_argument("--profile", action="store_true", help="cProfile the timed phases")
    args = bench_arguments(parser, argv, events=60, processes=1)
    report = Report(profiler=cProfile.Profile() if args.profile else None)
    with MemorySampler() as memory:
        if args.keep:
            counts = run(args.events, args.spacy_model, args.processes, args.keep, report)
        else:
            with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
                counts = run(args.events, args.spacy_model, args.processes, Path(tmp), report)
    report.peak_all_bytes = memory.peak_bytes
    print_report(counts, report, args.processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
