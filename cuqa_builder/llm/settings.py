"""How a command chooses its model endpoint: flags and the `openai` client's own variables."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from cuqa_builder.llm.local import REGISTRY

DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
API_TIMEOUT_S = 120.0
# A CPU model shares a few cores between parallel slots: a long passage can take minutes.
LOCAL_TIMEOUT_S = 900.0
# llama.cpp decodes this many requests together at most; more would only queue inside the
# server, where waiting counts against each call's timeout.
LOCAL_SLOTS_MAX = 4


class LLMSettings(BaseModel):
    """Where calls go and how. The API key is read from OPENAI_API_KEY only, never stored."""

    model: str | None = None
    base_url: str | None = None
    local: str | None = None  # registry name of the embedded model, when it is used
    # "completions": the legacy endpoint of instruct models (gpt-3.5-turbo-instruct), the prompt
    # sent as plain text; llama.cpp serves both.
    api: Literal["chat", "completions"] = "chat"
    concurrency: int = Field(default=8, ge=1)
    cache_path: Path | None = None  # None: no cache
    refresh: bool = False  # ignore cached answers (and overwrite them)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    prices_path: Path | None = None

    @property
    def uses_local_model(self) -> bool:
        return self.local is not None


def _count(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer of at least `minimum` (0 slots would wait forever)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is below the minimum of {minimum}")
        return value

    return parse


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def local_model_name(choice: str) -> str:
    """`--llm local` -> the default model; `local:NAME` -> NAME, which must be in the registry."""
    kind, _, name = choice.partition(":")
    if kind != "local":
        raise ValueError(f"--llm must be local or local:NAME, not {choice!r}")
    name = name or DEFAULT_LOCAL_MODEL
    if name not in REGISTRY:
        raise ValueError(f"unknown local model {name!r} (known: {', '.join(sorted(REGISTRY))})")
    return name


def _llm_choice(text: str) -> str:
    """Checked while parsing, so a typo is a usage error before any stage runs."""
    try:
        local_model_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


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
        type=_llm_choice,
        metavar="local[:NAME]",
        help=f"use the embedded llama.cpp model (default NAME: {DEFAULT_LOCAL_MODEL}; "
        "see `cuqa-models list`)",
    )
    group.add_argument(
        "--concurrency", type=_count(1), default=8,
        help="parallel calls (default: 8; the embedded model serves at most "
        f"{LOCAL_SLOTS_MAX} at once)",
    )
    group.add_argument(
        "--cache", type=Path, help="SQLite call cache (default: OUT/llm-cache.sqlite)"
    )
    group.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    group.add_argument(
        "--refresh", action="store_true", help="call again and overwrite cached answers"
    )
    group.add_argument(
        "--timeout",
        type=_seconds,
        help=f"seconds per call (default: {API_TIMEOUT_S:g}; "
        f"{LOCAL_TIMEOUT_S:g} for the embedded model)",
    )
    group.add_argument(
        "--max-retries", type=_count(0), default=4, help="tries after the first (default: 4)"
    )
    group.add_argument("--prices", type=Path, help="JSON price table overriding the built-in one")


def settings_from_args(args: argparse.Namespace, default_cache: Path | None) -> LLMSettings:
    """Resolve flags and environment: --llm local wins, then --base-url/$OPENAI_BASE_URL or
    $OPENAI_API_KEY (the OpenAI API), else the embedded model."""
    local: str | None = None
    base_url = args.base_url or os.environ.get("OPENAI_BASE_URL") or None
    if args.llm:
        local, base_url = local_model_name(args.llm), None
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
