"""BM25 over the scraped events (one passage per event: date, topics, text) and, for the known
hop, over passages of encyclopedia pages (`retrieval/pages.py`), built with `bm25s`.

An index directory holds the `bm25s` arrays, `passages.jsonl` (the passages in index order) and
`corpus.json` (the hash of the passages, the hash of the arrays, the size), so an index is
checked against the corpus it was built from, and its arrays against that corpus, on every load.
A new index is written to a temporary directory and swapped in whole, so an interrupted re-index
leaves the old index or the new one, never a mix.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import bm25s
import numpy as np
from bm25s.tokenization import Tokenizer
from pydantic import BaseModel, ValidationError

from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import atomic_write_text, iter_jsonl, read_jsonl, write_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.retrieval.types import Passage

PASSAGES = "passages.jsonl"
CORPUS_INFO = "corpus.json"
ARRAYS_DIR = "bm25"
STOPWORDS = "en"
# Below this k, k argmax passes over the score array beat a full argpartition by ~20x.
_ARGMAX_TOP_K = 16


class CorpusError(CuqaError, RuntimeError):
    """An index directory that is missing or does not match its corpus."""


class CorpusInfo(BaseModel):
    """`corpus.json`: what the index was built from; written last, it marks a whole index."""

    corpus_sha256: str
    passages: int
    arrays_sha256: str | None = None  # None: written before the arrays were checked


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
        return cls.build(event_passages(events_path))

    def save(self, directory: Path) -> None:
        """Write the index to a temporary directory beside `directory`, then swap it in."""
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}."))
        try:
            self.model.save(str(staging / ARRAYS_DIR), show_progress=False)
            write_jsonl(staging / PASSAGES, self.passages)
            info = CorpusInfo(corpus_sha256=self.corpus_sha256, passages=len(self.passages),
                              arrays_sha256=arrays_hash(staging / ARRAYS_DIR))
            atomic_write_text(staging / CORPUS_INFO, info.model_dump_json(indent=2) + "\n")
            _swap_in(staging, directory)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    @classmethod
    def load(cls, directory: Path) -> BM25Retriever:
        info = _corpus_info(directory)
        if info is None:
            raise CorpusError(f"{directory} is not a BM25 index (no valid {CORPUS_INFO}): "
                              "build it with `cuqa-eval index`")
        passages = read_jsonl(directory / PASSAGES, Passage)
        if corpus_hash(passages) != info.corpus_sha256:
            raise CorpusError(f"{directory}: {PASSAGES} does not match {CORPUS_INFO}: "
                              "index the corpus again")
        arrays = directory / ARRAYS_DIR
        if info.arrays_sha256 is not None and arrays_hash(arrays) != info.arrays_sha256:
            raise CorpusError(f"{directory}: the BM25 arrays in {ARRAYS_DIR}/ belong to another "
                              "corpus (or are damaged): index the corpus again")
        try:
            model = bm25s.BM25.load(str(arrays), show_progress=False)
        except (OSError, ValueError) as exc:
            raise CorpusError(f"{directory}: unreadable BM25 arrays ({exc})") from None
        if model.scores.get("num_docs") != len(passages):
            raise CorpusError(f"{directory}: the BM25 arrays index {model.scores.get('num_docs')}"
                              f" documents, {PASSAGES} has {len(passages)}: index again")
        return cls(model, passages, info.corpus_sha256)

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


def event_passages(events_path: Path) -> list[Passage]:
    return [event_passage(e) for e in iter_jsonl(events_path, Event)]


def arrays_hash(directory: Path) -> str:
    """sha256 over the files of a `bm25s` array directory (names and bytes, in name order)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0")
        with path.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def _swap_in(staging: Path, directory: Path) -> None:
    """Replace `directory` by `staging`: two renames, so `directory` is the old index or the
    new one whole; between them it is briefly absent (a load says so, and a re-index fixes it)."""
    if directory.exists():
        retired = Path(tempfile.mkdtemp(dir=directory.parent, prefix=f".{directory.name}.old."))
        os.replace(directory, retired / directory.name)
        os.replace(staging, directory)
        shutil.rmtree(retired, ignore_errors=True)
    else:
        os.replace(staging, directory)


def _corpus_info(directory: Path) -> CorpusInfo | None:
    try:
        return CorpusInfo.model_validate_json((directory / CORPUS_INFO).read_bytes())
    except (OSError, ValidationError):
        return None


def open_corpus(path: Path, cache_dir: Path | None = None) -> BM25Retriever:
    """An index directory is loaded; an events.jsonl is indexed, reusing `cache_dir` when it
    already holds the index of exactly these events (and saving the index there otherwise)."""
    if path.is_dir():
        return BM25Retriever.load(path)
    if not path.is_file():
        raise CorpusError(f"no corpus at {path} (expected an index directory or events.jsonl)")
    passages = event_passages(path)
    info = None if cache_dir is None else _corpus_info(cache_dir)
    if cache_dir is not None and info is not None and info.corpus_sha256 == corpus_hash(passages):
        try:
            return BM25Retriever.load(cache_dir)
        except CorpusError:
            pass  # damaged or mixed: built again below
    retriever = BM25Retriever.build(passages)
    if cache_dir is not None:
        retriever.save(cache_dir)
    return retriever
