"""Acc: an LLM decides whether a prediction implies the gold answer. Used by `cuqa-eval` and by
the validation probes.

Two prompts, by name:
- `iter-retgen` (cuqa-eval's default): ITER-RETGEN's judge word for word (Shao et al., 2023,
  section 4.2), which the Self-DC paper uses for its Acc (section 5.1, footnote 7), given the
  model's whole final output as the prediction, as ITER-RETGEN does.
- `reworded`: our rewording that names the several acceptable answers; given the short answer.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from cuqa_builder.errors import UsageError
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.prompts import load_prompt
from cuqa_builder.verification.replies import Unreadable, read_yes_no

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JudgePrompt:
    template: str
    answers_slot: str  # the placeholder that takes the gold answers, one per line
    full_output: bool  # judge the model's whole final output rather than the short answer


JUDGE_PROMPTS = {
    "iter-retgen": JudgePrompt("judge_iter_retgen", "answer", full_output=True),
    "reworded": JudgePrompt("judge_reworded", "answers", full_output=False),
}
DEFAULT_JUDGE_PROMPT = "iter-retgen"


def judge_prompt(name: str) -> JudgePrompt:
    try:
        return JUDGE_PROMPTS[name]
    except KeyError:
        raise UsageError(f"unknown judge prompt {name!r}; choose one of: "
                         f"{', '.join(JUDGE_PROMPTS)}") from None


async def judge_reply(
    client: LLMClient, question: str, prediction: str, answers: Sequence[str],
    prompt_name: str = DEFAULT_JUDGE_PROMPT,
) -> bool | Unreadable:
    """Whether `prediction` implies one of `answers`, or `Unreadable` when the judge says
    neither Yes nor No. An empty prediction is wrong without a call."""
    if not prediction.strip():
        return False
    chosen = judge_prompt(prompt_name)
    slots = frozenset({"question", "prediction", chosen.answers_slot})
    template = load_prompt(chosen.template, expects=slots)
    values = {"question": question, "prediction": prediction,
              chosen.answers_slot: "\n".join(answers)}
    # max_tokens 8: room for "Yes." plus formatting, nothing to ramble in.
    result = await client.chat(prompt_request(template, values, temperature=0.0, max_tokens=8))
    return read_yes_no(result.text)


async def judge(
    client: LLMClient, question: str, prediction: str, answers: Sequence[str],
    prompt_name: str = DEFAULT_JUDGE_PROMPT,
) -> bool:
    """`judge_reply` for a score (Acc): a reply with no yes/no counts as No (logged), never as
    a guess of Yes. A check must not pass on it: checks use `judge_reply`."""
    verdict = await judge_reply(client, question, prediction, answers, prompt_name)
    if isinstance(verdict, Unreadable):
        log.warning("judge gave no Yes/No (%r); counted as No", verdict.reply[:80])
        return False
    return verdict
