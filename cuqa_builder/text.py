"""Answer normalisation shared by the validators, the probes and the evaluation metrics."""

from __future__ import annotations

import re
import string
from functools import lru_cache

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "‘’“”–—")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")


@lru_cache(maxsize=1 << 14)  # the same names are checked against question after question
def normalize_answer(text: str) -> str:
    """SQuAD-style: lowercase, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_answer(text: str, answer: str) -> bool:
    """Whether the normalised answer occurs in the normalised text as whole words; a possessive
    counts ("Camilla's" names Camilla)."""
    needle = normalize_answer(answer)
    if not needle:
        return False
    return f" {needle} " in f" {normalize_answer(text)} " or (
        f" {needle} " in f" {normalize_answer(_POSSESSIVE.sub('', text))} "
    )
