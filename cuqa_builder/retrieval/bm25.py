"""BM25 over the scraped events: one passage per event (date, topics, text), built with `bm25s`.

An index directory holds the `bm25s` arrays, `passages.jsonl` (the passages in index order) and
`corpus.json` (the corpus hash and size), so an index can be checked against the events it was
built from and rebuilt only when they changed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from pathlib import Path

import bm25s
import numpy as np
from bm25s.tokenization import Tokenizer

from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import atomic_write_json, iter_jsonl, read_jsonl, write_jsonl
from cuqa_builder.records import Event
from cuqa_builder.retrieval.types import Passage

PASSAGES = "passages.jsonl"
CORPUS_INFO = "corpus.json"
ARRAYS_DIR = "bm25"
STOPWORDS = "en"
# Below this k, k argmax passes over the score array beat a full argpartition by ~20x.
_ARGMAX_TOP_K = 16


class CorpusError(CuqaError, RuntimeError):
    """An index directory that is missing or does not match its corpus."""


def event_passage(event: Event) -> Passage:
    """What the reader sees: the date (or range), the topics above the event, then its text."""
    when = event.date.isoformat()
    if event.end_date:
        when += f" to {event.end_date.isoformat()}"
    context = f" ({'; '.join(event.topics)})" if event.topics else ""
    return Passage(id=event.id, title=event.source.title, text=f"{when}{context}: {event.text}")


def corpus_hash(passages: Sequence[Passage]) -> str:
    digest = hashlib.sha256()
    for passage in passages:
        digest.update(passage.model_dump_json(exclude={"score"}).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def tokenize_queries(queries: Sequence[str]) -> list[list[str]]:
    return bm25s.tokenize(
        list(queries), stopwords=STOPWORDS, return_ids=False, show_progress=False
    )


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; only documents that scored above zero."""
    k = min(k, int(np.count_nonzero(scores)))
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if k <= _ARGMAX_TOP_K:
        work = scores.copy()
        best = np.empty(k, dtype=np.int64)
        for rank in range(k):
            best[rank] = int(work.argmax())
            work[best[rank]] = -np.inf
        return best
    part = np.argpartition(-scores, k - 1)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


class BM25Retriever:
    """`search(query, k)` over a fixed list of passages; thread-safe for concurrent searches."""

    name = "bm25"

    def __init__(self, model: bm25s.BM25, passages: list[Passage], corpus_sha256: str) -> None:
        self.model = model
        self.passages = passages
        self.corpus_sha256 = corpus_sha256

    # --- building ----------------------------------------------------------------------

    @classmethod
    def build(cls, passages: Iterable[Passage]) -> BM25Retriever:
        passages = list(passages)
        if not passages:
            raise CorpusError("cannot index an empty corpus (no events)")
        tokenizer = Tokenizer(stopwords=STOPWORDS)
        tokens = tokenizer.tokenize(
            [p.text for p in passages], return_as="tuple", show_progress=False
        )
        model = bm25s.BM25()
        model.index(tokens, show_progress=False)
        return cls(model, passages, corpus_hash(passages))

    @classmethod
    def from_events(cls, events_path: Path) -> BM25Retriever:
        return cls.build(event_passage(e) for e in iter_jsonl(events_path, Event))

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save(str(directory / ARRAYS_DIR), show_progress=False)
        write_jsonl(directory / PASSAGES, self.passages)
        # Written last: its presence marks a complete index.
        atomic_write_json(
            directory / CORPUS_INFO,
            {"corpus_sha256": self.corpus_sha256, "passages": len(self.passages)},
        )

    @classmethod
    def load(cls, directory: Path) -> BM25Retriever:
        info_path = directory / CORPUS_INFO
        if not info_path.is_file():
            raise CorpusError(f"{directory} is not a BM25 index (no {CORPUS_INFO})")
        info = json.loads(info_path.read_text(encoding="utf-8"))
        passages = read_jsonl(directory / PASSAGES, Passage)
        if corpus_hash(passages) != info["corpus_sha256"]:
            raise CorpusError(f"{directory}: {PASSAGES} does not match {CORPUS_INFO}")
        model = bm25s.BM25.load(str(directory / ARRAYS_DIR), show_progress=False)
        return cls(model, passages, info["corpus_sha256"])

    # --- searching ---------------------------------------------------------------------

    def search(self, query: str, k: int) -> list[Passage]:
        return self._hits(tokenize_queries([query])[0], k)

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """Batch search (tokenises all queries at once), for benchmarks and sweeps."""
        return [self._hits(tokens, k) for tokens in tokenize_queries(queries)]

    def _hits(self, tokens: list[str], k: int) -> list[Passage]:
        ids = self.model.get_tokens_ids(tokens)
        if not ids:
            return []
        scores = self.model.get_scores_from_ids(ids)
        return [
            self.passages[i].model_copy(update={"score": float(scores[i])})
            for i in top_k_indices(scores, k)
        ]


def open_corpus(path: Path, cache_dir: Path | None = None) -> BM25Retriever:
    """An index directory is loaded; an events.jsonl is indexed, reusing `cache_dir` when it
    already holds the index of exactly these events (and saving the index there otherwise)."""
    if path.is_dir():
        return BM25Retriever.load(path)
    if not path.is_file():
        raise CorpusError(f"no corpus at {path} (expected an index directory or events.jsonl)")
    passages = [event_passage(e) for e in iter_jsonl(path, Event)]
    if cache_dir is not None and _indexed_hash(cache_dir) == corpus_hash(passages):
        return BM25Retriever.load(cache_dir)
    retriever = BM25Retriever.build(passages)
    if cache_dir is not None:
        retriever.save(cache_dir)
    return retriever


def _indexed_hash(directory: Path) -> str | None:
    try:
        return json.loads((directory / CORPUS_INFO).read_text(encoding="utf-8"))["corpus_sha256"]
    except (OSError, ValueError, KeyError):
        return None
