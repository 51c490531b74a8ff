"""`cuqa-eval` end to end: the real CLI, gateway and solvers against the scripted OpenAI server.

The scripted model knows a few facts: it answers closed-book questions from a fixed table and
reads passages honestly (it answers only when the passage holds the fact), so every EM, F1, Acc,
gap and call count below is computed by hand.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.evaluate import main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.events import Event, EventSource
from cuqa_builder.records.items import CuqaItem, EventRef, GeneratorInfo, SubQuestion
from cuqa_builder.testing.batch_server import answer_batch_file
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from tests.test_eval_inputs import freshqa_row, write_freshqa

Q_SUMMIT = "Which country hosted the first AI Safety Summit?"
Q_OPEN = "Who won the 2023 US Open women's singles title?"
Q_G20 = "In which city was the 2023 G20 summit held?"
# question -> (closed-book answer, the fact a passage must hold, the answer read from it)
MODEL = {
    Q_SUMMIT: ("the UK.", "AI Safety Summit", "United Kingdom"),
    Q_OPEN: ("Serena Williams", "Coco Gauff", "Coco Gauff"),
    Q_G20: ("Delhi", "G20 summit", "New Delhi"),
    "Where was the first AI Safety Summit held?": ("Bletchley Park", "", ""),
    "Which country is Bletchley Park in?": ("United Kingdom", "", ""),
    "Which tournament did Coco Gauff win in September 2023?": ("the US Open", "", ""),
    "Which American tennis player was born in 2004?": ("Coco Gauff", "", ""),
    "Which group held its 2023 summit in India?": ("the G7", "", ""),
    "What is the capital of India?": ("New Delhi", "", ""),
}
FACTS = {
    "AI Safety Summit": "The first AI Safety Summit is held at Bletchley Park, United Kingdom.",
    "Coco Gauff": "Coco Gauff wins the US Open women's singles title.",
    "G20 summit": "The G20 summit is held in New Delhi, India.",
}
SOURCE = EventSource(title="2023", revid=1, url="https://en.wikipedia.org/wiki/2023")


def scripted_model(broken: set[str]) -> Any:
    """A responder: closed-book answers, honest reading, verbal confidence 90%, a lenient judge.
    Questions in `broken` get HTTP 400 (a refusal the gateway does not retry)."""

    def respond(body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if prompt.startswith("In the following task"):
            prediction = re.split(r"\nPrediction:?\n", prompt)[1].split("\n\nGround-truth")[0]
            prediction = prediction.lower()
            golds = re.split(r"Ground-truth Answer:?\n", prompt)[1].split("\n\nDoes the")[0]
            hit = any(g.lower() in prediction or prediction in g.lower()
                      for g in golds.splitlines())
            return Reply("Yes" if hit else "No")
        question = (re.search(r"Question: (.*)", prompt) or re.search(r"(.*)$", prompt)).group(1)
        if question in broken:
            return Reply("refused", status=400)
        closed_book, fact, read_answer = MODEL[question]
        if "indicate your level of confidence" in prompt:
            return Reply(f"Answer: {closed_book}\nConfidence (0-100): 90%")
        if prompt.startswith("Generate a background document"):
            return Reply(FACTS.get(fact, "No background is known."))
        if prompt.startswith("Refer to the passage below"):
            passage = prompt.split("Passage: ")[1].split("\nQuestion:")[0]
            return Reply(read_answer if fact and fact in passage else "unknown")
        return Reply(closed_book)

    return respond


def cuqa_item(id: str, question: str, answer: str, aliases: list[str], type: str,
              difficulty: str, subs: list[tuple[str, str, str]]) -> CuqaItem:
    return CuqaItem(
        id=id, question=question, answer=answer, answer_aliases=aliases, type=type,
        difficulty=difficulty,
        sub_questions=[SubQuestion(question=q, answer=a, kind=k) for q, a, k in subs],
        event=EventRef(id=f"ev-{id}", date=date(2023, 11, 1), text="event", source_title="2023",
                       revid=1),
        cutoff="2023-04", generator=GeneratorInfo(model="m"),
    )


ITEMS = [
    cuqa_item("c1", Q_SUMMIT, "United Kingdom", ["UK"], "ABC", "easy", [
        ("Where was the first AI Safety Summit held?", "Bletchley Park", "unknown"),
        ("Which country is Bletchley Park in?", "United Kingdom", "known")]),
    cuqa_item("c2", Q_OPEN, "Coco Gauff", [], "AAB", "easy", [
        ("Which tournament did Coco Gauff win in September 2023?", "US Open", "unknown"),
        ("Which American tennis player was born in 2004?", "Coco Gauff", "known")]),
    cuqa_item("c3", Q_G20, "New Delhi", [], "ABC", "hard", [
        ("Which group held its 2023 summit in India?", "G20", "unknown"),
        ("What is the capital of India?", "New Delhi", "known")]),
]


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-eval-000000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    write_jsonl(tmp_path / "cuqa.jsonl", ITEMS)
    events = [Event(id=f"ev-{n}", date=date(2023, 11, n), text=text, source=SOURCE)
              for n, text in enumerate(FACTS.values(), start=1)]
    events.append(Event(id="ev-9", date=date(2023, 11, 9), source=SOURCE,
                        text="A summit on climate finance is held in Paris."))
    write_jsonl(tmp_path / "events.jsonl", events)
    return tmp_path


def cli(llm: ScriptedLLM, work: Path, out: str, *args: str) -> int:
    return main([*args, "--model", "scripted", "--base-url", llm.base_url,
                 "--out", str(work / out), "-q"])


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_direct_scores_counts_and_resumes(workspace: Path) -> None:
    data = str(workspace / "cuqa.jsonl")
    with ScriptedLLM(scripted_model(broken=set())) as llm:
        # No subcommand: `run` is implied.
        assert cli(llm, workspace, "direct", "--data", data, "--method", "direct",
                   "--no-cache") == 0
        assert llm.calls == 3
        # A re-run finds every item done and makes no call, cache or no cache.
        assert cli(llm, workspace, "direct", "run", "--data", data, "--method", "direct",
                   "--no-cache") == 0
        assert llm.calls == 3

    predictions = {p["id"]: p for p in read_lines(workspace / "direct" / "predictions.jsonl")}
    assert predictions["c1"]["prediction"] == "the UK"
    assert (predictions["c1"]["em"], predictions["c1"]["f1"]) == (1.0, 1.0)  # alias "UK"
    assert (predictions["c2"]["em"], predictions["c2"]["f1"]) == (0.0, 0.0)
    assert predictions["c3"]["f1"] == pytest.approx(2 / 3)  # "delhi" vs "new delhi"
    assert predictions["c1"]["acc"] is None  # no judge
    step = predictions["c1"]["trace"][0]
    assert (step["kind"], step["name"], step["output"]) == ("llm", "solver_direct", "the UK.")
    assert Q_SUMMIT in step["input"]
    assert (predictions["c1"]["llm_calls"], predictions["c1"]["retrieval_calls"]) == (1, 0)
    assert predictions["c1"]["prompt_tokens"] > 0

    m = json.loads((workspace / "direct" / "metrics.json").read_text())
    assert m["n"] == 3 and m["complete"]
    assert m["em"] == pytest.approx(1 / 3)
    assert m["f1"] == pytest.approx((1 + 0 + 2 / 3) / 3)
    assert m["acc"] is None
    assert m["llm_calls"] == {"mean": 1.0, "total": 3}
    assert m["retrieval_calls"] == {"mean": 0.0, "total": 0}
    assert m["by_type"]["ABC"]["em"] == pytest.approx(0.5)
    assert m["by_difficulty"]["hard"]["f1"] == pytest.approx(2 / 3)
    assert m["run"]["method"] == "direct" and m["run"]["model"] == "scripted"


def test_interrupted_run_redoes_only_the_missing_item(workspace: Path, capsys) -> None:
    data = str(workspace / "cuqa.jsonl")
    broken = {Q_G20}
    with ScriptedLLM(scripted_model(broken)) as llm:
        assert cli(llm, workspace, "run", "--data", data, "--method", "direct") == 0
        assert "2 new, 0 resumed, 1 failed (re-run to retry)" in capsys.readouterr().out
        m = json.loads((workspace / "run" / "metrics.json").read_text())
        assert (m["n"], m["complete"]) == (2, False)
        # Simulate a kill in the middle of writing a line: the half line is dropped on resume.
        predictions = workspace / "run" / "predictions.jsonl"
        predictions.write_text(predictions.read_text() + '{"id": "c3", "questi')
        broken.clear()
        calls = llm.calls
        assert cli(llm, workspace, "run", "--data", data, "--method", "direct") == 0
        assert llm.calls == calls + 1  # only c3 is asked
    assert "1 new, 2 resumed" in capsys.readouterr().out
    assert sorted(p["id"] for p in read_lines(predictions)) == ["c1", "c2", "c3"]
    assert json.loads((workspace / "run" / "metrics.json").read_text())["complete"]


def test_other_settings_in_the_same_directory_are_refused(workspace: Path, capsys) -> None:
    data = str(workspace / "cuqa.jsonl")
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "run", "--data", data, "--method", "direct") == 0
        assert cli(llm, workspace, "run", "--data", data, "--method", "cot") == 1
    assert "holds a run with other settings (method differ)" in capsys.readouterr().err


def test_retrieval_needs_a_corpus(workspace: Path, capsys) -> None:
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "rr", "--data", str(workspace / "cuqa.jsonl"),
                   "--method", "rr") == 1
        assert llm.calls == 0
    assert "--method rr retrieves: give --corpus" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--method", "self-dc", "--alpha", "1.5"),
         "alpha: Input should be less than or equal to 1 (got 1.5)"),
        (("--method", "self-dc", "--beta", "-0.1"),
         "beta: Input should be greater than or equal to 0 (got -0.1)"),
        (("--method", "rr", "--top-k", "0"),
         "top_k: Input should be greater than or equal to 1 (got 0)"),
        (("sweep", "--param", "alpha", "--values", "0.4", "1.2"),
         "alpha: Input should be less than or equal to 1 (got 1.2)"),
    ],
)
def test_options_out_of_range_are_refused_before_any_call(
    workspace: Path, capsys, flags: tuple[str, ...], message: str
) -> None:
    args = [*flags, "--data", str(workspace / "cuqa.jsonl"),
            "--corpus", str(workspace / "events.jsonl")]
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "bad", *args) == 1
        assert llm.calls == 0
    assert f"cuqa-eval: error: {message}" in capsys.readouterr().err
    assert not list((workspace / "bad").glob("*/predictions.jsonl"))
    assert not (workspace / "bad" / "predictions.jsonl").exists()


def test_prob_confidence_without_logprobs_stops_the_run_in_one_line(
    workspace: Path, capsys
) -> None:
    no_logprobs = Reply(raw_body=json.dumps({
        "id": "x", "object": "chat.completion", "created": 0, "model": "scripted",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Paris"}}],
    }).encode())
    with ScriptedLLM(lambda body: no_logprobs) as llm:
        assert cli(llm, workspace, "prob", "--data", str(workspace / "cuqa.jsonl"), "--method",
                   "self-dc", "--confidence", "prob",
                   "--corpus", str(workspace / "events.jsonl")) == 1
    err = capsys.readouterr().err
    assert err.startswith("cuqa-eval: error: the endpoint returned no token logprobs")
    assert "Traceback" not in err and "gave up" not in err


def test_rr_with_an_index_and_a_judge(workspace: Path) -> None:
    data = str(workspace / "cuqa.jsonl")
    assert main(["index", "--events", str(workspace / "events.jsonl"),
                 "--out", str(workspace / "index")]) == 0
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "rr", "--data", data, "--method", "rr",
                   "--corpus", str(workspace / "index"), "--top-k", "2",
                   "--judge-model", "judge") == 0
        judged = [r for r in llm.requests if r["model"] == "judge"]
        assert len(judged) == 3 and llm.calls == 6
    predictions = {p["id"]: p for p in read_lines(workspace / "rr" / "predictions.jsonl")}
    for item in ITEMS:
        p = predictions[item.id]
        assert (p["prediction"], p["em"], p["acc"]) == (item.answer, 1.0, True)
        assert (p["retrieval_calls"], p["llm_calls"]) == (1, 1)
        retrieval = p["trace"][0]
        assert (retrieval["kind"], retrieval["name"], retrieval["input"]) == (
            "retrieval", "bm25", item.question)
        assert len(retrieval["data"]["passages"]) == 2
    m = json.loads((workspace / "rr" / "metrics.json").read_text())
    assert (m["em"], m["acc"], m["judged"]) == (1.0, 1.0, 3)
    assert m["retrieval_calls"] == {"mean": 1.0, "total": 3}
    assert m["run"]["retriever"]["name"] == "bm25"
    assert m["run"]["judge_model"] == "judge"


def test_events_corpus_is_indexed_into_the_run_directory(workspace: Path) -> None:
    data = str(workspace / "cuqa.jsonl")
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "rr", "--data", data, "--method", "rr",
                   "--corpus", str(workspace / "events.jsonl")) == 0
    assert (workspace / "rr" / "index" / "corpus.json").is_file()
    assert json.loads((workspace / "rr" / "metrics.json").read_text())["em"] == 1.0


def test_index_command_says_one_line_and_logs_nothing(workspace: Path) -> None:
    # A real process: the library's own DEBUG logging must not reach the terminal.
    done = subprocess.run(
        [sys.executable, "-m", "cuqa_builder.cli.evaluate", "index", "--events",
         str(workspace / "events.jsonl"), "--out", str(workspace / "index")],
        capture_output=True, text=True, check=False, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("indexed 4 events in ")
    assert done.stderr == ""


def test_gap(workspace: Path, capsys) -> None:
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "gap", "gap", "--data", str(workspace / "cuqa.jsonl"),
                   "--method", "direct") == 0
        assert llm.calls == 3 + 6  # composed questions, then their sub-questions
    # c1: subs right, composed right; c2: subs right, composed wrong; c3: a sub wrong.
    gap = json.loads((workspace / "gap" / "gap.json").read_text())
    assert (gap["items"], gap["subs_all_right"], gap["subs_right_composed_wrong"]) == (3, 2, 1)
    assert gap["gap"] == pytest.approx(0.5)
    assert gap["correct_by"] == "exact match"
    assert "compositionality gap 50.0%" in capsys.readouterr().out
    subs = read_lines(workspace / "gap" / "sub-questions" / "predictions.jsonl")
    assert {p["id"] for p in subs} == {f"c{i}/sub{j}" for i in (1, 2, 3) for j in (1, 2)}
    assert {p["type"] for p in subs} == {"known", "unknown"}


def test_the_gap_estimate_counts_the_sub_questions(workspace: Path, capsys) -> None:
    assert main(["gap", "--data", str(workspace / "cuqa.jsonl"), "--method", "direct",
                 "--model", "scripted", "--out", str(workspace / "gap"), "--estimate"]) == 0
    text = capsys.readouterr().out
    assert not (workspace / "gap").exists()
    total = re.search(r"^\s+total\s+([\d,]+)", text, re.MULTILINE)
    assert total is not None and int(total.group(1)) == 3 + 6  # what test_gap's run pays
    assert "their sub-questions" in text


def test_the_sweep_estimate_plans_every_value_and_shared_calls_once(
    workspace: Path, capsys
) -> None:
    args = ["sweep", "--data", str(workspace / "cuqa.jsonl"), "--param", "alpha",
            "--model", "scripted", "--out", str(workspace / "sweep"), "--estimate"]
    totals = []
    for values in (["0.3"], ["0.3", "0.6", "0.9"]):
        assert main([*args, "--values", *values]) == 0
        text = capsys.readouterr().out
        assert f"one run per value of alpha ({len(values)})" in text
        total = re.search(r"^\s+total\s+([\d,]+)", text, re.MULTILINE)
        assert total is not None
        totals.append(int(total.group(1)))
    # The stand-in model reads no confidence: every alpha takes the same path, so the other
    # values' calls are the first one's, answered by the cache.
    assert totals[0] == totals[1] > 0
    # More passages make another reading prompt: each top-k value is a run of its own.
    rr = [*args, "--method", "rr", "--corpus", str(workspace / "events.jsonl")]
    rr[rr.index("alpha")] = "top-k"
    assert main([*rr, "--values", "1", "3"]) == 0
    total = re.search(r"^\s+total\s+([\d,]+)", capsys.readouterr().out, re.MULTILINE)
    assert total is not None and int(total.group(1)) == 2 * 3  # one read per item and value


def test_sweep_reuses_shared_calls_and_report(workspace: Path) -> None:
    data = str(workspace / "cuqa.jsonl")
    with ScriptedLLM(scripted_model(set())) as llm:
        # Confidence 0.9 is above alpha+beta for both alphas: each item takes the generate
        # branch (confidence, generate, read) and the second setting repeats the first's calls.
        assert cli(llm, workspace, "sweep", "sweep", "--data", data, "--param", "alpha",
                   "--values", "0.3", "0.6", "--beta", "0.1", "--judge-model", "scripted",
                   "--corpus", str(workspace / "events.jsonl")) == 0
        assert llm.calls == 3 * 3 + 3  # three calls per item, plus one judgement per item
        assert cli(llm, workspace, "direct", "--data", data, "--method", "direct") == 0
        assert cli(llm, workspace, "rr", "--data", data, "--method", "rr",
                   "--corpus", str(workspace / "events.jsonl")) == 0
        assert cli(llm, workspace, "gap", "gap", "--data", data, "--method", "direct") == 0

    sweep = json.loads((workspace / "sweep" / "sweep.json").read_text())
    assert [s["value"] for s in sweep["settings"]] == [0.3, 0.6]
    assert all(s["em"] == 1.0 and s["acc"] == 1.0 for s in sweep["settings"])
    for alpha in ("0.3", "0.6"):
        run = workspace / "sweep" / f"alpha={alpha}"
        assert json.loads((run / "eval.json").read_text())["options"]["alpha"] == float(alpha)
        for p in read_lines(run / "predictions.jsonl"):
            routes = [s for s in p["trace"] if s["kind"] == "route"]
            assert [r["data"]["branch"] for r in routes] == ["generate"]
            assert p["routes"] == {"self-dc:generate": 1}
            assert (p["route"], p["confidence"]) == ("self-dc:generate", 0.9)
            assert p["llm_calls"] == 3

    report = workspace / "report.md"
    assert main(["report", str(workspace / "direct"), str(workspace / "rr"),
                 str(workspace / "sweep"), str(workspace / "gap"), "--out", str(report)]) == 0
    text = report.read_text()
    assert "| *w/o retrieval* |" in text and "| *w/ retrieval* |" in text
    assert text.index("| Direct |") < text.index("| RR |")
    assert "| Method | Cover-EM | EM | F1 | Acc |" in text
    assert "| Direct | 33.3 | 33.3 | 55.6 | – | 0.00 | 0 | 1.00 | 3 |" in text
    assert "| RR | 100.0 | 100.0 | 100.0 | – | 1.00 | 3 | 1.00 | 3 |" in text
    assert "| Direct | hard | 1 | 0.0 | 0.0 | 66.7 | – | 0.00 |" in text
    assert "## Sweep over alpha" in text
    assert "| 0.3 | 100.0 | 100.0 | 100.0 | 100.0 | 0 | 3 |" in text
    assert "![alpha sweep](report-alpha.png)" in text
    assert (workspace / "report-alpha.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Compositionality gap" in text and "| 50.0 | exact match |" in text


def test_report_of_a_directory_without_results(workspace: Path, capsys) -> None:
    assert main(["report", str(workspace), "--out", str(workspace / "r.md")]) == 1
    assert "nothing to report: " in capsys.readouterr().err
    assert not (workspace / "r.md").exists()


def test_report_over_a_glob_skips_what_holds_no_results(workspace: Path, capsys) -> None:
    data = str(workspace / "cuqa.jsonl")
    evals = workspace / "evals"
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, evals, "direct", "--data", data, "--method", "direct") == 0
    (evals / "unfinished").mkdir()
    report = evals / "REPORT.md"
    for _ in range(2):  # the second time, `evals/*` also matches the first report
        capsys.readouterr()
        assert main(["report", *map(str, sorted(evals.iterdir())), "--out", str(report)]) == 0
    out = capsys.readouterr().out
    assert f"  skipped {evals / 'unfinished'}: holds no metrics.json" in out
    assert f"  skipped {report}: not a directory" in out
    assert "| Direct | 33.3 | 33.3 |" in report.read_text()


def test_freshqa_split_runs_concurrently_up_to_the_gateway_bound(workspace: Path) -> None:
    rows = [freshqa_row(str(n), "TEST" if n < 4 else "DEV", question, [answer], "")
            for n, (question, answer) in enumerate(
                [(q, MODEL[q][0]) for q in list(MODEL)[:6]])]
    write_freshqa(workspace / "freshqa.csv", rows)
    slow = scripted_model(set())

    def respond(body: dict[str, Any]) -> Reply:
        reply = slow(body)
        reply.delay_s = 0.3
        return reply

    with ScriptedLLM(respond) as llm:
        assert cli(llm, workspace, "fresh", "--data", str(workspace / "freshqa.csv"),
                   "--split", "test", "--method", "direct", "--concurrency", "3") == 0
        assert llm.calls == 4
        assert llm.max_in_flight == 3  # items run together, as many calls as the bound allows
    m = json.loads((workspace / "fresh" / "metrics.json").read_text())
    assert (m["n"], m["em"], m["run"]["split"]) == (4, 1.0, "test")
    ids = [p["id"] for p in read_lines(workspace / "fresh" / "predictions.jsonl")]
    assert sorted(ids) == ["freshqa-0", "freshqa-1", "freshqa-2", "freshqa-3"]


def test_scoring_options_are_visible_and_recorded(workspace: Path) -> None:
    data = str(workspace / "cuqa.jsonl")
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "strict", "--data", data, "--method", "direct",
                   "--no-aliases") == 0
        assert cli(llm, workspace, "lenient", "--data", data, "--method", "direct",
                   "--yes-no-first-word") == 0
    strict = {p["id"]: p for p in read_lines(workspace / "strict" / "predictions.jsonl")}
    # "the UK" matched only the alias "UK": without aliases it scores nothing.
    assert (strict["c1"]["cover_em"], strict["c1"]["em"]) == (0.0, 0.0)
    assert strict["c1"]["answers"] == ["United Kingdom"]
    for name, aliases, yes_no in (("strict", False, False), ("lenient", True, True)):
        m = json.loads((workspace / name / "metrics.json").read_text())
        assert m["run"]["scoring"] == {"aliases": aliases, "yes_no_first_word": yes_no}
        assert json.loads((workspace / name / "eval.json").read_text())["scoring"] == (
            m["run"]["scoring"])
    assert json.loads((workspace / "lenient" / "metrics.json").read_text())["cover_em"] == (
        pytest.approx(1 / 3))


@pytest.mark.parametrize(("prompt", "judged"), [
    ("iter-retgen", "The summit met at Bletchley Park. So the answer is the UK."),
    ("reworded", "the UK"),
])
def test_the_judge_reads_the_whole_output_as_iter_retgen_does(
    workspace: Path, prompt: str, judged: str
) -> None:
    reasoning = "The summit met at Bletchley Park. So the answer is the UK."

    def respond(body: dict[str, Any]) -> Reply:
        return Reply("Yes" if body["model"] == "judge" else reasoning)

    write_jsonl(workspace / "one.jsonl", ITEMS[:1])
    with ScriptedLLM(respond) as llm:
        assert cli(llm, workspace, prompt, "--data", str(workspace / "one.jsonl"),
                   "--method", "cot", "--judge-model", "judge", "--judge-prompt", prompt) == 0
        [judge_call] = [b for b in llm.requests if b["model"] == "judge"]
    assert f"Prediction:\n{judged}\n\n" in last_user_message(judge_call) or (
        f"Prediction\n{judged}\n\n" in last_user_message(judge_call))
    [p] = read_lines(workspace / prompt / "predictions.jsonl")
    assert (p["prediction"], p["output"], p["acc"]) == ("the UK", reasoning, True)
    assert json.loads((workspace / prompt / "eval.json").read_text())["judge_prompt"] == prompt


def test_a_negative_limit_is_a_usage_error(workspace: Path, capsys) -> None:
    """Issue 15.6: `--limit -1` once evaluated all items but the last, silently."""
    with ScriptedLLM(scripted_model(set())) as llm:
        with pytest.raises(SystemExit) as stopped:
            cli(llm, workspace, "neg", "--data", str(workspace / "cuqa.jsonl"),
                "--method", "direct", "--limit", "-1")
        assert llm.calls == 0
    assert stopped.value.code == 2
    assert "--limit: must be 1 or more, not -1" in capsys.readouterr().err
    assert not (workspace / "neg" / "predictions.jsonl").exists()


@pytest.mark.parametrize("content", ["", "\n\n"])
def test_an_empty_dataset_is_an_error_not_a_score(workspace: Path, capsys, content: str) -> None:
    """Issue 15.10: an empty dataset once reported EM 0.000 and complete: true."""
    (workspace / "empty.jsonl").write_text(content)
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "empty", "--data", str(workspace / "empty.jsonl"),
                   "--method", "direct") == 1
        assert llm.calls == 0
    err = capsys.readouterr().err
    assert err.startswith(f"cuqa-eval: error: {workspace / 'empty.jsonl'}: no questions in the")
    assert not (workspace / "empty" / "metrics.json").exists()


def test_a_corrupt_call_cache_is_one_line_naming_it(workspace: Path, capsys) -> None:
    """Issue 15.9: random bytes in llm-cache.sqlite once gave a sqlite3 traceback."""
    cache = workspace / "run" / "llm-cache.sqlite"
    cache.parent.mkdir()
    cache.write_bytes(bytes(range(256)) * 64)
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "run", "--data", str(workspace / "cuqa.jsonl"),
                   "--method", "direct") == 1
        assert llm.calls == 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"cuqa-eval: error: {cache} is not a usable cache database")
    assert "--no-cache" in err and "move it aside" in err


def test_a_key_echoed_in_an_answer_is_scrubbed_like_the_cache(workspace: Path) -> None:
    """Issue 15.12: the key once reached predictions.jsonl while the cache kept it scrubbed,
    so a replay from the cache scored differently."""
    key = "sk-test-eval-000000"  # the workspace's OPENAI_API_KEY

    def echo(body: dict[str, Any]) -> Reply:
        return Reply(f"United Kingdom (debug: {key})")

    cache = workspace / "shared-cache.sqlite"
    runs = []
    with ScriptedLLM(echo) as llm:
        for out in ("live", "replay"):
            assert cli(llm, workspace, out, "--data", str(workspace / "cuqa.jsonl"), "--method",
                       "direct", "--cache", str(cache)) == 0
            runs.append((workspace / out / "predictions.jsonl").read_text())
        assert llm.calls == 3  # the replay is served from the cache
    for text in runs:
        assert key not in text and "debug: ***" in text
    live, replay = ({p["id"]: (p["prediction"], p["cover_em"], p["f1"]) for p in
                     map(json.loads, text.splitlines())} for text in runs)
    assert live == replay


def test_batch_file_rounds_stop_and_go_on_to_the_live_scores(workspace: Path, capsys) -> None:
    """`--batch-files`: each round's file is written and the run stops (exit 75) until an
    offline engine answers it; the scores are those of a live run, each call answered once."""
    data = str(workspace / "cuqa.jsonl")
    respond = scripted_model(broken=set())
    with ScriptedLLM(respond) as llm:
        assert cli(llm, workspace, "live", "--data", data, "--method", "genread") == 0
        live_calls = llm.calls
    rounds = workspace / "rounds"
    args = ["--data", data, "--method", "genread", "--model", "scripted", "-q",
            "--out", str(workspace / "batch"), "--batch-files", str(rounds)]
    answered, runs = 0, 0
    while (status := main(args)) == 75:
        runs += 1
        assert "run this command again" in capsys.readouterr().err
        for source in sorted(rounds.glob("round-*.input.jsonl")):
            target = source.with_name(source.name.replace(".input.", ".output."))
            if not target.exists():
                lines = source.read_text().splitlines()
                target.write_text("\n".join(answer_batch_file(lines, respond)) + "\n")
                answered += len(lines)
    assert status == 0
    assert runs == 2  # genread: generate, then read
    assert answered == live_calls
    scores = [{k: p[k] for k in ("id", "prediction", "em", "f1")}
              for p in read_lines(workspace / "batch" / "predictions.jsonl")]
    live = [{k: p[k] for k in ("id", "prediction", "em", "f1")}
            for p in read_lines(workspace / "live" / "predictions.jsonl")]
    assert sorted(scores, key=str) == sorted(live, key=str)


# --- Self-DC's dependent sub-questions, counts over a run of commands, prices (issue 32) -----

Q_MAYOR = "Which town elected the winner of the Lunar Chess Open as mayor?"
SUB_WINNER = "Who won the Lunar Chess Open?"
SUB_DEPENDENT = "Which town elected #1 as mayor?"
MAYOR_EVENTS = {
    "ev-chess": "The Lunar Chess Open is won by Ada Quill.",
    "ev-mayor": "Ada Quill is elected mayor of Brindle.",
}


def dependent_model(body: dict[str, Any]) -> Reply:
    """Self-DC on Q_MAYOR: uncertain, it splits into SUB_WINNER and a sub-question naming its
    answer "#1"; every sub-question is unknown (retrieved); a passage is read honestly, so only
    the filled sub-question "Which town elected Ada Quill as mayor?" finds Brindle."""
    prompt = last_user_message(body)
    question = re.findall(r"Question: (.*)", prompt)[-1]
    if "indicate your level of confidence" in prompt:
        return Reply(f"Answer: x\nConfidence (0-100): {40 if question == Q_MAYOR else 10}%")
    if "divide the question into smaller" in prompt:
        return Reply(f"#1: {SUB_WINNER}, #2: {SUB_DEPENDENT}")
    if "Here are all related sub-questions" in prompt:
        return Reply("Brindle" if "Answer: Brindle" in prompt else "It cannot be determined.")
    passage = prompt.split("Passage: ")[1].split("\nQuestion:")[0]
    if question == SUB_WINNER and MAYOR_EVENTS["ev-chess"] in passage:
        return Reply("Ada Quill")
    if "Ada Quill as mayor" in question and MAYOR_EVENTS["ev-mayor"] in passage:
        return Reply("Brindle")
    return Reply("It cannot be determined which politician #1 is.")


def answer_rounds_until_done(args: list[str], respond: Any, capsys) -> tuple[int, list[str]]:
    """Run a --batch-files command, answering each round it writes, until it finishes; the
    commands run and what each wrote to stderr."""
    rounds = Path(args[args.index("--batch-files") + 1])
    errs = []
    while (status := main(args)) == 75:
        errs.append(capsys.readouterr().err)
        for source in sorted(rounds.glob("round-*.input.jsonl")):
            target = source.with_name(source.name.replace(".input.", ".output."))
            if not target.exists():
                lines = source.read_text().splitlines()
                target.write_text("\n".join(answer_batch_file(lines, respond)) + "\n")
    assert status == 0
    errs.append(capsys.readouterr().err)
    return len(errs), errs


def test_self_dc_fill_and_literal_through_batch_files_side_by_side(
    tmp_path: Path, capsys, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32.12, 13 and 15: both settings of --self-dc-dependent run through --batch-files
    rounds (one rounds directory) on the same item, and the report puts them side by side; the
    last command counts the whole run; an offline engine has no price to warn about."""
    data = tmp_path / "q.jsonl"
    data.write_text(json.dumps({"id": "m1", "question": Q_MAYOR, "answers": ["Brindle"]}) + "\n")
    write_jsonl(tmp_path / "events.jsonl", [
        Event(id=id, date=date(2031, 5, 9), text=text, source=SOURCE)
        for id, text in MAYOR_EVENTS.items()])
    finals = {}
    for setting in ("fill", "literal"):
        args = ["--data", str(data), "--method", "self-dc", "--self-dc-dependent", setting,
                "--corpus", str(tmp_path / "events.jsonl"), "--model", "scripted", "-q",
                "--out", str(tmp_path / setting), "--batch-files", str(tmp_path / "rounds")]
        commands, errs = answer_rounds_until_done(args, dependent_model, capsys)
        assert commands > 2
        finals[setting] = errs[-1]
    assert "no price known" not in caplog.text

    fill = read_lines(tmp_path / "fill" / "predictions.jsonl")[0]
    literal = read_lines(tmp_path / "literal" / "predictions.jsonl")[0]
    assert (fill["prediction"], fill["cover_em"]) == ("Brindle", 1.0)
    assert literal["cover_em"] == 0.0
    [filled] = [s for s in fill["trace"] if s["name"] == "self-dc-fill"]
    assert filled["data"]["question"] == "Which town elected Ada Quill as mayor?"
    queries = [s["input"] for s in fill["trace"] if s["kind"] == "retrieval"]
    assert queries == [SUB_WINNER, "Which town elected Ada Quill as mayor?"]
    assert [s["input"] for s in literal["trace"] if s["kind"] == "retrieval"] == [
        SUB_WINNER, SUB_DEPENDENT]

    # The last command answered the last round only; the whole run is metrics.json's count.
    metrics = json.loads((tmp_path / "fill" / "metrics.json").read_text())
    whole = int(metrics["llm_calls"]["total"])
    this = re.search(r"LLM, this command: (\d+) calls, (\d+) cache hits", finals["fill"])
    assert this is not None and int(this.group(1)) < whole
    assert (f"LLM, the whole run: {whole} calls by the method for 1 questions, "
            f"{int(metrics['tokens']['total'])} tokens") in finals["fill"]
    # confidence, decompose; each sub-question: confidence, read; combine
    assert fill["llm_calls"] == whole == 2 + 2 * 2 + 1

    report = tmp_path / "REPORT.md"
    assert main(["report", str(tmp_path / "fill"), str(tmp_path / "literal"),
                 "--out", str(report)]) == 0
    text = report.read_text()
    assert "| Self-DC (verb, #k filled) | 100.0 | 100.0 | 100.0 | – |" in text
    assert "| Self-DC (verb) | 0.0 | 0.0 | 0.0 | – |" in text


def test_an_unknown_price_is_said_once_per_run(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32.15: every command of a run warned again; the first one that paid says it."""
    data = str(workspace / "cuqa.jsonl")
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "run", "--data", data, "--method", "direct",
                   "--limit", "1") == 0
        assert caplog.text.count("no price known for model 'scripted'") == 1
        caplog.clear()
        assert cli(llm, workspace, "run", "--data", data, "--method", "direct") == 0
        assert llm.calls == 3  # the second command paid for two more
    assert "no price known" not in caplog.text


def test_a_self_dc_run_recorded_before_filling_resumes_only_as_literal(
    workspace: Path, capsys
) -> None:
    """A Self-DC directory whose eval.json predates --self-dc-dependent asked its sub-questions
    as written: the default (fill) would mix two behaviours in it, so it is refused."""
    args = ["--data", str(workspace / "cuqa.jsonl"), "--method", "self-dc", "--limit", "1",
            "--corpus", str(workspace / "events.jsonl")]
    with ScriptedLLM(scripted_model(set())) as llm:
        assert cli(llm, workspace, "sdc", *args, "--self-dc-dependent", "literal") == 0
        settings = workspace / "sdc" / "eval.json"
        recorded = json.loads(settings.read_text())
        del recorded["options"]["self_dc_dependent"]  # as an older cuqa-eval wrote it
        settings.write_text(json.dumps(recorded))
        capsys.readouterr()
        assert cli(llm, workspace, "sdc", *args) == 1
        assert "holds a run with other settings (options differ)" in capsys.readouterr().err
        assert cli(llm, workspace, "sdc", *args, "--self-dc-dependent", "literal") == 0
