"""What every solver gets: the LLM client, a retriever, options, and a traced, counted run."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from cuqa_builder.answer_parsing import extract_answer
from cuqa_builder.errors import CuqaError
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.llm.types import ChatResult
from cuqa_builder.prompts import load_prompt
from cuqa_builder.retrieval.types import Passage, Retriever


class UnsupportedEndpoint(CuqaError, RuntimeError):
    """The endpoint lacks something a method needs (token logprobs): no question can be
    solved this way, so the whole evaluation stops with this message."""


class SolverOptions(BaseModel):
    confidence: Literal["verb", "prob"] = "verb"
    # Confidences are in [0, 1], so alpha and beta are too (paper 6.1: best alpha 0.4 with verb
    # confidence on gpt-3.5-turbo-1106, beta 0.1).
    alpha: float = Field(default=0.4, ge=0.0, le=1.0)
    beta: float = Field(default=0.1, ge=0.0, le=1.0)
    depth: int = Field(default=3, ge=1)  # Self-DC max iteration depth t
    # Self-DC's sub-questions that name an earlier one's answer ("#1"): filled with it before
    # they are asked (our deviation: models write dependent parts, though Table 21's prompt
    # asks for independent ones), or asked as written, as the paper's Figure 3 does.
    self_dc_dependent: Literal["fill", "literal"] = "fill"
    top_k: int = Field(default=3, ge=1)
    raisf_depth: int = Field(default=3, ge=0)
    temperature: float = 0.1  # paper 5.2: temperature and top_p 0.1 for all methods
    top_p: float = 0.1
    max_tokens: int = 256

    @classmethod
    def checked(cls, **values: Any) -> SolverOptions:
        """Options from user input; a value out of range is a one-line ValueError."""
        try:
            return cls(**values)
        except ValidationError as exc:
            first = exc.errors()[0]
            name = ".".join(map(str, first["loc"])) or "options"
            raise ValueError(f"{name}: {first['msg']} (got {first['input']!r})") from None


class SolverStep(BaseModel):
    """One entry of a prediction's trace."""

    kind: Literal["llm", "retrieval", "route"]
    name: str
    input: str = ""
    output: str = ""
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def decision(self) -> str:
        """A route's name with the branch or module it took ("self-dc:decompose")."""
        taken = self.data.get("branch") or self.data.get("module")
        return f"{self.name}:{taken}" if taken else self.name


class SolverRun:
    """One question's run: every call goes through here so it is traced and counted."""

    def __init__(
        self, client: LLMClient, retriever: Retriever | None, options: SolverOptions
    ) -> None:
        self.client = client
        self.retriever = retriever
        self.options = options
        self.trace: list[SolverStep] = []
        self.llm_calls = 0
        self.retrieval_calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cost = 0.0
        self.output: str | None = None  # the model's whole final output (what a judge reads)

    async def ask(
        self, template: str, values: dict[str, str], *, logprobs: bool = False, **sampling: Any
    ) -> ChatResult:
        request = prompt_request(
            load_prompt(template), values,
            temperature=sampling.pop("temperature", self.options.temperature),
            top_p=sampling.pop("top_p", self.options.top_p),
            max_tokens=sampling.pop("max_tokens", self.options.max_tokens),
            logprobs=logprobs,
            top_logprobs=1 if logprobs else None,
            **sampling,
        )
        text = request.messages[0]["content"]
        result = await self.client.chat(request)
        self.llm_calls += 1
        self.prompt_tokens += result.prompt_tokens
        self.completion_tokens += result.completion_tokens
        self.cost += result.cost
        self.trace.append(
            SolverStep(
                kind="llm",
                name=template,
                input=text,
                output=result.text,
                data={"cached": result.cached},
            )
        )
        return result

    async def retrieve(self, query: str) -> list[Passage]:
        if self.retriever is None:
            raise RuntimeError("this method needs a retriever: pass --retriever and --corpus")
        passages = await asyncio.to_thread(self.retriever.search, query, self.options.top_k)
        self.retrieval_calls += 1
        self.trace.append(
            SolverStep(
                kind="retrieval",
                name=self.retriever.name,
                input=query,
                data={"passages": [p.model_dump() for p in passages]},
            )
        )
        return passages

    def conclude(self, output: str, answer: str | None = None) -> str:
        """Record `output` as the model's final output; the short answer read from it (or
        `answer`, when the method reads it another way) is returned."""
        self.output = output
        return extract_answer(output) if answer is None else answer

    def route(self, name: str, **data: Any) -> None:
        """Record a decision (a Self-DC branch, a stop rule) in the trace."""
        self.trace.append(SolverStep(kind="route", name=name, data=data))


Solver = Callable[[str, SolverRun], Awaitable[str]]
