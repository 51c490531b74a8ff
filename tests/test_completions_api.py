"""The legacy completions endpoint (`--api completions`, the paper's gpt-3.5-turbo-instruct
backbone) through the real gateway and `openai` client against the scripted server: the prompt
as text, token logprobs, the same cache, retries and accounting as chat."""

from __future__ import annotations

import json
import math
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.evaluate import main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.records.events import Event
from cuqa_builder.testing.openai_server import Reply, RuleResponder, ScriptedLLM
from tests.test_eval_cli import FACTS, ITEMS, SOURCE, scripted_model
from tests.test_gateway import Script, ask, with_gateway

SECRET = "sk-test-SECRET123"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def completions(llm: ScriptedLLM, tmp_path: Path, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {
        "model": "gpt-3.5-turbo-instruct", "base_url": llm.base_url, "api": "completions",
        "cache_path": tmp_path / "c.sqlite", "max_retries": 2,
    }
    return LLMSettings(**(values | overrides))


def test_a_completion_with_logprobs_usage_and_cost(tmp_path: Path) -> None:
    request = ask("Question: Who won?\nThe answer is", temperature=0.1, top_p=0.1, seed=3,
                  max_tokens=16, stop=["\n"], logprobs=True, top_logprobs=1)
    responder = RuleResponder([("Who won", Reply(" Team Blue", token_logprob=math.log(0.5)))])
    with ScriptedLLM(responder) as llm:
        result = with_gateway(completions(llm, tmp_path), lambda gw: gw.chat(request))
        [sent], [path] = llm.requests, llm.paths

    assert path == "/v1/completions"
    assert sent["prompt"] == "Question: Who won?\nThe answer is" and "messages" not in sent
    assert {k: sent[k] for k in ("temperature", "top_p", "seed", "max_tokens", "stop")} == {
        "temperature": 0.1, "top_p": 0.1, "seed": 3, "max_tokens": 16, "stop": ["\n"]}
    assert sent["logprobs"] == 1 and "top_logprobs" not in sent  # an int on this endpoint
    assert result.text == " Team Blue"
    assert [(t.token, t.logprob) for t in result.logprobs or []] == [
        (" ", math.log(0.5)), ("Team ", math.log(0.5)), ("Blue", math.log(0.5))]
    assert result.logprobs[1].top == [("Team ", math.log(0.5))]
    assert (result.prompt_tokens, result.completion_tokens) == (6, 3)
    assert result.cost == pytest.approx((6 * 1.50 + 3 * 2.00) / 1e6)  # instruct's list price


def test_without_logprobs_none_are_asked_or_returned(tmp_path: Path) -> None:
    with ScriptedLLM(RuleResponder([], default="Paris")) as llm:
        result = with_gateway(completions(llm, tmp_path), lambda gw: gw.chat(ask("Capital?")))
        assert "logprobs" not in llm.requests[0]
    assert (result.text, result.logprobs) == ("Paris", None)


def test_cached_apart_from_chat_and_replayed(tmp_path: Path) -> None:
    request = ask("Capital of France?", temperature=0.0)
    with ScriptedLLM(RuleResponder([], default="Paris")) as llm:
        for _ in range(2):
            with_gateway(completions(llm, tmp_path), lambda gw: gw.chat(request))
        # The same request to the chat API is another call with its own cache row.
        chat = completions(llm, tmp_path, api="chat")
        with_gateway(chat, lambda gw: gw.chat(request))
        with_gateway(chat, lambda gw: gw.chat(request))
        assert llm.paths == ["/v1/completions", "/v1/chat/completions"]
    cache = CallCache(tmp_path / "c.sqlite")
    summary = cache.summary()
    cache.close()
    assert (summary.calls, summary.hits) == (2, 2)


def test_retries_and_failure_accounting_are_the_chat_ones(tmp_path: Path) -> None:
    script = Script(Reply(status=500, text="busy"), Reply(status=429, headers={"Retry-After": "0"}),
                    Reply(text="done"))

    async def twice(gw: Any) -> tuple[str, Any]:
        result = await gw.chat(ask("go"))
        return result.text, gw.stats

    with ScriptedLLM(script) as llm:
        text, stats = with_gateway(completions(llm, tmp_path, max_retries=2), twice)
        assert llm.paths == ["/v1/completions"] * 3
    assert text == "done" and (stats.calls, stats.failures) == (1, 0)


def test_a_malformed_completion_is_retried(tmp_path: Path) -> None:
    script = Script(Reply(raw_body=b'{"choices": [{"index": 0}]}'), Reply(text="fine"))
    with ScriptedLLM(script) as llm:
        result = with_gateway(completions(llm, tmp_path), lambda gw: gw.chat(ask("go")))
        assert llm.calls == 2
    assert result.text == "fine"


def test_cuqa_eval_self_dc_prob_on_the_completions_api(tmp_path: Path) -> None:
    """Self-DC with token-probability confidence on an instruct model, end to end: every call
    goes to /v1/completions, and the judge (always chat, as in the paper) to the chat API."""
    write_jsonl(tmp_path / "cuqa.jsonl", ITEMS)
    write_jsonl(tmp_path / "events.jsonl", [
        Event(id=f"ev-{n}", date=date(2023, 11, n), text=text, source=SOURCE)
        for n, text in enumerate(FACTS.values(), start=1)])
    model = scripted_model(set())

    def respond(body: dict[str, Any]) -> Reply:
        reply = model(body)
        reply.token_logprob = math.log(0.95)  # confident: every item takes the generate branch
        return reply

    with ScriptedLLM(respond) as llm:
        assert main(["--data", str(tmp_path / "cuqa.jsonl"), "--method", "self-dc",
                     "--confidence", "prob", "--alpha", "0.6", "--beta", "0.1",
                     "--model", "gpt-3.5-turbo-instruct", "--api", "completions",
                     "--judge-model", "judge", "--base-url", llm.base_url,
                     "--corpus", str(tmp_path / "events.jsonl"),
                     "--out", str(tmp_path / "out"), "-q"]) == 0
        solver_paths = [p for p, b in zip(llm.paths, llm.requests, strict=True)
                        if b["model"] != "judge"]
        judge_paths = [p for p, b in zip(llm.paths, llm.requests, strict=True)
                       if b["model"] == "judge"]
        confidence_calls = [b for b in llm.requests if b.get("logprobs")]
    # Per item: the Direct answer with logprobs, then generate and read.
    assert solver_paths == ["/v1/completions"] * 9
    assert judge_paths == ["/v1/chat/completions"] * 3
    assert len(confidence_calls) == 3 and all(b["logprobs"] == 1 for b in confidence_calls)
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["run"]["api"] == "completions" and metrics["run"]["judge_api"] == "chat"
    assert metrics["llm_calls"] == {"mean": 3.0, "total": 9}
    assert (metrics["cover_em"], metrics["acc"]) == (1.0, 1.0)

