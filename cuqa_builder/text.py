"""Answer normalisation shared by the validators, the probes and the evaluation metrics."""

from __future__ import annotations

import re
import string
from functools import lru_cache

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation + "‘’“”–—")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s\b")
# What joins two names into a longer one: hyphens, dashes, a slash ("the Israel–Hamas war").
_JOINERS = re.compile(r"[-‐‑‒–—―/]")


@lru_cache(maxsize=1 << 14)  # the same names are checked against question after question
def normalize_answer(text: str) -> str:
    """SQuAD-style: lowercase, no punctuation, no articles, single spaces."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def contains_answer(text: str, answer: str, *, in_compounds: bool = False) -> bool:
    """Whether the normalised answer occurs in the normalised text as whole words; a possessive
    counts ("Camilla's" names Camilla). `in_compounds`: a name joined to another by a hyphen, a
    dash or a slash counts too ("the Israel–Hamas war" names Israel and Hamas), where a leak
    is looked for; a longer word never does ("Israeli" is a demonym, not the name)."""
    needle = normalize_answer(answer)
    if not needle:
        return False
    forms = [text, _POSSESSIVE.sub("", text)]
    if in_compounds:
        forms += [_JOINERS.sub(" ", form) for form in forms]
    return any(f" {needle} " in f" {normalize_answer(form)} " for form in forms)
