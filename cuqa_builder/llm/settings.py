"""How a command chooses its model endpoint: flags and the `openai` client's own variables."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from pydantic import BaseModel

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
API_TIMEOUT_S = 120.0
# A CPU model shares a few cores between parallel slots: a long passage can take minutes.
LOCAL_TIMEOUT_S = 900.0


class LLMSettings(BaseModel):
    """Where calls go and how. The API key is read from OPENAI_API_KEY only, never stored."""

    model: str | None = None
    base_url: str | None = None
    local: str | None = None  # registry name of the embedded model, when it is used
    concurrency: int = 8
    cache_path: Path | None = None  # None: no cache
    refresh: bool = False  # ignore cached answers (and overwrite them)
    timeout_s: float = 120.0
    max_retries: int = 4
    prices_path: Path | None = None

    @property
    def uses_local_model(self) -> bool:
        return self.local is not None


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("LLM")
    group.add_argument("--model", help="model name at the endpoint")
    group.add_argument(
        "--base-url",
        help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL; with no "
        "endpoint and no $OPENAI_API_KEY, the embedded local model)",
    )
    group.add_argument(
        "--llm",
        metavar="local[:NAME]",
        help=f"use the embedded llama.cpp model (default NAME: {DEFAULT_LOCAL_MODEL}; "
        "see `cuqa-models list`)",
    )
    group.add_argument("--concurrency", type=int, default=8, help="parallel calls (default: 8)")
    group.add_argument(
        "--cache", type=Path, help="SQLite call cache (default: OUT/llm-cache.sqlite)"
    )
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    group.add_argument(
        "--refresh", action="store_true", help="call again and overwrite cached answers"
    )
    group.add_argument(
        "--timeout",
        type=float,
        help=f"seconds per call (default: {API_TIMEOUT_S:g}; "
        f"{LOCAL_TIMEOUT_S:g} for the embedded model)",
    )
    group.add_argument(
        "--max-retries", type=int, default=4, help="tries after the first (default: 4)"
    )
    group.add_argument("--prices", type=Path, help="JSON price table overriding the built-in one")


def settings_from_args(args: argparse.Namespace, default_cache: Path | None) -> LLMSettings:
    """Resolve flags and environment: --llm local wins, then --base-url/$OPENAI_BASE_URL or
    $OPENAI_API_KEY (the OpenAI API), else the embedded model."""
    local: str | None = None
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or None
    if args.llm:
        kind, _, name = args.llm.partition(":")
        if kind != "local":
            raise ValueError(f"--llm must be local or local:NAME, not {args.llm!r}")
        local, base_url = name or DEFAULT_LOCAL_MODEL, None
    elif not base_url and not os.environ.get("OPENAI_API_KEY"):
        local = DEFAULT_LOCAL_MODEL
    return LLMSettings(
        model=args.model,
        base_url=base_url,
        local=local,
        concurrency=args.concurrency,
        cache_path=None if args.no_cache else (args.cache or default_cache),
        refresh=args.refresh,
        timeout_s=args.timeout or (LOCAL_TIMEOUT_S if local else API_TIMEOUT_S),
        max_retries=args.max_retries,
        prices_path=args.prices,
    )
