"""`cuqa-eval reproduce table1`: the eleven rows of the paper's Table 1 with its settings,
through the scripted OpenAI-compatible server, with exact call and retrieval counts per row and
a report laid out like the table."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.evaluate import main
from cuqa_builder.evaluation.reproduce import TABLES
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.events import Event
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from tests.test_eval_cli import FACTS, ITEMS, SOURCE, read_lines

ANSWER = "So the final answer is: United Kingdom. It is well known."


def everyone_answers(body: dict[str, Any]) -> Reply:
    """One reply every method can end on: a "final answer" line (Self-Ask), an "answer is"
    sentence (IRCoT stops at it), a confident verbal 90% (Self-DC verb: generate), token
    logprobs of -0.1 (Self-DC prob: mean probability 0.905 >= 0.7: generate); the judge: Yes."""
    prompt = last_user_message(body)
    if body["model"] == "judge":
        return Reply("Yes")
    if "indicate your level of confidence" in prompt:
        return Reply("Answer: United Kingdom\nConfidence (0-100): 90%")
    return Reply(ANSWER)


# Per item: (LLM calls, retrieval calls) of each row under `everyone_answers`.
EXPECTED = {
    "direct": (1, 0), "cot": (1, 0), "fewshot-cot": (1, 0), "genread": (2, 0), "rr": (1, 1),
    "refeed": (2, 1), "ircot": (1, 1), "self-ask": (1, 0), "iter-retgen": (2, 2),
    "self-dc-verb": (3, 0), "self-dc-prob": (3, 0),
}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-reproduce-00")
    monkeypatch.delenv("SERPER_API_KEY", raising=False)
    write_jsonl(tmp_path / "cuqa.jsonl", ITEMS)
    write_jsonl(tmp_path / "events.jsonl", [
        Event(id=f"ev-{n}", date=date(2023, 11, n), text=text, source=SOURCE)
        for n, text in enumerate(FACTS.values(), start=1)])
    return tmp_path


def test_table1_rows_settings_counts_and_report(workspace: Path, capsys) -> None:
    out = workspace / "table1"
    with ScriptedLLM(everyone_answers) as llm:
        assert main(["reproduce", "table1", "--data", str(workspace / "cuqa.jsonl"),
                     "--retriever", "bm25", "--corpus", str(workspace / "events.jsonl"),
                     "--model", "gpt-3.5-turbo-1106", "--judge-model", "judge",
                     "--base-url", llm.base_url, "--out", str(out), "-q"]) == 0
        first_calls = llm.calls
        # A re-run finds every row done: nothing is asked again.
        assert main(["reproduce", "table1", "--data", str(workspace / "cuqa.jsonl"),
                     "--retriever", "bm25", "--corpus", str(workspace / "events.jsonl"),
                     "--model", "gpt-3.5-turbo-1106", "--judge-model", "judge",
                     "--base-url", llm.base_url, "--out", str(out), "-q"]) == 0
        assert llm.calls == first_calls
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(
        [*EXPECTED, "index"])
    for slug, (llm_calls, retrieval_calls) in EXPECTED.items():
        predictions = read_lines(out / slug / "predictions.jsonl")
        assert [(p["llm_calls"], p["retrieval_calls"]) for p in predictions] == [
            (llm_calls, retrieval_calls)] * 3, slug
        assert all(p["acc"] is True for p in predictions)
        run = json.loads((out / slug / "eval.json").read_text())
        options = run["options"]
        # Section 5.2: top 3, depth 3, temperature and top_p 0.1; Table 1's alpha and beta.
        assert (options["top_k"], options["depth"], options["temperature"],
                options["top_p"]) == (3, 3, 0.1, 0.1)
        if slug.startswith("self-dc"):
            assert (options["confidence"], options["alpha"], options["beta"]) == (
                slug.removeprefix("self-dc-"), 0.4 if slug.endswith("verb") else 0.6, 0.1)
        assert (run["retriever"] is None) == (slug in ("direct", "cot", "fewshot-cot", "genread"))
    table = (out / "TABLE1.md").read_text()
    lines = table.splitlines()
    assert lines[0] == "# Table 1 reproduced (CuQA, gpt-3.5-turbo-1106)"
    header = next(line for line in lines if line.startswith("| Method |"))
    assert header == ("| Method | Cover-EM | EM (SQuAD) | F1 | Acc | Retrieval/q | n | "
                      "Paper EM | Paper F1 | Paper Acc |")
    rows = [line.split(" | ")[0].removeprefix("| ") for line in lines
            if line.startswith("| ") and line != header and not line.startswith("|---")]
    assert rows == ["*w/o retrieval*", "Direct", "CoT", "Few-shot-CoT", "GenRead",
                    "*w/ retrieval*", "RR", "REFEED", "IRCoT", "Self-Ask", "ITER-RETGEN",
                    "Self-DC (verb)", "Self-DC (prob)"]
    # "So the final answer is: United Kingdom." covers the gold; SQuAD EM needs it alone.
    assert "| Direct | 33.3 | 0.0 | " in table
    assert "| Self-Ask | 33.3 | 0.0 | 16.7 | 100.0 | 0.00 | 3 | 7.9 | 2.9 | 11.1 |" in table
    # IRCoT keeps one sentence: "So the final answer is: United Kingdom."
    assert "| IRCoT | 33.3 | 33.3 | 33.3 | 100.0 | 1.00 | 3 | 19.0 | 7.6 | 34.8 |" in table
    assert "| ITER-RETGEN | 33.3 | 0.0 | " in table and "| 2.00 | 3 | 9.9 | 2.5 | 14.2 |" in table
    assert "retriever `bm25`, top-k 3, depth t 3, temperature 0.1, top_p 0.1" in table
    assert capsys.readouterr().out.rstrip().endswith(f"Table 1 -> {out / 'TABLE1.md'}")


def test_reproduce_uses_web_search_by_default(workspace: Path, capsys) -> None:
    with ScriptedLLM(everyone_answers) as llm:
        assert main(["reproduce", "table1", "--data", str(workspace / "cuqa.jsonl"),
                     "--model", "m", "--base-url", llm.base_url,
                     "--out", str(workspace / "t"), "-q"]) == 2
        assert llm.calls == 0
    assert "needs $SERPER_API_KEY" in capsys.readouterr().err


def test_instruct_tables_default_to_the_completions_api(workspace: Path) -> None:
    assert TABLES["table2"].api == "completions"
    assert [row.label for row in TABLES["table2"].rows][-1] == "Self-DC (verb)"
    write_jsonl(workspace / "one.jsonl", ITEMS[:1])
    with ScriptedLLM(everyone_answers) as llm:
        assert main(["reproduce", "table2", "--data", str(workspace / "one.jsonl"),
                     "--retriever", "bm25", "--corpus", str(workspace / "events.jsonl"),
                     "--model", "gpt-3.5-turbo-instruct", "--base-url", llm.base_url,
                     "--out", str(workspace / "t2"), "-q"]) == 0
        assert set(llm.paths) == {"/v1/completions"}
    options = json.loads((workspace / "t2" / "self-dc-verb" / "eval.json").read_text())
    assert (options["api"], options["options"]["alpha"]) == ("completions", 0.8)
