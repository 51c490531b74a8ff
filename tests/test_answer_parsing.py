"""The solvers' readers of free text, on the messy shapes models actually produce."""

from __future__ import annotations

import pytest

from cuqa_builder.answer_parsing import (
    cut_at_stop,
    extract_answer,
    final_answer,
    first_sentence,
    parse_confidence,
    parse_sub_questions,
    parse_yes_no,
)


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        (" Port Vela.", "Port Vela"),
        ("The answer is Port Vela.", "Port Vela"),
        ("the answer is: \"Port Vela\"", "Port Vela"),
        ("So the final answer is: Brindle.", "Brindle"),
        ("Ada Quill won the open in Port Vela. So the answer is Port Vela", "Port Vela"),
        ("First the answer is unclear.\nSo the answer is No.", "No"),
        ("Answer: **Ada Quill**\nConfidence (0-100): 80%", "Ada Quill"),
        ("Final answer: Angola achieved independence from Portugal in 1975.",
         "Angola achieved independence from Portugal in 1975"),
        ("The answer is\n\n  New Zealand\nbecause it hosted both.", "New Zealand"),
        ("\n\nover 70 percent..\nExplanation: the vote share.", "over 70 percent"),
        ("U.S.", "U.S"),
        # A quote opened inside the answer keeps its close and what it encloses (issue 32.14).
        ('The party is called "Forward."', 'The party is called "Forward."'),
        ('The party is called "Forward".', 'The party is called "Forward"'),
        ('"Forward."', "Forward"),
        ('"Ada" and "Ben".', '"Ada" and "Ben"'),
        ("**Ada Quill**.", "Ada Quill"),
        ("“Port Vela”", "Port Vela"),
        ('Port Vela."', "Port Vela"),
        ("", ""),
        # JSON replies, fenced or not (issue 26, fault 6): never the fence's tag "json"
        ('```json\n{"final_answer": "Ankara"}\n```', "Ankara"),
        ('```json {"final_answer": "Ankara"} ```', "Ankara"),
        ('```JSON\n{\n  "reasoning": "The capital.",\n  "answer": "Ankara."\n}\n```', "Ankara"),
        ('Here it is: {"Final Answer": ["Ankara", "Izmir"]}', "Ankara, Izmir"),
        ('{"city": "Ankara"}', "Ankara"),
        ("```\nPort Vela\n```", "Port Vela"),
        ("```Port Vela```", "Port Vela"),
        ("```python\nprint(1)\n```\nAnswer: Port Vela", "Port Vela"),
        ("The answer is {{unknown}}", "{{unknown}}"),
        ('It read {"city": "Bonn"} once. So the answer is Berlin.', "Berlin"),
    ],
)
def test_extract_answer(text: str, answer: str) -> None:
    assert extract_answer(text) == answer


def test_final_answer_only_from_the_final_answer_line() -> None:
    assert final_answer("Follow up: Who?\nSo the final answer is: Brindle.") == "Brindle"
    assert final_answer("so the final answer is New Zealand") == "New Zealand"
    assert final_answer("Intermediate answer: Brindle") is None


@pytest.mark.parametrize(
    ("text", "confidence"),
    [
        ("Answer: Port Vela\nConfidence (0-100): 80%", 0.8),
        ("Answer: Port Vela Confidence (0-100): [75]%", 0.75),
        ("Confidence (0 - 100): 0%", 0.0),
        ("Answer: I am not sure.\nConfidence: 35", 0.35),
        ("confidence level: 0.8", 0.8),
        ("My confidence is 90/100.", 0.9),
        ("Confidence: 100 percent", 1.0),
        ("Confidence (0–100): 120%", 1.0),
        ("Answer: 2031\nConfidence level (0-100): 65 %", 0.65),
        ("Answer: Brindle (about 60% sure)", 0.6),
        ("Answer: 1975 Confidence: 1", 0.01),
    ],
)
def test_parse_confidence_shapes(text: str, confidence: float) -> None:
    assert parse_confidence(text) == pytest.approx(confidence)


def test_parse_confidence_none_when_not_stated() -> None:
    assert parse_confidence("Answer: The 2031 Lunar Chess Open was held in Port Vela.") is None


@pytest.mark.parametrize(
    ("text", "questions"),
    [
        ("#1: Who won the 2031 Lunar Chess Open?, #2: Where is Ada Quill mayor?",
         ["Who won the 2031 Lunar Chess Open?", "Where is Ada Quill mayor?"]),
        ("Answer: #1: [Who won the open?], #2: [Where was it held?], #3: [When?]",
         ["Who won the open?", "Where was it held?", "When?"]),
        ("Sure! Here they are:\n1. Who won the 2031 open?\n2. Which city elected her?\n",
         ["Who won the 2031 open?", "Which city elected her?"]),
        ("1. What is the name of the gang? 2. Which gang is the rival? 3. Did he refuse?",
         ["What is the name of the gang?", "Which gang is the rival?", "Did he refuse?"]),
        ("Sub-question 1: Who won in 2031?\nSub-question 2: Where?",
         ["Who won in 2031?", "Where?"]),
        ("- Who won the open?\n- Where is Brindle?", ["Who won the open?", "Where is Brindle?"]),
        ("#1: Who won the 2031 open in 12 moves?", ["Who won the 2031 open in 12 moves?"]),
        ("Who won the 2031 Lunar Chess Open?", ["Who won the 2031 Lunar Chess Open?"]),
        ("Q1: How many rounds had the 2031 open?\nQ2: Who won round 2?",
         ["How many rounds had the 2031 open?", "Who won round 2?"]),
        ("", []),
    ],
)
def test_parse_sub_questions(text: str, questions: list[str]) -> None:
    assert parse_sub_questions(text) == questions


@pytest.mark.parametrize(
    ("text", "verdict"),
    [("Yes.", True), ("Output: No", False), ("no, I need additional knowledge", False),
     ("I don't know.", None), ("YES, I know it", True)],
)
def test_parse_yes_no(text: str, verdict: bool | None) -> None:
    assert parse_yes_no(text) is verdict


def test_first_sentence_and_stop_cut() -> None:
    assert first_sentence(" Ada Quill won. So the answer is Brindle.") == "Ada Quill won."
    assert first_sentence("Ada Quill won\nSo the answer is Brindle") == "Ada Quill won"
    text = "Follow up: Who won?\nIntermediate answer: invented\nQuestion: next"
    assert cut_at_stop(text, ["\nQuestion:", "Intermediate answer:"]) == "Follow up: Who won?\n"
    assert cut_at_stop("no stop here", ["Intermediate answer:"]) == "no stop here"
