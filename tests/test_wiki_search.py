"""The live Wikipedia search retriever against a local api.php that answers list=search and
prop=extracts (formatversion=2), through the real MediaWiki client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlparse

import pytest

from cuqa_builder.cli.evaluate import main as cuqa_eval
from cuqa_builder.evaluation.datasets import EvalItem
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.retrieval.types import RetrievalError
from cuqa_builder.retrieval.wiki_search import WikiSearchRetriever
from cuqa_builder.testing.loopback import LoopbackServer, QuietHandler
from cuqa_builder.testing.openai_server import RuleResponder, ScriptedLLM
from cuqa_builder.wiki.client import MediaWikiClient

INTROS = {
    "AI Safety Summit": "The AI Safety Summit was held at Bletchley Park in November 2023.",
    "Bletchley Park": "Bletchley Park is an English country house in Milton Keynes.",
    "Stub page": "",  # a page without an intro gives no passage
}


class SearchAPI(LoopbackServer):
    """Search ranks titles by how many query words they share with title + intro."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        super().__init__(self._handler())

    @property
    def url(self) -> str:
        return f"{self.origin}/w/api.php"

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
        if "broken" in params.get("srsearch", ""):  # an API error the client does not retry
            return {"error": {"code": "internal_api_error", "info": "search backend down"}}
        if params.get("list") == "search":
            words = set(params["srsearch"].lower().split())
            ranked = sorted(
                (t for t in INTROS if words & set(f"{t} {INTROS[t]}".lower().split())),
                key=lambda t: -len(words & set(f"{t} {INTROS[t]}".lower().split())),
            )
            hits = [{"ns": 0, "title": t} for t in ranked[: int(params["srlimit"])]]
            return {"batchcomplete": True, "query": {"search": hits}}
        pages = [{"pageid": n, "ns": 0, "title": title, "extract": INTROS[title]}
                 for n, title in enumerate(params["titles"].split("|"), start=1)]
        return {"batchcomplete": True, "query": {"pages": pages}}

    def _handler(self) -> type[QuietHandler]:
        api = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                params = dict(parse_qsl(urlparse(self.path).query))
                api.requests.append(params)
                data = json.dumps(api.answer(params)).encode()
                self.send_body(200, data, "application/json", {})

        return Handler


@pytest.fixture
def api() -> Iterator[SearchAPI]:
    with SearchAPI() as server:
        yield server


def retriever(api: SearchAPI) -> WikiSearchRetriever:
    return WikiSearchRetriever(MediaWikiClient(api.url, min_interval_s=0.0, max_retries=0))


def test_search_then_intro_extracts(api: SearchAPI) -> None:
    hits = retriever(api).search("AI Safety Summit held in which country house", 2)
    assert [h.title for h in hits] == ["AI Safety Summit", "Bletchley Park"]
    assert hits[0].id == "wiki:AI Safety Summit"
    assert hits[0].text == INTROS["AI Safety Summit"]
    search, extracts = api.requests
    assert (search["action"], search["list"], search["srlimit"]) == ("query", "search", "2")
    assert search["srnamespace"] == "0"
    assert (extracts["prop"], extracts["exintro"], extracts["explaintext"]) == (
        "extracts", "1", "1")
    assert extracts["titles"] == "AI Safety Summit|Bletchley Park"
    assert search["format"] == "json" and search["formatversion"] == "2"


def test_pages_without_an_intro_are_left_out(api: SearchAPI) -> None:
    hits = retriever(api).search("stub page", 3)
    assert hits == []


def test_no_hits_means_one_request_only(api: SearchAPI) -> None:
    assert retriever(api).search("xylophone", 3) == []
    assert len(api.requests) == 1
    assert retriever(api).search("   ", 3) == []
    assert len(api.requests) == 1


def test_a_failed_search_is_a_retrieval_error(api: SearchAPI) -> None:
    with pytest.raises(RetrievalError, match="Wikipedia search failed: API error "
                       "internal_api_error: search backend down"):
        retriever(api).search("broken summit", 3)


def test_cuqa_eval_skips_a_question_whose_search_failed(
    api: SearchAPI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-wiki-search")
    data = tmp_path / "questions.jsonl"
    write_jsonl(data, [
        EvalItem(id="ok", question="Where was the AI Safety Summit held?",
                 answers=["Bletchley Park"]),
        EvalItem(id="lost", question="Which broken summit was held?", answers=["none"]),
    ])
    out = tmp_path / "rr"
    with ScriptedLLM(RuleResponder([], default="Bletchley Park")) as llm:
        args = ["--data", str(data), "--method", "rr", "--retriever", "wiki", "--wiki-api",
                api.url, "--model", "scripted", "--base-url", llm.base_url, "--out", str(out),
                "-q"]
        assert cuqa_eval(args) == 0
        assert llm.calls == 1  # the lost question never reached the reader
    assert "1 new, 0 resumed, 1 failed (re-run to retry)" in capsys.readouterr().out
    [prediction] = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    assert (prediction["id"], prediction["em"], prediction["retrieval_calls"]) == ("ok", 1.0, 1)
    assert json.loads((out / "metrics.json").read_text())["complete"] is False
