"""The API key: where it comes from, and how it is kept out of what we raise, log and cache (an
endpoint may echo it, or another secret, in an error or even in an answer)."""

from __future__ import annotations

import os
import re

from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import LLMError

_SECRET_PATTERNS = re.compile(r"(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+\S+|//[^/\s:@]+:[^/\s@]+@)")


class Scrubber:
    """Takes our key (`secret`; None when there is none to hide) out of text."""

    def __init__(self, secret: str | None) -> None:
        self._secret = secret

    def without_key(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def scrub(self, text: str) -> str:
        """For messages: our key, and anything shaped like a key, a bearer token or URL
        credentials (an endpoint may echo another secret). Never applied to model answers."""
        return _SECRET_PATTERNS.sub("***", self.without_key(text))


def read_api_key(settings: LLMSettings) -> str:
    if settings.batch_mode == "files":
        return "unused"  # an offline engine answers the files: no endpoint is called
    key = os.environ.get("OPENAI_API_KEY")
    if key:
        return key
    if settings.base_url:
        return "none"  # self-hosted endpoints (vLLM, Ollama...) usually take any key
    raise LLMError("OPENAI_API_KEY is not set: set it, or give --base-url, or use --llm local")
