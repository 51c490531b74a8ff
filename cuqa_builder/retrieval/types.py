"""What every retriever returns and promises: passages, the `Retriever` Protocol, its error."""

from __future__ import annotations

from typing import Protocol

from pydantic import BaseModel

from cuqa_builder.errors import CuqaError


class Passage(BaseModel):
    id: str
    text: str
    title: str | None = None
    score: float = 0.0


class RetrievalError(CuqaError, RuntimeError):
    """A search that failed for good (its service unreachable or refusing): like an LLMError,
    it ends the one question being solved, not the whole evaluation."""


class Retriever(Protocol):
    name: str

    def search(self, query: str, k: int) -> list[Passage]: ...


class WithoutPassages:
    """A retriever that never returns the passages of `excluded` (a question's own source
    event, to measure how much finding it helps); the top k of the rest."""

    def __init__(self, retriever: Retriever, excluded: frozenset[str]) -> None:
        self.retriever = retriever
        self.excluded = excluded
        self.name = retriever.name

    def search(self, query: str, k: int) -> list[Passage]:
        hits = self.retriever.search(query, k + len(self.excluded))
        return [hit for hit in hits if hit.id not in self.excluded][:k]
