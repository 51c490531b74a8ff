"""The critic model (issue 10, part 5) through the scripted OpenAI-compatible server, and
near-duplicates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.grounding.evidence import critic_lines
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate, CheckFailure
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.validation.critic import CRITERIA, parse_verdicts
from cuqa_builder.validation.near_duplicates import find_near_duplicates
from tests.validation_samples import aab, abc, river

VERDICTS = ("A: yes - one question\n**B: yes** - Aurelia 7\nC) no - the second hop alone gives it"
            "\nD: yes - the article says so")


class CriticResponder:
    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        self.prompts.append(prompt)
        assert "You are reviewing one item" in prompt
        return Reply(text=VERDICTS if "Trans-Karoo" in prompt else "All good!")


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _validate(out: Path, llm: ScriptedLLM, *extra: str) -> int:
    return main(["--out", str(out), "--cutoff", "2023-04", "--stage", "validate", "-q",
                 "--critic-model", "critic", "--critic-base-url", llm.base_url, *extra])


def test_verdicts_are_read_per_criterion() -> None:
    found = parse_verdicts(VERDICTS)
    assert {name: v.passed for name, v in found.items()} == {
        "natural_question": True, "one_clear_answer": True, "both_hops_needed": False,
        "known_answer_supported": True}
    assert found["both_hops_needed"].note == "the second hop alone gives it"
    assert parse_verdicts("Sure.") == {}


def test_a_criterion_the_critic_rejects_fails_the_item(tmp_path: Path, capsys) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [aab(), river()])
    responder = CriticResponder()
    with ScriptedLLM(responder) as llm:
        assert _validate(tmp_path, llm) == 0
        assert llm.calls == 2
        out = capsys.readouterr().out
        assert _validate(tmp_path, llm) == 0
        assert llm.calls == 2  # the critic's answers come from the cache
    judged = {c.id: c.validation for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)}
    car, osk = judged[aab().id], judged[river().id]
    assert car is not None and set(car.critic) == set(CRITERIA.values())
    assert not car.passed
    assert [(f.check, f.reason) for f in car.failures] == [(
        "critic_both_hops_needed", "the critic critic says no: the second hop alone gives it")]
    # A reply without verdicts judges nothing: every criterion fails, saying why.
    assert osk is not None and not osk.passed and len(osk.failures) == 4
    assert osk.critic["natural_question"].note.startswith("no verdict in the critic's reply")
    assert "critic: 2 candidates judged by critic (failing items)" in out
    car_prompt = next(prompt for prompt in responder.prompts if "Aurelia 7" in prompt)
    assert "Sub-questions it was built from" in car_prompt


def test_an_advisory_critic_records_without_failing(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [aab()])
    with ScriptedLLM(CriticResponder()) as llm:
        assert _validate(tmp_path, llm, "--critic-advisory") == 0
    (item,) = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert item.validation is not None and item.validation.passed
    assert [f.check for f in item.validation.advisories] == ["critic_both_hops_needed"]
    assert not item.validation.critic["both_hops_needed"].passed
    assert critic_lines(item) == [
        "✓ critic, natural question: one question", "✓ critic, one clear answer: Aurelia 7",
        "✗ critic, both hops needed: the second hop alone gives it",
        "✓ critic, known answer supported: the article says so"]


# --- near-duplicates ------------------------------------------------------------------------


def test_reworded_questions_are_near_duplicates_of_the_first_clean_one() -> None:
    first = abc(id="cq-first")
    reworded = abc(id="cq-reworded", question="In which city is the university whose students "
                   "won the Trans-Karoo Challenge of 2023 located?")
    other_event = reworded.model_copy(update={
        "id": "cq-other", "event": river().event, "answer": "Elsewhere"})
    unrelated = aab()
    candidates = [reworded, first, other_event, unrelated]
    failures: list[list[CheckFailure]] = [[CheckFailure(check="x", reason="y")], [], [], []]
    flagged = find_near_duplicates(candidates, failures)
    # the clean first is kept; the reworded one (same event and answer) points to it
    assert flagged[0].reason == "near_duplicate of cq-first (same event and answer)"
    # another event, another answer, and the same words: compared through neither block
    assert set(flagged) == {0}


def test_same_answer_and_the_same_question_in_other_words_on_another_event() -> None:
    first = abc(id="cq-a")
    second = abc(id="cq-b", event=river().event,
                 question="Located in which city is the university whose students won the 2023 "
                 "Trans-Karoo Challenge?")
    flagged = find_near_duplicates([first, second], [[], []])
    assert flagged[1].check == "near_duplicate"
    assert flagged[1].reason.startswith("near_duplicate of cq-a (questions ")


def test_one_story_told_by_two_events_is_one_item() -> None:
    """Issue 32: an earthquake and, two days later, its death toll: the same bridge to the same
    answer is one item, whatever the words; two hops of one event with other answers are two."""
    first = abc(id="cq-quake")
    toll = abc(id="cq-toll", event=river().event,
               question="What is the capital of the country where rescuers reached villages "
               "after a magnitude 6.8 earthquake in September 2023?")
    other_hop = abc(id="cq-hop", answer="Elsewhere",
                    question=first.question.replace("In which city", "In which district"))
    flagged = find_near_duplicates([first, toll, other_hop], [[], [], []])
    assert flagged[1].reason == ("near_duplicate of cq-quake (same bridge and answer: one story "
                                 "told by two events)")
    assert 2 not in flagged
