"""The checker's four checks (`verification/checker.py`) through the real gateway and the scripted
OpenAI-compatible server: each fails a scripted bad item and passes a good one, with the calls
counted; plus the masked question and the replies' shapes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.grounding.evidence import checker_lines
from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.records.candidates import (
    Candidate,
    CheckerCheck,
    CheckerVerdict,
    Intermediates,
    Validation,
)
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import EventRef, GeneratorInfo
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.verification.answers import decided
from cuqa_builder.verification.checker import ItemChecker, Outcome, failure_reason
from cuqa_builder.verification.masking import masked_description
from cuqa_builder.verification.replies import Unreadable, read_guesses, read_open_book

NOT_IT = "1. Atlantis\n2. El Dorado\n3. Avalon\n4. Lemuria\n5. Shangri-La"
CLEAN_OPEN_BOOK = "Answer: {answer}\nOther things the description fits: none\n" \
    "Other right answers: none"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-checker-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _item(answer: str = "Nasdaq", aliases: tuple[str, ...] = (), *,
          question: str = "On which exchange is the company that agreed in September 2023 to "
                           "be bought for $28 billion listed?",
          masked: str = "On which exchange is a certain company listed?",
          bridge: str = "Splunk", item_id: str = "cq-1") -> Candidate:
    steps = Intermediates(
        branch="ABC", cur_ent=Entity(text=bridge, label="ORG", wiki_title=bridge),
        known_passage=f"{bridge} is a software company.", unknown_question="What is it?",
        known_question=f"On which exchange is {bridge} listed?", known_answer=answer,
        merged_question=question, masked_question=masked,
    )
    return Candidate(
        id=item_id, question=question, answer=answer, answer_aliases=list(aliases), type="ABC",
        difficulty="easy", sub_questions=[],
        event=EventRef(id="ev-1", date=date(2023, 9, 21), text=f"Cisco agrees to buy {bridge}.",
                       source_title="Portal:Current events/2023 September 21", revid=1),
        cutoff="2023-04", generator=GeneratorInfo(model="scripted"), intermediates=steps, seed=0,
    )


Script = Callable[[str, str], str]  # (kind of prompt, the question asked) -> the reply


class Checker:
    """The scripted checker: `script` answers the guesses and the open-book prompt; the judge
    says Yes to the pairs in `same`."""

    def __init__(self, script: Script, same: frozenset[tuple[str, str]] = frozenset()) -> None:
        self.script = script
        self.same = same
        self.asked: list[tuple[str, str]] = []  # (model, kind)

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        question = prompt.rsplit("Question: ", 1)[-1].split("\n", 1)[0].strip()
        if prompt.startswith("Imagine you know everything"):
            kind = "guesses"
        elif "Background, as written before" in prompt:
            kind = "open book"
        else:
            kind = "judge"
            prediction = prompt.split("Prediction:\n", 1)[1].split("\n", 1)[0]
            answers = prompt.split("Ground-truth Answer:\n", 1)[1].split("\n\n", 1)[0]
            self.asked.append((body["model"], kind))
            return Reply(text="Yes" if (prediction, answers.splitlines()[0]) in self.same
                         else "No")
        self.asked.append((body["model"], kind))
        return Reply(text=self.script(kind, question))


def _check(llm: ScriptedLLM, tmp_path: Path, item: Candidate, *, counted: int = 3,
           fail_fast: bool = False, probe: bool = False) -> Outcome:
    def settings(model: str) -> LLMSettings:
        return LLMSettings(model=model, base_url=llm.base_url, cache_path=tmp_path / "c.sqlite")

    async def go() -> Outcome:
        async with open_gateway(settings("checker")) as gateway:
            if not probe:
                return await ItemChecker(gateway, "2023-04", counted=counted).check(
                    item, fail_fast=fail_fast)
            async with open_gateway(settings("probe")) as guesser:
                return await ItemChecker(gateway, "2023-04", counted=counted,
                                         guesser=guesser).check(item, fail_fast=fail_fast)

    return asyncio.run(go())


def _verdicts(outcome: Outcome) -> dict[str, bool]:
    return {v.check: v.passed for v in outcome.verdicts}


def _honest(answer: str, whole: str = NOT_IT, masked: str = NOT_IT, open_book: str = "") -> Script:
    """Guesses at the masked question (it has "a certain"), at the whole one, and the answer
    with the event."""
    def script(kind: str, question: str) -> str:
        if kind == "open book":
            return open_book or CLEAN_OPEN_BOOK.format(answer=answer)
        return masked if " a certain " in question else whole
    return script


def test_a_good_item_passes_all_four_checks_in_three_calls(tmp_path: Path) -> None:
    with ScriptedLLM(Checker(_honest("Nasdaq"))) as llm:
        outcome = _check(llm, tmp_path, _item())
        assert llm.calls == 3  # guesses masked, guesses whole, the answer with the event
    assert _verdicts(outcome) == {"connected": True, "unknown_before_cutoff": True,
                                  "answered_with_event": True, "one_answer": True}
    whole = outcome.verdicts[1]
    assert whole.guesses == ["Atlantis", "El Dorado", "Avalon", "Lemuria", "Shangri-La"]
    assert whole.counted == 3 and whole.knowledge == "told"
    assert sorted(c.function for c in outcome.calls) == ["AnswerWithEvent", "GuessAnswers",
                                                         "GuessAnswers"]


def test_an_answer_among_the_counted_guesses_is_guessable(tmp_path: Path) -> None:
    """The whole question's guesses name Nasdaq second: guessable with three counted, not with
    one; the verdict changes with `counted` and no call is paid again."""
    guesses = "1. New York Stock Exchange\n2. Nasdaq\n3. London Stock Exchange\n4. Euronext\n5. TSX"
    with ScriptedLLM(Checker(_honest("Nasdaq", whole=guesses))) as llm:
        three = _check(llm, tmp_path, _item())
        one = _check(llm, tmp_path, _item(), counted=1)
        assert llm.calls == 3  # the second run is served by the cache
    assert _verdicts(three)["unknown_before_cutoff"] is False
    assert _verdicts(one)["unknown_before_cutoff"] is True
    failed = three.failed
    assert failed is not None and failed.matched == "Nasdaq (alias)"
    assert failure_reason(failed) == (
        'checker, told to know nothing after the cutoff, guesses the answer: Nasdaq (alias) '
        'among "New York Stock Exchange; Nasdaq; London Stock Exchange"')


def test_the_masked_question_guessed_is_a_shortcut_and_stops_a_compose_time_check(
    tmp_path: Path,
) -> None:
    with ScriptedLLM(Checker(_honest("Nasdaq", masked="Nasdaq\nNYSE\nLSE\nTSX\nSIX"))) as llm:
        outcome = _check(llm, tmp_path, _item(), fail_fast=True)
        assert llm.calls == 2  # both guesses at once; one failed: no answer with the event
    assert _verdicts(outcome) == {"connected": False, "unknown_before_cutoff": True}
    assert "with the event masked" in failure_reason(outcome.verdicts[0])


def test_a_checker_that_gives_no_guesses_measured_nothing(tmp_path: Path) -> None:
    with ScriptedLLM(Checker(_honest("Nasdaq", whole="Unknown."))) as llm:
        outcome = _check(llm, tmp_path, _item())
    assert _verdicts(outcome)["unknown_before_cutoff"] is False
    assert "cannot be read (guesses: a line that names nothing ('Unknown'))" in \
        failure_reason(outcome.verdicts[1])


def test_a_reworded_answer_is_judged_the_same_with_one_call(tmp_path: Path) -> None:
    """"Israeli Ground Forces" shares words with "IDF Ground Forces" without being one of its
    names: the judge is asked once (and says Yes), so the masked guess names the answer; the
    open-book answer worded the same way is the item's answer. Unrelated guesses ask nothing."""
    item = _item("IDF Ground Forces", question="Which branch does the brigade whose commander "
                 "was killed in October 2023 belong to?",
                 masked="Which branch does a certain brigade belong to?",
                 bridge="Golani Brigade")
    same = frozenset({("Israeli Ground Forces", "IDF Ground Forces")})
    script = _honest("IDF Ground Forces", masked="Israeli Ground Forces\nIsraeli Navy\nMossad",
                     open_book=CLEAN_OPEN_BOOK.format(answer="Israeli Ground Forces"))
    checker = Checker(script, same)
    with ScriptedLLM(checker) as llm:
        outcome = _check(llm, tmp_path, item)
        assert llm.calls == 3 + 2  # one judge call for the masked guess, one for the answer
    assert [kind for _, kind in checker.asked].count("judge") == 2
    assert _verdicts(outcome) == {"connected": False, "unknown_before_cutoff": True,
                                  "answered_with_event": True, "one_answer": True}
    assert outcome.verdicts[0].matched == "Israeli Ground Forces (judge)"
    assert [c.function for c in outcome.calls].count("SameAnswer") == 2


def test_a_known_hop_that_changed_by_the_event_gives_another_answer(tmp_path: Path) -> None:
    """At the cutoff the player played for the Lakers; by the event he had moved: with the
    event in hand the checker answers the Raptors, and the item fails with no judge call."""
    item = _item("Los Angeles Lakers",
                 question="Which NBA team does the MVP of the 2023 World Cup play for?",
                 masked="Which NBA team does a certain player play for?", bridge="Dennis Schröder")
    script = _honest("", open_book=CLEAN_OPEN_BOOK.format(answer="Toronto Raptors"))
    with ScriptedLLM(Checker(script)) as llm:
        outcome = _check(llm, tmp_path, item)
        assert llm.calls == 3
    assert _verdicts(outcome)["answered_with_event"] is False
    assert failure_reason(outcome.verdicts[2]) == (
        'with the event in hand, checker answers "Toronto Raptors" instead')


def test_a_description_that_fits_another_thing_of_the_event_is_ambiguous(tmp_path: Path) -> None:
    """The kibbutz attacked: the news names three. The bridge named among the "others" does not
    count against the item; the two other kibbutzim do."""
    item = _item("Eshkol Regional Council", question="Which regional council includes the "
                 "kibbutz attacked on 7 October 2023?",
                 masked="Which regional council includes a certain kibbutz?", bridge="Be'eri")
    script = _honest("", open_book="Answer: Eshkol Regional Council\nOther things the "
                     "description fits: Be'eri; Kfar Aza; Nir Oz\nOther right answers: none")
    with ScriptedLLM(Checker(script)) as llm:
        outcome = _check(llm, tmp_path, item)
        assert llm.calls == 3  # nothing shares a word with the answer: no judge
    assert _verdicts(outcome)["one_answer"] is False
    assert outcome.verdicts[3].others == ["Kfar Aza", "Nir Oz"]
    assert "Kfar Aza; Nir Oz" in failure_reason(outcome.verdicts[3])


def test_the_whole_question_goes_to_a_model_of_the_cutoff_when_one_is_given(
    tmp_path: Path,
) -> None:
    checker = Checker(_honest("Nasdaq"))
    with ScriptedLLM(checker) as llm:
        outcome = _check(llm, tmp_path, _item(), probe=True)
    assert sorted(checker.asked) == [("checker", "guesses"), ("checker", "open book"),
                                     ("probe", "guesses")]
    whole = outcome.verdicts[1]
    assert whole.model == "probe" and whole.knowledge == "cutoff"


@pytest.mark.parametrize(("said", "names", "verdict"), [
    ("Nasdaq", ["Nasdaq"], True),
    ("the Nasdaq.", ["Nasdaq"], True),
    ("NATO", ["North Atlantic Treaty Organization"], True),  # an acronym either way
    ("United States of America", ["USA"], True),
    ("Armenians", ["Armenian"], True),
    ("Israeli Ground Forces", ["IDF Ground Forces"], None),  # shares words: the judge decides
    ("The 2023 final", ["2023 FIFA Women's World Cup final"], None),
    ("Paris", ["Paris Saint-Germain"], None),  # one inside the other
    ("Toronto Raptors", ["Los Angeles Lakers"], False),
    ("Republic of Ireland", ["Republic of Korea"], False),  # only filler words in common
    ("Sefton", ["Metropolitan Borough of Sefton"], True),  # a place without its admin words
    ("Tehri Garhwal", ["Tehri Garhwal district"], True),
    ("London", ["City of London"], None),  # a city is not its borough's name
    ("Grindavíkurbær", ["Grindavík"], None),  # one word begins the other: the judge decides
    ("unknown", ["Nasdaq"], False),
])
def test_an_answer_is_decided_by_its_names_before_any_judge(
    said: str, names: list[str], verdict: bool | None
) -> None:
    assert decided(said, names) is verdict


@pytest.mark.parametrize(("reply", "guesses"), [
    ("1. NATO – most are members\n2. European Union\n3. G7 (maybe)", ["NATO", "European Union",
                                                                       "G7"]),
    ("```json\n[\"Ankara\", \"Istanbul\"]\n```", ["Ankara", "Istanbul"]),
    ('{"guesses": ["Ankara", "Izmir"]}', ["Ankara", "Izmir"]),
    ('```json\n{"reasoning": "the largest city", "final_answer": "Ankara"}\n```', ["Ankara"]),
    ("Guesses:\n- Paris, France\n- Lyon", ["Paris, France", "Lyon"]),
    ("Guess 1: Atlantis\nGuess 2: Ankara", ["Atlantis", "Ankara"]),
    ("1. Star Wars: The Force Awakens\n2. Avatar", ["Star Wars: The Force Awakens", "Avatar"]),
    ("NATO; EU; G7", ["NATO", "EU", "G7"]),
    ("St. Louis; U.S. Steel", ["St. Louis", "U.S. Steel"]),
])
def test_guesses_are_read_from_the_shapes_models_write(reply: str, guesses: list[str]) -> None:
    assert read_guesses(reply) == guesses


@pytest.mark.parametrize(("reply", "why"), [
    ("Unknown.", "a line that names nothing ('Unknown')"),
    ("N/A", "no guess given"),
    ("", "an empty reply"),
    ("I cannot know this: the question is about events after my knowledge cutoff.",
     "a sentence"),
    ('{"reasoning": "it is hard to say", "confidence": "low"}', "a JSON object without guesses"),
    ("It is probably Ankara.", "a sentence"),
])
def test_a_reply_that_is_no_list_of_guesses_is_unreadable(reply: str, why: str) -> None:
    read = read_guesses(reply)
    assert isinstance(read, Unreadable) and why in read.why


def test_the_open_book_reply_is_read_from_lines_or_json() -> None:
    read = read_open_book("**Answer:** Be'eri\nOther things the description fits: Kfar Aza; "
                          "Nir Oz\nOther right answers: none.")
    assert not isinstance(read, Unreadable)
    assert (read.answer, read.other_fits, read.other_answers) == ("Be'eri", ["Kfar Aza",
                                                                            "Nir Oz"], [])
    fenced = read_open_book('```json\n{"answer": "Ankara", "other things the description '
                            'fits": [], "other_right_answers": ["Istanbul"]}\n```')
    assert not isinstance(fenced, Unreadable)
    assert (fenced.answer, fenced.other_answers) == ("Ankara", ["Istanbul"])


def test_an_open_book_reply_without_its_lines_measures_nothing() -> None:
    assert isinstance(read_open_book("Nasdaq"), Unreadable)  # no Answer: line
    prose = read_open_book("Answer: Ankara, though Istanbul and Izmir fit as well")
    assert not isinstance(prose, Unreadable) and prose.others_unreadable is not None
    empty = read_open_book("Answer:\nOther things the description fits: none\n"
                           "Other right answers: none")
    assert not isinstance(empty, Unreadable) and empty.answer == ""


@pytest.mark.parametrize(("description", "masked"), [
    ("the town near which wildfires destroyed most homes in August 2023", "a certain town"),
    ("the court to which the case was referred in May 2023", "a certain court"),
    ("the organization through which aid was sent in October 2023", "a certain organization"),
    ("the kibbutz attacked on 7 October 2023", "a certain kibbutz"),
    ("the country whose women's team beat England 1–0 in August 2023", "a certain country"),
])
def test_the_masked_head_never_leaves_a_word_dangling(description: str, masked: str) -> None:
    assert masked_description(description) == masked


def test_a_reduced_relative_clause_ends_the_masked_head() -> None:
    assert masked_description("the shipwreck a submersible was diving to when it imploded in "
                              "June 2023") == "a certain shipwreck"


def test_another_name_of_the_answer_is_no_other_answer(tmp_path: Path) -> None:
    """"Stadio Giuseppe Meazza" offered as another right answer beside "San Siro": the judge is
    asked once, says it is the same, and the item has one answer."""
    item = _item("San Siro", question="What is the home stadium of the club that beat Arsenal "
                 "1–0 in November 2024?", masked="What is the home stadium of a certain club?",
                 bridge="Inter Milan")
    same = frozenset({("Stadio Giuseppe Meazza", "San Siro")})
    script = _honest("", open_book="Answer: San Siro\nOther things the description fits: "
                     "none\nOther right answers: Stadio Giuseppe Meazza")
    with ScriptedLLM(Checker(script, same)) as llm:
        outcome = _check(llm, tmp_path, item)
        assert llm.calls == 3 + 1
    assert _verdicts(outcome)["one_answer"] is True


def test_each_check_reads_as_one_line_for_annotators() -> None:
    """`checker_lines`: the guesses counted and which checker made them (one whose knowledge
    ends at the cutoff, or one told to know nothing after it), the open-book answer, and what
    else fits."""
    def verdict(check: CheckerCheck, passed: bool = True, **fields: Any) -> CheckerVerdict:
        return CheckerVerdict(check=check, question="q", reply="r", model="checker",
                              passed=passed, **fields)

    guesses = ["NYSE", "LSE", "Nasdaq"]
    validation = Validation(passed=False, connected=[
        verdict("unknown_before_cutoff", guesses=guesses, counted=2, knowledge="cutoff"),
        verdict("unknown_before_cutoff", False, guesses=guesses, knowledge="told"),
        verdict("answered_with_event", answer="Nasdaq"),
        verdict("one_answer", False, others=["NYSE", "LSE"]),
        verdict("one_answer"),
    ])
    assert checker_lines(_item().model_copy(update={"validation": validation})) == [
        "✓ unknown before the cutoff: checker, knowing only what was known at the cutoff, "
        "guesses: NYSE; LSE",
        "✗ unknown before the cutoff: checker, told to know nothing after the cutoff, guesses: "
        "NYSE; LSE; Nasdaq",
        '✓ answered with the event: checker, given the event, answers "Nasdaq"',
        "✗ one answer: checker finds that else fits: NYSE; LSE",
        "✓ one answer: checker finds that else fits: nothing",
    ]


def test_a_judge_that_says_nothing_measures_nothing_and_the_item_fails(tmp_path: Path) -> None:
    """Issue 31: a guess sharing words with the answer ("IDF Ground Forces") goes to the
    judge; a judge reply with neither Yes nor No is no verdict: `connected` fails as
    unreadable, naming the guess, never passes."""

    class Mute(Checker):
        def __call__(self, body: dict[str, Any]) -> Reply:
            if "Output Yes or No" in last_user_message(body):
                return Reply(text="Hmm, hard to say.")
            return super().__call__(body)

    guessed = "1. IDF Ground Forces\n2. Navy\n3. Air Force\n4. Border Police\n5. Shin Bet"
    army = "Israeli Ground Forces"
    with ScriptedLLM(Mute(_honest(army, masked=guessed))) as llm:
        outcome = _check(llm, tmp_path, _item(army), fail_fast=True)
    connected = outcome.verdicts[0]
    assert connected.check == "connected" and not connected.passed
    assert connected.unreadable and "'IDF Ground Forces'" in connected.unreadable
    assert "cannot be read" in failure_reason(connected)


def test_an_open_book_reply_without_an_answer_says_it_gave_none(tmp_path: Path) -> None:
    """Issue 31: "Answer:" with nothing after it fails `answered_with_event` as "gave no
    answer" (not `answers "" instead`); a reply with no Answer line at all is unreadable."""
    empty = "Answer:\nOther things the description fits: none\nOther right answers: none"
    with ScriptedLLM(Checker(_honest("Nasdaq", open_book=empty))) as llm:
        outcome = _check(llm, tmp_path, _item())
    answered = next(v for v in outcome.verdicts if v.check == "answered_with_event")
    assert not answered.passed and not answered.unreadable
    assert failure_reason(answered) == "with the event in hand, checker gave no answer"
    with ScriptedLLM(Checker(_honest("Nasdaq", open_book="I'd rather not."))) as llm:
        outcome = _check(llm, tmp_path / "b", _item())
    assert all(v.unreadable == "no 'Answer:' line" for v in outcome.verdicts
               if v.check in ("answered_with_event", "one_answer"))
