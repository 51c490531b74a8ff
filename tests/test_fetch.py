"""Which pages a window needs, and the fetch stage writing them as a snapshot + manifest."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from cuqa_builder.run import MANIFEST, RunContext
from cuqa_builder.snapshot import iter_snapshot, page_filename, page_kind, sha256_text
from cuqa_builder.stages import fetch
from cuqa_builder.stages.options import BuildOptions, SourceOptions
from cuqa_builder.testing.mediawiki_server import Fault, MediaWikiServer
from cuqa_builder.wiki.titles import parse_sources, portal_title, window_titles
from cuqa_builder.window import Window

# 2023-04-28 .. 2023-05-02: the days after the cutoff are April 29 and 30, May 1 and 2.
CUTOFF, UNTIL = "2023-04-28", "2023-05-02"
PORTAL_TITLES = [
    "Portal:Current events/2023 April 29",
    "Portal:Current events/2023 April 30",
    "Portal:Current events/2023 May 1",
    "Portal:Current events/2023 May 2",
]
WIKI = {
    "2023": (7001, "2023-05-03T10:00:00Z", "== Events ==\n=== May ===\n* [[May 1]] – A thing."),
    **{title: f"news of {title[22:]}" for title in PORTAL_TITLES},
}


def make_context(out: Path, api_url: str, **source: object) -> RunContext:
    options = BuildOptions(
        source=SourceOptions(wiki_api=api_url, wiki_interval=0.0, **source), quiet=True
    )
    return RunContext(out=out, window=Window.parse(CUTOFF, UNTIL), options=options)


def manifest_of(out: Path) -> dict:
    return json.loads((out / MANIFEST).read_text(encoding="utf-8"))


# --- titles ---------------------------------------------------------------------------------


def test_titles_cover_every_day_after_the_cutoff_and_every_year_touched():
    assert window_titles(Window.parse(CUTOFF, UNTIL)) == ["2023", *PORTAL_TITLES]
    across_new_year = window_titles(Window.parse("2023-12-30", "2024-01-01"))
    assert across_new_year == [
        "2023", "2024",
        "Portal:Current events/2023 December 31", "Portal:Current events/2024 January 1",
    ]
    by_month = window_titles(Window.parse("2023-04", "2023-05-03"), "portal")
    assert by_month == [f"Portal:Current events/2023 May {day}" for day in (1, 2, 3)]


def test_titles_match_the_page_kinds_the_parsers_recognise():
    titles = window_titles(Window.parse("2023-01-31", "2023-03-01"))
    kinds = [page_kind(title) for title in titles]
    assert kinds == ["year"] + ["portal"] * 29
    assert portal_title(Window.parse("2024-02-28", "2024-03-01").until) == (
        "Portal:Current events/2024 March 1"
    )


def test_sources_select_page_kinds_and_reject_unknown_ones():
    assert window_titles(Window.parse(CUTOFF, UNTIL), "year") == ["2023"]
    assert parse_sources(" portal , year,portal") == ("portal", "year")
    for bad in ("", "years", "year,news"):
        with pytest.raises(ValueError, match="unknown page kinds in "):
            parse_sources(bad)


# --- the stage ------------------------------------------------------------------------------


def test_fetch_writes_a_snapshot_and_a_manifest(tmp_path):
    with MediaWikiServer(WIKI) as wiki:
        summary = fetch.run(make_context(tmp_path, wiki.api_url, contact="me@example.org"))

    assert summary.startswith("fetch: 5 pages: 5 fetched, 0 already present, 0 missing, 0 failed")
    assert "1 API requests" in summary
    assert "(me@example.org)" in wiki.requests[0].headers["User-Agent"]
    pages = {page.meta.title: page for page in iter_snapshot(tmp_path / "pages")}
    assert set(pages) == set(WIKI)
    year = pages["2023"]
    assert (year.meta.revid, year.meta.timestamp) == (7001, "2023-05-03T10:00:00Z")
    assert year.meta.sha256 == sha256_text(WIKI["2023"][2])
    assert (tmp_path / "pages" / "Portal%3ACurrent_events%2F2023_May_1.wiki").exists()

    manifest = manifest_of(tmp_path)
    assert manifest["api"] == wiki.api_url
    assert manifest["fetched"].endswith("+00:00")
    assert manifest["pages"] == {"2023": 7001, **{t: pages[t].meta.revid for t in PORTAL_TITLES}}
    assert list(manifest["pages"]) == ["2023", *PORTAL_TITLES]


def test_a_year_of_current_events_takes_at_most_ten_requests(tmp_path):
    window = Window.parse("2022-12", "2023-12")
    pages = dict.fromkeys(window_titles(window), "{{Current events|content=\n* News.\n}}")
    with MediaWikiServer(pages) as wiki:
        context = make_context(tmp_path, wiki.api_url)
        summary = fetch.run(RunContext(out=tmp_path, window=window, options=context.options))

    assert len(pages) == 366  # 365 days and the year article
    assert "366 fetched" in summary
    assert len(wiki.requests) <= 10
    assert all(len(request.titles) <= 50 for request in wiki.requests)


def test_missing_pages_are_warned_about_and_counted(tmp_path, caplog):
    present = {title: spec for title, spec in WIKI.items() if not title.endswith("May 2")}
    with MediaWikiServer(present) as wiki, caplog.at_level(logging.WARNING):
        summary = fetch.run(make_context(tmp_path, wiki.api_url))

    assert "4 fetched, 0 already present, 1 missing, 0 failed" in summary
    assert "Portal:Current events/2023 May 2: missing (page does not exist)" in caplog.text
    assert "Portal:Current events/2023 May 2" not in manifest_of(tmp_path)["pages"]


def test_failures_are_warned_about_and_the_run_goes_on(tmp_path, caplog):
    with MediaWikiServer(WIKI) as wiki, caplog.at_level(logging.WARNING):
        # Retry-After: 0 keeps the test fast; 6 failures exhaust the default 5 retries.
        wiki.fail_next(*[Fault.too_many_requests(retry_after=0)] * 6)
        summary = fetch.run(make_context(tmp_path, wiki.api_url))

    assert "0 fetched, 0 already present, 0 missing, 5 failed; 6 API requests" in summary
    assert "2023: failed (gave up after 6 attempts: HTTP 429)" in caplog.text
    assert manifest_of(tmp_path)["pages"] == {}


def test_resume_fetches_only_what_is_not_on_disk(tmp_path):
    with MediaWikiServer(WIKI) as wiki:
        fetch.run(make_context(tmp_path, wiki.api_url))
        requests_after_first_run = len(wiki.requests)
        again = fetch.run(make_context(tmp_path, wiki.api_url))
        assert len(wiki.requests) == requests_after_first_run
        assert "0 fetched, 5 already present" in again and "0 API requests" in again

        # a page killed between its two files (no sidecar) is fetched again, alone
        (tmp_path / "pages" / f"{page_filename(PORTAL_TITLES[1])}.json").unlink()
        third = fetch.run(make_context(tmp_path, wiki.api_url))

    assert "1 fetched, 4 already present" in third
    assert wiki.requests[-1].titles == [PORTAL_TITLES[1]]
    assert len(manifest_of(tmp_path)["pages"]) == 5


def test_revisions_manifest_refetches_the_same_revisions(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    with MediaWikiServer(WIKI) as wiki:
        fetch.run(make_context(first, wiki.api_url))
        wiki.edit("2023", "rewritten since")
        summary = fetch.run(
            # the manifest decides which pages, whatever --sources says
            make_context(second, wiki.api_url, revisions=first / MANIFEST, sources="portal")
        )

    assert "5 fetched" in summary
    assert "revids" in wiki.requests[-1].params
    assert manifest_of(second)["pages"] == manifest_of(first)["pages"]
    year = (second / "pages" / "2023.wiki").read_text(encoding="utf-8")
    assert year == WIKI["2023"][2]


def test_revisions_mode_refetches_a_stored_page_of_another_revision(tmp_path):
    with MediaWikiServer(WIKI) as wiki:
        fetch.run(make_context(tmp_path, wiki.api_url))
        old_manifest = tmp_path / "old-manifest.json"
        old_manifest.write_text((tmp_path / MANIFEST).read_text(encoding="utf-8"))
        wiki.edit("2023", "rewritten since")
        (tmp_path / "pages" / "2023.wiki").unlink()
        fetch.run(make_context(tmp_path, wiki.api_url))  # stores the new revision of 2023
        summary = fetch.run(make_context(tmp_path, wiki.api_url, revisions=old_manifest))

    assert "1 fetched, 4 already present" in summary
    assert (tmp_path / "pages" / "2023.wiki").read_text(encoding="utf-8") == WIKI["2023"][2]
    assert manifest_of(tmp_path)["pages"]["2023"] == 7001


def test_fetch_refuses_to_go_online_when_a_snapshot_is_given(tmp_path):
    with MediaWikiServer(WIKI) as wiki:
        context = make_context(tmp_path, wiki.api_url, source=tmp_path / "snapshot")
        with pytest.raises(ValueError, match="with --source DIR the pages are already on disk"):
            fetch.run(context)
    assert not wiki.requests


def test_an_unreadable_revisions_manifest_is_a_clear_error(tmp_path):
    bad = tmp_path / "manifest.json"
    bad.write_text('{"pages": {"2023": "not a revid"}}', encoding="utf-8")
    with pytest.raises(ValueError, match="is not a manifest.json"):
        fetch.read_manifest(bad)
    with pytest.raises(ValueError, match="cannot read --revisions"):
        fetch.read_manifest(tmp_path / "nowhere.json")
