"""Issue 38's bar: the run of the control, with the checker's guesses answered by a refusal
without a subject ("Cannot determine", "Beyond my knowledge cutoff") or cut at their token limit
(`finish_reason: "length"`), puts no item in cuqa.jsonl: whether the guesses are pooled while
composing or asked one item at a time by validate. Everything through the loopback server."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import count_records
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.testing.pool_llm import PoolResponder
from cuqa_builder.verification.replies import Unreadable, read_guesses, sections

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wiki-sample"
CUT = "cut"  # the guesses cut mid-name at their token limit


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@dataclass
class NonAnswers(PoolResponder):
    """The pool's scripted model, its guesses replaced: every line said `said`, or (CUT) the
    reply ended mid-name where its token limit would end it, and said so."""

    said: str | None = None  # None: the control, guessing as PoolResponder does

    def __call__(self, body: dict[str, Any]) -> Reply:
        reply = super().__call__(body)
        if self.said is None or not last_user_message(body).startswith("Imagine you know"):
            return reply
        if self.said == CUT:  # "Q1: Atlantis; El Dor", and nothing after it
            return Reply(text=reply.text[: reply.text.index("El Dorado") + 6],
                         finish_reason="length")
        return Reply(text="\n".join(line.split(": ", 1)[0] + f": {self.said}"
                                    if line.startswith("Q") else self.said
                                    for line in reply.text.splitlines()))


def _build(out: Path, llm: ScriptedLLM, stage: str, *extra: str) -> int:
    return main(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                 "--out", str(out), "--limit", "5", "--stage", stage, "-q",
                 "--base-url", llm.base_url, "--model", "scripted", *extra])


def _released(out: Path, said: str | None, *generate: str) -> int:
    """Items in cuqa.jsonl after events, generate and validate (a generate that made nothing
    ends with status 1 and leaves validate nothing to pass)."""
    with ScriptedLLM(NonAnswers(said=said)) as llm:
        assert _build(out, llm, "events") == 0
        status = _build(out, llm, "generate", *generate)
        assert status == (0 if said is None else 1)
        if status == 0:
            (out / "articles.jsonl").unlink(missing_ok=True)  # the checker decides here
            assert _build(out, llm, "validate", "--max-share", "1") == 0
    return count_records(out / "cuqa.jsonl")


@pytest.mark.parametrize("said", ["Cannot determine", "Beyond my knowledge cutoff", CUT])
def test_pooled_guesses_that_name_nothing_or_were_cut_put_no_item_in_the_dataset(
    tmp_path: Path, said: str
) -> None:
    assert _released(tmp_path / "control", None) > 0
    assert _released(tmp_path / "run", said) == 0


@pytest.mark.parametrize("said", ["Cannot determine", "Beyond my knowledge cutoff", CUT])
def test_guesses_asked_one_item_at_a_time_that_name_nothing_or_were_cut_pass_nothing(
    tmp_path: Path, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Composed without a checker, then validated by one: every item's guesses unreadable, and
    the summary's advice names the model that checks (issue 38.9)."""
    with ScriptedLLM(NonAnswers(said=said)) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate", "--check-model", "none") == 0
        assert count_records(tmp_path / "candidates.jsonl") > 0
        (tmp_path / "articles.jsonl").unlink(missing_ok=True)
        capsys.readouterr()
        assert _build(tmp_path, llm, "validate", "--max-share", "1",
                      "--check-model", "checker") == 0
    summary = capsys.readouterr().out
    assert count_records(tmp_path / "cuqa.jsonl") == 0
    assert "nothing passed, most commonly unreadable" in summary
    assert "try another --check-model" in summary and "stronger --model" not in summary


def test_a_cut_pooled_reply_is_unreadable_for_the_question_it_did_not_finish() -> None:
    reply = "Q1: Izmir; Bursa; Konya\nQ2: Atlantis; El Dor"
    whole = sections(reply, 3)
    assert read_guesses(whole[2]) == ["Atlantis", "El Dor"]  # as if it were complete
    cut = sections(reply, 3, cut=True)
    assert read_guesses(cut[1]) == ["Izmir", "Bursa", "Konya"]
    assert isinstance(cut[2], Unreadable) and "token limit" in cut[2].why
    assert isinstance(cut[3], Unreadable) and cut[3].why == "no line for Q3"
