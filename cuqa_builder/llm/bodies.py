"""What the endpoints are sent and must answer: a request's sampling parameters as the chat
endpoint or the legacy completions endpoint takes them (the messages' text as the prompt, token
logprobs in either of the two shapes servers return), the body of a batch line, and the shape a
completion must have to be read."""

from __future__ import annotations

from typing import Any

from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import ChatRequest


def request_body(model: str, settings: LLMSettings, request: ChatRequest) -> dict[str, Any]:
    """The request as a batch line's body: what a live call would send."""
    if settings.api == "completions":
        return {"model": model, "prompt": completion_prompt(request.messages),
                **completion_sampling(request)}
    return {"model": model, "messages": request.messages, **sampling(request)}


def sampling(request: ChatRequest) -> dict[str, Any]:
    """The request's sampling parameters that were set, as the client takes them."""
    params: dict[str, Any] = {
        name: value
        for name in ("temperature", "top_p", "seed", "max_tokens", "stop", "top_logprobs",
                     "response_format")
        if (value := getattr(request, name)) is not None
    }
    if request.logprobs:
        params["logprobs"] = True
    return params


def completion_prompt(messages: list[dict[str, str]]) -> str:
    """The prompt text of the completions endpoint: the messages' contents (one, in practice)."""
    return "\n\n".join(message["content"] for message in messages)


def completion_sampling(request: ChatRequest) -> dict[str, Any]:
    """As `sampling`, for the completions endpoint, whose `logprobs` is the number of top
    alternatives (0 would ask for none at all on llama.cpp)."""
    params = {name: value for name, value in sampling(request).items()
              if name not in ("logprobs", "top_logprobs")}
    if request.logprobs:
        params["logprobs"] = max(1, request.top_logprobs or 1)
    return params


def check_shape(body: Any) -> None:
    """Raise unless `body` is a completion with at least one choice: a chat message, or the
    completions endpoint's text."""
    choice = body["choices"][0]
    if "message" in choice:
        if not isinstance(choice["message"], dict):
            raise TypeError("the first choice has no message")
    elif not isinstance(choice["text"], str):
        raise TypeError("the first choice has no text")
