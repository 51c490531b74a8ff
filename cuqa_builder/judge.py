"""Acc: an LLM decides whether a prediction implies the gold answer (ITER-RETGEN's judge, which
the Self-DC paper uses, section 5.1). Used by `cuqa-eval` and by the validation probes."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from cuqa_builder.llm.types import ChatRequest
from cuqa_builder.prompts import load_prompt
from cuqa_builder.solvers.base import Gateway

log = logging.getLogger(__name__)

JUDGE_PROMPT = "judge"
_VERDICT = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_verdict(text: str) -> bool | None:
    """The first standalone yes/no ("**Yes**", "Answer: no.", "YES - it does"); None if absent."""
    found = _VERDICT.search(text)
    return found.group(1).lower() == "yes" if found else None


async def judge(gateway: Gateway, question: str, prediction: str, answers: Sequence[str]) -> bool:
    """Whether `prediction` implies one of `answers`. An empty prediction is wrong without a
    call; a reply with no yes/no in it counts as No (logged), never as a guess of Yes."""
    if not prediction.strip():
        return False
    prompt = load_prompt(JUDGE_PROMPT, expects=frozenset({"question", "prediction", "answers"}))
    text = prompt.render(question=question, prediction=prediction, answers="\n".join(answers))
    result = await gateway.chat(
        ChatRequest(
            messages=[{"role": "user", "content": text}],
            temperature=0.0,
            max_tokens=8,  # room for "Yes." plus formatting, nothing to ramble in
            template=prompt.name,
            template_hash=prompt.sha256,
        )
    )
    verdict = parse_verdict(result.text)
    if verdict is None:
        log.warning("judge gave no Yes/No (%r); counted as No", result.text[:80])
        return False
    return verdict
