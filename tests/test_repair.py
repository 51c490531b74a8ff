"""Repair (issue 10, part 4): a step whose output its check refuses is asked again with a new
seed, and only that step; every attempt is kept; a re-run pays nothing; the yield is reported."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.generation.yield_report import BranchYield
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.records.events import Event
from cuqa_builder.run import GENERATION_FAILURES
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message

_UNKNOWN_ANSWER = re.compile(r"the answer is the entity (.+)\.$")


class FirstTryLeaks(AlgorithmResponder):
    """The first seed asked for a chosen prompt gets a question that names its own answer."""

    def __init__(self, markers: dict[str, str]) -> None:
        super().__init__()
        self.markers = markers  # substring of a prompt -> the leaking reply
        self.first_seed: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        for marker, leak in self.markers.items():
            if marker in prompt:
                first = self.first_seed.setdefault(prompt, body["seed"])
                if body["seed"] == first:
                    return Reply(text=leak.format(answer=_answer_in(prompt)))
        return super().__call__(body)


def _answer_in(prompt: str) -> str:
    found = _UNKNOWN_ANSWER.search(prompt)
    return found.group(1) if found else ""


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _build(out: Path, llm: ScriptedLLM, *extra: str) -> int:
    return main(["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "-q",
                 "--base-url", llm.base_url,
                 "--model", "scripted", "--concurrency", "4", *extra])


def _requests_with(llm: ScriptedLLM, marker: str) -> list[dict[str, Any]]:
    return [r for r in llm.requests if marker in last_user_message(r)]


def _setup(tmp_path: Path) -> tuple[list[Event], FirstTryLeaks]:
    events = make_events(4)
    write_jsonl(tmp_path / "events.jsonl", events)
    leaky = FirstTryLeaks({f"Unknown: {events[0].text}": "Which body is {answer}?"})
    return events, leaky


def test_a_refused_step_is_retried_alone_with_a_new_seed(tmp_path: Path, capsys) -> None:
    events, leaky = _setup(tmp_path)
    with ScriptedLLM(leaky) as llm:
        assert _build(tmp_path, llm, "--stage", "generate") == 0
        assert llm.calls == 4 * 4 + 1  # one retried step, nothing else asked again
        unknown = _requests_with(llm, f"Unknown: {events[0].text}")
        passage = _requests_with(llm, "Generate a detailed passage about ")
        assert len(unknown) == 2 and unknown[0]["seed"] != unknown[1]["seed"]
        assert len(passage) == 4  # the other steps of that event ran once
        summary = capsys.readouterr().out
        assert "repair (--attempts 3): 1 outputs refused by their step check; 1 items written " \
               "after a retry" in summary
        assert _build(tmp_path, llm, "--stage", "generate") == 0
        assert llm.calls == 4 * 4 + 1  # a re-run is served by the cache

    item = next(c for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)
                if c.event.id == events[0].id)
    assert item.intermediates is not None
    calls = item.intermediates.calls
    assert [(c.function, c.attempt) for c in calls][:2] == [
        ("UnknownQuestionGen", 0), ("UnknownQuestionGen", 1)]
    cur_ent = item.intermediates.cur_ent.text
    assert calls[0].rejected == f"the unknown question names its own answer {cur_ent!r}"
    assert calls[0].parsed == f"Which body is {cur_ent}?"
    assert all(c.rejected is None for c in calls[1:]) and len(calls) == 5
    assert item.intermediates.unknown_question == calls[1].parsed
    assert all(c.prompt_tokens and c.completion_tokens for c in calls)


def test_a_leaking_merge_is_asked_again_and_later_steps_wait(tmp_path: Path) -> None:
    events = make_events(3)
    write_jsonl(tmp_path / "events.jsonl", events)
    leaky = FirstTryLeaks({"Question One: ": "Merged question: Is it Marie Curie or not?"})
    with ScriptedLLM(leaky) as llm:
        assert _build(tmp_path, llm, "--stage", "generate") == 0
        merges = _requests_with(llm, "Question One: ")
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    refused = [c for item in items for c in item.intermediates.calls if c.rejected]
    abc_items = [item for item in items if item.type == "ABC" and item.answer == "Marie Curie"]
    # A merge naming the answer is refused only where the answer is Marie Curie.
    assert len(merges) == len(items) + len(abc_items) == len(items) + len(refused)
    assert all(r.rejected == "the merged question names the answer 'Marie Curie'"
               for r in refused)


def test_without_repair_the_step_fails_and_a_later_run_with_repair_pays_only_the_rest(
    tmp_path: Path,
) -> None:
    events, leaky = _setup(tmp_path)
    with ScriptedLLM(leaky) as llm:
        assert _build(tmp_path, llm, "--stage", "generate", "--attempts", "1") == 0
        assert llm.calls == 3 * 4 + 2  # the failed event's passage was asked beside it
        (failure,) = read_jsonl(tmp_path / GENERATION_FAILURES, GenerationFailure)
        assert failure.event_id == events[0].id and failure.step == "UnknownQuestionGen"
        assert failure.reason.startswith("the unknown question names its own answer")
        # the passage asked beside the refused question is counted too (it was paid for)
        assert [c.function for c in failure.calls] == ["KnownEventsGen", "UnknownQuestionGen"]
        assert failure.branch in ("AAB", "ABC")

        assert _build(tmp_path, llm, "--stage", "generate") == 0
        assert llm.calls == 3 * 4 + 2 + 3  # the retry, the known question and the merge
    assert len(read_jsonl(tmp_path / "candidates.jsonl", Candidate)) == 4


def test_failures_are_counted_by_reason_and_the_summary_says_what_a_retry_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    """Three events fail alike, each naming its own entity: one reason, 3 of 3, in the words of
    one of them. A re-run answers them from the cache and fails them again, as the summary
    says; a larger --attempts asks the refused step again."""
    events = make_events(4)
    write_jsonl(tmp_path / "events.jsonl", events)
    leaky = FirstTryLeaks({f"Unknown: {e.text}": "Which body is {answer}?" for e in events[:3]})
    with ScriptedLLM(leaky) as llm:
        for _ in range(2):
            assert _build(tmp_path, llm, "--stage", "generate", "--attempts", "1") == 0
            summary = capsys.readouterr().out
            assert "  most common failure: UnknownQuestionGen: the unknown question names its " \
                   "own answer '" in summary
            assert "(3 of 3 failures; the same reason for other names)" in summary
            assert ("(a re-run replays the cached answers and fails them alike: a larger "
                    "--attempts asks a refused step again, --refresh asks every call anew, "
                    "another --model or --seed takes another way)") in summary
        assert "LLM scripted: 0 calls, 6 cache hits" in summary  # the re-run asked nothing
        assert _build(tmp_path, llm, "--stage", "generate") == 0
    assert len(read_jsonl(tmp_path / "candidates.jsonl", Candidate)) == 4


def test_validate_reports_the_yield_by_branch(tmp_path: Path, capsys) -> None:
    events, leaky = _setup(tmp_path)
    with ScriptedLLM(leaky) as llm:
        assert _build(tmp_path, llm, "--stage", "generate", "--attempts", "1") == 0
        capsys.readouterr()
        assert _build(tmp_path, llm, "--stage", "validate") == 0
    out = capsys.readouterr().out
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    passed = sum(bool(c.validation and c.validation.passed) for c in items)
    assert "yield (generation calls, refused attempts included):" in out
    all_line = next(line for line in out.splitlines() if line.strip().startswith("all"))
    # 3 items of 4 calls each, and the failed event's passage and refused question
    assert f"{passed} passed of    4 (1 failed in generation); 14 calls" in all_line
    assert f"{passed / 14:.3f} items per call" in all_line


def test_a_known_entity_named_inside_the_bridge_is_not_drawn(tmp_path: Path) -> None:
    from cuqa_builder.records.events import Entity
    from tests.test_generate import _abc_event_named

    # Every entity of the scripted passage is part of this bridge's name: asking about the
    # bridge would name any of them, so the ABC draw falls back to AAB.
    bridge = Entity(text="Marie Curie Warsaw Poland United Nations Geneva Society", label="ORG")
    write_jsonl(tmp_path / "events.jsonl", [_abc_event_named(bridge)])
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert _build(tmp_path, llm, "--stage", "generate") == 0
    (item,) = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert item.type == "AAB" and item.intermediates is not None
    assert item.intermediates.fallback == f"no entity other than {bridge.text!r} in the known " \
                                          "passage"


def test_a_yield_without_generation_calls_gives_no_rate() -> None:
    """The embedded model composes from structure: 3 items passed on no call is no "0.000 items
    per call"."""
    made = BranchYield(items=6, passed=3, failed_generation=24)
    assert made.line("all") == ("  all      3 passed of   30 (24 failed in generation); no "
                                "generation calls (composed from structure)")
