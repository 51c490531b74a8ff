"""Guesses matched as a reader would (issue 37.3, `verification/answers.py` and
`verification/spelling.py`): spellings and transliterations of one name match, by the answer's
names first, then by folding, and a near miss is asked of the judge (the scripted
OpenAI-compatible server); a different place never counts, in either direction."""

from __future__ import annotations

import asyncio
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.verification.answers import BY_ALIAS, BY_JUDGE, decided, names_the_answer
from cuqa_builder.verification.checker import UNKNOWN_BEFORE_CUTOFF, GuessAsked, guess_verdict
from cuqa_builder.verification.spelling import NEAR, fold, spelling_score

QUESTION = "Which city is the capital of the governorate where the port was shelled?"
# What a reader of the world knows: one place under two names.
ONE_PLACE = frozenset({("Saida", "Sidon"), ("El Fasher", "Al-Fashir"), ("Kiev", "Kyiv")})


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-answers-0000")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


class Judge:
    """The judge model: Yes to a prediction that is the first ground-truth name in `ONE_PLACE`;
    every (prediction, answer) it is asked is recorded."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        prediction = prompt.split("Prediction:\n", 1)[1].split("\n", 1)[0]
        answer = prompt.split("Ground-truth Answer:\n", 1)[1].split("\n", 1)[0]
        self.asked.append((prediction, answer))
        return Reply(text="Yes" if (prediction, answer) in ONE_PLACE else "No")


def _settings(llm: ScriptedLLM, tmp_path: Path) -> LLMSettings:
    return LLMSettings(model="judge", base_url=llm.base_url, cache_path=tmp_path / "c.sqlite")


def _how(llm: ScriptedLLM, tmp_path: Path, said: str, names: list[str]) -> object:
    async def go() -> object:
        async with open_gateway(_settings(llm, tmp_path)) as gateway:
            return await names_the_answer(gateway, QUESTION, said, names)
    return asyncio.run(go())


@pytest.mark.parametrize(("said", "names", "verdict"), [
    # one name folded: the same name, no call
    ("Al Fashir", ["Al-Fashir"], True),
    ("AL-FASHIR", ["al Fashir"], True),
    ("El-Fasher, North Darfur", ["El Fasher"], True),  # a guess holding the name counts
    ("Ash-Shati", ["Al-Shati"], True),  # the article assimilated to a sun letter
    ("As Suwayda", ["As-Suwayda"], True),
    ("An-Nabatieh", ["Nabatieh", "Al-Nabatieh"], True),
    ("Krakow", ["Kraków"], True),
    ("Be'eri", ["Beeri"], True),
    ("Gaza City", ["Gaza"], True),
    ("Saida", ["Sidon", "Saida"], True),  # the answer's names hold it (a redirect, a bold name)
    # near misses: the judge decides
    ("El Fasher", ["Al-Fashir"], None),
    ("El Fasher, Sudan", ["Al-Fashir"], None),
    ("Fasher", ["Al-Fashir"], None),
    ("Kiev", ["Kyiv"], None),
    ("Kyiv", ["Kiev"], None),
    ("Bombay", ["Mumbai"], None),
    ("Tiflis", ["Tbilisi"], None),
    ("Saida", ["Sidon"], None),
    ("Sidon", ["Saida"], None),
    ("Gaza", ["Gaza City"], None),  # a word in common (the Strip or the city)
    ("Sudan", ["Sidon"], None),  # spelt near, another place: only a judge can tell
    ("Salvador", ["El Salvador"], None),  # the article is no proof: a city is not the country
    # far apart: different without a call
    ("Tyre", ["Sidon"], False),
    ("Sidon", ["Tyre"], False),
    ("Jordan", ["Sudan"], False),
    ("London", ["Boston"], False),
    ("Republic of Ireland", ["Republic of Korea"], False),  # only words any two names share
])
def test_a_guess_is_decided_by_its_spelling(said: str, names: list[str],
                                            verdict: bool | None) -> None:
    assert decided(said, names) is verdict


@pytest.mark.parametrize(("said", "name", "score", "near"), [
    ("El Fasher", "Al-Fashir", 83, True), ("Tbilisi", "Tiflis", 77, True),
    ("Kiev", "Kyiv", 75, True), ("Mumbai", "Bombay", 67, True), ("Saida", "Sidon", 60, True),
    ("Sidon", "Sudan", 60, True), ("Jordan", "Sudan", 55, False),
    ("London", "Boston", 50, False), ("Tyre", "Sidon", 22, False),
])
def test_the_near_miss_threshold_is_the_measured_one(said: str, name: str, score: int,
                                                     near: bool) -> None:
    """The scores `spelling.NEAR` was chosen from (its comment quotes them)."""
    assert round(spelling_score(said, name)) == score
    assert (spelling_score(said, name) >= NEAR) is near


def test_saida_is_sidon_by_alias_or_by_the_judge_and_tyre_never(tmp_path: Path) -> None:
    """Saida for Sidon: by the alias, no call; without it a near miss, one judge call (Yes),
    cached. Tyre for Sidon and Sidon for Tyre: no call, not counted. Sudan for Sidon: asked,
    and the judge's No is kept."""
    judge = Judge()
    with ScriptedLLM(judge) as llm:
        assert _how(llm, tmp_path, "Saida", ["Sidon", "Saida"]) == BY_ALIAS
        assert llm.calls == 0
        assert _how(llm, tmp_path, "Saida", ["Sidon"]) == BY_JUDGE
        assert _how(llm, tmp_path, "Saida", ["Sidon"]) == BY_JUDGE
        assert llm.calls == 1  # the second is served by the cache
        assert _how(llm, tmp_path, "Tyre", ["Sidon"]) is None
        assert _how(llm, tmp_path, "Sidon", ["Tyre"]) is None
        assert llm.calls == 1  # far apart: no call either way
        assert _how(llm, tmp_path, "Sudan", ["Sidon"]) is None
        assert llm.calls == 2
    assert judge.asked == [("Saida", "Sidon"), ("Sudan", "Sidon")]


def test_el_fasher_guessed_for_al_fashir_makes_the_item_guessable(tmp_path: Path) -> None:
    """Issue 37: a model of the cutoff guessed "El Fasher" for "Al-Fashir" and the item was
    kept; now the judge is asked about the near miss only, and the item fails."""
    judge = Judge()
    asked = GuessAsked(UNKNOWN_BEFORE_CUTOFF, "Which city is besieged ...?", "probe", "cutoff")
    reply = "1. Khartoum\n2. El Fasher\n3. Nyala\n4. Omdurman\n5. El Geneina"

    async def go() -> Any:
        async with open_gateway(_settings(llm, tmp_path)) as gateway:
            return await guess_verdict(gateway, asked, reply, ["Al-Fashir", "Al Fashir"], 3)

    with ScriptedLLM(judge) as llm:
        verdict = asyncio.run(go())
    assert not verdict.passed and verdict.matched == "El Fasher (judge)"
    assert judge.asked == [("El Fasher", "Al-Fashir")]  # Khartoum is far: not asked


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=9)


@given(st.text(max_size=40))
def test_folding_is_idempotent(text: str) -> None:
    assert fold(fold(text)) == fold(text)


@given(st.lists(_WORD, min_size=1, max_size=3), st.data())
def test_an_answer_names_itself_in_any_case_accents_and_hyphenation(
    words: list[str], data: st.DataObject,
) -> None:
    name = " ".join(words)
    assume(fold(name) and decided(name, [name]) is True)  # not "unknown", nor only articles
    joiners = data.draw(st.lists(st.sampled_from([" ", "-", " - ", "‐"]),
                                 min_size=len(words) - 1, max_size=len(words) - 1))
    written = words[0] + "".join(j + w for j, w in zip(joiners, words[1:], strict=True))
    upper = data.draw(st.lists(st.booleans(), min_size=len(written), max_size=len(written)))
    accent = data.draw(st.lists(st.sampled_from(["", "\u0301", "\u0308", "\u0303"]),
                                min_size=len(written), max_size=len(written)))
    variant = unicodedata.normalize("NFC", "".join(
        (c.upper() if up else c) + (mark if c.isalpha() else "")
        for c, up, mark in zip(written, upper, accent, strict=True)))
    assert decided(variant, [name]) is True
    assert decided(name, [variant]) is True
