"""How passages and demonstrations are put into prompts, the same way for every method."""

from __future__ import annotations

from collections.abc import Iterable

from cuqa_builder.prompts import load_prompt
from cuqa_builder.retrieval.types import Passage


def demonstrations(name: str) -> str:
    """A demonstrations file of `prompts/` (plain text, no placeholders)."""
    return load_prompt(name, expects=frozenset()).text


def passage_text(passage: Passage) -> str:
    # A title the text does not already carry (a Wikipedia search hit) tells the reader its topic.
    if passage.title and passage.title not in passage.text:
        return f"{passage.title}: {passage.text}"
    return passage.text


def join_passages(passages: Iterable[Passage]) -> str:
    """The `{passage}` of the read prompts: one passage per line, best first."""
    return "\n".join(passage_text(p) for p in passages)


def number_passages(passages: Iterable[Passage]) -> str:
    """RA-ISF's "[1] ... [2] ..." numbering."""
    return "\n".join(f"[{i}] {passage_text(p)}" for i, p in enumerate(passages, 1))


def merge_passages(kept: list[Passage], new: Iterable[Passage]) -> list[Passage]:
    """`kept` followed by the passages of `new` not already in it (by id)."""
    merged = list(kept)
    seen = {p.id for p in kept}
    for passage in new:
        if passage.id not in seen:
            seen.add(passage.id)
            merged.append(passage)
    return merged
