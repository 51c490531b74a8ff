"""The base of every record: unknown keys are an error."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    """Base of every record: unknown keys are an error, so typos surface early."""

    model_config = ConfigDict(extra="forbid")
