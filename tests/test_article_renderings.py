"""MediaWiki's rendering of an entity article improves on its wikitext and is never a condition
for having the article (issue 31): text a browser shows in place of something else is no article
text; a rendering nested past any real page, wrapped once more, or without a lead still gives the
article; a damaged stored rendering, or a wiki that refuses `action=parse`, leaves the article
read from its wikitext, nothing false recorded, and the ground stage's summary says so with a
count. The stage is run as `cuqa-build` processes against the local api.php and real files."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cuqa_builder.grounding.article_text import ArticleText, article_text
from cuqa_builder.grounding.articles import ArticleLookup
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records import Entity, Page, PageMeta
from cuqa_builder.testing.mediawiki_render import WRAPPER
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
