"""How a command chooses its model endpoint: flags and the `openai` client's own variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cuqa_builder.llm.local import REGISTRY

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
API_TIMEOUT_S = 120.0
# A CPU model shares a few cores between parallel slots: a long passage can take minutes.
LOCAL_TIMEOUT_S = 900.0
# llama.cpp decodes this many requests together at most; more would only queue inside the
# server, where waiting counts against each call's timeout.
LOCAL_SLOTS_MAX = 4
DEFAULT_CONCURRENCY = 8
DEFAULT_MAX_RETRIES = 4


class LLMSettings(BaseModel):
    """Where calls go and how. The API key is read from OPENAI_API_KEY only, never stored."""

    model: str | None = None
    base_url: str | None = None
    local: str | None = None  # registry name of the embedded model, when it is used
    # "completions": the legacy endpoint of instruct models (gpt-3.5-turbo-instruct), the prompt
    # sent as plain text; llama.cpp serves both.
    api: Literal["chat", "completions"] = "chat"
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    cache_path: Path | None = None  # None: no cache
    refresh: bool = False  # ignore cached answers (and overwrite them)
    timeout_s: float = Field(default=API_TIMEOUT_S, gt=0)
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    prices_path: Path | None = None

    @property
    def uses_local_model(self) -> bool:
        return self.local is not None


def local_model_name(choice: str) -> str:
    """`--llm local` -> the default model; `local:NAME` -> NAME, which must be in the registry."""
    kind, _, name = choice.partition(":")
    if kind != "local":
        raise ValueError(f"--llm must be local or local:NAME, not {choice!r}")
    name = name or DEFAULT_LOCAL_MODEL
    if name not in REGISTRY:
        raise ValueError(f"unknown local model {name!r} (known: {', '.join(sorted(REGISTRY))})")
    return name


class LLMOptions(BaseModel):
    """The LLM flags every command shares (`--model`, `--base-url`, `--llm`...), as typed."""

    model_config = ConfigDict(frozen=True)

    model: str | None = Field(None, description="model name at the endpoint")
    base_url: str | None = Field(
        None,
        description="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL; with no endpoint "
        "and no $OPENAI_API_KEY, the embedded local model)",
    )
    llm: str | None = Field(
        None,
        description=f"use the embedded llama.cpp model (default NAME: {DEFAULT_LOCAL_MODEL}; "
        "see `cuqa-models list`)",
        json_schema_extra={"flag": {"metavar": "local[:NAME]"}},
    )
    concurrency: int = Field(
        DEFAULT_CONCURRENCY, ge=1,
        description=f"parallel calls; the embedded model serves at most {LOCAL_SLOTS_MAX} at once",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    cache: Path | None = Field(
        None, description="SQLite call cache (default: OUT/llm-cache.sqlite)",
        json_schema_extra={"flag": {"metavar": "FILE"}},
    )
    no_cache: bool = Field(False, description="neither read nor write the cache")
    refresh: bool = Field(False, description="call again and overwrite cached answers")
    timeout: float | None = Field(
        None, gt=0,
        description=f"seconds per call (default: {API_TIMEOUT_S:g}; {LOCAL_TIMEOUT_S:g} for the "
        "embedded model)",
        json_schema_extra={"flag": {"metavar": "SECONDS"}},
    )
    max_retries: int = Field(
        DEFAULT_MAX_RETRIES, ge=0, description="tries after the first",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    prices: Path | None = Field(None, description="JSON price table overriding the built-in one")

    @field_validator("llm")
    @classmethod
    def _known_local_model(cls, choice: str | None) -> str | None:
        if choice is not None:
            local_model_name(choice)  # a typo is a usage error before any stage runs
        return choice


def resolve_settings(options: LLMOptions, default_cache: Path | None) -> LLMSettings:
    """Resolve flags and environment: --llm local wins, then --base-url/$OPENAI_BASE_URL or
    $OPENAI_API_KEY (the OpenAI API), else the embedded model."""
    local: str | None = None
    base_url = options.base_url or os.environ.get("OPENAI_BASE_URL") or None
    if options.llm:
        local, base_url = local_model_name(options.llm), None
    elif not base_url and not os.environ.get("OPENAI_API_KEY"):
        local = DEFAULT_LOCAL_MODEL
    return LLMSettings(
        model=options.model,
        base_url=base_url,
        local=local,
        concurrency=options.concurrency,
        cache_path=None if options.no_cache else (options.cache or default_cache),
        refresh=options.refresh,
        timeout_s=options.timeout or (LOCAL_TIMEOUT_S if local else API_TIMEOUT_S),
        max_retries=options.max_retries,
        prices_path=options.prices,
    )
