"""`cuqa-build --stage fetch|events` end to end against the local api.php stand-in."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.run import EVENTS, MANIFEST, PAGES_DIR
from cuqa_builder.snapshot import iter_snapshot
from cuqa_builder.testing.mediawiki_server import MediaWikiServer

SAMPLE = Path(__file__).resolve().parent.parent / "examples" / "wiki-sample"

WIKI = {
    "2023": "== Events ==\n=== May ===\n* [[May 1]] – Something happened.",
    "Portal:Current events/2023 April 30": "news of April 30",
    "Portal:Current events/2023 May 1": "news of May 1",
}


def build(wiki: MediaWikiServer, out, *extra: str) -> int:
    return main([
        "--wiki-api", wiki.api_url, "--stage", "fetch", "--out", str(out),
        "--wiki-interval", "0", "--quiet", *extra,
    ])


def test_fetch_stage_writes_pages_and_manifest(tmp_path, capsys):
    with MediaWikiServer(WIKI) as wiki:
        code = build(wiki, tmp_path, "--cutoff", "2023-04-29", "--until", "2023-05-01",
                     "--contact", "cli@example.org")

    assert code == 0
    assert sorted(p.name for p in (tmp_path / PAGES_DIR).glob("*.wiki")) == [
        "2023.wiki",
        "Portal%3ACurrent_events%2F2023_April_30.wiki",
        "Portal%3ACurrent_events%2F2023_May_1.wiki",
    ]
    manifest = json.loads((tmp_path / MANIFEST).read_text(encoding="utf-8"))
    assert list(manifest["pages"]) == list(WIKI)
    assert "(cli@example.org)" in wiki.requests[0].headers["User-Agent"]
    assert "fetch: 3 pages: 3 fetched" in capsys.readouterr().out


def test_a_second_run_in_the_same_directory_resumes_without_requests(tmp_path, capsys):
    with MediaWikiServer(WIKI) as wiki:
        assert build(wiki, tmp_path, "--cutoff", "2023-04-29", "--until", "2023-05-01") == 0
        requests = len(wiki.requests)
        # the cutoff and window are taken from the run directory's run.json
        assert build(wiki, tmp_path) == 0

    assert len(wiki.requests) == requests
    assert "0 fetched, 3 already present" in capsys.readouterr().out


def test_an_invalid_cutoff_is_a_one_line_error_with_exit_code_2(tmp_path, capsys):
    with MediaWikiServer(WIKI) as wiki:
        code = build(wiki, tmp_path / "run", "--cutoff", "2023-13")

    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("cuqa-build: error: invalid cutoff '2023-13'")
    assert err.count("\n") == 1
    assert not wiki.requests


def test_unknown_sources_are_a_usage_error_before_anything_runs(tmp_path, capsys):
    """A malformed flag: argparse's usage and exit 2 (issue 32, item 4), not a failed stage."""
    with MediaWikiServer(WIKI) as wiki, pytest.raises(SystemExit) as usage:
        build(wiki, tmp_path / "run", "--cutoff", "2023-04-29", "--until", "2023-05-01",
              "--sources", "year,blogs")

    assert usage.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "cuqa-build: error: argument --sources: unknown page kinds in 'year,blogs': choose one "
        "or more of year, portal"
    )
    assert not wiki.requests and not (tmp_path / "run").exists()


def test_events_from_the_api_are_the_events_of_the_same_pages_read_offline(tmp_path, capsys):
    pages = {
        page.meta.title: (page.meta.revid, page.meta.timestamp, page.wikitext)
        for page in iter_snapshot(SAMPLE)
    }
    window = ["--cutoff", "2023-04", "--until", "2023-12-31", "--stage", "events", "--quiet"]
    with MediaWikiServer(pages) as wiki:
        online = main([*window, "--wiki-api", wiki.api_url, "--wiki-interval", "0",
                       "--out", str(tmp_path / "online")])
    offline = main([*window, "--source", str(SAMPLE), "--out", str(tmp_path / "offline")])

    assert online == offline == 0
    # 245 days and the year article, 50 titles per request; only the sample's pages exist
    assert len(wiki.requests) == 5
    summary = capsys.readouterr().out
    assert "fetch: 246 pages: 5 fetched, 0 already present, 241 missing, 0 failed" in summary
    fetched, read = (read_jsonl(tmp_path / run / EVENTS, Event) for run in ("online", "offline"))
    assert len(fetched) == 33
    assert [e.model_dump(exclude={"source": {"url"}}) for e in fetched] == [
        e.model_dump(exclude={"source": {"url"}}) for e in read
    ]
    assert fetched[0].source.url.startswith(wiki.api_url.removesuffix("api.php") + "index.php?")


def test_a_wiki_that_cannot_be_reached_ends_the_fetch_in_seconds_with_one_line(tmp_path):
    """Issue 32: without --source and offline, a new run used to spend 14 minutes failing the
    window's 1,312 pages one warning at a time. Run as a user would (no --quiet, so the
    progress bar and INFO logging are on), against a closed port."""
    with MediaWikiServer(WIKI) as wiki:
        closed = wiki.api_url
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "cuqa_builder.cli.build", "--cutoff", "2023-04",
         "--until", "2025-12-31", "--out", str(tmp_path / "run"), "--wiki-api", closed],
        capture_output=True, timeout=120,  # bytes: text mode would turn each \r into \n
    )
    stderr = done.stderr.decode()
    assert time.monotonic() - started < 20
    assert done.returncode == 1, stderr
    # what a terminal shows: each line as its last carriage return left it
    shown = [line.rsplit("\r", 1)[-1].strip() for line in stderr.split("\n")]
    assert [line for line in shown if line] == [
        f"cuqa-build: error: fetch failed: the wiki cannot be reached at {closed}: gave up after "
        "3 attempts: connection failed (Connection refused); no page was fetched: check the "
        "network and --wiki-api, or build from pages on disk with --source DIR (a snapshot "
        "directory)"
    ]
