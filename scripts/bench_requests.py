"""Count the MediaWiki API requests the fetch stage makes for a year of Current events pages.

Serves the year article and 365 daily portal pages from the local api.php stand-in (the one the
tests use), runs the real fetch stage into a temporary directory and prints the request count
(target: at most 10 for a year). Run from the repository root:

    python scripts/bench_requests.py [--year 2023] [--max-per-reply N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench_common import bench_arguments

from cuqa_builder.run import RunContext
from cuqa_builder.stages import fetch
from cuqa_builder.stages.options import BuildOptions, SourceOptions
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from cuqa_builder.wiki.titles import window_days, window_titles
from cuqa_builder.window import Window

TARGET = 10
# A day of news is a few kilobytes of wikitext; the size only matters for the bytes moved.
DAY_TEXT = "{{Current events|content=\n;Sports\n* A club won a cup.\n}}\n" * 40


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--year", type=int, default=2023)
    parser.add_argument(
        "--max-per-reply", type=int,
        help="answer at most N pages per reply, like the real API when a reply is too big",
    )
    args = bench_arguments(parser)  # a year of day pages takes the local server a second

    window = Window.parse(f"{args.year - 1}-12", f"{args.year}-12")
    titles = window_titles(window)
    days = sum(1 for _ in window_days(window))
    pages = {title: DAY_TEXT for title in titles}
    with tempfile.TemporaryDirectory() as out, MediaWikiServer(
        pages, max_revisions_per_reply=args.max_per_reply
    ) as wiki:
        options = BuildOptions(
            source=SourceOptions(wiki_api=wiki.api_url, wiki_interval=0.0), quiet=True
        )
        started = time.perf_counter()
        summary = fetch.run(RunContext(out=Path(out), window=window, options=options))
        elapsed = time.perf_counter() - started
        requests = len(wiki.requests)

    print(summary)
    print(
        f"{days} days + {len(titles) - days} year article(s) = {len(titles)} pages: "
        f"{requests} API requests ({requests / days:.3f} per day of window; target <= {TARGET}), "
        f"{elapsed:.2f} s against the local server"
    )
    return 0 if requests <= TARGET else 1  # a count, not a speed: judged in a tiny run too


if __name__ == "__main__":
    sys.exit(main())
