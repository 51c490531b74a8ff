"""The embedded backend for real: pull the small model, serve it with llama.cpp, chat through the
gateway with logprobs, and stop the server cleanly."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import urllib.error
import urllib.request
from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.cli.evaluate import main as evaluate_main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.local import SERVERS, LocalServer
from cuqa_builder.llm.local_registry import REGISTRY, installed_path, machine_speed
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import ChatRequest, ChatResult, GatewayStats
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.verification.replies import OpenBookReply, read_open_book

pytestmark = pytest.mark.localmodel
SMALL = "smollm2-135m-instruct-q4_1"


@pytest.fixture(autouse=True)
def use_models_dir(small_model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUQA_MODELS_DIR", str(small_model))


def test_the_pulled_model_has_the_pinned_hash() -> None:
    path = installed_path(SMALL)
    assert path is not None
    assert hashlib.sha256(path.read_bytes()).hexdigest() == REGISTRY[SMALL].sha256


def test_a_real_chat_completion_with_logprobs_through_the_gateway(tmp_path: Path) -> None:
    request = ChatRequest(
        messages=[{"role": "user", "content": "What is the capital of France? One word."}],
        temperature=0.0, max_tokens=12, logprobs=True, top_logprobs=2, seed=1,
    )

    async def run() -> tuple[str, ChatResult, ChatResult, GatewayStats]:
        settings = LLMSettings(local=SMALL, cache_path=tmp_path / "c.sqlite", concurrency=2)
        async with open_gateway(settings) as gw:
            first = await gw.chat(request)
            second = await gw.chat(request)
            return gw.model, first, second, gw.stats

    model, first, second, stats = asyncio.run(run())
    assert model == SMALL and first.model == SMALL
    assert first.text.strip()
    assert first.completion_tokens > 0 and first.prompt_tokens > 0
    assert first.logprobs is not None and len(first.logprobs) == first.completion_tokens
    assert all(token.logprob <= 0 and len(token.top) == 2 for token in first.logprobs)
    assert "".join(token.token for token in first.logprobs) == first.text
    assert first.cost == 0.0 and first.latency_s > 0
    assert second.cached and second.text == first.text
    assert (stats.calls, stats.cache_hits) == (1, 1)


def test_the_embedded_model_is_held_to_the_open_book_reply_format(tmp_path: Path) -> None:
    """Left to itself a small model answers the open book with a bare name (measured: the
    quick start's 1.5B model, every time); held to the template's reply schema by llama.cpp,
    its reply is one the check can read, with both findings."""
    values = {"date": "12 September 2023",
              "event": "A magnitude 6.8 earthquake strikes the High Atlas in Morocco.",
              "cutoff": "the end of April 2023",
              "passage": "Morocco is a country in North Africa. Its capital is Rabat.",
              "question": "What is the capital of the country where a magnitude 6.8 earthquake "
                          "struck the High Atlas in September 2023?"}

    async def run() -> str:
        settings = LLMSettings(local=SMALL, cache_path=tmp_path / "c.sqlite", concurrency=1)
        async with open_gateway(settings) as gw:
            result = await gw.prompt(load_prompt("answer_with_event"), values,
                                     temperature=0.0, max_tokens=96, seed=1)
            return result.text

    reply = read_open_book(asyncio.run(run()))
    assert isinstance(reply, OpenBookReply), reply
    assert reply.others_unreadable is None


def test_the_server_listens_on_loopback_and_stops_on_close(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO), LocalServer(SMALL, n_ctx=512, threads=1) as server:
        url = server.base_url
        assert f"local model {SMALL} served at {url} (threads: 1)" in caplog.messages
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(f"{url}/models", timeout=10) as response:
            assert response.status == 200
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/models", timeout=2)


def test_the_model_loads_with_the_first_uncached_call_and_stays_for_the_next_stage(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    """A gateway whose calls the cache answers never loads the model; the first one that asks
    it does, and the next stage's gateway (same settings) finds it running."""
    SERVERS.close_all()
    settings = LLMSettings(local=SMALL, cache_path=tmp_path / "c.sqlite", concurrency=1,
                           threads=1)

    def ask(question: str) -> GatewayStats:
        request = ChatRequest(messages=[{"role": "user", "content": question}],
                              temperature=0.0, max_tokens=4, seed=1)

        async def stage() -> GatewayStats:
            async with open_gateway(settings) as gw:
                await gw.chat(request)
                return gw.stats

        return asyncio.run(stage())

    timed = machine_speed(SMALL).calls
    with caplog.at_level(logging.INFO):
        assert ask("Say yes.").calls == 1
        assert ask("Say yes.").cache_hits == 1  # cached: nothing to load
        assert ask("Say no.").calls == 1  # the next stage: the running model answers
    assert sum("served at" in message for message in caplog.messages) == 1
    assert machine_speed(SMALL).calls == timed + 2  # its speed here, for the next --estimate


def test_a_real_completion_with_logprobs_through_the_gateway(tmp_path: Path) -> None:
    """llama.cpp's /v1/completions (`--api completions`): the prompt as text, logprobs in the
    chat shape that llama.cpp returns there, the same cache."""
    request = ChatRequest(
        messages=[{"role": "user", "content": "Question: What is the capital of France?\n"
                   "The answer is"}],
        temperature=0.0, max_tokens=8, logprobs=True, top_logprobs=1, seed=1,
    )

    async def run() -> tuple[ChatResult, ChatResult, GatewayStats]:
        settings = LLMSettings(local=SMALL, api="completions", cache_path=tmp_path / "c.sqlite",
                               concurrency=1)
        async with open_gateway(settings) as gw:
            return await gw.chat(request), await gw.chat(request), gw.stats

    first, second, stats = asyncio.run(run())
    assert first.text.strip() and first.completion_tokens > 0
    assert first.logprobs is not None and len(first.logprobs) == first.completion_tokens
    assert all(token.logprob <= 0 for token in first.logprobs)
    assert "".join(token.token for token in first.logprobs) == first.text
    assert second.cached and second.text == first.text
    assert (stats.calls, stats.cache_hits) == (1, 1)


def test_self_dc_prob_confidence_on_the_completions_api(tmp_path: Path) -> None:
    """`cuqa-eval --api completions --confidence prob` on the embedded model, end to end."""
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"id": "q1", "question": "What is the capital of France?",
                                "answers": ["Paris"]}) + "\n")
    corpus = tmp_path / "events.jsonl"
    write_jsonl(corpus, [Event(id="ev-1", date=date(2024, 1, 2), text="Paris hosts a fair.",
                               source=EventSource(title="2024", revid=1, url="u"))])
    out = tmp_path / "out"
    assert evaluate_main(["--data", str(data), "--method", "self-dc", "--confidence", "prob",
                          "--llm", f"local:{SMALL}", "--api", "completions",
                          "--corpus", str(corpus), "--out", str(out), "-q"]) == 0
    [prediction] = [json.loads(line) for line in (out / "predictions.jsonl").open()]
    first_route = next(s for s in prediction["trace"] if s["kind"] == "route")
    assert 0.0 < first_route["data"]["confidence"] <= 1.0  # a real mean token probability
    assert prediction["trace"][0]["name"] == "solver_direct"  # the logprob-bearing answer
    assert prediction["llm_calls"] >= 2
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["run"]["api"] == "completions" and metrics["complete"]
