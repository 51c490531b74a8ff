"""What the evaluation reads (one question with its gold answers) and writes (one prediction)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, computed_field

from cuqa_builder.records import SubQuestion
from cuqa_builder.solvers.base import Step


class EvalItem(BaseModel):
    """One question of any input format, with every acceptable answer (aliases included)."""

    id: str
    question: str
    answers: list[str]
    type: str | None = None
    difficulty: str | None = None
    sub_questions: list[SubQuestion] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)


class Prediction(BaseModel):
    """One line of `predictions.jsonl`: the answer, its scores, the full trace and the counts."""

    id: str
    question: str
    answers: list[str]
    type: str | None = None
    difficulty: str | None = None
    prediction: str
    em: float
    f1: float
    acc: bool | None = None  # None: no judge was set
    routes: dict[str, int] = Field(default_factory=dict)
    retrieval_calls: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    trace: list[Step] = Field(default_factory=list)

    @computed_field  # written to predictions.jsonl for readers; recomputed when read back
    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def correct(self) -> bool:
        """The judge's verdict when there is one, else an exact match."""
        return self.acc if self.acc is not None else self.em == 1.0
