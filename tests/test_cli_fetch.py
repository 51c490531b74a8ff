"""`cuqa-build --stage fetch` end to end against the local api.php stand-in."""

from __future__ import annotations

import json

from cuqa_builder.cli.build import main
from cuqa_builder.run import MANIFEST, PAGES_DIR
from tests.fakes.mediawiki_server import MediaWikiServer

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


def test_unknown_sources_fail_the_stage_with_one_clear_line(tmp_path, capsys):
    with MediaWikiServer(WIKI) as wiki:
        code = build(wiki, tmp_path, "--cutoff", "2023-04-29", "--until", "2023-05-01",
                     "--sources", "year,blogs")

    assert code == 1
    assert capsys.readouterr().err == (
        "cuqa-build: fetch failed: invalid --sources 'year,blogs': choose one or more of "
        "year, portal\n"
    )
    assert not wiki.requests
