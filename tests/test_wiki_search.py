"""The live Wikipedia search retriever against a local api.php that answers list=search and
prop=extracts (formatversion=2), through the real MediaWiki client."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlparse

import pytest

from cuqa_builder.retrieval.wiki_search import WikiSearchRetriever
from cuqa_builder.wiki.client import MediaWikiClient

INTROS = {
    "AI Safety Summit": "The AI Safety Summit was held at Bletchley Park in November 2023.",
    "Bletchley Park": "Bletchley Park is an English country house in Milton Keynes.",
    "Stub page": "",  # a page without an intro gives no passage
}


class SearchAPI:
    """Search ranks titles by how many query words they share with title + intro."""

    def __init__(self) -> None:
        self.requests: list[dict[str, str]] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/w/api.php"

    def answer(self, params: dict[str, str]) -> dict[str, Any]:
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

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                params = dict(parse_qsl(urlparse(self.path).query))
                api.requests.append(params)
                data = json.dumps(api.answer(params)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


@pytest.fixture
def api() -> Iterator[SearchAPI]:
    server = SearchAPI()
    server.thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()


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
