"""A critic model's verdicts on each item, per criterion (template: `prompts/critic.txt` of the
package).

The critic reads the question, the answer, the sub-questions and the grounding evidence (else
the known passage) and answers yes or no on four criteria. Calls go through the gateway with
greedy decoding, so they are cached and a re-run asks nothing twice. A criterion the critic
answered "no", or did not answer at all, fails the item unless the critic is advisory.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuqa_builder.llm.types import LLMError
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, CheckFailure, CriticVerdict, Validation
from cuqa_builder.validation.checks import CheckReport
from cuqa_builder.validation.probes import CRITIC, Roles, ask_each, record_outcomes

if TYPE_CHECKING:  # the gateway module loads `openai`
    from cuqa_builder.llm.gateway import Gateway

CRITIC_TEMPLATE = "critic"
CRITERIA = {  # letter in the prompt -> criterion name
    "A": "natural_question",
    "B": "one_clear_answer",
    "C": "both_hops_needed",
    "D": "known_answer_supported",
}
CRITIC_PREFIX = "critic_"
CRITIC_CHECKS = tuple(CRITIC_PREFIX + name for name in CRITERIA.values())
CRITIC_ERROR = "critic_error"
CRITIC_SAMPLING = {"temperature": 0.0, "max_tokens": 200, "seed": 0}
_VERDICT_LINE = re.compile(
    r"^\W*(?:criterion\s+)?([ABCD])\W*\s*[:.)\-]\s*\**\s*(yes|no)\b\W*(.*)$", re.IGNORECASE
)
_PASSAGE_CHARS = 600  # how much of a model-written passage stands in for missing evidence


def parse_verdicts(text: str) -> dict[str, CriticVerdict]:
    """Criterion name -> verdict, for each criterion the reply judged (the first line counts)."""
    found: dict[str, CriticVerdict] = {}
    for line in text.splitlines():
        match = _VERDICT_LINE.match(line.strip())
        if match:
            name = CRITERIA[match.group(1).upper()]
            found.setdefault(name, CriticVerdict(passed=match.group(2).lower() == "yes",
                                                 note=match.group(3).strip()))
    return found


def _evidence(candidate: Candidate) -> str:
    lines = [f'"{sentence}" ({evidence.title}, revision {evidence.revid})'
             for verdict in candidate.grounding for evidence in verdict.evidence
             for sentence in evidence.sentences]
    if lines:
        return "\n".join(lines)
    passages = _passages(candidate)
    if passages:
        return "(no Wikipedia evidence; the generator's own passage) " + " ".join(
            p[:_PASSAGE_CHARS] for p in passages)
    return "(none)"


def _passages(candidate: Candidate) -> list[str]:
    if candidate.intermediates is not None:
        return [candidate.intermediates.known_passage]
    return [p for sub in candidate.sub_items for p in _passages(sub)]


def critic_values(candidate: Candidate) -> dict[str, str]:
    subs = "\n".join(f"- ({'recent event' if s.kind == 'unknown' else 'general knowledge'}) "
                     f"{s.question} -> {s.answer}" for s in candidate.sub_questions)
    return {"question": candidate.question, "answer": candidate.answer,
            "sub_questions": subs, "evidence": _evidence(candidate)}


@dataclass
class Critic:
    gateway: Gateway

    async def judge(self, candidate: Candidate) -> dict[str, CriticVerdict]:
        template = load_prompt(CRITIC_TEMPLATE)
        result = await self.gateway.prompt(template, critic_values(candidate), **CRITIC_SAMPLING)
        found = parse_verdicts(result.text)
        for name in CRITERIA.values():
            found.setdefault(name, CriticVerdict(
                passed=False, note=f"no verdict in the critic's reply: {result.text[:120]!r}"))
        return {name: found[name] for name in CRITERIA.values()}


async def criticise_all(
    critic: Critic, candidates: Sequence[Candidate], *, progress: bool = False
) -> list[dict[str, CriticVerdict] | LLMError]:
    return await ask_each(candidates, critic.judge, "critic", progress)


def record_critic(
    report: CheckReport, indexes: Sequence[int],
    outcomes: Sequence[dict[str, CriticVerdict] | LLMError], model: str, *, advisory: bool,
) -> None:
    """Store each verdict; a failed criterion fails the item, or is only noted when advisory."""

    def judge(validation: Validation, verdicts: dict[str, CriticVerdict]) -> list[CheckFailure]:
        validation.critic = verdicts
        report.applied.update(CRITIC_CHECKS)
        return [CheckFailure(check=CRITIC_PREFIX + name, reason=f"the critic {model} says no: "
                             f"{verdict.note or '(no reason given)'}")
                for name, verdict in verdicts.items() if not verdict.passed]

    record_outcomes(report, indexes, outcomes, roles=Roles.of((CRITIC, model)),
                    error_check=CRITIC_ERROR, judge=judge, advisory=advisory)
