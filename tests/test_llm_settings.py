"""How `cuqa-build` picks its model endpoint, and LLM flags that are refused before any stage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main, parse_options
from cuqa_builder.cores import available_cores
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.llm.local import LocalServer
from cuqa_builder.llm.settings import DEFAULT_LOCAL_MODEL, resolve_settings
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import ScriptedLLM

SMALL = "smollm2-135m-instruct-q4_1"


@pytest.fixture(autouse=True)
def no_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def settings_for(*argv: str):
    options = parse_options(["--out", "run", *argv])
    return resolve_settings(options.llm, default_cache=Path("run/llm-cache.sqlite"))


def test_no_endpoint_and_no_key_means_the_embedded_default_model() -> None:
    settings = settings_for()
    assert settings.local == DEFAULT_LOCAL_MODEL and settings.base_url is None
    assert settings.cache_path == Path("run/llm-cache.sqlite")


def test_llm_local_names_a_registry_model_and_wins_over_an_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    assert settings_for("--llm", "local").local == DEFAULT_LOCAL_MODEL
    chosen = settings_for("--llm", f"local:{SMALL}", "--base-url", "http://127.0.0.1:9/v1")
    assert (chosen.local, chosen.base_url) == (SMALL, None)


def test_threads_of_the_embedded_model_default_to_none_and_take_a_count() -> None:
    assert settings_for().threads is None
    assert settings_for("--threads", "3").threads == 3


def test_the_embedded_model_uses_every_core_even_under_a_passing_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A count taken from the load average at start kept whole runs on one thread of two.
    monkeypatch.setattr(os, "getloadavg", lambda: (8.0, 8.0, 8.0))
    assert LocalServer(SMALL).threads == available_cores()
    assert LocalServer(SMALL, threads=3).threads == 3


def test_an_api_key_alone_means_the_openai_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    settings = settings_for("--model", "gpt-4o-mini", "--no-cache")
    assert (settings.local, settings.base_url, settings.model) == (None, None, "gpt-4o-mini")
    assert settings.cache_path is None


def test_the_base_url_flag_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    assert settings_for().base_url == "http://127.0.0.1:1/v1"
    assert settings_for("--base-url", "http://127.0.0.1:2/v1").base_url == "http://127.0.0.1:2/v1"


def test_openai_base_url_from_the_environment_is_used_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = make_events(2)
    write_jsonl(tmp_path / "events.jsonl", events)
    with ScriptedLLM(AlgorithmResponder()) as llm:
        monkeypatch.setenv("OPENAI_BASE_URL", llm.base_url)
        assert main(["--out", str(tmp_path), "--cutoff", "2023-04", "--prompts", "paper",
                     "--stage", "generate",
                     "-q", "--model", "scripted"]) == 0
        assert llm.calls == 4 * len(events)
    assert len(read_jsonl(tmp_path / "candidates.jsonl", Candidate)) == len(events)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--concurrency", "0"], "argument --concurrency: 0 is below the minimum of 1"),
        (["--concurrency", "many"], "argument --concurrency: 'many' is not a whole number"),
        (["--max-retries", "-1"], "argument --max-retries: -1 is below the minimum of 0"),
        (["--threads", "0"], "argument --threads: 0 is below the minimum of 1"),
        (["--timeout", "0"], "argument --timeout: 0.0 is not a positive number"),
        (["--llm", "remote"], "argument --llm: --llm must be local or local:NAME, not 'remote'"),
        (["--llm", "local:gpt-9"], "argument --llm: unknown local model 'gpt-9' (known: "),
    ],
)
def test_bad_llm_flags_are_usage_errors_before_any_stage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as exit_info:
        main(["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage",
        "generate", *flags])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not out.exists()
