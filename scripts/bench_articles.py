"""Benchmark reading entity articles: `article_text` (lead, sentences, links, infobox, names)
per article and per KB of wikitext, over articles of 10-330 KB.

Issue 25, parse once: real articles are 10-330 KB of wikitext; each is read once per run (the
result is cached), so what matters is the time of one read. By default the articles are made
from the project's own country fixture (`tests/fixtures/articles/Kestrian_Isles.wiki`) grown
with sections in the shapes of real ones (references, list items, tables, conversions, foreign
names) to 10, 20, 40, 80, 160 and 330 KB; `--articles DIR` reads every `NAME.wiki` of a folder
instead (a snapshot's `articles/`, or real articles kept for measuring), and with `--html` the
`NAME.html` beside it (MediaWiki's rendering; for the made-up articles, the test api.php's
simplified rendering). Run from the repository root, or with PYTHONPATH pointing at another
checkout of the package to compare:

    python scripts/bench_articles.py [--articles DIR] [--html] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from bench_common import bench_arguments, judged

from cuqa_builder.grounding.article_text import article_text
from cuqa_builder.records.pages import Page, PageMeta

FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "articles"
SIZES_KB = (10, 20, 40, 80, 160, 330)
TARGET_MS_PER_KB = 2.0  # a 330 KB article in well under a second on a busy 2-core machine
SECTION = """
== Region {i} ==
The [[Region {i} (Kestrian Isles)|{i}th region]] covers {{{{convert|{area}|km2|sqmi}}}} of \
moor and bog.<ref>{{{{cite web |url=https://example.org/region-{i} |title=Region {i} in \
figures}}}}</ref> {{{{As of|2020}}}}, {{{{nowrap|{people} people}}}} lived there, most of them \
in [[Harbour {i}]] ({{{{lang-nl|Haven {i}}}}}).{{{{sfn|Holt|2001|p={i}}}}} Its council meets \
in [[Old Hall {i}]]{{{{mdash}}}}a stone house built for the wool trade.
* [[Harbour {i}]] – the main harbour<ref name="ports{i}">Ports of the isles, p. {i}.</ref>
* [[Moorside {i}]] – a village on the moor<ref name="ports{i}"/>
"""
TABLE = """{{| class="wikitable"
! Year !! People
|-
| 1900 || {old}
|-
| 2000 || {people}
|}}
"""  # one section in four has a table, as in real articles


def made_up_articles(html: bool, sizes: tuple[int, ...] = SIZES_KB
                     ) -> list[tuple[str, str, str | None]]:
    """(title, wikitext, rendered HTML if `html`) of the fixture country grown to each size."""
    if html:  # an older checkout, measured for comparison, has no HTML reader
        from cuqa_builder.testing.mediawiki_render import render_page
    base = (FIXTURE / "Kestrian_Isles.wiki").read_text(encoding="utf-8")
    articles = []
    for size in sizes:
        parts, i = [base], 0
        while sum(len(p.encode()) for p in parts) < size * 1024:
            i += 1
            section = SECTION + (TABLE if i % 4 == 0 else "")
            parts.append(section.format(i=i, area=37 * i, people=1000 * i, old=400 * i))
        wikitext = "".join(parts)
        articles.append((f"Kestrian Isles {size} KB", wikitext,
                         render_page(wikitext) if html else None))
    return articles


def folder_articles(folder: Path, html: bool) -> list[tuple[str, str, str | None]]:
    articles = []
    for path in sorted(folder.glob("*.wiki")):
        rendered = path.with_suffix(".html")
        articles.append((path.stem.replace("_", " "), path.read_text(encoding="utf-8"),
                         rendered.read_text(encoding="utf-8") if html and rendered.exists()
                         else None))
    return articles


def read_ms(title: str, wikitext: str, html: str | None, repeat: int) -> float:
    """Median ms of one `article_text` read (a new title each time: no cache hit)."""
    times = []
    for n in range(repeat):
        extra = {"html": html} if html is not None else {}
        page = Page(meta=PageMeta(title=f"{title} #{n}", revid=1, timestamp="x"),
                    wikitext=wikitext, **extra)
        start = time.perf_counter()
        article_text(page)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--articles", type=Path, help="a folder of NAME.wiki files to read")
    parser.add_argument("--html", action="store_true",
                        help="read MediaWiki's rendering (NAME.html) where there is one")
    parser.add_argument("--repeat", type=int, default=3, help="reads of each article")
    parser.add_argument("--largest-kb", type=int, default=SIZES_KB[-1],
                        help="the made-up articles' largest size")
    args = bench_arguments(parser, repeat=1, largest_kb=SIZES_KB[0])
    html = args.html and "html" in Page.model_fields
    sizes = tuple(kb for kb in SIZES_KB if kb <= args.largest_kb)
    articles = (folder_articles(args.articles, html) if args.articles
                else made_up_articles(html, sizes))
    rows = []
    for title, wikitext, rendered in articles:
        kb = len(wikitext.encode()) / 1024
        ms = read_ms(title, wikitext, rendered, args.repeat)
        rows.append((kb, ms))
        path = "html" if rendered is not None else "wikitext"
        print(f"{kb:7.1f} KB  {ms:8.1f} ms  {ms / kb:6.2f} ms/KB  {path:8}  {title}")
    per_kb = statistics.median(ms / kb for kb, ms in rows)
    largest_kb, largest_ms = max(rows)
    print(f"{len(rows)} articles, {min(kb for kb, _ in rows):.0f}-{largest_kb:.0f} KB: median "
          f"{statistics.median(ms for _, ms in rows):.1f} ms per article, {per_kb:.2f} ms per KB;"
          f" the largest {largest_ms:.0f} ms (target <= {TARGET_MS_PER_KB} ms per KB)")
    return judged(per_kb <= TARGET_MS_PER_KB, args)


if __name__ == "__main__":
    sys.exit(main())
