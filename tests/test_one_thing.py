"""`one_thing` (issue 37): with the news in hand, the checker says whether someone who followed
the whole world's news of the month could take a question's description for anything else.
The descriptions are those read in issue 37's measurement: eight that fit many things of their
month (each fails) and eleven read as acceptable (each passes). The replies of the "Elsewhere in
the world" line are recorded from a strong model answering the pooled open book; they reach the
checks through the loopback server and the real `openai` client."""

from __future__ import annotations

import asyncio
import datetime
import re
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.records.candidates import CheckerVerdict
from cuqa_builder.records.events import Event
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.verification.checker import ONE_THING, failure_reason
from cuqa_builder.verification.pooled import PooledChecker, PooledQuestion, deal

# (description, its month, the recorded "Elsewhere in the world that month" line)
FITS_MANY = [
    ("the person charged in July 2024 with making indecent images of children", "July 2024",
     "recurs"),
    ("the person whose death at the age of 88 was announced in April 2025", "April 2025",
     "recurs (many notable people die at 88 in a month, e.g. Pope Francis)"),
    ("the person whose request to be released from detention was rejected in October 2025 over "
     "flight risk", "October 2025", "recurs: such requests are refused many times a month"),
    ("the politician sentenced by a court to four months in jail in November 2024",
     "November 2024", "Recurs"),
    ("the army that captured a town from a militia in April 2025", "April 2025",
     "recurs — towns change hands in several wars every month"),
    ("the town where an airstrike on a residential building killed thirty people in November "
     "2024", "November 2024", "Beit Lahia; Ain Yaaqoub; Almat"),
    ("the politician who won a November 2024 Senate election, defeating a Republican to succeed "
     "a senator who had left office", "November 2024",
     "Andy Kim; Adam Schiff; Elissa Slotkin; Angela Alsobrooks"),
    ("the refugee camp that Israeli forces withdrew from in August 2026 after a two-day raid",
     "August 2026", "Nur Shams camp; Tulkarm camp; Jenin camp"),
]
ONE_ONLY = [
    ("the politician reappointed prime minister in October 2025, four days after resigning "
     "from the post", "October 2025"),
    ("the town where an explosion at a firecracker warehouse killed thirteen people and "
     "injured seven others in October 2023", "October 2023"),
    ("the music group three of whose members were among the seven people killed in a plane "
     "crash in July 2024", "July 2024"),
    ("the person who took four wickets for 29 runs in the season's opening match in March 2024",
     "March 2024"),
    ("the person who visited a military base in Greenland in March 2025 and accused Denmark of "
     "underinvesting in the island's security", "March 2025"),
    ("the tennis player who lost a men's singles quarter-final 6–2, 6–1, 7–6 in June 2023",
     "June 2023"),
    ("the country that abstained in a March 2024 UN Security Council vote on a US-drafted Gaza "
     "ceasefire resolution vetoed by Russia and China", "March 2024"),
    ("the team that clinched the Formula One constructors' championship in December 2024",
     "December 2024"),
    ("the politician whose party won 24 of 150 seats in a November 2023 parliamentary election",
     "November 2023"),
    ("the team that beat Ghana 2–1 with a stoppage-time winner in an Abidjan group match in "
     "January 2024", "January 2024"),
    ("the person who won the Open Championship golf tournament by six strokes in July 2023 for "
     "a first major title", "July 2023"),
]
_BLOCK = re.compile(r"^Q(\d+)\. News of [^:]+: (.*)\n.*\nQuestion: (.+)$", re.MULTILINE)


class RecordedOpenBook:
    """The strong model's recorded open-book replies: each question answered with its item's
    answer, nothing else named in its news, and the recorded line about the world (a question
    of `broken` gets that line instead)."""

    def __init__(self, elsewhere: dict[str, str], broken: dict[str, str | None] | None = None):
        self.elsewhere, self.broken = elsewhere, broken or {}

    def __call__(self, body: dict[str, Any]) -> Reply:
        parts = []
        for number, _, question in _BLOCK.findall(last_user_message(body)):
            description = question.removeprefix("What is the birthplace of ").removesuffix("?")
            line = (self.broken[description] if description in self.broken else
                    f"Elsewhere in the world that month: {self.elsewhere[description]}")
            parts.append(f"Q{number}\nAnswer: Marlow Heath\nOther things the description "
                         "fits: none\nOther right answers: none" + (f"\n{line}" if line else ""))
        return Reply(text="\n".join(parts))


def _question(n: int, description: str, month: str) -> PooledQuestion:
    day = datetime.datetime.strptime(f"15 {month}", "%d %B %Y").date()
    event = Event(id=f"ev-{n}", date=day, text=f"News of the month: {description}.",
                  source={"title": "Portal:Current events", "revid": 1, "url": "u"})
    return PooledQuestion(
        key=f"q{n}", question=f"What is the birthplace of {description}?", masked="m",
        names=("Marlow Heath",), bridges=(f"Bridge {n}",), passage="", event=event,
        bridge=f"ev-{n} b")


def _one_thing(tmp_path: Path, responder: RecordedOpenBook, questions: list[PooledQuestion]
               ) -> dict[str, CheckerVerdict]:
    with ScriptedLLM(responder) as llm:
        settings = LLMSettings(model="checker", base_url=llm.base_url,
                               cache_path=tmp_path / "c.sqlite")

        async def go() -> dict[str, CheckerVerdict]:
            async with open_gateway(settings) as gateway:
                found = await PooledChecker(gateway, "2023-04").open_book(questions)
            return {key: next(v for v in verdicts if v.check == ONE_THING)
                    for key, verdicts in found.verdicts.items()}

        return asyncio.run(go())


def test_each_description_that_fits_many_things_fails_and_each_acceptable_one_passes(
    tmp_path: Path,
) -> None:
    recorded = {d: line for d, _, line in FITS_MANY} | {d: "none" for d, _ in ONE_ONLY}
    months = [(d, m) for d, m, _ in FITS_MANY] + ONE_ONLY
    questions = [_question(n, d, m) for n, (d, m) in enumerate(months)]
    verdicts = _one_thing(tmp_path, RecordedOpenBook(recorded), questions)
    failed = [q.question for q in questions if not verdicts[q.key].passed]
    assert failed == [q.question for q in questions[:len(FITS_MANY)]]
    assert all(verdicts[q.key].unreadable is None for q in questions)
    town = verdicts[questions[5].key]
    assert town.others == ["Beit Lahia", "Ain Yaaqoub", "Almat"]
    assert "fits other things of its month in the world: Beit Lahia" in failure_reason(town)
    assert "its kind of event recurs" in failure_reason(verdicts[questions[0].key])


@pytest.mark.parametrize("line", [
    None,  # no line about the world: nothing measured
    "Elsewhere in the world that month: It is hard to say without more information.",
    "Elsewhere in the world that month: I cannot know what else happened that month.",
])
def test_an_unreadable_line_about_the_world_fails_closed(tmp_path: Path, line: str | None
                                                         ) -> None:
    description, month = ONE_ONLY[0]
    responder = RecordedOpenBook({}, broken={description: line})
    [verdict] = _one_thing(tmp_path, responder, [_question(0, description, month)]).values()
    assert not verdict.passed and verdict.unreadable


def test_questions_are_dealt_by_the_seed_never_two_of_one_bridge_in_a_request() -> None:
    """70 questions of 9 bridges (one bridge with 12 properties): as few requests as the
    largest bridge allows, at most the size each, every question once; the same seed deals the
    same requests, another seed others."""
    questions = [_question(n, f"the thing {n}", "May 2024") for n in range(70)]
    questions = [PooledQuestion(**{**q.__dict__, "bridge": f"b{min(n // 8, 8)}"})
                 for n, q in enumerate(questions)]
    dealt = deal(questions, seed=7, size=30)
    assert len(dealt) == 8  # eight bridges hold eight questions each
    assert all(len(r) <= 30 and len({q.bridge for q in r}) == len(r) for r in dealt)
    assert sorted(q.key for r in dealt for q in r) == sorted(q.key for q in questions)
    keys = [[q.key for q in r] for r in dealt]
    assert keys == [[q.key for q in r] for r in deal(list(reversed(questions)), 7, 30)]
    assert keys != [[q.key for q in r] for r in deal(questions, 8, 30)]
    few = deal(questions[:16], seed=7, size=30)  # two bridges of eight: eight requests
    assert len(few) == 8


class NearMisses:
    """Guesses a near spelling of each question's answer ("Fasher 3" for "Fashir 3"): only a
    judge can tell. The judge of many pairs says Yes to `same`, No to the rest, and leaves out
    the line of `mute` (that pair has measured nothing)."""

    def __init__(self, same: str, mute: str) -> None:
        self.same, self.mute = same, mute
        self.judged: list[int] = []  # pairs in each judge request

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if prompt.startswith("Imagine"):
            asked = re.findall(r"^Q(\d+)\. .*thing (\d+)", prompt, re.MULTILINE)
            return Reply(text="\n".join(f"Q{line}: Fasher {n}; Atlantis; Avalon; Lemuria"
                                        for line, n in asked))
        assert prompt.startswith("In each task below"), prompt[:60]
        pairs = re.findall(r"^Q(\d+)\. .*\nPrediction: (.*)\n", prompt, re.MULTILINE)
        self.judged.append(len(pairs))
        return Reply(text="\n".join(f"Q{n}: {'Yes' if said == self.same else 'No'}"
                                    for n, said in pairs if said != self.mute))


def test_the_judge_s_pairs_of_all_questions_are_asked_together_and_a_mute_one_fails_closed(
    tmp_path: Path,
) -> None:
    """Twelve questions of twelve events, each guessed with a near spelling of its answer: the
    judge is asked every pair of the masked guesses in one request and of the whole ones in
    another (not one request a pair), and the survivors' other guesses in a third; the pair
    it says Yes to fails its question, the pair whose line it leaves out fails its question
    as unreadable, the rest pass."""
    questions = [PooledQuestion(**{**_question(n, f"the thing {n}", "May 2024").__dict__,
                                   "names": (f"Fashir {n}",),
                                   "masked": f"Which is a certain thing {n}?"})
                 for n in range(12)]
    responder = NearMisses(same="Fasher 3", mute="Fasher 5")
    with ScriptedLLM(responder) as llm:
        settings = LLMSettings(model="checker", base_url=llm.base_url,
                               cache_path=tmp_path / "c.sqlite")

        async def go() -> dict[str, list[CheckerVerdict]]:
            async with open_gateway(settings) as gateway:
                return (await PooledChecker(gateway, "2023-04").guesses(questions)).verdicts

        verdicts = asyncio.run(go())
    # masked and whole: one request each, every pair; then the survivors' other counted
    # guesses (Atlantis, Avalon: 10 questions, 2 checks) in one more
    assert responder.judged == [12, 12, 40]
    failed = {n: sorted((v.check, "unreadable" if v.unreadable else v.matched)
                        for v in verdicts[q.key] if not v.passed)
              for n, q in enumerate(questions)}
    assert failed[3] == [("connected", "Fasher 3 (judge)"),
                         ("unknown_before_cutoff", "Fasher 3 (judge)")]
    assert failed[5] == [("connected", "unreadable"), ("unknown_before_cutoff", "unreadable")]
    assert not any(found for n, found in failed.items() if n not in (3, 5))


def test_a_pooled_reply_numbered_without_q_is_read_and_a_list_inside_a_q_part_is_not_split(
) -> None:
    """The pooled prompts ask for "its number, a colon": "1: No" is read as Q1's line (a strong
    model wrote the judge's replies so); where the reply has "Q" headers, a numbered line is
    part of its question's answer."""
    from cuqa_builder.verification.replies import sections
    assert sections("1: No\n2: Yes\n3. No", 3) == {1: "No", 2: "Yes", 3: "No"}
    assert sections("Q1: Paris; Lyon\n2. Nice", 2)[1] == "Paris; Lyon\n2. Nice"
    assert sections("Q1: Paris; Lyon\n2. Nice", 2)[2].why == "no line for Q2"
