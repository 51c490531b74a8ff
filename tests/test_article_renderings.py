"""MediaWiki's rendering of an entity article improves on its wikitext and is never a condition
for having the article (issue 31): text a browser shows in place of something else is no article
text; a rendering nested past any real page, wrapped once more, or without a lead still gives the
article; a damaged stored rendering, or a wiki that refuses `action=parse`, leaves the article
read from its wikitext, nothing false recorded, and the ground stage's summary says so with a
count. The stage is run as `cuqa-build` processes against the local api.php and real files."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuqa_builder.grounding.article_text import ArticleText, article_text
from cuqa_builder.grounding.lookups import ArticleLookup
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Entity
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.testing.mediawiki_render import WRAPPER, render_page
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from tests.validation_samples import _intermediates, aab

# Fictional articles in our own words, each as it stood before the cutoff of 2023-04.
WIKITEXT = {
    "Velmora Bridge": "'''Velmora Bridge''' is a stone bridge over the [[River Tamm]] in "
                      "[[Orlingford]]. It opened in 1887.",
    "Kessa Quay": "'''Kessa Quay''' is a harbour wall in [[Orlingford]]. Fishing boats moor "
                  "along it.",
    "Orlin Tower": "'''Orlin Tower''' is a clock tower in [[Orlingford]]. Its bell was cast in "
                   "1902.",
    "Tamsby Ferry": "'''Tamsby Ferry''' is a river crossing on the [[River Tamm]]. It carries "
                    "bicycles.",
    "Marsh Lantern Festival": "The '''Marsh Lantern Festival''' is an autumn fair in "
                              "[[Orlingford]]. Lanterns float down the river.",
}
TITLES = list(WIKITEXT)
REVIDS = {title: 501 + n for n, title in enumerate(TITLES)}
PAGES = {title: (REVIDS[title], "2022-06-01T00:00:00Z", text) for title, text in WIKITEXT.items()}
DEEP = 100_000
ENV = {key: value for key, value in os.environ.items()
       if key not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}


def _text(wikitext: str, html: str, title: str = "Velmora Bridge") -> ArticleText:
    return article_text(Page(meta=PageMeta(title=title, revid=1, timestamp="x"),
                             wikitext=wikitext, html=html))


def _lead(title: str) -> str:
    return f"<p><b>{title}</b> is a place in Orlingford, as its rendering says.</p>"


def cuqa_build(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """A real `cuqa-build` process."""
    return subprocess.run([sys.executable, "-m", "cuqa_builder.cli.build", *map(str, args)],
                          env=ENV, capture_output=True, text=True, timeout=300)


def _run(tmp_path: Path, name: str) -> Path:
    """A run holding one AAB item per article: the ground stage looks up each bridge."""
    run = tmp_path / name
    run.mkdir()
    items = []
    for n, title in enumerate(TITLES):
        bridge = Entity(text=title, label="FAC", wiki_title=title)
        steps = _intermediates("AAB", bridge, None, f"Which place reopened in 2023 ({n})?",
                               f"Which place is in Orlingford ({n})?", title,
                               f"Which place in Orlingford reopened in 2023 ({n})?")
        items.append(aab(id=f"cq-aab{n:016d}", answer=title, intermediates=steps))
    write_jsonl(run / "candidates.jsonl", items)
    return run


def _lookups(run: Path) -> dict[str, ArticleLookup]:
    """The run's lookups as it reads them (a later line of a key stands for it)."""
    return {lookup.key: lookup for lookup in read_jsonl(run / "articles.jsonl", ArticleLookup)}


def _ground(run: Path, *flags: str | Path) -> subprocess.CompletedProcess[str]:
    return cuqa_build("--out", run, "--cutoff", "2023-04", "-q", *flags, "--stage", "ground")


def _online(wiki: MediaWikiServer) -> list[str]:
    return ["--wiki-api", wiki.api_url, "--wiki-interval", "0"]


# --- reading a rendering (item 6) --------------------------------------------------------------


@pytest.mark.parametrize("element", [
    "<iframe src='https://example.org/map'>Your browser cannot show the map of the quay.</iframe>",
    "<object data='quay.swf'>Your browser cannot show the map of the quay.</object>",
    "<noscript><p>Your browser cannot show the map of the quay.</p></noscript>",
    "<script>document.write('Your browser cannot show the map of the quay.')</script>",
    "<style>.quay::after { content: 'Your browser cannot show the map of the quay.' }</style>",
    "<svg><text>Your browser cannot show the map of the quay.</text></svg>",
    "<video src='quay.webm'>Your browser cannot show the map of the quay.</video>",
    "<template><p>Your browser cannot show the map of the quay.</p></template>",
])
def test_what_a_browser_shows_in_place_of_something_else_is_no_article_text(element: str
                                                                              ) -> None:
    html = WRAPPER.format(f"{element}<p><b>Kessa Quay</b> is a harbour wall{element} in "
                          f"<a href='/wiki/Orlingford'>Orlingford</a>.</p>{element}")
    text = _text(WIKITEXT["Kessa Quay"], html, "Kessa Quay")
    assert text.lead == ["Kessa Quay is a harbour wall in Orlingford."]
    assert text.rendering_unread is None and text.names == ["Kessa Quay"]


def test_an_infobox_inside_noscript_is_not_the_articles() -> None:
    hidden = ("<noscript><table class='infobox'><tr><th>Architect</th><td><a href='/wiki/"
              "Nobody'>Nobody</a></td></tr></table></noscript>")
    text = _text("{{Infobox building|architect=[[Ada Venn]]}}\n" + WIKITEXT["Orlin Tower"],
                 WRAPPER.format(hidden + _lead("Orlin Tower")), "Orlin Tower")
    assert text.relations == [] and text.lead


@pytest.mark.parametrize("html", [
    # an extra element around MediaWiki's own wrapper (a proxy, a saved page)
    f"<div class='mw-body-content'>{WRAPPER.format(_lead('Velmora Bridge'))}</div>",
    f"<main><article><div>{WRAPPER.format(_lead('Velmora Bridge'))}</div></article></main>",
    # without MediaWiki's wrapper: what the elements wrapping the page hold
    f"<div><div>{_lead('Velmora Bridge')}<h2>History</h2><p>More.</p></div></div>",
    _lead("Velmora Bridge"),
    # Parsoid's sections
    WRAPPER.format(f"<section data-mw-section-id='0'>{_lead('Velmora Bridge')}</section>"),
])
def test_a_rendering_wrapped_once_more_or_not_at_all_still_reads(html: str) -> None:
    text = _text(WIKITEXT["Velmora Bridge"], html)
    assert text.lead == ["Velmora Bridge is a place in Orlingford, as its rendering says."]
    assert text.rendering_unread is None


def test_a_rendering_nested_past_any_real_page_is_read_from_the_wikitext(caplog) -> None:
    deep = WRAPPER.format("<span>" * DEEP + _lead("Tamsby Ferry") + "</span>" * DEEP)
    start = time.perf_counter()
    with caplog.at_level(logging.WARNING):
        text = _text(WIKITEXT["Tamsby Ferry"], deep, "Tamsby Ferry")
    assert time.perf_counter() - start < 5  # linear: no quadratic walk of 100,000 levels
    assert text.lead == ["Tamsby Ferry is a river crossing on the River Tamm.",
                         "It carries bicycles."]
    assert text.rendering_unread is not None and "Excessive depth" in text.rendering_unread
    assert "article Tamsby Ferry: MediaWiki's rendering is more than the HTML parser reads " \
           "(Excessive depth" in caplog.text
    # deeper than any rendering MediaWiki makes, though the parser reads it all
    nested = WRAPPER.format("<div>" * 200 + _lead("Tamsby Ferry") + "</div>" * 200)
    text = _text(WIKITEXT["Tamsby Ferry"], nested, "Tamsby Ferry")
    assert text.rendering_unread == "nests elements more than 128 deep"
    assert text.lead[0] == "Tamsby Ferry is a river crossing on the River Tamm."


def test_a_rendering_without_a_lead_is_read_from_the_wikitext(caplog) -> None:
    html = WRAPPER.format(f"<table><tr><td>{_lead('Orlin Tower')}</td></tr></table>")
    with caplog.at_level(logging.WARNING):
        text = _text(WIKITEXT["Orlin Tower"], html, "Orlin Tower")
    assert text.lead == ["Orlin Tower is a clock tower in Orlingford.",
                         "Its bell was cast in 1902."]
    assert text.rendering_unread == "gives no lead, its wikitext does"
    assert "article Orlin Tower: MediaWiki's rendering gives no lead, its wikitext does: read " \
           "from its wikitext" in caplog.text
    # when neither has a lead, the rendering is what there is
    assert _text("{{Infobox building}}", html, "Orlin Tower").rendering_unread is None


def test_unsound_renderings_fetched_are_read_from_the_wikitext_and_counted(
    tmp_path: Path,
) -> None:
    """Through the ground stage and validate: the lead of each article is its own, whatever its
    rendering holds; the summary counts the two read from their wikitext, the warnings name
    them, and what MediaWiki gave is kept as it was."""
    html = {
        REVIDS["Velmora Bridge"]: WRAPPER.format("<span>" * DEEP + _lead("Velmora Bridge")
                                                 + "</span>" * DEEP),
        REVIDS["Kessa Quay"]: f"<div class='mw-body-content'>{WRAPPER.format(_lead('Kessa Quay'))}"
                              "</div>",
        REVIDS["Orlin Tower"]: WRAPPER.format("<p><iframe>Your browser cannot show the tower."
                                              "</iframe></p>" + _lead("Orlin Tower")),
        REVIDS["Tamsby Ferry"]: WRAPPER.format(f"<table><tr><td>{_lead('Tamsby Ferry')}</td>"
                                               "</tr></table>"),
    }
    run = _run(tmp_path, "run")
    with MediaWikiServer(PAGES, html=html) as wiki:
        done = _ground(run, *_online(wiki))
        assert done.returncode == 0, done.stderr
        validated = cuqa_build("--out", run, "--cutoff", "2023-04", "-q", *_online(wiki),
                               "--stage", "validate")
    assert validated.returncode == 0, validated.stderr
    assert "  bridges: 5 looked up (5 found), 0 already known, 0 failed (run again to retry); " \
           "10 API requests\n" \
           "  known answers not named by the bridge's article: 0 looked up (none), 0 already " \
           "known, 0 failed (run again to retry); 0 API requests\n" \
           "  2 articles read from wikitext: MediaWiki's rendering could not be read soundly\n" \
           in done.stdout
    warned = [line for line in done.stderr.splitlines() if "read from its wikitext" in line]
    assert len(warned) == 2 and "article Velmora Bridge: MediaWiki's rendering is more than " \
        "the HTML parser reads" in warned[0] and "article Tamsby Ferry: MediaWiki's rendering " \
        "gives no lead, its wikitext does" in warned[1]
    assert all(lookup.found for lookup in _lookups(run).values())
    for title, rendering in html.items():
        name = next(t for t, revid in REVIDS.items() if revid == title).replace(" ", "_")
        assert (run / "pages/articles" / f"{name}.html").read_text(encoding="utf-8") == rendering
    evidence = {item.answer: item.grounding[0].evidence[0].sentences
                for item in read_jsonl(run / "candidates.jsonl", Candidate)}
    assert evidence == {
        "Velmora Bridge": ["Velmora Bridge is a stone bridge over the River Tamm in Orlingford."],
        "Kessa Quay": ["Kessa Quay is a place in Orlingford, as its rendering says."],
        "Orlin Tower": ["Orlin Tower is a place in Orlingford, as its rendering says."],
        "Tamsby Ferry": ["Tamsby Ferry is a river crossing on the River Tamm."],
        "Marsh Lantern Festival": ["The Marsh Lantern Festival is an autumn fair in Orlingford."],
    }


# --- a damaged stored rendering (item 10) ------------------------------------------------------


def test_a_damaged_stored_rendering_leaves_the_article_and_a_restored_one_is_read(
    tmp_path: Path,
) -> None:
    """A snapshot (a fetched run's pages/) whose renderings were edited, replaced by another
    revision's, removed or written in another encoding: each article is read from its wikitext,
    found, and counted once; once the renderings are back they are read again, and a finding of
    no article that an older run recorded for one of them does not stick."""
    fetched = _run(tmp_path, "fetched")
    with MediaWikiServer(PAGES) as wiki:
        assert _ground(fetched, *_online(wiki)).returncode == 0
    articles = fetched / "pages/articles"
    kept = {path.name: path.read_bytes() for path in articles.glob("*.html")}
    assert len(kept) == 5
    (articles / "Velmora_Bridge.html").write_text(render_page(WIKITEXT["Velmora Bridge"])
                                                  .replace("1887", "1888"), encoding="utf-8")
    (articles / "Kessa_Quay.html").write_text(
        render_page(WIKITEXT["Kessa Quay"] + " A newer revision says more."), encoding="utf-8")
    (articles / "Orlin_Tower.html").unlink()
    (articles / "Tamsby_Ferry.html").write_bytes(
        render_page(WIKITEXT["Tamsby Ferry"]).encode("utf-16"))
    snapshot = list((fetched / "pages").rglob("*"))

    run = _run(tmp_path, "run")
    # what an older run recorded when a damaged rendering made the article unreadable
    stale = ArticleLookup(key="Velmora Bridge", by="wiki_title", status="missing",
                          title="Velmora Bridge", reason="'Velmora Bridge': no article in the "
                          "snapshot's folder (none at the cutoff, or not collected)")
    write_jsonl(run / "articles.jsonl", [stale])
    damaged = _ground(run, "--source", fetched / "pages")
    assert damaged.returncode == 0, damaged.stderr
    assert "  bridges: 5 looked up (5 found), 0 already known, 0 failed (run again to retry); " \
           "0 API requests\n" in damaged.stdout
    assert "\n  4 articles read from wikitext: the rendering stored beside the wikitext " \
           "(NAME.html) is missing, changed or not UTF-8\n" in damaged.stdout
    assert all(lookup.found for lookup in _lookups(run).values())
    for why in ("article Velmora Bridge: Velmora_Bridge.html: sha256 does not match its sidecar",
                "article Kessa Quay: Kessa_Quay.html: sha256 does not match its sidecar",
                "article Orlin Tower: Orlin_Tower.html is missing (its sidecar gives its sha256)",
                "article Tamsby Ferry: Tamsby_Ferry.html: not UTF-8 text (byte 0)"):
        assert f"{why}: read from its wikitext" in damaged.stderr
    assert list((fetched / "pages").rglob("*")) == snapshot  # nothing written there

    for name, data in kept.items():
        (articles / name).write_bytes(data)
    restored = _ground(run, "--source", fetched / "pages")
    assert restored.returncode == 0, restored.stderr
    assert "bridges: 0 looked up (none), 5 already known" in restored.stdout
    assert "read from wikitext" not in restored.stdout + restored.stderr
    assert len((run / "articles.jsonl").read_text().splitlines()) == 6  # nothing asked twice


def test_a_fetched_run_fetches_a_damaged_rendering_again(tmp_path: Path) -> None:
    run = _run(tmp_path, "run")
    with MediaWikiServer(PAGES) as wiki:
        assert _ground(run, *_online(wiki)).returncode == 0
        rendering = run / "pages/articles/Kessa_Quay.html"
        kept = rendering.read_text(encoding="utf-8")
        rendering.unlink()
        again = _ground(run, *_online(wiki))
        asked = [r.params.get("titles") or r.params["oldid"] for r in wiki.requests[10:]]
    assert again.returncode == 0, again.stderr
    assert "article Kessa Quay: Kessa_Quay.html is missing (its sidecar gives its sha256): " \
           "fetching it again" in again.stderr
    assert asked == ["Kessa Quay", str(REVIDS["Kessa Quay"])]
    assert "bridges: 1 looked up (1 found), 4 already known" in again.stdout
    assert "read from wikitext" not in again.stdout
    assert rendering.read_text(encoding="utf-8") == kept


# --- a wiki that refuses action=parse (item 11) -------------------------------------------------


def test_a_wiki_that_refuses_to_render_leaves_every_article_its_wikitext(tmp_path: Path) -> None:
    run = _run(tmp_path, "run")
    with MediaWikiServer(PAGES, parse_refused="moduledisabled") as wiki:
        done = _ground(run, *_online(wiki))
        refused = len(wiki.requests_for_html())
        validated = cuqa_build("--out", run, "--cutoff", "2023-04", "-q", *_online(wiki),
                               "--stage", "validate")
    assert done.returncode == 0, done.stderr
    assert refused == 5  # one request each: the cost --estimate counts
    assert "  bridges: 5 looked up (5 found), 0 already known, 0 failed (run again to retry); " \
           "10 API requests\n" in done.stdout
    assert "\n  5 articles read from wikitext: the wiki refused action=parse (error code " \
           "moduledisabled)\n" in done.stdout
    # one warning for the reason, not one per article
    assert done.stderr.count("module has been disabled") == 1, done.stderr
    assert all(lookup.found for lookup in _lookups(run).values())
    articles = run / "pages/articles"
    assert sorted(path.name for path in articles.iterdir()) == sorted(
        f"{title.replace(' ', '_')}{suffix}" for title in TITLES for suffix in (".json", ".wiki"))
    sidecar = json.loads((articles / "Velmora_Bridge.json").read_text())
    assert "html_sha256" not in sidecar and sidecar["revid"] == REVIDS["Velmora Bridge"]
    assert validated.returncode == 0, validated.stderr
    bridges = [item.grounding[0] for item in read_jsonl(run / "candidates.jsonl", Candidate)]
    assert len(bridges) == 5 and all(verdict.passed for verdict in bridges)


def test_the_snapshot_of_a_refusing_wiki_is_read_offline_without_renderings(
    tmp_path: Path,
) -> None:
    fetched = _run(tmp_path, "fetched")
    with MediaWikiServer(PAGES, parse_refused="moduledisabled") as wiki:
        assert _ground(fetched, *_online(wiki)).returncode == 0
    shutil.copytree(fetched / "pages", tmp_path / "snapshot")
    offline = _ground(_run(tmp_path, "run"), "--source", tmp_path / "snapshot")
    assert offline.returncode == 0, offline.stderr
    assert "5 looked up (5 found)" in offline.stdout
    assert "read from wikitext" not in offline.stdout  # stored without one: nothing to say
