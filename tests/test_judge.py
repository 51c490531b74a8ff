"""The Acc judge through the real gateway and the scripted OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cuqa_builder.answer_parsing import parse_yes_no
from cuqa_builder.judge import judge
from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.prompts import load_prompt
from cuqa_builder.testing.openai_server import RuleResponder, ScriptedLLM, last_user_message


@pytest.fixture(autouse=True)
def dummy_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-judge-000000")


def run_judge(llm: ScriptedLLM, tmp_path: Path, prediction: str, answers: list[str],
              prompt: str = "iter-retgen") -> bool:
    settings = LLMSettings(model="scripted", base_url=llm.base_url,
                           cache_path=tmp_path / "c.sqlite")

    async def go() -> bool:
        async with open_gateway(settings) as gateway:
            return await judge(gateway, "Which city hosted the summit?", prediction, answers,
                               prompt)

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [
        ("Yes", True),
        ("No", False),
        ("**Yes**", True),
        ("Answer: no.", False),
        ("YES - the prediction names the city.", True),
        ("Not sure", False),  # neither word: counted as No
        ("", False),
    ],
)
def test_verdicts_are_parsed(tmp_path: Path, reply: str, verdict: bool) -> None:
    with ScriptedLLM(RuleResponder([], default=reply)) as llm:
        assert run_judge(llm, tmp_path, "It was Bletchley Park", ["Bletchley Park"]) is verdict
        assert llm.calls == 1


ITER_RETGEN_JUDGE = (  # Shao et al., 2023, section 4.2, as the Self-DC paper's footnote 7 uses it
    "In the following task, you are given a Question, a model Prediction for the Question, and "
    "a Ground-truth Answer to the Question. You should decide whether the model Prediction "
    "implies the Ground-truth Answer.\n\nQuestion\n{question}\n\nPrediction\n{prediction}\n\n"
    "Ground-truth Answer\n{answer}\n\nDoes the Prediction imply the Ground-truth Answer? "
    "Output Yes or No:"
)


def test_the_default_prompt_is_iter_retgens_word_for_word(tmp_path: Path) -> None:
    with ScriptedLLM(RuleResponder([], default="Yes")) as llm:
        run_judge(llm, tmp_path, "It was New Delhi.", ["New Delhi", "Delhi"])
        prompt = last_user_message(llm.requests[0])
        body = llm.requests[0]
    assert load_prompt("judge_iter_retgen").text == ITER_RETGEN_JUDGE
    assert prompt == ITER_RETGEN_JUDGE.format(
        question="Which city hosted the summit?", prediction="It was New Delhi.",
        answer="New Delhi\nDelhi")
    assert body["temperature"] == 0.0
    assert "footnote 7" in load_prompt("judge_iter_retgen").source


def test_reworded_prompt_is_a_named_alternative(tmp_path: Path) -> None:
    with ScriptedLLM(RuleResponder([], default="Yes")) as llm:
        run_judge(llm, tmp_path, "New Delhi", ["New Delhi", "Delhi"], prompt="reworded")
        prompt = last_user_message(llm.requests[0])
    assert "Question:\nWhich city hosted the summit?" in prompt
    assert "Prediction:\nNew Delhi" in prompt
    assert "Ground-truth Answer:\nNew Delhi\nDelhi" in prompt
    assert "several acceptable forms may be listed" in prompt
    assert prompt.endswith("Does the Prediction imply the Ground-truth Answer? Output Yes or No:")


def test_empty_prediction_is_wrong_without_a_call(tmp_path: Path) -> None:
    with ScriptedLLM(RuleResponder([], default="Yes")) as llm:
        assert run_judge(llm, tmp_path, "   ", ["Paris"]) is False
        assert llm.calls == 0


def test_repeated_judgement_is_served_from_the_cache(tmp_path: Path) -> None:
    with ScriptedLLM(RuleResponder([], default="Yes")) as llm:
        assert run_judge(llm, tmp_path, "Paris", ["Paris"])
        assert run_judge(llm, tmp_path, "Paris", ["Paris"])
        assert llm.calls == 1


def test_parse_verdict_needs_a_standalone_word() -> None:
    assert parse_yes_no("Nobody knows") is None  # "no" inside a word does not count
    assert parse_yes_no("yesterday") is None
    assert parse_yes_no("I would say no, it does not.") is False
