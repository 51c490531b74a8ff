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

import pytest
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


# Refusals without a subject, made from a grammar of statements that name nothing (issue 38):
# what cannot be done about knowing, how far the question lies beyond what is known, what is
# lacking, what the answer is not, an adjective alone, a pass, punctuation.
_CANNOT = st.sampled_from(["Cannot", "Can't", "Unable to", "Impossible to", "Not possible to",
                           "Hard to", "Too early to", "No way to", "Not able to", "Could not",
                           "Won't", "Difficult to"])
_KNOWING_VERB = st.sampled_from(["know", "determine", "say", "tell", "guess", "identify",
                                 "answer", "predict", "confirm", "verify", "speculate",
                                 "be determined", "be known", "recall", "be sure", "decide"])
_QUALIFIER = st.sampled_from(["", " this", " that", " it", " the answer", " for sure",
                              " for certain", " reliably", " yet", " from the question",
                              " with certainty", " with any confidence", " at this time"])
_BEYOND = st.sampled_from(["Beyond", "After", "Past", "Outside", "Later than"])
_LIMIT = st.sampled_from(["knowledge cutoff", "training data", "knowledge", "training cutoff",
                          "cutoff date", "knowledge cut-off", "data", "training"])
_LACKING = st.sampled_from(["Insufficient", "Not enough", "No", "Too little", "Lacking",
                            "Without enough", "Not sufficient", "No clear", "No reliable"])
_WHAT_IS_LACKING = st.sampled_from(["information", "data", "context", "evidence", "details",
                                    "knowledge", "info", "clues", "idea", "basis"])
_PURPOSE = st.sampled_from(["", " to guess", " to answer", " to say", " to determine",
                            " available", " given", " to go on"])
_NOT = st.sampled_from(["Not", "Not yet", "Still not", "Not currently", "Not really"])
_STATE = st.sampled_from(["known", "knowable", "determinable", "certain", "clear", "available",
                          "sure", "confirmed", "disclosed", "reported", "specified",
                          "determined", "identifiable", "guessable"])
_ADJECTIVE = st.sampled_from([
    "Unclear", "Unknowable", "Uncertain", "Unsure", "Undetermined", "Indeterminate",
    "Unanswerable", "Unverifiable", "Unpredictable", "Unknown", "Impossible", "Inconclusive",
    "Speculative", "Ambiguous", "Undisclosed", "Unconfirmed", "Unspecified", "Undecidable",
    "Unidentifiable", "Doubtful", "Anyone's guess", "A mystery"])
_NO_GUESS = st.sampled_from(["No", "No good", "No confident", "No educated", "No definitive"])
_GUESS_NOUN = st.sampled_from(["guess", "idea", "answer", "clue", "comment", "information"])
REFUSAL = st.one_of(
    st.builds("{} {}{}".format, _CANNOT, _KNOWING_VERB, _QUALIFIER),
    st.builds("{} {} {}".format, _BEYOND, st.sampled_from(["my", "the"]), _LIMIT),
    st.builds("{} {}{}".format, _LACKING, _WHAT_IS_LACKING, _PURPOSE),
    st.builds("{} {}".format, _NOT, _STATE),
    _ADJECTIVE,
    st.builds("{} {}".format, _NO_GUESS, _GUESS_NOUN),
    st.sampled_from(["Pass", "Skip", "?", "??", "…", "—", "?!"]),
)


@st.composite
def refusals(draw: st.DrawFn) -> str:
    """A refusal as a model may write it: any case, a full stop or not."""
    said = draw(REFUSAL)
    said = draw(st.sampled_from([said, said.lower(), said.upper(), said.title()]))
    return said + draw(st.sampled_from(["", ".", "!", "…"]))


@settings(max_examples=400, deadline=None)
@given(refusal=refusals(), shape=st.sampled_from(["bare", "numbered", "labelled", "json list",
                                                   "json object", "final answer"]),
       others=st.lists(st.sampled_from(OTHERS), max_size=3, unique=True), fence=st.booleans())
def test_a_line_that_names_nothing_is_no_guess_and_never_passes(
    refusal: str, shape: str, others: list[str], fence: bool
) -> None:
    """Alone or among names, a refusal without a subject makes the reply unreadable."""
    guesses = [refusal, *others]
    reply = refusal if shape == "bare" else _shape(guesses, shape, False, False, fence)
    assert isinstance(read_guesses(reply), Unreadable), reply
    assert not _verdict(reply)
    pooled = sections(f"Q1: Izmir; Bursa; Konya\nQ2: {refusal}", 2)
    assert not isinstance(pooled[1], Unreadable) and _verdict(pooled[1])
    assert not isinstance(pooled[2], Unreadable) and not _verdict(pooled[2])


# Names made of the refusals' own words and one word of another kind are names.
_NAME_WORD = st.sampled_from(["Lake", "Key", "Christian", "County", "Island", "Foods",
                              "Party", "Orchestra", "Bay", "Affinity", "Springs", "Valley"])


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.sampled_from(["Clear", "No", "Name", "Pass", "Unknown", "Certain",
                                       "Impossible", "Know", "Nothing", "The"]),
                      min_size=1, max_size=2),
       last=_NAME_WORD, position=st.integers(0, 2))
def test_a_name_of_the_refusals_words_and_another_word_is_read(
    words: list[str], last: str, position: int
) -> None:
    name = " ".join([*words[:position], last, *words[position:]])
    assert read_guesses(f"1. {name}\n2. Izmir") == [name, "Izmir"]


@pytest.mark.parametrize("name", ["Pass Christian", "Unity", "Clear Lake", "No Name Key",
                                  "The Guess Who", "Know Nothing Party", "Impossible Foods",
                                  "Information Age", "Indiana", "Unknown Mortal Orchestra"])
def test_real_names_that_look_like_refusals_are_names(name: str) -> None:
    part = sections(f"Q1: {name}; Izmir", 1)[1]
    assert isinstance(part, str) and read_guesses(part) == [name, "Izmir"]
    assert read_guesses(name) == [name]


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
