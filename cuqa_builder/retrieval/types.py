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
