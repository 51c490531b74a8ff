"""BM25 over events: passages, ranking, save/load, corpus hash, on-the-fly indexing."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import numpy as np
import pytest

from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.retrieval.bm25 import (
    ARRAYS_DIR,
    CORPUS_INFO,
    PASSAGES,
    BM25Retriever,
    CorpusError,
    arrays_hash,
    event_passage,
    open_corpus,
    top_k_indices,
)

SOURCE = EventSource(title="2023", revid=11, url="https://en.wikipedia.org/wiki/2023")


def event(n: int, text: str, topics: list[str] | None = None, end: date | None = None) -> Event:
    return Event(id=f"ev-{n}", date=date(2023, 9, n), end_date=end, text=text,
                 topics=topics or [], source=SOURCE)


EVENTS = [
    event(1, "A magnitude 6.8 earthquake strikes Morocco, killing nearly 3,000 people.",
          ["2023 Marrakesh–Safi earthquake"]),
    event(2, "The G20 summit is held in New Delhi, India.", ["2023 G20 New Delhi summit"]),
    event(3, "Storm Daniel causes catastrophic flooding in Derna, Libya.", ["Storm Daniel"]),
    event(4, "Coco Gauff wins the US Open women's singles title.", [],
          end=date(2023, 9, 10)),
    event(5, "India's Aditya-L1 probe leaves Earth orbit towards the Sun.", []),
]


@pytest.fixture
def events_file(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    write_jsonl(path, EVENTS)
    return path


def test_passage_is_date_topics_and_text() -> None:
    passage = event_passage(EVENTS[0])
    assert passage.id == "ev-1"
    assert passage.title == "2023"
    assert passage.text == (
        "2023-09-01 (2023 Marrakesh–Safi earthquake): A magnitude 6.8 earthquake strikes "
        "Morocco, killing nearly 3,000 people."
    )
    assert event_passage(EVENTS[3]).text.startswith("2023-09-04 to 2023-09-10: Coco Gauff")


def test_search_ranks_the_matching_event_first(events_file: Path) -> None:
    retriever = BM25Retriever.from_events(events_file)
    hits = retriever.search("Which country was hit by the Marrakesh earthquake?", 3)
    assert hits[0].id == "ev-1"
    assert hits[0].score > 0
    # Only documents sharing a term are returned, best first.
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert retriever.search("Where did flooding hit after Storm Daniel?", 1)[0].id == "ev-3"
    # Topics are searchable: "summit" only occurs in the G20 event's topic and text.
    assert retriever.search("summit", 5)[0].id == "ev-2"


def test_search_without_known_terms_returns_nothing(events_file: Path) -> None:
    retriever = BM25Retriever.from_events(events_file)
    assert retriever.search("the of and", 3) == []  # stopwords only
    assert retriever.search("", 3) == []
    assert retriever.search("xylophone", 3) == []


def test_k_larger_than_the_corpus(events_file: Path) -> None:
    retriever = BM25Retriever.from_events(events_file)
    hits = retriever.search("India", 50)
    assert {h.id for h in hits} == {"ev-2", "ev-5"}


def test_batch_search_matches_single_searches(events_file: Path) -> None:
    retriever = BM25Retriever.from_events(events_file)
    queries = ["earthquake Morocco", "US Open", "Sun probe", "nothing here"]
    assert retriever.search_many(queries, 2) == [retriever.search(q, 2) for q in queries]


def test_save_and_load_give_the_same_results(events_file: Path, tmp_path: Path) -> None:
    built = BM25Retriever.from_events(events_file)
    built.save(tmp_path / "index")
    loaded = BM25Retriever.load(tmp_path / "index")
    assert loaded.corpus_sha256 == built.corpus_sha256
    for query in ("earthquake", "New Delhi summit", "Libya flooding Derna"):
        assert loaded.search(query, 3) == built.search(query, 3)
    info = json.loads((tmp_path / "index" / CORPUS_INFO).read_text())
    assert info == {"corpus_sha256": built.corpus_sha256, "passages": 5,
                    "arrays_sha256": arrays_hash(tmp_path / "index" / "bm25")}


def test_load_detects_edited_passages(events_file: Path, tmp_path: Path) -> None:
    BM25Retriever.from_events(events_file).save(tmp_path / "index")
    passages = tmp_path / "index" / PASSAGES
    passages.write_text(passages.read_text().replace("Morocco", "Portugal"))
    with pytest.raises(CorpusError, match="does not match"):
        BM25Retriever.load(tmp_path / "index")


OTHER_EVENTS = [
    event(11, "Heavy snow closes the passes of the Karst range."),
    event(12, "A ferry line opens between two island towns."),
    event(13, "The Karst observatory records a bright comet."),
    event(14, "Island towns vote to merge their councils."),
    event(15, "A comet festival is held in the Karst valley."),
    event(16, "The ferry line adds a night crossing."),
]


def test_arrays_of_another_corpus_are_refused(events_file: Path, tmp_path: Path) -> None:
    """Issue 15.5: the index data itself is checked, not only passages.jsonl."""
    BM25Retriever.from_events(events_file).save(tmp_path / "index")
    BM25Retriever.build(map(event_passage, OTHER_EVENTS)).save(tmp_path / "other")
    shutil.rmtree(tmp_path / "index" / ARRAYS_DIR)
    shutil.copytree(tmp_path / "other" / ARRAYS_DIR, tmp_path / "index" / ARRAYS_DIR)
    with pytest.raises(CorpusError, match="belong to another corpus"):
        BM25Retriever.load(tmp_path / "index")


def test_an_interrupted_reindex_leaves_the_old_index_whole(
    events_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 15.5: a new index is built aside and swapped in, never mixed into the old one."""
    old = BM25Retriever.from_events(events_file)
    old.save(tmp_path / "index")
    new = BM25Retriever.build(map(event_passage, OTHER_EVENTS))

    def killed_while_writing_passages(*args: object, **kwargs: object) -> int:
        raise KeyboardInterrupt  # the arrays are written, the passages are not

    monkeypatch.setattr("cuqa_builder.retrieval.bm25.write_jsonl",
                        killed_while_writing_passages)
    with pytest.raises(KeyboardInterrupt):
        new.save(tmp_path / "index")
    monkeypatch.undo()
    reloaded = BM25Retriever.load(tmp_path / "index")
    assert reloaded.corpus_sha256 == old.corpus_sha256
    assert reloaded.search("earthquake Morocco", 1)[0].id == "ev-1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events.jsonl", "index"]


def test_load_of_a_directory_that_is_no_index(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="is not a BM25 index"):
        BM25Retriever.load(tmp_path)


def test_empty_corpus_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text("")
    with pytest.raises(CorpusError, match="empty corpus"):
        BM25Retriever.from_events(path)


def test_open_corpus_indexes_events_once(events_file: Path, tmp_path: Path) -> None:
    cache = tmp_path / "out" / "index"
    first = open_corpus(events_file, cache_dir=cache)
    stamp = (cache / CORPUS_INFO).stat().st_mtime_ns
    again = open_corpus(events_file, cache_dir=cache)
    assert (cache / CORPUS_INFO).stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert again.corpus_sha256 == first.corpus_sha256
    # Other events: the cached index no longer matches and is rebuilt.
    write_jsonl(events_file, [*EVENTS, event(6, "A new event about volcanoes in Iceland.")])
    changed = open_corpus(events_file, cache_dir=cache)
    assert changed.corpus_sha256 != first.corpus_sha256
    assert changed.search("Iceland volcanoes", 1)[0].id == "ev-6"
    assert BM25Retriever.load(cache).corpus_sha256 == changed.corpus_sha256
    # An index directory is opened as it is.
    assert open_corpus(cache).corpus_sha256 == changed.corpus_sha256


def test_open_corpus_of_a_missing_path(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no corpus at"):
        open_corpus(tmp_path / "missing.jsonl")


@pytest.mark.parametrize("k", [1, 3, 16, 17, 40])
def test_top_k_matches_a_full_sort(k: int) -> None:
    scores = np.random.default_rng(k).random(500).astype(np.float32)
    scores[::3] = 0.0  # documents without a query term never come back
    expected = [i for i in np.argsort(-scores, kind="stable") if scores[i] > 0][:k]
    assert list(top_k_indices(scores, k)) == expected
