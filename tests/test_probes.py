"""Probes against a scripted target model: a real local OpenAI-compatible server and gateway."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main, parse_options
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import API_TIMEOUT_S, LOCAL_TIMEOUT_S, LLMSettings
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, CheckFailure
from cuqa_builder.records.items import CuqaItem, SubQuestion
from cuqa_builder.stages.endpoints import probe_settings
from cuqa_builder.stages.options import BuildOptions
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.validation.probes import Prober, ProbeResult
from tests.validation_samples import aab, abc, hard, river

ABC_KNOWN = "In which city is Pellham University located?"
IDK = "I do not know."


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-probes-000000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def asked(prompt: str) -> str:
    """The question inside a probe prompt (Tables 14 and 16 end with it)."""
    return prompt.split("\nQuestion: ", 1)[1].removesuffix("\nThe answer is")


def target_model(
    closed_book: dict[str, str],
    with_passage: dict[str, str],
    judge: Callable[[str], str] | None = None,
) -> Callable[[dict[str, Any]], Reply]:
    """A scripted target: what it answers to each question closed-book and with a passage
    (anything else: it does not know), and as model "judge" the judge's verdicts."""

    def respond(body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if body["model"] == "judge":
            assert judge is not None
            return Reply(text=judge(prompt))
        answers = with_passage if "\nPassage: " in prompt else closed_book
        return Reply(text=answers.get(asked(prompt), IDK))

    return respond


def probe(llm: ScriptedLLM, tmp_path: Path, candidate: Candidate, judged: bool = False):
    settings = LLMSettings(model="target", base_url=llm.base_url, cache_path=tmp_path / "c.db")

    async def go() -> ProbeResult:
        async with open_gateway(settings) as gateway:
            if not judged:
                return await Prober(gateway).probe(candidate)
            judge_settings = settings.model_copy(update={"model": "judge"})
            async with open_gateway(judge_settings) as judge_gateway:
                return await Prober(gateway, judge_gateway).probe(candidate)

    return asyncio.run(go())


def test_a_compositional_unknown_item_passes_the_probes(tmp_path: Path) -> None:
    item = abc()
    responder = target_model({ABC_KNOWN: "Dunmere."}, {item.question: "Dunmere"})
    with ScriptedLLM(responder) as llm:
        result = probe(llm, tmp_path, item)
        prompts = [last_user_message(body) for body in llm.requests]
        bodies = llm.requests
    assert result.failures() == []
    assert (result.model, result.judge) == ("target", "normalised match")
    assert not result.closed_book.correct and result.closed_book.prediction == "I do not know"
    assert [(k.question, k.prediction, k.correct) for k in result.known] == [
        (ABC_KNOWN, "Dunmere", True)
    ]
    assert result.with_unknown_answer.correct
    assert len(prompts) == 3 and all(b["temperature"] == 0.0 for b in bodies)
    direct = load_prompt("probe_closed_book").render(question=item.question)
    assert direct == (
        "Please answer the following question with just a few words.\n"
        f"Question: {item.question}\nThe answer is"
    )
    assert direct in prompts
    assert any(
        p.startswith("Refer to the passage below and answer the following question with just a "
                     "few words.\nPassage: Which university's students won the 2023 Trans-Karoo "
                     "Challenge? Pellham University.\nQuestion: In which city")
        for p in prompts
    )


def test_each_probe_failure_has_its_reason(tmp_path: Path) -> None:
    item = abc()
    known = {item.question: "It is Dunmere.", ABC_KNOWN: "Karoo City"}
    with ScriptedLLM(target_model(known, {item.question: "Port Alla"})) as llm:
        result = probe(llm, tmp_path, item)
    assert result.failures() == [
        CheckFailure(check="probe_not_unknown",
                     reason='target answered the question closed-book: "It is Dunmere"'),
        CheckFailure(check="probe_known_part_not_known",
                     reason=f'target got the known sub-question "{ABC_KNOWN}" wrong: '
                     '"Karoo City" instead of "Dunmere"'),
        CheckFailure(check="probe_does_not_compose",
                     reason='given the unknown part, target still answered "Port Alla" instead '
                     'of "Dunmere"'),
    ]


def test_an_alias_is_a_correct_answer(tmp_path: Path) -> None:
    item = river()
    known = {"Which river flows through Dunmere?": "The Osk."}
    with ScriptedLLM(target_model(known, {item.question: "the osk river"})) as llm:
        result = probe(llm, tmp_path, item)
    assert result.known[0].answers == ["River Osk", "Osk"]
    assert result.failures() == []


def connected_aab() -> Candidate:
    """A connected recipe's AAB item: its known part is a category of many members."""
    item = aab(question="Which of the solar cars of the Karoo league is the car that won the "
               "2023 Trans-Karoo Challenge?")
    known = SubQuestion(question="What are the solar cars of the Karoo league?",
                        answer="Aurelia 7", kind="known")
    steps = item.intermediates.model_copy(update={
        "category": "solar cars of the Karoo league", "known_question": known.question})
    return item.model_copy(update={
        "sub_questions": [item.sub_questions[0], known], "intermediates": steps})


@pytest.mark.parametrize(("reply", "known"), [("Yes.", True), ("No, it is not.", False)])
def test_a_category_known_part_is_asked_as_membership(
    tmp_path: Path, reply: str, known: bool
) -> None:
    """A list of the category's members names only its famous ones, so the probe asks whether
    the answer is one of them, and a "yes" is right."""
    item = connected_aab()
    membership = "Is Aurelia 7 one of the solar cars of the Karoo league? Answer yes or no."
    with ScriptedLLM(target_model({membership: reply}, {item.question: "Aurelia 7"})) as llm:
        result = probe(llm, tmp_path, item)
        asked_questions = [asked(last_user_message(body)) for body in llm.requests]
    assert llm.calls == 3 and membership in asked_questions
    assert [(k.question, k.answers, k.correct) for k in result.known] == [
        (membership, ["yes"], known)
    ]
    assert [f.check for f in result.failures()] == ([] if known else ["probe_known_part_not_known"])


def test_a_hard_item_probes_both_known_parts_and_gives_both_unknown_ones(tmp_path: Path) -> None:
    item = hard()
    known = {ABC_KNOWN: "Dunmere", "Which river flows through Dunmere?": "Lake Tarn"}
    with ScriptedLLM(target_model(known, {item.question: "River Osk"})) as llm:
        result = probe(llm, tmp_path, item)
        prompts = [last_user_message(body) for body in llm.requests]
    assert llm.calls == 4
    assert [k.correct for k in result.known] == [True, False]
    assert [f.check for f in result.failures()] == ["probe_known_part_not_known"]
    passage = next(p for p in prompts if "\nPassage: " in p)
    assert ("Passage: Which university's students won the 2023 Trans-Karoo Challenge? Pellham "
            "University.\nWhich river flooded Dunmere in October 2023? River Osk.\n") in passage


def test_the_judge_decides_when_given(tmp_path: Path) -> None:
    """"The town on the Osk delta" names no gold answer: a normalised match says wrong, the
    judge (scripted to accept it) says right, so the item is not unknown after all."""
    item = abc()

    def verdict(prompt: str) -> str:
        return "No" if f"Prediction:\n{IDK.rstrip('.')}" in prompt else "Yes"

    known = {item.question: "The town on the Osk delta.", ABC_KNOWN: "Dunmere"}
    responder = target_model(known, {item.question: "Dunmere"}, judge=verdict)
    with ScriptedLLM(responder) as llm:
        plain = probe(llm, tmp_path / "plain", item)
        judged = probe(llm, tmp_path / "judged", item, judged=True)
        judge_calls = [b for b in llm.requests if b["model"] == "judge"]
    assert not plain.closed_book.correct
    assert judged.judge == "judge" and judged.closed_book.correct
    assert [f.check for f in judged.failures()] == ["probe_not_unknown"]
    assert len(judge_calls) == 3  # one per probe answer


# --- the stage with probes --------------------------------------------------------------------


def validate(tmp_path: Path, llm: ScriptedLLM, *extra: str) -> int:
    return main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate", "-q",
                 "--probe-model", "target", "--probe-base-url", llm.base_url, *extra])


def test_validate_stage_probes_the_items_that_passed_the_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    known_by_target = aab(id="cq-known")  # the target already answers it closed-book
    residue = abc(id="cq-residue", question="Merged question: which city hosts it?")
    write_jsonl(tmp_path / "candidates.jsonl", [abc(), known_by_target, residue])
    known = {ABC_KNOWN: "Dunmere", known_by_target.question: "Aurelia 7",
             "Which solar car was built by students of Pellham University?": "Aurelia 7"}
    passage = {abc().question: "Dunmere", known_by_target.question: "Aurelia 7"}
    with ScriptedLLM(target_model(known, passage)) as llm:
        assert validate(tmp_path, llm) == 0
        first_run_calls = llm.calls
        out = capsys.readouterr().out
        assert validate(tmp_path, llm) == 0  # a re-run asks nothing again
        assert llm.calls == first_run_calls
        rerun_out = capsys.readouterr().out

    assert first_run_calls == 6  # 3 probes for each of the two items that passed the checks
    verdicts = {c.id: c.validation for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)}
    assert verdicts["cq-abc0000000000002"].passed
    assert verdicts["cq-abc0000000000002"].probes["known"][0]["prediction"] == "Dunmere"
    assert [f.check for f in verdicts["cq-known"].failures] == ["probe_not_unknown"]
    assert verdicts["cq-residue"].probes == {}  # failed the checks: not probed
    items = read_jsonl(tmp_path / "cuqa.jsonl", CuqaItem)
    assert [i.id for i in items] == ["cq-abc0000000000002"]

    assert "probes: 2 candidates asked target (judge: normalised match); 6 calls, 0 from" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert rows["probe_not_unknown"] == ["1", "1"]
    assert rows["probe_does_not_compose"] == ["2", "0"]
    assert "0 calls, 6 from the cache" in rerun_out
    info = json.loads((tmp_path / "run.json").read_text())["validation"]
    assert info["probe_model"] == "target" and info["judge"] == "normalised match"
    assert info["prompts"]["probe_closed_book"] == load_prompt("probe_closed_book").sha256


def test_validate_stage_uses_the_judge_model_at_the_probe_endpoint(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [abc()])
    known = {ABC_KNOWN: "Dunmere"}
    with ScriptedLLM(target_model(known, {abc().question: "Dunmere"}, judge=lambda p: "No")) as llm:
        assert validate(tmp_path, llm, "--judge-model", "judge") == 0
        models = [body["model"] for body in llm.requests]
    assert models.count("target") == 3 and models.count("judge") == 3
    candidate = read_jsonl(tmp_path / "candidates.jsonl", Candidate)[0]
    assert candidate.validation.probes["judge"] == "judge"
    # The judge said No to everything: the known part is "not known" and it "does not compose".
    assert [f.check for f in candidate.validation.failures] == [
        "probe_known_part_not_known", "probe_does_not_compose"
    ]


def test_a_probe_that_fails_for_good_is_a_verdict_not_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [abc()])
    with ScriptedLLM(lambda body: Reply(text="overloaded", status=500)) as llm:
        # the verdicts are written, then the command says the run is not done (exit 1)
        assert validate(tmp_path, llm, "--max-retries", "0") == 1
    candidate = read_jsonl(tmp_path / "candidates.jsonl", Candidate)[0]
    assert not candidate.validation.passed
    failure = candidate.validation.failures[0]
    assert failure.check == "probe_error"
    assert failure.reason.startswith(
        "the probe model target (a model of the cutoff) could not be asked (target: ")
    assert failure.reason.endswith("); run validate again to retry")
    assert "sk-test-probes" not in (tmp_path / "candidates.jsonl").read_text()
    assert candidate.validation.probes["model"] == "target"
    out, err = capsys.readouterr()
    assert ("the probe model target (a model of the cutoff) could not be asked about 1 "
            "candidates (they fail probe_error): run validate again once it answers") in out
    assert err.rstrip().endswith("validate failed: the probe model target (a model of the "
                                 "cutoff) could not be asked about 1 candidates: run validate "
                                 "again once it answers")
    assert (tmp_path / "cuqa.jsonl").read_text() == ""


def probe_options(*flags: str) -> BuildOptions:
    return parse_options(["--out", "run", "--stage", "validate", *flags])


def test_an_embedded_target_model_can_be_probed_whatever_generated() -> None:
    options = probe_options("--base-url", "http://127.0.0.1:9/v1", "--model", "generator",
                            "--probe-model", "local:smollm2-135m-instruct-q4_1",
                            "--judge-model", "local:smollm2-135m-instruct-q4_1")
    probe, judging = probe_settings(options, Path("c.sqlite"))
    assert (probe.local, probe.base_url, probe.model) == (
        "smollm2-135m-instruct-q4_1", None, None)
    assert probe.timeout_s == LOCAL_TIMEOUT_S
    assert judging == probe  # one embedded server serves both


def test_a_remote_target_of_an_embedded_generator_gets_the_api_timeout() -> None:
    options = probe_options("--llm", "local", "--probe-model", "target",
                            "--probe-base-url", "http://127.0.0.1:9/v1")
    probe, judging = probe_settings(options, Path("c.sqlite"))
    assert (probe.local, probe.base_url, probe.model) == (None, "http://127.0.0.1:9/v1", "target")
    assert probe.timeout_s == API_TIMEOUT_S and judging is None


def test_an_unknown_embedded_target_is_refused(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [abc()])
    code = main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate", "-q",
                 "--probe-model", "local:no-such-model"])
    assert code == 1
    assert "unknown local model 'no-such-model'" in capsys.readouterr().err
