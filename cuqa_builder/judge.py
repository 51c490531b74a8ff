"""Acc: an LLM decides whether a prediction implies the gold answer (ITER-RETGEN's judge, which
the Self-DC paper uses, section 5.1). Used by `cuqa-eval` and by the validation probes."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from cuqa_builder.answer_parsing import parse_yes_no
from cuqa_builder.llm.client import LLMClient, prompt_request
from cuqa_builder.prompts import load_prompt

log = logging.getLogger(__name__)

JUDGE_PROMPT = "judge"


async def judge(client: LLMClient, question: str, prediction: str, answers: Sequence[str]) -> bool:
    """Whether `prediction` implies one of `answers`. An empty prediction is wrong without a
    call; a reply with no yes/no in it counts as No (logged), never as a guess of Yes."""
    if not prediction.strip():
        return False
    prompt = load_prompt(JUDGE_PROMPT, expects=frozenset({"question", "prediction", "answers"}))
    values = {"question": question, "prediction": prediction, "answers": "\n".join(answers)}
    # max_tokens 8: room for "Yes." plus formatting, nothing to ramble in.
    result = await client.chat(prompt_request(prompt, values, temperature=0.0, max_tokens=8))
    verdict = parse_yes_no(result.text)
    if verdict is None:
        log.warning("judge gave no Yes/No (%r); counted as No", result.text[:80])
        return False
    return verdict
