"""The events stage through `cuqa-build --stage events --source DIR`: window, order, bad pages."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import resource
import shutil
from datetime import date, timedelta
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.run import index_url_for
from cuqa_builder.snapshot import read_page, write_page
from cuqa_builder.stages import events as events_stage
from cuqa_builder.stages.events import parse_page
from cuqa_builder.wiki.wikitext import ParseError

FIXTURES = Path(__file__).parent / "fixtures" / "wiki"
MAY_14 = "Portal:Current events/2023 May 14"
SEPT_10 = "Portal:Current events/2023 September 10"


def build_events(out: Path, cutoff: str, *extra: str, source: Path = FIXTURES) -> int:
    return main(["--cutoff", cutoff, "--until", "2023-12-31", "--source", str(source),
                 "--out", str(out), "--stage", "events", "-q", *extra])


@pytest.fixture(scope="module")
def april_run(tmp_path_factory):
    """One run with --cutoff 2023-04 over the fixtures: exit code, events, summary, warnings."""
    out = tmp_path_factory.mktemp("run")
    capture = _Capture()
    logging.getLogger().addHandler(capture)
    stdout = io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout):
            code = build_events(out, "2023-04")
    finally:
        logging.getLogger().removeHandler(capture)
    return code, out, read_jsonl(out / "events.jsonl", Event), stdout.getvalue(), capture.lines


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_writes_the_events_of_the_window_sorted(april_run):
    code, _, events, _, _ = april_run
    assert code == 0
    assert [(e.date, e.source.title) for e in events] == (
        [(date(2023, 5, 14), MAY_14)] * 7
        + [(date(2023, 9, 8), "2023")]
        + [(date(2023, 9, 10), SEPT_10)] * 6
        + [(date(2023, 9, 20), "2023")] * 2
        + [(date(2023, 12, 28), "2023"), (date(2023, 12, 31), "2023")]
    )
    # Within a page and a day, the page's own order is kept.
    assert events[0].text.startswith("Ukrainian commanders")
    assert events[6].text == "Finland beat Latvia in overtime in Tampere."
    assert [e.text.split()[0] for e in events[8:11]] == ["Ukrainian", "A", "Drones"]
    assert len({e.id for e in events}) == len(events)


def test_event_records_carry_every_field(april_run):
    _, _, events, _, _ = april_run
    rugby = next(e for e in events if "Rugby" in e.text)
    assert rugby.model_dump(mode="json", exclude={"id", "entities"}) == {
        "date": "2023-09-08",
        "end_date": "2023-10-28",
        "text": "The 2023 Rugby World Cup is held in France.",
        "links": [{"title": "2023 Rugby World Cup", "text": "2023 Rugby World Cup"},
                  {"title": "France", "text": "France"}],
        "category": None,
        "topics": [],
        "citations": ["https://ref.example.com/rugby"],
        "source": {"title": "2023", "revid": 1190000000,
                   "url": "https://en.wikipedia.org/w/index.php?title=2023&oldid=1190000000"},
    }
    djokovic = next(e for e in events if e.text.startswith("Novak Djokovic"))
    assert djokovic.category == "Sports"
    assert djokovic.topics == ["2023 US Open (tennis)"]
    assert djokovic.source.url.endswith("title=Portal:Current_events/2023_September_10"
                                        "&oldid=1175002002")


def test_entities_are_filled_from_ner_and_links(april_run):
    _, _, events, _, _ = april_run
    djokovic = next(e for e in events if e.text.startswith("Novak Djokovic"))
    assert any(entity.wiki_title == "Novak Djokovic" for entity in djokovic.entities)
    assert sum(len(e.entities) for e in events) > len(events)


def test_bad_pages_are_warned_about_and_counted(april_run):
    code, _, _, summary, warnings = april_run
    assert code == 0
    assert "skipping 2022: no '== Events ==' section" in warnings
    assert "skipping Portal:Current events/2023 June 2: a {{Current events}} template is not " \
           "closed" in warnings
    assert "skipping Portal:Current events/2023 June 3: no news items on the page (empty day)" \
           in warnings
    assert "2023: section 'March' has no dated events" in warnings
    first_line = summary.splitlines()[0]
    assert first_line.startswith(
        "events: 3 pages read, 1 day pages outside the window, 3 skipped ("
    )
    assert first_line.endswith(", 2 warnings")


def test_summary_counts_the_window_months_categories_and_entities(april_run):
    _, out, events, summary, _ = april_run
    lines = summary.splitlines()
    # 7 events of the 2023 article are before May (the 2008 page is not even parsed); one
    # repeated line is dropped.
    assert lines[1] == ("events: 18 kept (after 2023-04-30 up to 2023-12-31), "
                        "7 outside the window, 1 duplicates dropped")
    assert lines[2] == "per month: 2023-05 7, 2023-09 9, 2023-12 2"
    assert lines[3] == (
        "per category: (none) 5, Armed conflicts and attacks 5, Politics and elections 3, "
        "Disasters and accidents 2, Sports 2, International relations 1"
    )
    entities = sum(len(e.entities) for e in events)
    assert lines[4] == f"entities: {entities} ({entities / 18:.1f} per event)"
    assert lines[5] == f"-> {out / 'events.jsonl'}"


@pytest.mark.parametrize(("cutoff", "first", "count"), [
    # A month cutoff is the end of that month: April 20 is known, May 14 is not.
    ("2023-04", date(2023, 5, 14), 18),
    # A day cutoff is precise: that day itself is known.
    ("2023-05-13", date(2023, 5, 14), 18),
    ("2023-05-14", date(2023, 9, 8), 11),
    # A range counts by its start: the Rugby World Cup (September 8 - October 28) is known.
    ("2023-09-10", date(2023, 9, 20), 4),
])
def test_cutoff_semantics(tmp_path, cutoff, first, count):
    assert build_events(tmp_path, cutoff) == 0
    events = read_jsonl(tmp_path / "events.jsonl", Event)
    assert (events[0].date, len(events)) == (first, count)
    assert all(e.date >= first for e in events)


def test_until_bounds_the_window(tmp_path):
    assert main(["--cutoff", "2023-09", "--until", "2023-12-30", "--source", str(FIXTURES),
                 "--out", str(tmp_path), "--stage", "events", "-q"]) == 0
    events = read_jsonl(tmp_path / "events.jsonl", Event)
    assert [e.date for e in events] == [date(2023, 12, 28)]


def test_unreadable_and_unexpected_pages_do_not_stop_the_run(tmp_path, caplog, capsys):
    source = tmp_path / "snapshot"
    shutil.copytree(FIXTURES, source)
    (source / "Orphan.wiki").write_text("no sidecar next to me", encoding="utf-8")
    (source / "Main_Page.wiki").write_text("Welcome", encoding="utf-8")
    (source / "Main_Page.json").write_text(
        '{"title": "Main Page", "revid": 1, "timestamp": "2023-06-01T00:00:00Z"}',
        encoding="utf-8",
    )
    with caplog.at_level(logging.WARNING):
        code = build_events(tmp_path / "out", "2023-04", "--sources", "portal", source=source)
    assert code == 0
    messages = [record.getMessage() for record in caplog.records]
    assert "skipping Orphan.wiki: no sidecar Orphan.json" in messages
    assert "skipping Main Page: neither a year article nor a Current events day page" in messages
    assert "skipping 2023: year pages not selected by --sources" in messages
    summary = capsys.readouterr().out.splitlines()
    assert summary[0].startswith(
        "events: 2 pages read, 1 day pages outside the window, 6 skipped ("
    )
    assert "2 year pages not selected by --sources" in summary[0]
    assert "1 unreadable files" in summary[0]
    events = read_jsonl(tmp_path / "out" / "events.jsonl", Event)
    assert {e.source.title for e in events} == {MAY_14, SEPT_10}


def test_missing_source_directory_fails_with_one_line(tmp_path, capsys):
    assert build_events(tmp_path / "out", "2023-04", source=tmp_path / "nowhere") == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"cuqa-build: error: snapshot directory {tmp_path / 'nowhere'} does not exist"
    ]
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_rerun_writes_the_same_file(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    assert build_events(first, "2023-08") == 0
    assert build_events(second, "2023-08") == 0
    assert (first / "events.jsonl").read_bytes() == (second / "events.jsonl").read_bytes()


def test_parse_page_dispatches_by_title():
    meta = {"revid": 3, "timestamp": "2024-01-01T00:00:00Z"}
    year = Page(meta=PageMeta(title="2024", **meta), wikitext="== Events ==\n* [[May 2]] – News.")
    assert [e.text for e in parse_page(year)] == ["News."]
    with pytest.raises(ParseError, match="neither"):
        parse_page(Page(meta=PageMeta(title="Main Page", **meta), wikitext="* [[May 2]] – News."))


def test_revision_links_follow_the_configured_wiki():
    assert index_url_for("http://127.0.0.1:8080/w/api.php") == "http://127.0.0.1:8080/w/index.php"
    assert index_url_for(None) == "https://en.wikipedia.org/w/index.php"


def test_a_snapshot_run_records_the_revisions_it_read(april_run):
    _, out, _, _, _ = april_run
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["snapshot"] == str(FIXTURES)
    read = {}
    for sidecar in FIXTURES.glob("*.json"):
        meta = json.loads(sidecar.read_text())
        read[meta["title"]] = meta["revid"]
    # Pages that could not be parsed are not part of the dataset's provenance.
    assert set(manifest["pages"]) < set(read)
    assert {"2023", MAY_14, SEPT_10} <= set(manifest["pages"])
    assert all(manifest["pages"][title] == read[title] for title in manifest["pages"])


# --- every era, sections that are not news, pages and events too big, both cores -------------

ERAS = FIXTURES / "eras"


def run_quietly(out: Path, source: Path, cutoff: str = "2004-01", until: str = "2025-12-31"):
    """(exit code, summary lines, warnings) of an events run."""
    capture, stdout = _Capture(), io.StringIO()
    logging.getLogger().addHandler(capture)
    try:
        with contextlib.redirect_stdout(stdout):
            code = main(["--cutoff", cutoff, "--until", until, "--source", str(source),
                         "--out", str(out), "--stage", "events", "-q"])
    finally:
        logging.getLogger().removeHandler(capture)
    return code, stdout.getvalue().splitlines(), capture.lines


def test_the_summary_lists_the_sections_skipped_as_not_news(tmp_path):
    code, summary, warnings = run_quietly(tmp_path, ERAS)
    assert code == 0 and warnings == []
    assert summary[0] == "events: 7 pages read, 0 day pages outside the window, 0 skipped"
    assert summary[1] == "non-event sections skipped: 2 holidays and observances (4 lines)"
    assert summary[2] == ("events: 36 kept (after 2004-01-31 up to 2025-12-31), "
                          "0 outside the window, 0 duplicates dropped")
    events = read_jsonl(tmp_path / "events.jsonl", Event)
    assert not any("festival is celebrated" in e.text or "Diwali" in e.text for e in events)


def copy_snapshot(tmp_path: Path, *extra: Page) -> Path:
    source = tmp_path / "snapshot"
    shutil.copytree(FIXTURES, source, ignore=shutil.ignore_patterns("eras"))
    for page in extra:
        write_page(source, page)
    return source


def day_page(day: str, body: str) -> Page:
    meta = PageMeta(title=f"Portal:Current events/{day}", revid=9, timestamp="2023-12-01T00:00:00Z")
    return Page(meta=meta, wikitext=(
        "{{Current events|year=2023|month=10|day=2|content=\n"
        f"<!-- All news items below this line -->\n{body}\n"
        "<!-- All news items above this line -->}}\n"
    ))


def test_an_event_of_a_million_characters_is_skipped_with_a_warning(tmp_path):
    """Issue 15, item 4: spaCy refuses such a text (E088), which ended the whole stage."""
    huge = "A very long line. " * 60_000  # 1,080,000 characters
    source = copy_snapshot(tmp_path, day_page("2023 October 2", (
        f"* {huge}[https://a.example.com (A)]\n"
        "* A normal event on the same day. [https://b.example.com (B)]"
    )))
    code, summary, warnings = run_quietly(tmp_path / "out", source, cutoff="2023-04",
                                          until="2023-12-31")
    assert code == 0
    assert ("Portal:Current events/2023 October 2: skipping an event of 1,079,999 characters "
            "(a news line has at most 10,000)") in warnings
    assert summary[1].endswith(", 1 too long to be news")
    events = read_jsonl(tmp_path / "out" / "events.jsonl", Event)
    assert "A normal event on the same day." in [e.text for e in events]
    assert len(events) == 19  # the 18 of the fixtures, and the normal one


def test_a_page_larger_than_wikipedia_allows_is_not_parsed(tmp_path):
    """Issue 15, item 4: parsing costs ~90 bytes a character, so a 50 MB page took 3.6 GB."""
    filler = "<!-- " + "x" * (2 * 1024 * 1024) + " -->"
    source = copy_snapshot(tmp_path, day_page(
        "2023 October 2", f"{filler}\n* An event on an oversized page. [https://a.example.com (A)]"
    ))
    code, summary, warnings = run_quietly(tmp_path / "out", source, cutoff="2023-04",
                                          until="2023-12-31")
    assert code == 0
    assert ("skipping Portal:Current events/2023 October 2: 2.0 MiB of wikitext, more than the "
            "2 MiB Wikipedia allows a page: not parsed") in warnings
    events = read_jsonl(tmp_path / "out" / "events.jsonl", Event)
    assert "An event on an oversized page." not in [e.text for e in events]


def many_days(tmp_path: Path, days: int) -> Path:
    """`days` day pages made from the era fixtures' day pages in turn, one per day of 2024."""
    templates = [read_page(path) for path in sorted(ERAS.glob("Portal*.wiki"))]
    source = tmp_path / "many"
    for n in range(days):
        day = date(2024, 1, 1) + timedelta(days=n)
        title = f"Portal:Current events/{day.year} {day:%B} {day.day}"
        template = templates[n % len(templates)]
        meta = PageMeta(title=title, revid=n + 1, timestamp="2025-01-01T00:00:00Z")
        write_page(source, Page(meta=meta, wikitext=template.wikitext))
    return source


def test_one_or_two_ner_processes_write_the_same_events(tmp_path, monkeypatch):
    source = many_days(tmp_path, 150)  # ~600 events: more than a batch for each of two workers
    outputs = {}
    for processes in (1, 2):
        monkeypatch.setattr(events_stage, "default_processes", lambda n=processes: n)
        children_before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        out = tmp_path / f"out-{processes}"
        code, summary, _ = run_quietly(out, source, cutoff="2023-12", until="2024-12-31")
        assert code == 0, summary
        workers_cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - children_before
        assert (workers_cpu > 0) == (processes == 2)  # two processes really ran NER
        outputs[processes] = (out / "events.jsonl").read_bytes()
    events = read_jsonl(tmp_path / "out-2" / "events.jsonl", Event)
    assert len(events) > 2 * 256
    assert sum(1 for e in events if e.entities) > len(events) / 2  # NER did run
    assert outputs[1] == outputs[2]
