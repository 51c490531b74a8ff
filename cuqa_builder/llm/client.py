"""The one face every caller sees of the LLM: the `LLMClient` Protocol and `prompt_request`.

Solvers, generation, probes and the judge depend on this Protocol, never on the gateway class
(which loads `openai`); `prompt_request` is the one way a prompt template becomes a request, so
the template's name and hash are recorded the same way on every path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from cuqa_builder.llm.types import ChatRequest, ChatResult
from cuqa_builder.prompts import PromptTemplate


class LLMClient(Protocol):
    """What callers need of `cuqa_builder.llm.gateway.Gateway`: its model name and `chat`."""

    @property
    def model(self) -> str: ...

    async def chat(self, request: ChatRequest) -> ChatResult: ...


def prompt_request(
    template: PromptTemplate, values: Mapping[str, str], **sampling: Any
) -> ChatRequest:
    """`template` rendered with `values` as one user message, with the template recorded."""
    return ChatRequest(
        messages=[{"role": "user", "content": template.render(**values)}],
        template=template.name,
        template_hash=template.sha256,
        reply_schema=template.reply_schema,
        **sampling,
    )
