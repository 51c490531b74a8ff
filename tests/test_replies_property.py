"""The checker's replies fail closed (issue 31), as a property over replies of every shape:
no reply that names the item's answer among its counted guesses passes `connected` or
`unknown_before_cutoff`, whatever its shape, and no reply the readers cannot read passes
anything. Replies are made by hypothesis in the shapes models write (numbered, bulleted,
labelled, bold, one line of semicolons, JSON lists and objects, fenced, with lead-ins and
explanations), and in shapes they should not be read in (refusals, prose, JSON of other
fields); pooled replies (one section per question) too.
"""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cuqa_builder.llm.types import ChatRequest, ChatResult
from cuqa_builder.verification.checker import (
    CONNECTED,
    GuessAsked,
    guess_verdict,
    open_book_verdicts,
)
from cuqa_builder.verification.replies import Unreadable, read_guesses, sections

ANSWER = "Ankara"
COUNTED = 3
# Names sharing no word or stem with the answer, nor spelt near it ("Antalya" is: its spelling
# is 62 of 100 like "Ankara"'s, a near miss for a judge): matching them needs no judge.
OTHERS = ["Izmir", "Bursa", "Konya", "Kayseri", "Adana", "Trabzon", "Eskisehir", "Samsun",
          "Star Wars: The Force Awakens", "St. Louis", "Paris, France", "U.S. Steel"]


class NoJudge:
    """A checker whose judge must not be needed (every name here is decided by its words)."""

    model = "checker"

    async def chat(self, request: ChatRequest) -> ChatResult:
        raise AssertionError(f"a judge call was made: {request.messages[-1]['content'][:80]}")


def _verdict(reply: str) -> bool:
    asked = GuessAsked(CONNECTED, "Which city is the capital of a certain country?", "checker",
                       "told")
    return asyncio.run(guess_verdict(NoJudge(), asked, reply, [ANSWER], COUNTED)).passed


def _shape(guesses: list[str], shape: str, lead_in: bool, explain: bool, fence: bool) -> str:
    items = [f"{g} – the likeliest" if explain and i == 0 else g for i, g in enumerate(guesses)]
    text = {
        "numbered": "\n".join(f"{i}. {g}" for i, g in enumerate(items, 1)),
        "bulleted": "\n".join(f"- {g}" for g in items),
        "labelled": "\n".join(f"Guess {i}: {g}" for i, g in enumerate(items, 1)),
        "bold": "\n".join(f"{i}. **{g}**" for i, g in enumerate(items, 1)),
        "semicolons": "; ".join(guesses),
        "json list": json.dumps(guesses),
        "json object": json.dumps({"reasoning": "capitals are often guessed",
                                   "guesses": guesses}),
        "final answer": json.dumps({"reasoning": "the likeliest", "final_answer": guesses[0]}),
    }[shape]
    if lead_in and not shape.startswith(("json", "final")):
        text = "Here are my five best guesses:\n" + text
    return f"```json\n{text}\n```" if fence else text


SHAPES = st.sampled_from(["numbered", "bulleted", "labelled", "bold", "semicolons",
                          "json list", "json object", "final answer"])


@settings(max_examples=300, deadline=None)
@given(others=st.lists(st.sampled_from(OTHERS), min_size=4, max_size=4, unique=True),
       position=st.integers(0, COUNTED - 1), shape=SHAPES, lead_in=st.booleans(),
       explain=st.booleans(), fence=st.booleans())
def test_no_reply_naming_the_answer_among_its_counted_guesses_passes(
    others: list[str], position: int, shape: str, lead_in: bool, explain: bool, fence: bool
) -> None:
    guesses = [*others[:position], ANSWER, *others[position:]]
    if shape == "final answer":
        guesses = [ANSWER]
    assert not _verdict(_shape(guesses, shape, lead_in, explain, fence))


@settings(max_examples=200, deadline=None)
@given(others=st.lists(st.sampled_from(OTHERS), min_size=5, max_size=5, unique=True),
       shape=SHAPES, lead_in=st.booleans(), explain=st.booleans(), fence=st.booleans())
def test_a_reply_without_the_answer_is_read_and_passes(
    others: list[str], shape: str, lead_in: bool, explain: bool, fence: bool
) -> None:
    reply = _shape(others, shape, lead_in, explain, fence)
    assert not isinstance(read_guesses(reply), Unreadable)
    assert _verdict(reply)


PROSE = st.sampled_from([
    "I cannot know this: the question is about events after my knowledge cutoff.",
    "It is probably {answer}.",
    "As an AI, I don't have information about events after 2023, but {answer} seems likely.",
    "Sorry, I am unable to guess.",
    '{{"reasoning": "it could be {answer}", "confidence": "low"}}',
    "{answer}. It is the capital.",
    "",
    "Unknown.",
    "none",
])


@settings(max_examples=100, deadline=None)
@given(prose=PROSE, fence=st.booleans())
def test_a_refusal_or_prose_is_unreadable_and_never_passes(prose: str, fence: bool) -> None:
    reply = prose.format(answer=ANSWER)
    reply = f"```\n{reply}\n```" if fence else reply
    assert isinstance(read_guesses(reply), Unreadable)
    assert not _verdict(reply)


@settings(max_examples=150, deadline=None)
@given(reply=st.text(max_size=200))
def test_no_reply_the_reader_cannot_read_passes(reply: str) -> None:
    if isinstance(read_guesses(reply), Unreadable):
        assert not _verdict(reply)


@settings(max_examples=150, deadline=None)
@given(reply=st.text(max_size=200) | st.sampled_from([
    "Answer: Ankara", "Nasdaq", "Answer: Ankara, though Izmir fits as well",
    "Answer: Ankara\nOther things the description fits: none",
]))
def test_an_open_book_reply_missing_its_lines_never_passes_one_answer(reply: str) -> None:
    verdicts = asyncio.run(open_book_verdicts(NoJudge(), "Which city?", "checker", reply,
                                              [ANSWER], ["Turkey"]))
    one_answer = verdicts[1]
    if "Other things the description fits:" not in reply or "Other right answers:" not in reply:
        assert not one_answer.passed and one_answer.unreadable


@settings(max_examples=200, deadline=None)
@given(shapes=st.lists(SHAPES, min_size=1, max_size=4), answered=st.data(),
       header=st.sampled_from(["Q{n}: ", "**Q{n}.** ", "Question {n}:\n", "Q{n}\n"]))
def test_in_a_pooled_reply_every_question_is_judged_by_its_own_section(
    shapes: list[str], answered: st.DataObject, header: str
) -> None:
    named = [answered.draw(st.booleans()) for _ in shapes]
    parts = []
    for n, (shape, has) in enumerate(zip(shapes, named, strict=True), 1):
        guesses = [ANSWER, *OTHERS[:4]] if has else OTHERS[4:9]
        body = _shape(guesses, shape if shape != "final answer" else "semicolons", False,
                      False, False)
        parts.append(header.format(n=n) + body)
    read = sections("\n".join(parts), len(shapes))
    for n, has in enumerate(named, 1):
        part = read[n]
        assert not isinstance(part, Unreadable)
        assert _verdict(part) is not has
