"""Bounds of the length checks (`--min-question-words`...), in whitespace-separated words.

Apart from the checks themselves so that the CLI can build its flags from it without loading them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True)

    min_question_words: int = Field(
        4, ge=1, description="shortest question kept, in words",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    max_question_words: int = Field(
        60, ge=1, description="longest question kept, in words",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    max_answer_words: int = Field(
        10, ge=1, description="longest answer kept, in words",
        json_schema_extra={"flag": {"metavar": "N"}},
    )

    @model_validator(mode="after")
    def _bounds_not_empty(self) -> Limits:
        if self.min_question_words > self.max_question_words:
            raise ValueError(
                f"question length bounds {self.min_question_words}-{self.max_question_words} "
                "are empty (--min-question-words is above --max-question-words)"
            )
        return self
