"""The `web` retriever against loopback stand-ins of Serper's Google results API and a SearXNG
instance's JSON API: requests as the services expect them, top-k passages, the SQLite cache,
retries, refusals, secrets kept out of storage, and exact search counts through cuqa-eval."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from cuqa_builder.cli.evaluate import main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.retrieval.search_cache import SearchCache
from cuqa_builder.retrieval.types import RetrievalError
from cuqa_builder.retrieval.web import SearxNG, Serper, WebSearchRetriever
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM
from cuqa_builder.testing.search_servers import Hit, SearchStandIn
from tests.test_eval_cli import FACTS, ITEMS, MODEL, read_lines, scripted_model

KEY = "serper-test-key-0123456789"
RESULTS = [Hit(f"Result {n}", f"https://example.org/{n}", f"Snippet number {n}.")
           for n in range(1, 26)]


def some_hits(query: str) -> list[Hit]:
    return RESULTS


def serper(stand_in: SearchStandIn, **kwargs) -> Serper:
    return Serper(stand_in.origin, KEY, **kwargs)


def test_serper_request_and_top_k_passages(tmp_path: Path) -> None:
    dated = [Hit("Summit", "https://example.org/s", "It met at Bletchley Park.", "Nov 1, 2023"),
             Hit("No snippet", "https://example.org/e", ""), *RESULTS]
    with SearchStandIn("serper", lambda q: dated, api_key=KEY) as stand_in:
        web = WebSearchRetriever(serper(stand_in))
        passages = web.search("Where did the first AI Safety Summit take place?", 3)
        [request] = stand_in.requests
    assert (request.method, request.path, request.num) == ("POST", "/search", 3)
    assert request.query == "Where did the first AI Safety Summit take place?"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["content-type"] == "application/json"
    # Results without a snippet are skipped; a dated result keeps its date.
    assert [(p.id, p.title, p.text) for p in passages] == [
        ("https://example.org/s", "Summit", "Nov 1, 2023: It met at Bletchley Park."),
        ("https://example.org/1", "Result 1", "Snippet number 1."),
    ]
    assert web.stats.model_dump() == {"searches": 1, "cache_hits": 0, "failures": 0,
                                      "cost": 0.001}


def test_searches_are_cached_in_sqlite_and_paid_once(tmp_path: Path) -> None:
    path = tmp_path / "llm-cache.sqlite"
    with SearchStandIn("serper", some_hits, api_key=KEY) as stand_in:
        for _ in range(2):  # two runs on the same cache file
            cache = SearchCache(path)
            web = WebSearchRetriever(serper(stand_in), cache)
            assert len(web.search("summit", 3)) == 3
            assert len(web.search("summit", 3)) == 3
            cache.close()
        # Another k is another search.
        web = WebSearchRetriever(serper(stand_in), SearchCache(path))
        web.search("summit", 2)
        assert stand_in.searches == 2
    assert web.stats.searches == 1
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT request, response, hits FROM searches ORDER BY created_at")
        stored = rows.fetchall()
    assert [hits for _, _, hits in stored] == [3, 0]
    assert all(KEY not in request + response for request, response, _ in stored)


def test_identical_searches_in_flight_are_paid_once(tmp_path: Path) -> None:
    with SearchStandIn("serper", some_hits, api_key=KEY, delay_s=0.2) as stand_in:
        web = WebSearchRetriever(serper(stand_in), SearchCache(tmp_path / "c.sqlite"))
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda _: web.search("same query", 3), range(4)))
        assert stand_in.searches == 1
    assert all(r == results[0] for r in results)
    assert (web.stats.searches, web.stats.cache_hits) == (1, 3)


def test_a_wrong_key_is_refused_without_retries() -> None:
    with SearchStandIn("serper", some_hits, api_key=KEY) as stand_in:
        web = WebSearchRetriever(Serper(stand_in.origin, "wrong-key"))
        with pytest.raises(RetrievalError, match=r"refused the search \(HTTP 403\): check "
                           r"SERPER_API_KEY"):
            web.search("summit", 3)
        assert stand_in.searches == 1
    assert web.stats.failures == 1


def test_rate_limits_and_server_errors_are_retried() -> None:
    with SearchStandIn("serper", some_hits, api_key=KEY) as stand_in:
        stand_in.failures = [(429, {"Retry-After": "0"}), (500, {})]
        web = WebSearchRetriever(serper(stand_in), max_retries=2)
        web_backoff = web.search("summit", 1)
        assert stand_in.searches == 3 and len(web_backoff) == 1
        stand_in.failures = [(503, {"Retry-After": "0"})] * 3
        with pytest.raises(RetrievalError, match="search failed after 3 tries: HTTP 503"):
            web.search("another", 1)
    assert (web.stats.searches, web.stats.failures) == (1, 1)


def test_an_echoed_key_is_scrubbed_from_passages_and_cache(tmp_path: Path) -> None:
    leaky = [Hit("Debug", "https://example.org/d", f"request had key {KEY}")]
    with SearchStandIn("serper", lambda q: leaky, api_key=KEY) as stand_in:
        web = WebSearchRetriever(serper(stand_in), SearchCache(tmp_path / "c.sqlite"))
        [passage] = web.search("debug", 1)
        [again] = web.search("debug", 1)
    assert passage.text == again.text == "request had key ***"


def test_searxng_json_api() -> None:
    with SearchStandIn("searxng", some_hits) as stand_in:
        web = WebSearchRetriever(SearxNG(stand_in.origin))
        passages = web.search("summit venue", 3)
        [request] = stand_in.requests
    assert (request.method, request.path, request.query) == ("GET", "/search", "summit venue")
    assert [p.id for p in passages] == [f"https://example.org/{n}" for n in (1, 2, 3)]
    assert web.stats.cost == 0.0


def test_searxng_without_the_json_format_says_how_to_enable_it() -> None:
    with SearchStandIn("searxng", some_hits, json_enabled=False) as stand_in:
        web = WebSearchRetriever(SearxNG(stand_in.origin))
        with pytest.raises(RetrievalError, match="enable the json format in the instance's "
                           "settings.yml"):
            web.search("summit", 3)


# --- through cuqa-eval -------------------------------------------------------------------


def fact_hits(query: str) -> list[Hit]:
    """The fact a question needs is the first result of a search that starts with it."""
    needed = [MODEL[q][1] for q in MODEL if query.startswith(q) and MODEL[q][1]]
    return [Hit(subject, f"https://example.org/{subject}", FACTS[subject])
            for subject in needed] + RESULTS[:2]


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-web-0000000")
    monkeypatch.setenv("SERPER_API_KEY", KEY)
    write_jsonl(tmp_path / "cuqa.jsonl", ITEMS)
    return tmp_path / "cuqa.jsonl"


def eval_web(llm: ScriptedLLM, stand_in: SearchStandIn, data: Path, out: Path,
             *flags: str) -> int:
    return main(["--data", str(data), "--retriever", "web", "--web-api", stand_in.origin,
                 "--model", "scripted", "--base-url", llm.base_url, "--out", str(out),
                 "-q", *flags])


@pytest.mark.parametrize(("method", "per_item"), [("rr", 1), ("iter-retgen", 2)])
def test_cuqa_eval_counts_searches_as_retrieval_calls(
    data: Path, tmp_path: Path, capsys, method: str, per_item: int
) -> None:
    # rr reads honestly (the scripted model of test_eval_cli); ITER-RETGEN's demonstrations
    # are beyond that model, so it gets one fixed generation.
    responder = scripted_model(set()) if method == "rr" else (
        lambda body: Reply("It was held there. So the answer is United Kingdom."))
    with ScriptedLLM(responder) as llm, \
            SearchStandIn("serper", fact_hits, api_key=KEY) as stand_in:
        cache = ["--cache", str(tmp_path / "shared.sqlite")]
        assert eval_web(llm, stand_in, data, tmp_path / "first", "--method", method,
                        *cache) == 0
        paid = stand_in.searches
        # Another run over the same cache pays for no search and counts the same calls.
        assert eval_web(llm, stand_in, data, tmp_path / "again", "--method", method,
                        *cache) == 0
        assert stand_in.searches == paid
    assert all(r.num == 3 for r in stand_in.requests)  # the paper's top 3
    err = capsys.readouterr().err
    assert f"search (serper): {paid} searches, 0 cache hits, 0 failures" in err
    assert f"search (serper): 0 searches, {3 * per_item} cache hits" in err
    for out in ("first", "again"):
        predictions = read_lines(tmp_path / out / "predictions.jsonl")
        assert [p["retrieval_calls"] for p in predictions] == [per_item] * 3
        steps = [s for p in predictions for s in p["trace"] if s["kind"] == "retrieval"]
        assert {s["name"] for s in steps} == {"web"}
        metrics = json.loads((tmp_path / out / "metrics.json").read_text())
        assert metrics["run"]["retriever"] == {
            "name": "web", "service": "serper", "corpus_sha256": None, "api": stand_in.origin,
            "exclude_source_event": False}
    if method == "rr":  # the honest reader finds each fact in the first result
        assert metrics["cover_em"] == 1.0 and paid == 3


def test_cuqa_eval_web_needs_its_key_or_instance(data: Path, tmp_path: Path, capsys,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPER_API_KEY")
    with ScriptedLLM(scripted_model(set())) as llm, \
            SearchStandIn("serper", fact_hits, api_key=KEY) as stand_in:
        assert eval_web(llm, stand_in, data, tmp_path / "out", "--method", "rr") == 2
        assert main(["--data", str(data), "--method", "rr", "--retriever", "web",
                     "--web-service", "searxng", "--model", "scripted", "--base-url",
                     llm.base_url, "--out", str(tmp_path / "out2"), "-q"]) == 2
        assert llm.calls == 0 and stand_in.searches == 0
    err = capsys.readouterr().err
    assert "needs $SERPER_API_KEY in the environment" in err
    assert "--web-service searxng needs --web-api URL" in err
