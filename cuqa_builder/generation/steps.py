"""The steps a recipe asks a model: each step's template, placeholders and parser (the paper's
five functions of Algorithm 1 here; other recipes declare theirs), the sampling of every call,
the checks a step's output must pass, and asking a step: a refused output is asked again with
the next sampling seed (a new cache key), up to `attempts` times, every attempt kept."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from cuqa_builder.errors import CuqaError
from cuqa_builder.generation.output_parsing import OutputError, parse_passage, parse_question
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.llm.types import LLMError
from cuqa_builder.prompts import PromptTemplate, load_prompt
from cuqa_builder.records.candidates import PromptCall
from cuqa_builder.records.items import QuestionType
from cuqa_builder.records.pool import PoolRecord
from cuqa_builder.similarity import SIMILAR, wording_similarity
from cuqa_builder.text import contains_answer
from cuqa_builder.verification.question_form import form_problem

# A refused reply is asked again with the next sampling seed (a new cache key); refused replies
# stay cached, so a re-run reproduces the same outcome for free.
DEFAULT_ATTEMPTS = 3


# What a repair adds to the prompt of a step with `feedback`.
REFUSED = "\n\nYour previous reply was refused: {reason}. Reply again, keeping to every rule."


# A step check: the parsed output -> why it is refused, or None to accept it.
StepCheck = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Step:
    """One function of Algorithm 1: its template, the placeholders it must have, its parser."""

    function: str
    template: str
    placeholders: frozenset[str]
    parse: Callable[[str], str]
    long_output: bool = False
    # A repair tells the model why its last reply was refused (the paper's steps are asked
    # again as they were, with the next seed: their requests stay the paper's).
    feedback: bool = False


UNKNOWN_QUESTION_GEN = Step(
    "UnknownQuestionGen", "unknown_question_gen",
    frozenset({"unknown_event", "unknown_entity"}), parse_question,
)
KNOWN_EVENTS_GEN = Step(
    "KnownEventsGen", "known_events_gen", frozenset({"entity"}), parse_passage, long_output=True
)
KNOWN_QUESTION_GEN = Step(
    "KnownQuestionGen", "known_question_gen", frozenset({"known_event", "entity"}), parse_question
)
KNOWN_QUESTION_GEN2 = Step(
    "KnownQuestionGen2", "known_question_gen2",
    frozenset({"known_passage", "unknown_entity", "known_entity"}), parse_question,
)
MERGE_QUESTIONS = Step(
    "MergeQuestions", "merge_questions",
    frozenset({"unknown_question", "known_question"}), parse_question,
)
STEPS = (
    UNKNOWN_QUESTION_GEN, KNOWN_EVENTS_GEN, KNOWN_QUESTION_GEN, KNOWN_QUESTION_GEN2, MERGE_QUESTIONS
)


class Sampling(BaseModel):
    """Sampling of every generation call; recorded in run.json so a dataset can be rebuilt."""

    temperature: float = 0.7  # varied wording across events while staying on the prompt
    top_p: float = 0.95
    question_max_tokens: int = 128  # a question is one sentence; this leaves room for a preamble
    passage_max_tokens: int = 384  # "a detailed passage": a few paragraphs

    def for_step(self, step: Step, seed: int) -> dict[str, Any]:
        max_tokens = self.passage_max_tokens if step.long_output else self.question_max_tokens
        return {
            "temperature": self.temperature, "top_p": self.top_p,
            "max_tokens": max_tokens, "seed": seed,
        }


class GenerationError(CuqaError):
    """A step that failed for good: the model call, or every attempt refused by its check."""

    def __init__(self, step: str, reason: str, attempts: list[PromptCall] | None = None) -> None:
        super().__init__(f"{step}: {reason}")
        self.step = step
        self.reason = reason
        self.attempts = list(attempts or [])
        self.branch: QuestionType | None = None
        self.pool: PoolRecord | None = None  # the connected recipe: what the event's pool held
        self.unasked: str | None = None  # the checking model (by its role) that failed to answer


@dataclass(frozen=True)
class StepResult:
    """Every attempt of one step, the accepted one last."""

    attempts: list[PromptCall]

    @property
    def parsed(self) -> str:
        return self.attempts[-1].parsed


def names_found(text: str, names: list[str]) -> str | None:
    """The first of `names` that `text` contains as whole words (normalised), if any."""
    return next((name for name in names if contains_answer(text, name)), None)


def own_answer_check(what: str, answer: list[str], bridge: list[str] | None = None) -> StepCheck:
    """A sub-question must read as one question, not name its own answer, and (an ABC known
    question) name the bridge."""

    def check(question: str) -> str | None:
        if problem := form_problem(question):
            return f"the {what}: {problem}"
        if found := names_found(question, answer):
            return f"the {what} names its own answer {found!r}"
        if bridge is not None and not names_found(question, bridge):
            return f"the {what} does not mention the bridge {bridge[0]!r}"
        return None

    return check


def merge_check(answer: list[str], bridge: list[str], inputs: list[str]) -> StepCheck:
    """A merged question must hide the answer and the bridge and join both inputs."""

    def check(question: str) -> str | None:
        if problem := form_problem(question):
            return f"the merged question: {problem}"
        if found := names_found(question, answer):
            return f"the merged question names the answer {found!r}"
        if found := names_found(question, bridge):
            return f"the merged question names the bridge {found!r}"
        if any(wording_similarity(question, q) >= SIMILAR for q in inputs):
            return "the merged question only repeats or rewords one of its two questions"
        return None

    return check


def load_templates(steps: tuple[Step, ...] = STEPS) -> dict[str, PromptTemplate]:
    """The steps' templates (the paper's five by default), checked now so a broken file fails
    before any call is paid."""
    return {step.template: load_prompt(step.template, expects=step.placeholders) for step in steps}


async def ask_step(
    gateway: LLMClient, template: PromptTemplate, step: Step, values: dict[str, str],
    sampling: Callable[[Step, int], dict[str, Any]], api_seed: int, tries: int,
    check: StepCheck | None = None,
) -> StepResult:
    """One step: ask, parse, check; a refused output is asked again with the next seed, up to
    `tries` times (`sampling(step, seed)`: the call's sampling)."""
    attempts: list[PromptCall] = []
    for attempt in range(tries):
        seed = api_seed + attempt
        request = prompt_request(template, values, **sampling(step, seed))
        if step.feedback and attempts:
            request.messages[-1]["content"] += REFUSED.format(reason=attempts[-1].rejected)
        try:
            result = await gateway.chat(request)
        except LLMError as exc:
            raise GenerationError(step.function, str(exc), attempts) from exc
        try:
            parsed, refused = step.parse(result.text), None
        except OutputError as exc:
            parsed, refused = "", str(exc)
        if refused is None and check is not None:
            refused = check(parsed)
        attempts.append(PromptCall(
            function=step.function, template_hash=template.sha256, raw=result.text,
            parsed=parsed, attempt=attempt, seed=seed, rejected=refused,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
        ))
        if refused is None:
            return StepResult(attempts)
    last = attempts[-1]
    raise GenerationError(
        step.function,
        f"{last.rejected} in {len(attempts)} attempts, last: {last.raw[:200]!r}", attempts,
    )
