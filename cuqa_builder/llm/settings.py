"""How a command chooses its model endpoint: flags and the `openai` client's own variables."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from cuqa_builder.llm.local_registry import REGISTRY

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
API_TIMEOUT_S = 120.0
# A CPU model shares a few cores between parallel slots: a long passage can take minutes.
LOCAL_TIMEOUT_S = 900.0
# llama.cpp decodes this many requests together at most; more would only queue inside the
# server, where waiting counts against each call's timeout.
LOCAL_SLOTS_MAX = 4
DEFAULT_CONCURRENCY = 8
DEFAULT_MAX_RETRIES = 4
# The OpenAI Batch API's limits per input file (other providers' are no larger that we know of).
BATCH_MAX_REQUESTS = 50_000
BATCH_MAX_MB = 200.0
BATCH_POLL_S = 30.0
# Items (events, questions) in flight in batch mode at most: each holds ~20 KB while it waits
# (its record, its coroutines, its requests), so this keeps a run under ~500 MB at any size.
BATCH_JOBS_MAX = 12_500

BatchMode = Literal["live", "api", "files"]


class LLMSettings(BaseModel):
    """Where calls go and how. The API key is read from OPENAI_API_KEY only, never stored."""

    model: str | None = None
    base_url: str | None = None
    local: str | None = None  # registry name of the embedded model, when it is used
    # "completions": the legacy endpoint of instruct models (gpt-3.5-turbo-instruct), the prompt
    # sent as plain text; llama.cpp serves both.
    api: Literal["chat", "completions"] = "chat"
    concurrency: int = Field(default=DEFAULT_CONCURRENCY, ge=1)
    threads: int | None = Field(default=None, ge=1)  # embedded model's; None: every core
    cache_path: Path | None = None  # None: no cache
    refresh: bool = False  # ignore cached answers (and overwrite them)
    timeout_s: float = Field(default=API_TIMEOUT_S, gt=0)
    max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0)
    prices_path: Path | None = None
    # Scale (issue 13): rounds of batched calls instead of live ones, and client-side rate limits.
    batch_mode: BatchMode = "live"
    batch_dir: Path | None = None  # the round files of batch_mode "files"
    accept_partial_round: bool = False  # read a round file that answers only some requests
    batch_max_requests: int = Field(default=BATCH_MAX_REQUESTS, ge=1)
    batch_max_bytes: int = Field(default=int(BATCH_MAX_MB * 1_000_000), ge=1)
    batch_poll_s: float = Field(default=BATCH_POLL_S, gt=0)
    rpm: float | None = Field(default=None, gt=0)
    tpm: float | None = Field(default=None, gt=0)
    progress: bool = True  # progress bars of batch rounds

    @property
    def uses_local_model(self) -> bool:
        return self.local is not None

    @property
    def held_to_format(self) -> bool:
        """Whether calls are held to their prompt's reply format (`types.held_to_format`): the
        embedded model, on llama.cpp's chat endpoint."""
        return self.uses_local_model and self.api == "chat"

    @property
    def batched(self) -> bool:
        return self.batch_mode != "live"

    def jobs_in_flight(self, per_call_slot: int) -> int:
        """How many items (events, questions) a stage should work on at once: enough to keep
        every live call slot busy, or, in batch mode, a batch file's worth (an item asks up to
        `per_call_slot` calls at once; more items in flight would only take memory)."""
        if self.batched:
            return max(1, min(self.batch_max_requests // per_call_slot, BATCH_JOBS_MAX))
        return per_call_slot * self.concurrency


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
    threads: int | None = Field(
        None, ge=1,
        description="CPU threads of the embedded model (default: every core this process may use)",
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
        DEFAULT_MAX_RETRIES, ge=0, description="tries after the first; in batch rounds, rounds "
        "after the first, counted over every command: a request that failed in all of them "
        "fails at once until a larger N",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    prices: Path | None = Field(None, description="JSON price table overriding the built-in one")
    rpm: float | None = Field(
        None, gt=0, description="at most N requests per minute, spread evenly (the provider's "
        "x-ratelimit headers also slow calls down before it would refuse one)",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    tpm: float | None = Field(
        None, gt=0, description="at most N tokens per minute (prompt estimated from its length, "
        "plus max_tokens)",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    batch: bool = Field(
        False, description="send the calls through the provider's Batch API in rounds "
        "(half price; each round can take up to 24 h); answers land in the call cache",
    )
    batch_files: Path | None = Field(
        None, description="write each round of calls to DIR/round-NNN.input.jsonl for an "
        "offline engine (vLLM's run_batch) and stop; run the same command again once "
        "DIR/round-NNN.output.jsonl exists",
        json_schema_extra={"flag": {"metavar": "DIR"}},
    )
    accept_partial_round: bool = Field(
        False, description="with --batch-files: read a round's output file that answers only "
        "some of its requests (an engine that stopped early); the others are asked again in "
        "the next round. Without it such a file waits, as the engine may still be writing it",
    )
    batch_max_requests: int = Field(
        BATCH_MAX_REQUESTS, ge=1, description="requests per batch file (larger rounds are "
        "split)", json_schema_extra={"flag": {"metavar": "N"}},
    )
    batch_max_mb: float = Field(
        BATCH_MAX_MB, gt=0, description="megabytes per batch file (larger rounds are split)",
        json_schema_extra={"flag": {"metavar": "MB"}},
    )
    batch_poll: float = Field(
        BATCH_POLL_S, gt=0, description="seconds between two looks at a running batch",
        json_schema_extra={"flag": {"metavar": "SECONDS"}},
    )
    estimate: bool = Field(
        False, description="print the calls, tokens, cost (live and batch prices) and time "
        "the command would need, then stop: nothing is called or written (calls its call "
        "cache answers cost nothing, and are counted apart)",
    )

    @model_validator(mode="after")
    def _one_batch_mode(self) -> LLMOptions:
        if self.batch and self.batch_files is not None:
            raise ValueError("--batch and --batch-files exclude each other: the Batch API, "
                             "or files for an offline engine")
        if (self.batch or self.batch_files is not None) and self.no_cache:
            raise ValueError("batch answers are kept in the call cache: drop --no-cache")
        if self.accept_partial_round and self.batch_files is None:
            raise ValueError("--accept-partial-round reads --batch-files rounds: give "
                             "--batch-files DIR too")
        if self.batch and self.llm:
            raise ValueError("the embedded model has no Batch API: use --batch-files DIR, "
                             "or drop --llm")
        return self

    @field_validator("batch_files")
    @classmethod
    def _a_directory(cls, directory: Path | None) -> Path | None:
        if directory is not None and directory.exists() and not directory.is_dir():
            raise ValueError(f"--batch-files takes a directory (the round files go in it); "
                             f"{directory} is a file")
        # Absolute: the rounds are recorded with their paths, and a re-run from another
        # working directory must find the same files.
        return directory.absolute() if directory is not None else None

    @field_validator("llm")
    @classmethod
    def _known_local_model(cls, choice: str | None) -> str | None:
        if choice is not None:
            local_model_name(choice)  # a typo is a usage error before any stage runs
        return choice


def resolve_settings(
    options: LLMOptions, default_cache: Path | None, progress: bool = True
) -> LLMSettings:
    """Resolve flags and environment: --llm local wins, then --base-url/$OPENAI_BASE_URL or
    $OPENAI_API_KEY (the OpenAI API), else the embedded model."""
    local: str | None = None
    base_url = options.base_url or os.environ.get("OPENAI_BASE_URL") or None
    if options.batch_files is not None:
        # An offline engine answers the files: no endpoint is ever called, nothing starts.
        local = None
    elif options.llm:
        local, base_url = local_model_name(options.llm), None
    elif not base_url and not os.environ.get("OPENAI_API_KEY"):
        local = DEFAULT_LOCAL_MODEL
    batch_mode: BatchMode = (
        "files" if options.batch_files is not None else "api" if options.batch else "live"
    )
    return LLMSettings(
        model=options.model,
        base_url=base_url,
        local=local,
        concurrency=options.concurrency,
        threads=options.threads,
        cache_path=None if options.no_cache else (options.cache or default_cache),
        refresh=options.refresh,
        timeout_s=options.timeout or (LOCAL_TIMEOUT_S if local else API_TIMEOUT_S),
        max_retries=options.max_retries,
        prices_path=options.prices,
        batch_mode=batch_mode,
        batch_dir=options.batch_files,
        accept_partial_round=options.accept_partial_round,
        batch_max_requests=options.batch_max_requests,
        batch_max_bytes=int(options.batch_max_mb * 1_000_000),
        batch_poll_s=options.batch_poll,
        rpm=options.rpm,
        tpm=options.tpm,
        progress=progress,
    )
