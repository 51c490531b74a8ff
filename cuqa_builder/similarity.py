"""How alike two questions are, word for word, and two spellings of a name, letter for letter
(rapidfuzz lives here, and only here). Shared by generation's step checks (a merge that only
rewords one of its inputs), the validators' near-duplicates and the checker's reading of a guess
(`verification/spelling.py`)."""

from __future__ import annotations

from rapidfuzz import fuzz

from cuqa_builder.text import normalize_answer

SIMILAR = 90.0  # 0-100: at least this alike is the same question reworded


def wording_similarity(a: str, b: str) -> float:
    """0-100: how alike two questions are word for word, order ignored, extra words counted
    (so a merge that adds the other sub-question to one of them is not "alike")."""
    return fuzz.token_sort_ratio(normalize_answer(a), normalize_answer(b))


def overlap_similarity(a: str, b: str) -> float:
    """0-100: like `wording_similarity`, but one question's words inside the other's count as
    alike (token-set)."""
    return fuzz.token_set_ratio(normalize_answer(a), normalize_answer(b))


def spelling_similarity(a: str, b: str) -> float:
    """0-100: how alike two spellings are letter for letter (normalised InDel similarity);
    the caller folds case, accents and punctuation first."""
    return fuzz.ratio(a, b)
