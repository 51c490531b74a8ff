"""Spellings and transliterations of one name, as a reader matches them (issue 37.3).

`fold` gives the form two spellings of one name share: no case, no accents, no apostrophes,
hyphens as spaces, and the Arabic article in one form ("El Fasher", "Al-Fashir", "al Fashir",
"Ash-Shati" / "Al-Shati" all begin with "al"). Equal folded forms are one name. Spellings that
still differ ("El Fasher" / "Al-Fashir", "Kiev" / "Kyiv") or a name given for another ("Bombay"
for "Mumbai", "Saida" for "Sidon") are only *near*: letters alone cannot tell "Saida" (Sidon)
from "Sudan" ("Sidon" and "Sudan" even share their consonants), so a near miss goes to a judge,
and only strings far apart are different names without one.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from cuqa_builder.similarity import spelling_similarity
from cuqa_builder.text import normalize_answer

# fuzz.ratio of the own words after `fold` and `_ROMANISED`, measured (tests/test_answers.py):
# the pairs a near miss must reach: El Fasher / Al-Fashir 83, Tbilisi / Tiflis 77, Kiev / Kyiv
# 75, Mumbai / Bombay 67, Saida / Sidon 60; Sidon / Sudan 60 reaches the judge too (letters
# cannot tell); different names far apart cost no call: Jordan / Sudan 55, London / Boston 50,
# Tyre / Sidon 22.
NEAR = 60.0
_ARTICLE = "al"
# Letters that do not decompose into a base letter and an accent.
_LETTERS = str.maketrans({"ø": "o", "ł": "l", "đ": "d", "ð": "d", "þ": "th", "æ": "ae",
                          "œ": "oe", "ı": "i"})
_APOSTROPHES = re.compile(r"['‘’ʼʻʿʾ`´]")
_SEPARATORS = re.compile(r"[^\w\s]|_")  # hyphens, dashes, slashes, commas, dots...
# The Arabic article, before a word: al-/el- always; the forms assimilated to a "sun letter"
# (ad-, an-, ar-, as-, ash-, at-, az-...) only before that letter ("As-Suwayda", "Ash-Shati",
# "ar Raqqa"), so the English "as", "at" and "an" stay words.
_ARABIC_ARTICLE = re.compile(r"(?<!\w)(?:[ae]l|[ae](sh|th|dh|[dnrstz])(?=\s+\1))\s+(?=\w)")
# Romanisations of one sound, for the near-miss score only ("Kyiv" / "Kiev", "Bombay" /
# "Mumbai"): never enough for a match on their own.
_ROMANISED = (("ph", "f"), ("ou", "u"), ("y", "i"), ("q", "k"))


def _unaccented(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text.casefold().translate(_LETTERS))
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@lru_cache(maxsize=1 << 14)  # the same names are read against guess after guess
def fold(name: str) -> str:
    """The form every spelling of one name shares: "Al-Fashir", "al Fashir" and "AL FASHIR"
    are "al fashir"; "Kraków" is "krakow"; "Be'eri" is "beeri"."""
    text = _SEPARATORS.sub(" ", _APOSTROPHES.sub("", _unaccented(name)))
    # The article is read before "an" is dropped as an English one ("An-Nabatieh"), and again
    # after words are dropped, so that a folded name folds to itself.
    return _canonical_article(normalize_answer(_canonical_article(text)))


def _canonical_article(text: str) -> str:
    return _ARABIC_ARTICLE.sub(f"{_ARTICLE} ", text)


def same_spelling(said: str, name: str) -> bool:
    """Whether `said`, folded, holds `name` folded as whole words ("El-Fasher, North Darfur"
    names "El Fasher")."""
    folded = fold(name)
    return bool(folded) and f" {folded} " in f" {fold(said)} "


def _romanised(word: str) -> str:
    for spelled, sound in _ROMANISED:
        word = word.replace(spelled, sound)
    return word


def _own_words(name: str, ignored: frozenset[str]) -> list[str]:
    """The folded, romanised words that tell the name apart (all of them when none do)."""
    words = fold(name).split()
    return [_romanised(w) for w in ([w for w in words if w not in ignored] or words)]


def _forms(name: str) -> set[str]:
    """The name, and its head before a qualifier ("El Fasher, North Darfur", "Tyre (Lebanon)")."""
    return {name, re.split(r"[,(]", name, maxsplit=1)[0]}


def spelling_score(said: str, name: str, ignored: frozenset[str] = frozenset({_ARTICLE})
                   ) -> float:
    """0-100: how near `said` is to being spelt as `name`, on their own words (not the article,
    nor the `ignored` words two different names share: "Republic of Ireland" / "Republic of
    Korea" is "ireland" / "korea"), each with or without a qualifier."""
    return max(spelling_similarity(" ".join(_own_words(a, ignored)),
                                   " ".join(_own_words(b, ignored)))
               for a in _forms(said) for b in _forms(name))


def near_miss(said: str, name: str, ignored: frozenset[str] = frozenset({_ARTICLE})) -> bool:
    """Whether `said` may be `name` spelt or transliterated otherwise: only a judge can tell."""
    return spelling_score(said, name, ignored) >= NEAR
