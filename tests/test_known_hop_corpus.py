"""Documents for both hops: `cuqa-eval index --pages` splits encyclopedia pages (any folder in the
snapshot format, e.g. entity articles as of the cutoff) into passages beside the events, and
`--exclude-source-event` keeps each question's own event out of its searches."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.evaluate import main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.retrieval.bm25 import BM25Retriever
from cuqa_builder.retrieval.pages import pack, page_passages, paragraphs
from cuqa_builder.snapshot import write_page
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from tests.test_eval_cli import SOURCE, cuqa_item, read_lines

# Our own made-up articles, in real wikitext.
BRINDLE = """{{Short description|Town in the north}}
{{Infobox settlement|name=Brindle|population=5,000}}
'''Brindle''' is a harbour town on the [[Vela Sea]].<ref>{{cite web|url=https://example.org/b|title=B}}</ref>
It is the seat of the [[Osk District]].

== History ==
Brindle was founded in 1820 by fishers from [[Port Vela]].
* A bridge over the Osk river opened in 1901.
* The town hall burned down in 1954.

[[Category:Towns]]
"""
ADA_QUILL = """'''Ada Quill''' (born 1990) is a chess player from [[Brindle]].

== Career ==
Quill learned chess at the Brindle harbour club and became a grandmaster in 2012.
"""


def article(title: str, text: str) -> Page:
    meta = PageMeta(title=title, revid=100, timestamp="2023-04-30T12:00:00Z", kind="article")
    return Page(meta=meta, wikitext=text)


@pytest.fixture
def pages(tmp_path: Path) -> Path:
    folder = tmp_path / "articles"
    folder.mkdir()
    write_page(folder, article("Brindle", BRINDLE))
    write_page(folder, article("Ada Quill", ADA_QUILL))
    year = Page(meta=PageMeta(title="2023", revid=1, timestamp="2023-12-31T00:00:00Z"),
                wikitext="== Events ==\n=== May ===\n* [[May 9]] – A vote is held.")
    write_page(folder, year)
    (folder / "Broken.wiki").write_text("text without a sidecar")
    return folder


def test_a_page_is_plain_prose_in_passages_of_bounded_size() -> None:
    assert paragraphs(BRINDLE) == [
        "Brindle is a harbour town on the Vela Sea. It is the seat of the Osk District.",
        "Brindle was founded in 1820 by fishers from Port Vela. A bridge over the Osk river "
        "opened in 1901. The town hall burned down in 1954.",
    ]
    [one] = page_passages(article("Brindle", BRINDLE))
    assert (one.id, one.title) == ("page:Brindle#1", "Brindle")
    assert one.text.startswith("Brindle is a harbour town") and "Category" not in one.text
    # Paragraphs are packed in order; a long one is cut at word boundaries.
    assert pack(["a b c", "d e", "f g h i j k l"], 4) == ["a b c", "d e", "f g h i", "j k l"]
    assert [len(p.text.split()) for p in page_passages(article("Brindle", BRINDLE), 20)] == [
        17, 20, 6]


def test_index_events_and_pages_into_one_corpus(tmp_path: Path, pages: Path, capsys) -> None:
    events = tmp_path / "events.jsonl"
    write_jsonl(events, [Event(id="ev-1", date=date(2031, 5, 9), source=SOURCE,
                               text="Ada Quill wins the 2031 Lunar Chess Open.")])
    assert main(["index", "--events", str(events), "--pages", str(pages),
                 "--out", str(tmp_path / "index")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("indexed 1 events and 2 passages of 2 pages in ")
    assert "1 year/Current events pages skipped" in out
    assert "unreadable: Broken.wiki: no sidecar Broken.json" in out
    index = BM25Retriever.load(tmp_path / "index")
    # The unknown hop finds the event, the known hop the article.
    assert index.search("Who won the 2031 Lunar Chess Open?", 1)[0].id == "ev-1"
    assert index.search("When was the town of Brindle founded?", 1)[0].id == "page:Brindle#1"
    assert index.search("Where did Ada Quill learn chess?", 1)[0].id.startswith("page:Ada Quill")


def test_index_needs_something_to_index(tmp_path: Path, capsys) -> None:
    assert main(["index", "--out", str(tmp_path / "index")]) == 2
    assert "index needs --events FILE, --pages DIR, or both" in capsys.readouterr().err


def reader(body: dict[str, Any]) -> Reply:
    """Reads honestly: names the winner only when a passage says who won."""
    prompt = last_user_message(body)
    return Reply("Ada Quill" if "wins the 2031 Lunar Chess Open" in prompt else "unknown")


@pytest.mark.parametrize(("exclude", "cover_em"), [(False, 1.0), (True, 0.0)])
def test_exclude_source_event(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              exclude: bool, cover_em: float) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-known-hop-0000")
    item = cuqa_item("c1", "Who won the 2031 Lunar Chess Open?", "Ada Quill", [], "AAB", "easy",
                     [])
    item.event.id = "ev-1"  # made from this event
    write_jsonl(tmp_path / "cuqa.jsonl", [item])
    write_jsonl(tmp_path / "events.jsonl", [
        Event(id="ev-1", date=date(2031, 5, 9), source=SOURCE,
              text="Ada Quill wins the 2031 Lunar Chess Open."),
        Event(id="ev-2", date=date(2031, 5, 10), source=SOURCE,
              text="The 2031 Lunar Chess Open closes with a ceremony."),
    ])
    flags = ["--exclude-source-event"] if exclude else []
    with ScriptedLLM(reader) as llm:
        assert main(["--data", str(tmp_path / "cuqa.jsonl"), "--method", "rr", "--top-k", "2",
                     "--corpus", str(tmp_path / "events.jsonl"), *flags, "--model", "m",
                     "--base-url", llm.base_url, "--out", str(tmp_path / "out"), "-q"]) == 0
        assert llm.calls == 1
    [p] = read_lines(tmp_path / "out" / "predictions.jsonl")
    found = [passage["id"] for passage in p["trace"][0]["data"]["passages"]]
    assert sorted(found) == (["ev-2"] if exclude else ["ev-1", "ev-2"])
    assert (p["cover_em"], p["retrieval_calls"]) == (cover_em, 1)
    run = json.loads((tmp_path / "out" / "metrics.json").read_text())["run"]
    assert run["retriever"]["exclude_source_event"] is exclude


def test_exclusion_is_refused_for_live_search(tmp_path: Path, capsys) -> None:
    write_jsonl(tmp_path / "cuqa.jsonl", [cuqa_item("c1", "Q?", "A", [], "AAB", "easy", [])])
    assert main(["--data", str(tmp_path / "cuqa.jsonl"), "--method", "rr", "--retriever",
                 "wiki", "--exclude-source-event", "--model", "m", "--base-url",
                 "http://127.0.0.1:9/v1", "--out", str(tmp_path / "out"), "-q"]) == 2
    assert "--exclude-source-event needs a --corpus" in capsys.readouterr().err
