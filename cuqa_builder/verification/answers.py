"""Whether a reply names the item's answer, however worded (SPEC 2.9).

First by the answer's names: the answer, its aliases (the name as written, the article title,
the bold names of the article's lead, the redirects that led to it), a plural, an acronym, a
place without its administrative words ("Sefton" / "Metropolitan Borough of Sefton"), a
spelling that folds to one of them ("Al Fashir" / "Al-Fashir", "Krakow" / "Kraków":
`spelling.fold`). When the strings still differ but share a word ("Israeli Ground Forces" /
"IDF Ground Forces", "the 2023 final" / "2023 FIFA Women's World Cup final"), one holds the
other ("Paris" / "Paris Saint-Germain"), a word begins another ("Grindavík" /
"Grindavíkurbær") or the spellings are near ("El Fasher" / "Al-Fashir", "Kiev" / "Kyiv",
"Saida" / "Sidon": `spelling.near_miss`), a judge decides: one call through the gateway, cached
like every other. Strings far apart, with no word or stem in common, are different answers
without a call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from cuqa_builder.judge import judge_reply
from cuqa_builder.llm.client import LLMClient
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.text import contains_answer, normalize_answer
from cuqa_builder.verification.replies import Unreadable
from cuqa_builder.verification.spelling import near_miss, same_spelling

JUDGE_PROMPT = "reworded"  # names the several acceptable forms of an answer
BY_ALIAS, BY_JUDGE = "alias", "judge"
# Words two different names share without naming the same thing; a closed class.
_SHARED_FILLER = frozenset({
    "of", "and", "for", "in", "on", "at", "to", "by", "with", "de", "la", "le", "el", "al", "y",
    "s", "national", "team", "republic", "city", "state", "county", "province", "district",
    "party", "university", "club", "fc", "international", "united", "new", "saint", "st",
})
_NO_ANSWER = re.compile(r"^(?:unknown|none|n/?a|no idea|i don't know|not sure|-)$")
# The administrative words around a place's own name: "Metropolitan Borough of Sefton" is
# "Sefton", "Tehri Garhwal district" is "Tehri Garhwal" ("City of London" is not "London").
_ADMINISTRATIVE = (r"(?:metropolitan\s+)?borough|municipality|county|district|province|region"
                   r"|governorate|prefecture|oblast|canton|republic|kingdom|state")
_ADMINISTRATIVE_WORDS = re.compile(
    rf"^(?:the\s+)?(?:{_ADMINISTRATIVE})\s+of\s+|\s+(?:{_ADMINISTRATIVE})$", re.IGNORECASE
)
# A word this long that begins another names the same root ("Grindavík" / "Grindavíkurbær").
_STEM = 5


def answer_names(item: Candidate) -> list[str]:
    """Every form the item's answer may be given in."""
    return list(dict.fromkeys(n for n in (item.answer, *item.answer_aliases) if n.strip()))


def _initials(name: str) -> str:
    words = [w for w in re.split(r"[\s-]+", name) if w and w.lower() not in {"of", "the", "and"}]
    return "".join(w[0] for w in words).upper()


def _acronym(said: str, name: str) -> bool:
    """"NATO" for "North Atlantic Treaty Organization", "USA" for "United States of America"."""
    short = said.replace(".", "").strip()
    return 2 <= len(short) <= 6 and short.isupper() and len(name.split()) >= 2 \
        and short == _initials(name)


def _words(text: str) -> set[str]:
    return set(normalize_answer(text).split()) - _SHARED_FILLER


def _own_name(name: str) -> str:
    """A place's name without its administrative words."""
    return _ADMINISTRATIVE_WORDS.sub("", name.strip()).strip()


def _shares_a_stem(said: set[str], name: set[str]) -> bool:
    return any(len(short) >= _STEM and long.startswith(short)
               for a in said for b in name for short, long in ((a, b), (b, a)))


def decided(said: str, names: Sequence[str]) -> bool | None:
    """True when `said` names one of `names` (whole words, normalised; a plural: "Armenians"
    names "Armenian"; an acronym either way; a place with or without its administrative words;
    a spelling that folds to the name); False when it gives no answer, or shares no word or stem
    with any and is spelt far from each; None when only a judge can tell."""
    said = said.strip()
    if not said or _NO_ANSWER.match(normalize_answer(said)):
        return False
    for name in names:
        if contains_answer(said, name) or contains_answer(said, f"{name}s") \
                or _acronym(said, name) or _acronym(name, said) \
                or normalize_answer(_own_name(said)) == normalize_answer(_own_name(name)) \
                or same_spelling(said, name):
            return True
    said_words = _words(said)
    if any(said_words & _words(name) or contains_answer(name, said)
           or _shares_a_stem(said_words, _words(name))
           or near_miss(said, name, _SHARED_FILLER)
           for name in names):
        return None
    return False


@runtime_checkable
class Judge(Protocol):
    """Decides whether `said` names the answer where its words cannot: one call a pair
    (`AskingJudge`), or the answers of a batch asked before (`pooled.py`)."""

    async def same(self, question: str, said: str, names: Sequence[str]) -> bool | Unreadable:
        ...


@dataclass(frozen=True)
class AskingJudge:
    """One judge call for each pair, through the gateway (cached like every call)."""

    client: LLMClient

    async def same(self, question: str, said: str, names: Sequence[str]) -> bool | Unreadable:
        return await judge_reply(self.client, question, said, list(names),
                                 prompt_name=JUDGE_PROMPT)


def as_judge(judge: LLMClient | Judge) -> Judge:
    return judge if isinstance(judge, Judge) else AskingJudge(judge)


async def names_the_answer(
    judge: LLMClient | Judge, question: str, said: str, names: Sequence[str]
) -> str | None | Unreadable:
    """How `said` names the answer (`alias` or `judge`), None when it does not, `Unreadable`
    when the judge it took gave no verdict (nothing measured)."""
    verdict = decided(said, names)
    if verdict is None:
        judged = await as_judge(judge).same(question, said, names)
        if isinstance(judged, Unreadable):
            return Unreadable(f"the judge, asked whether {said!r} names the answer, "
                              f"{judged.why}", judged.reply)
        return BY_JUDGE if judged else None
    return BY_ALIAS if verdict else None


async def another_name(judge: LLMClient | Judge, question: str, said: str,
                       names: Sequence[str]) -> bool | Unreadable:
    """Whether `said`, offered as another answer, is the answer under another name: by its
    names, else the judge ("Stadio Giuseppe Meazza" is "San Siro" without a word in common)."""
    if decided(said, names):
        return True
    judged = await as_judge(judge).same(question, said, names)
    if isinstance(judged, Unreadable):
        return Unreadable(f"the judge, asked whether {said!r} is another name of the "
                          f"answer, {judged.why}", judged.reply)
    return judged
