"""The LLM gateway against a real local OpenAI-compatible server, via the real `openai` client."""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from cuqa_builder.llm.cache import CallCache, CallRow, canonical_request, request_key
from cuqa_builder.llm.client import prompt_request
from cuqa_builder.llm.gateway import Gateway, open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import ChatRequest, ChatResult, LLMError, held_to_format
from cuqa_builder.prompts import PromptTemplate, load_prompt
from cuqa_builder.testing.openai_server import Reply, RuleResponder, ScriptedLLM

SECRET = "sk-test-SECRET123"
T = TypeVar("T")


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class Script:
    """Replies in order; the last one repeats."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)

    def __call__(self, body: dict[str, Any]) -> Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


def settings_for(llm: ScriptedLLM, tmp_path: Path, **overrides: Any) -> LLMSettings:
    values: dict[str, Any] = {
        "model": "scripted", "base_url": llm.base_url, "cache_path": tmp_path / "c.sqlite",
        "max_retries": 2,
    }
    return LLMSettings(**(values | overrides))


def with_gateway(settings: LLMSettings, use: Callable[[Gateway], Awaitable[T]]) -> T:
    async def main() -> T:
        async with open_gateway(settings) as gateway:
            return await use(gateway)

    return asyncio.run(main())


def ask(text: str, **sampling: Any) -> ChatRequest:
    return ChatRequest(messages=[{"role": "user", "content": text}], **sampling)


def chat_once(settings: LLMSettings, request: ChatRequest) -> ChatResult:
    return with_gateway(settings, lambda gw: gw.chat(request))


# --- answers -----------------------------------------------------------------------------------


def test_chat_sends_sampling_and_returns_text_usage_logprobs_and_cost(tmp_path: Path) -> None:
    request = ask(
        "Who won?", temperature=0.1, top_p=0.1, seed=7, max_tokens=32, stop=["\n"],
        logprobs=True, top_logprobs=1, template="T", template_hash="abc",
    )
    with ScriptedLLM(RuleResponder([("Who won", Reply(text="Team Blue won"))])) as llm:
        result = chat_once(settings_for(llm, tmp_path, model="gpt-4o-mini"), request)
        sent = llm.requests[0]

    assert result.text == "Team Blue won" and result.finish_reason == "stop"
    assert result.model == "gpt-4o-mini" and not result.cached
    assert [t.token for t in result.logprobs or []] == ["Team ", "Blue ", "won"]
    assert result.logprobs and result.logprobs[0].top == [("Team ", -0.1)]
    assert (result.prompt_tokens, result.completion_tokens) == (2, 3)
    assert result.cost == pytest.approx((2 * 0.15 + 3 * 0.60) / 1e6)
    assert result.latency_s > 0
    assert sent["model"] == "gpt-4o-mini"
    assert {k: sent[k] for k in ("temperature", "top_p", "seed", "max_tokens", "stop")} == {
        "temperature": 0.1, "top_p": 0.1, "seed": 7, "max_tokens": 32, "stop": ["\n"],
    }
    assert sent["logprobs"] is True and sent["top_logprobs"] == 1
    assert "template" not in sent and "template_hash" not in sent


def test_unset_sampling_parameters_are_not_sent(tmp_path: Path) -> None:
    with ScriptedLLM() as llm:
        chat_once(settings_for(llm, tmp_path), ask("hi"))
        assert set(llm.requests[0]) == {"model", "messages"}


def test_prompt_renders_one_user_message_and_records_the_template(tmp_path: Path) -> None:
    template = PromptTemplate(name="Probe", text="Question: {question}\nAnswer:", source="")
    with ScriptedLLM(RuleResponder([], default="42")) as llm:
        settings = settings_for(llm, tmp_path)
        result = with_gateway(settings, lambda gw: gw.prompt(template, {"question": "Why?"}))
        sent = llm.requests[0]["messages"]

    assert result.text == "42"
    assert sent == [{"role": "user", "content": "Question: Why?\nAnswer:"}]
    request = ask("Question: Why?\nAnswer:")
    cache = CallCache(tmp_path / "c.sqlite")
    row = cache.get(request_key(canonical_request("scripted", request)))
    cache.close()
    assert row is not None
    assert (row.template, row.template_hash) == ("Probe", template.sha256)


@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": ""}}]}',
        b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": null},'
        b' "finish_reason": "length"}]}',
        b'{"choices": [{"index": 0, "message": {"role": "assistant"}}]}',
    ],
)
def test_empty_or_missing_content_is_empty_text(tmp_path: Path, body: bytes) -> None:
    with ScriptedLLM(RuleResponder([], default=Reply(raw_body=body))) as llm:
        result = chat_once(settings_for(llm, tmp_path), ask("hi"))
        assert llm.calls == 1
    assert result.text == ""
    assert result.prompt_tokens == 0 and result.logprobs is None


# --- cache -------------------------------------------------------------------------------------


def test_a_repeated_call_is_a_cache_hit_with_no_server_call(tmp_path: Path) -> None:
    async def twice(gw: Gateway) -> tuple[ChatResult, ChatResult]:
        return await gw.chat(ask("hi", seed=1)), await gw.chat(ask("hi", seed=1))

    with ScriptedLLM(RuleResponder([], default="hello there")) as llm:
        settings = settings_for(llm, tmp_path, model="gpt-4o")
        first, second = with_gateway(settings, twice)
        again = chat_once(settings, ask("hi", seed=1))  # a new run on the same cache file
        assert llm.calls == 1

    assert second.cached and again.cached and not first.cached
    assert second.text == again.text == "hello there"
    assert second.cost == 0.0 and first.cost > 0
    assert second.completion_tokens == first.completion_tokens
    cache = CallCache(tmp_path / "c.sqlite")
    summary = cache.summary()
    cache.close()
    assert (summary.calls, summary.hits) == (1, 2)
    assert summary.cost == pytest.approx(first.cost)


def test_hits_counted_in_a_cache_file_made_before_the_hits_table_still_count(
    tmp_path: Path,
) -> None:
    cache = CallCache(tmp_path / "c.sqlite")
    key = request_key(canonical_request("scripted", ask("hi")))
    cache.put(CallRow(key=key, model="scripted", canonical_request="{}",
                      response_json='{"choices": []}', prompt_tokens=1, completion_tokens=1,
                      latency_s=0.1, cost=0.0, template=None, template_hash=None))
    with sqlite3.connect(tmp_path / "c.sqlite") as old_layout:
        old_layout.execute("UPDATE calls SET hits = 3 WHERE key = ?", (key,))
    cache.count_hit(key)
    assert cache.summary().hits == 4
    cache.close()


def test_the_canonical_request_is_every_sent_field_as_dumped(tmp_path: Path) -> None:
    """Cache keys must not change between versions: the canonical JSON is the model's dump."""
    request = ChatRequest(messages=[{"role": "user", "content": "Où? ☃"}], temperature=0.3,
                          seed=7, stop=["\n"], logprobs=True, top_logprobs=2, template="t",
                          template_hash="h")
    # The fields added later (a reply format) are left out while unset: old keys stay valid.
    dumped = {"model": "m", **request.model_dump(
        exclude={"template", "template_hash", "reply_schema", "response_format"})}
    assert canonical_request("m", request) == json.dumps(
        dumped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_remote_model_is_asked_for_the_reply_format_in_words_only(tmp_path: Path) -> None:
    """A template's reply schema reaches only the embedded model (`held_to_format`): an endpoint
    gets the papers' wording and nothing else, under the key it always had."""
    template = load_prompt("answer_with_event")
    assert template.reply_schema is not None
    values = {"date": "1 May 2024", "event": "E.", "cutoff": "2023-04", "passage": "P.",
              "question": "Q?"}
    with ScriptedLLM(RuleResponder([], default="Answer: X")) as llm:
        with_gateway(settings_for(llm, tmp_path), lambda gw: gw.prompt(template, values))
        assert "response_format" not in llm.requests[0]
    request = prompt_request(template, values)
    plain = request.model_copy(update={"reply_schema": None})
    assert canonical_request("m", request) == canonical_request("m", plain)
    held = held_to_format(request, True)
    assert held.response_format == {"type": "json_schema", "json_schema": {
        "name": "answer_with_event", "schema": json.loads(template.reply_schema)}}
    assert canonical_request("m", held) != canonical_request("m", request)  # another answer
    assert held_to_format(request, False) is request


@pytest.mark.parametrize("cached", [True, False])
def test_identical_calls_in_flight_together_are_paid_once(tmp_path: Path, cached: bool) -> None:
    async def together(gw: Gateway) -> tuple[list[ChatResult], int]:
        results = await asyncio.gather(*(gw.chat(ask("hi", seed=1)) for _ in range(3)))
        return list(results), gw.stats.cache_hits

    with ScriptedLLM(RuleResponder([], default=Reply(text="hello", delay_s=0.3))) as llm:
        settings = settings_for(llm, tmp_path, cache_path=tmp_path / "c.sqlite" if cached else None)
        results, hits = with_gateway(settings, together)
        assert llm.calls == 1
    assert [r.text for r in results] == ["hello"] * 3
    assert [r.cached for r in results].count(False) == 1
    assert hits == 2


def test_a_failed_call_fails_every_identical_caller_waiting_on_it(tmp_path: Path) -> None:
    async def together(gw: Gateway) -> list[BaseException | ChatResult]:
        calls = (gw.chat(ask("hi", seed=1)) for _ in range(2))
        return list(await asyncio.gather(*calls, return_exceptions=True))

    refused = Reply(status=400, text="bad request", delay_s=0.3)
    with ScriptedLLM(RuleResponder([], default=refused)) as llm:
        outcomes = with_gateway(settings_for(llm, tmp_path), together)
        assert llm.calls == 1
    assert all(isinstance(o, LLMError) for o in outcomes)


def test_a_cached_answer_is_stored_verbatim(tmp_path: Path) -> None:
    answer = "Bearer Bonds of sk-learnsomething fame"  # shaped like secrets, but an answer
    with ScriptedLLM(RuleResponder([], default=answer)) as llm:
        settings = settings_for(llm, tmp_path)
        chat_once(settings, ask("hi"))
        assert chat_once(settings, ask("hi")).text == answer
        assert llm.calls == 1


def test_stats_count_calls_hits_tokens_and_cost(tmp_path: Path) -> None:
    async def three(gw: Gateway) -> Any:
        await gw.chat(ask("one"))
        await gw.chat(ask("two"))
        await gw.chat(ask("one"))
        return gw.stats

    with ScriptedLLM(RuleResponder([], default="a b")) as llm:
        stats = with_gateway(settings_for(llm, tmp_path, model="gpt-4o"), three)
    assert (stats.calls, stats.cache_hits, stats.failures) == (2, 1, 0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (2, 4)
    assert stats.cost == pytest.approx((2 * 2.5 + 4 * 10.0) / 1e6)
    assert stats.wall_s > 0


def test_any_change_of_a_sampling_parameter_is_a_new_call(tmp_path: Path) -> None:
    async def variants(gw: Gateway) -> None:
        for request in (
            ask("hi"), ask("hi", seed=2), ask("hi", temperature=0.5), ask("hi", max_tokens=5),
            ask("hi", logprobs=True), ask("hi", logprobs=True, top_logprobs=3),
            ask("hi", stop=["x"]), ask("hi", top_p=0.5),
        ):
            await gw.chat(request)
        # The template is recorded, not sent: it does not make a different call.
        await gw.chat(ask("hi", template="Other", template_hash="f00"))

    with ScriptedLLM() as llm:
        with_gateway(settings_for(llm, tmp_path), variants)
        assert llm.calls == 8


def test_refresh_calls_again_and_replaces_the_cached_answer(tmp_path: Path) -> None:
    with ScriptedLLM(Script(Reply(text="old"), Reply(text="new"))) as llm:
        settings = settings_for(llm, tmp_path)
        assert chat_once(settings, ask("hi")).text == "old"
        refreshed = chat_once(settings.model_copy(update={"refresh": True}), ask("hi"))
        later = chat_once(settings, ask("hi"))
        assert llm.calls == 2
    assert refreshed.text == "new" and not refreshed.cached
    assert later.text == "new" and later.cached


def test_no_cache_path_means_every_call_goes_out_and_nothing_is_written(tmp_path: Path) -> None:
    with ScriptedLLM() as llm:
        settings = settings_for(llm, tmp_path, cache_path=None)
        chat_once(settings, ask("hi"))
        chat_once(settings, ask("hi"))
        assert llm.calls == 2
    assert list(tmp_path.iterdir()) == []


def test_a_finished_call_survives_kill_9(tmp_path: Path) -> None:
    script = (
        "import asyncio, os, signal, sys\n"
        "from pathlib import Path\n"
        "from cuqa_builder.llm.gateway import open_gateway\n"
        "from cuqa_builder.llm.settings import LLMSettings\n"
        "from cuqa_builder.llm.types import ChatRequest\n"
        "async def main():\n"
        "    s = LLMSettings(model='m', base_url=sys.argv[1], cache_path=Path(sys.argv[2]))\n"
        "    async with open_gateway(s) as gw:\n"
        "        await gw.chat(ChatRequest(messages=[{'role': 'user', 'content': 'hi'}]))\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "asyncio.run(main())\n"
    )
    with ScriptedLLM(RuleResponder([], default="kept")) as llm:
        done = subprocess.run(
            [sys.executable, "-c", script, llm.base_url, str(tmp_path / "c.sqlite")],
            cwd=Path(__file__).resolve().parents[1], capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == -9, done.stderr
        result = chat_once(settings_for(llm, tmp_path, model="m"), ask("hi"))
        assert llm.calls == 1
    assert result.cached and result.text == "kept"


# --- failures and retries ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make_headers", "at_least"),
    [
        (lambda: {"Retry-After": "1"}, 1.0),
        (lambda: {"retry-after-ms": "800"}, 0.8),
        # An HTTP date has whole seconds: 2 s from now is 1 to 2 s away.
        (lambda: {"Retry-After": email.utils.formatdate(time.time() + 2, usegmt=True)}, 0.9),
    ],
)
def test_429_waits_as_long_as_retry_after_asks(
    tmp_path: Path, make_headers: Callable[[], dict[str, str]], at_least: float
) -> None:
    busy = Reply(text="slow down", status=429, headers=make_headers())
    with ScriptedLLM(Script(busy, Reply("ok"))) as llm:
        started = time.monotonic()
        result = chat_once(settings_for(llm, tmp_path), ask("hi"))
        waited = time.monotonic() - started
        assert llm.calls == 2
    assert result.text == "ok"
    assert at_least <= waited < at_least + 1.5


def test_a_500_is_retried_then_succeeds(tmp_path: Path) -> None:
    async def one(gw: Gateway) -> tuple[ChatResult, Any]:
        return await gw.chat(ask("hi")), gw.stats

    with ScriptedLLM(Script(Reply(text="boom", status=500), Reply(text="fine"))) as llm:
        result, stats = with_gateway(settings_for(llm, tmp_path), one)
        assert llm.calls == 2
    assert result.text == "fine" and (stats.calls, stats.failures) == (1, 0)


def test_a_slow_reply_times_out_and_is_retried(tmp_path: Path) -> None:
    with ScriptedLLM(Script(Reply(text="late", delay_s=3.0), Reply(text="quick"))) as llm:
        started = time.monotonic()
        result = chat_once(settings_for(llm, tmp_path, timeout_s=0.3), ask("hi"))
        elapsed = time.monotonic() - started
        assert llm.calls == 2
    assert result.text == "quick"
    assert elapsed < 2.0  # did not wait for the slow reply


@pytest.mark.parametrize("body", [b"<html>gateway error</html>", b'{"choices": []}', b"[1, 2]"])
def test_a_malformed_body_is_an_llm_error_after_bounded_retries(
    tmp_path: Path, body: bytes
) -> None:
    async def one(gw: Gateway) -> Any:
        with pytest.raises(LLMError, match="after 3 tries: malformed response"):
            await gw.chat(ask("hi"))
        return gw.stats

    with ScriptedLLM(RuleResponder([], default=Reply(raw_body=body))) as llm:
        stats = with_gateway(settings_for(llm, tmp_path, max_retries=2), one)
        assert llm.calls == 3
    assert (stats.calls, stats.failures) == (0, 1)
    cache = CallCache(tmp_path / "c.sqlite")
    assert cache.summary().calls == 0  # a failure is not cached: the next run tries again
    cache.close()


def test_a_client_error_is_not_retried(tmp_path: Path) -> None:
    with ScriptedLLM(RuleResponder([], default=Reply(text="bad model", status=400))) as llm:
        with pytest.raises(LLMError, match="refused the call: HTTP 400: bad model"):
            chat_once(settings_for(llm, tmp_path), ask("hi"))
        assert llm.calls == 1


def test_an_unreachable_endpoint_fails_with_a_reason(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    settings = LLMSettings(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", cache_path=None, max_retries=1
    )
    with pytest.raises(LLMError, match="after 2 tries: connection failed"):
        chat_once(settings, ask("hi"))


def test_concurrency_is_bounded(tmp_path: Path) -> None:
    async def many(gw: Gateway) -> list[ChatResult]:
        return await asyncio.gather(*(gw.chat(ask(f"q{i}")) for i in range(12)))

    with ScriptedLLM(RuleResponder([], default=Reply(text="ok", delay_s=0.15))) as llm:
        results = with_gateway(settings_for(llm, tmp_path, concurrency=3), many)
        assert llm.calls == 12 and llm.max_in_flight == 3
    assert all(r.text == "ok" for r in results)


def test_an_api_endpoint_needs_a_model_name(tmp_path: Path) -> None:
    settings = LLMSettings(base_url="http://127.0.0.1:9/v1", cache_path=None)
    with pytest.raises(LLMError, match="no model name: pass --model"):
        chat_once(settings, ask("hi"))


# --- secrets -----------------------------------------------------------------------------------


def test_the_api_key_never_reaches_errors_logs_or_the_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    echo = f"Incorrect API key provided: {SECRET}. Authorization: Bearer {SECRET}"
    responder = RuleResponder([
        ("refuse", Reply(text=echo, status=401)),
        ("busy", Reply(text=echo, status=503)),
    ], default="fine")

    async def calls(gw: Gateway) -> list[str]:
        await gw.chat(ask("normal question"))
        errors = []
        for prompt in ("refuse", "busy"):
            with pytest.raises(LLMError) as failure:
                await gw.chat(ask(prompt))
            errors.append(str(failure.value))
        return errors

    caplog.set_level(logging.DEBUG)
    with ScriptedLLM(responder) as llm:
        errors = with_gateway(settings_for(llm, tmp_path, max_retries=1), calls)
        # The key really was used (so the checks below could fail).
        sent_headers = {name.lower(): value for name, value in llm.headers[0].items()}
        assert sent_headers["authorization"] == f"Bearer {SECRET}"

    assert "HTTP 401" in errors[0] and "HTTP 503" in errors[1]
    assert all(SECRET not in error for error in errors)
    assert "HTTP 503" in caplog.text and SECRET not in caplog.text
    stored = b"".join(path.read_bytes() for path in tmp_path.glob("c.sqlite*"))
    assert b"fine" in stored and SECRET.encode() not in stored


# --- prices ------------------------------------------------------------------------------------


def test_unknown_model_costs_nothing_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async def two(gw: Gateway) -> list[ChatResult]:
        return [await gw.chat(ask("a")), await gw.chat(ask("b"))]

    with ScriptedLLM() as llm:
        results = with_gateway(settings_for(llm, tmp_path, model="my-own-model"), two)
    assert [r.cost for r in results] == [0.0, 0.0]
    assert caplog.text.count("no price known for model 'my-own-model'") == 1


def test_a_price_file_overrides_and_dated_ids_take_their_family_price(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"my-own-model": {"input": 1.0, "output": 2.0}}))
    with ScriptedLLM(RuleResponder([], default="x y z")) as llm:
        own = chat_once(
            settings_for(llm, tmp_path, model="my-own-model", prices_path=prices), ask("a b")
        )
        dated = chat_once(settings_for(llm, tmp_path, model="gpt-4o-mini-2024-07-18"), ask("a b"))
    assert own.cost == pytest.approx((2 * 1.0 + 3 * 2.0) / 1e6)
    assert dated.cost == pytest.approx((2 * 0.15 + 3 * 0.60) / 1e6)


def test_a_broken_price_file_is_a_readable_error(tmp_path: Path) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"m": {"input": "cheap"}}))
    with ScriptedLLM() as llm, pytest.raises(ValueError, match="m.input"):
        chat_once(settings_for(llm, tmp_path, prices_path=prices), ask("hi"))
