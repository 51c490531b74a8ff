"""Passages of encyclopedia pages for the known hop: any snapshot folder (`NAME.wiki` +
`NAME.json`, SPEC 2.1), such as the entity articles as of the cutoff that a build stores.

A page's wikitext is rendered to plain text line by line (templates, references, categories and
headings dropped), its paragraphs are packed in order into passages of at most `words` words
(a long paragraph is cut at word boundaries), and each passage keeps the page title, so a reader
sees "Title: text". Year articles and Current events pages are skipped: their events are indexed
one passage each from events.jsonl.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from cuqa_builder.records.pages import Page
from cuqa_builder.retrieval.types import Passage
from cuqa_builder.snapshot import SnapshotError, iter_snapshot, page_kind
from cuqa_builder.wiki.render import plain_text
from cuqa_builder.wiki.wikitext import is_heading, iter_lines, parse_wikitext

PASSAGE_WORDS = 100  # the usual size of Wikipedia passages for retrieval (DPR)


def paragraphs(wikitext: str) -> list[str]:
    """The page's prose and list items as plain text, one string per paragraph."""
    found: list[str] = []
    current: list[str] = []
    for line in iter_lines(parse_wikitext(wikitext).nodes):
        text = "" if is_heading(line.nodes) else plain_text(line.nodes)
        if text:
            current.append(text)
        elif current:
            found.append(" ".join(current))
            current = []
    if current:
        found.append(" ".join(current))
    return found


def pack(texts: Iterable[str], words: int) -> list[str]:
    """Consecutive paragraphs joined into chunks of at most `words` words."""
    chunks: list[list[str]] = [[]]
    for text in texts:
        tokens = text.split()
        if chunks[-1] and len(chunks[-1]) + len(tokens) > words:
            chunks.append([])
        for start in range(0, len(tokens), words):
            piece = tokens[start:start + words]
            if chunks[-1] and len(chunks[-1]) + len(piece) > words:
                chunks.append([])
            chunks[-1].extend(piece)
    return [" ".join(chunk) for chunk in chunks if chunk]


def page_passages(page: Page, words: int = PASSAGE_WORDS) -> list[Passage]:
    title = page.meta.title
    return [
        Passage(id=f"page:{title}#{n}", title=title, text=text)
        for n, text in enumerate(pack(paragraphs(page.wikitext), words), start=1)
    ]


@dataclass
class PageCorpus:
    """What a folder of pages gave: its passages, and what was left out and why."""

    passages: list[Passage] = field(default_factory=list)
    pages: int = 0
    event_pages: int = 0  # year articles and Current events pages, not indexed here
    unreadable: list[str] = field(default_factory=list)


def read_page_corpus(folders: Iterable[Path], words: int = PASSAGE_WORDS) -> PageCorpus:
    corpus = PageCorpus()
    for page in _pages(folders, corpus):
        if page_kind(page.meta.title) is not None:
            corpus.event_pages += 1
            continue
        corpus.pages += 1
        corpus.passages.extend(page_passages(page, words))
    return corpus


def _pages(folders: Iterable[Path], corpus: PageCorpus) -> Iterator[Page]:
    for folder in folders:
        for page in iter_snapshot(folder):
            if isinstance(page, SnapshotError):
                corpus.unreadable.append(str(page))
            else:
                yield page
