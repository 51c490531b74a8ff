"""`cuqa-eval index`: events.jsonl and/or folders of pages -> a BM25 index directory."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from cuqa_builder.cli.flags import positive_int
from cuqa_builder.errors import UsageError
from cuqa_builder.retrieval.bm25 import BM25Retriever, event_passages
from cuqa_builder.retrieval.pages import PASSAGE_WORDS, read_page_corpus


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "index", help="build a BM25 index from events.jsonl and/or folders of pages")
    parser.add_argument("--events", type=Path, help="a run's events.jsonl (one passage per event)")
    parser.add_argument("--pages", type=Path, action="append", default=[], metavar="DIR",
                        help="a folder of pages in the snapshot format (NAME.wiki + NAME.json), "
                        "e.g. the entity articles as of the cutoff, split into passages: the "
                        "known hop's documents (repeatable)")
    parser.add_argument("--passage-words", type=positive_int, default=PASSAGE_WORDS,
                        help=f"words per page passage (default: {PASSAGE_WORDS})")
    parser.add_argument("--out", type=Path, required=True, help="index directory")


async def command(args: argparse.Namespace) -> str:
    if args.events is None and not args.pages:
        raise UsageError("index needs --events FILE, --pages DIR, or both")
    started = time.perf_counter()
    events = event_passages(args.events) if args.events is not None else []
    pages = read_page_corpus(args.pages, args.passage_words)
    retriever = BM25Retriever.build([*events, *pages.passages])
    retriever.save(args.out)
    what = f"{len(events)} events" if args.events is not None else ""
    if args.pages:
        what += (" and " if what else "") + (
            f"{len(pages.passages)} passages of {pages.pages} pages")
    notes = [f"{pages.event_pages} year/Current events pages skipped (index their events "
             "with --events)"] if pages.event_pages else []
    notes += [f"unreadable: {why}" for why in pages.unreadable]
    summary = f"indexed {what} in {time.perf_counter() - started:.1f} s -> {args.out}"
    return "\n".join([summary, *(f"  {note}" for note in notes)])
