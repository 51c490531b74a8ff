"""The `connected` check: does the item need its event? (MuSiQue's disconnected-reasoning filter)

A checker model is asked, closed-book, the item's question with the event masked. The connected
recipe records that question when it composes the item (the known question with the bridge
replaced by "a certain place/person/..."); for the paper's recipe it is the known question with
the bridge masked (ABC), or the known question as it is (AAB: it is asked for the answer itself).
If the checker still gives the item's answer, the event was not needed: a shortcut. A hard item
is connected when both its easy items are. Calls go through the gateway with greedy decoding,
so they are cached, batched and counted like every other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuqa_builder.answer_parsing import extract_answer
from cuqa_builder.generation.bridges import kind_of, names_of, substitute
from cuqa_builder.llm.types import LLMError
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records import Candidate, CheckFailure, ConnectedVerdict
from cuqa_builder.text import contains_answer
from cuqa_builder.validation.checks import CheckReport
from cuqa_builder.validation.probes import ask_each

if TYPE_CHECKING:  # the gateway module loads `openai`
    from cuqa_builder.llm.gateway import Gateway

CONNECTED = "connected"
CONNECTED_ERROR = "connected_error"
CONNECTED_TEMPLATE = "connected_check"
CHECK_SAMPLING = {"temperature": 0.0, "max_tokens": 32, "seed": 0}


def masked_question(item: Candidate) -> str:
    """The easy item's question with the event masked."""
    steps = item.intermediates
    assert steps is not None, "an easy item keeps its intermediates"
    if steps.masked_question:
        return steps.masked_question
    if steps.branch == "AAB":
        return steps.known_question
    masked = substitute(steps.known_question, names_of(steps.cur_ent),
                        f"a certain {kind_of(steps.cur_ent)}")
    return masked or steps.known_question


def gives_answer(reply: str, item: Candidate) -> bool:
    said = extract_answer(reply)
    return any(contains_answer(said, name) for name in (item.answer, *item.answer_aliases))


@dataclass
class ConnectedChecker:
    gateway: Gateway

    async def _ask(self, item: Candidate) -> ConnectedVerdict:
        question = masked_question(item)
        result = await self.gateway.prompt(load_prompt(CONNECTED_TEMPLATE),
                                           {"question": question}, **CHECK_SAMPLING)
        return ConnectedVerdict(
            masked_question=question, reply=result.text.strip(), model=self.gateway.model,
            passed=not gives_answer(result.text, item),
        )

    async def verdicts(self, candidate: Candidate) -> list[ConnectedVerdict]:
        if candidate.difficulty == "easy":
            return [await self._ask(candidate)]
        return [(await self._ask(sub)).model_copy(update={"item": sub.id})
                for sub in candidate.sub_items]


async def check_connected_all(
    checker: ConnectedChecker, candidates: Sequence[Candidate], *, progress: bool = False
) -> list[list[ConnectedVerdict] | LLMError]:
    return await ask_each(candidates, checker.verdicts, "connected", progress)


def record_connected(
    report: CheckReport, indexes: Sequence[int],
    outcomes: Sequence[list[ConnectedVerdict] | LLMError], model: str,
) -> None:
    """Store each item's verdicts; a checker that still answers fails the item."""
    for index, outcome in zip(indexes, outcomes, strict=True):
        validation = report.validations[index]
        if isinstance(outcome, LLMError):
            failures = [CheckFailure(check=CONNECTED_ERROR, reason=f"the checker {model} could "
                                     f"not be asked ({outcome}); run validate again to retry")]
        else:
            validation.connected = outcome
            report.applied[CONNECTED] += 1
            failures = [CheckFailure(
                check=CONNECTED, reason=f'with the event masked, "{v.masked_question}", '
                f'{v.model} still answers "{v.reply[:80]}"' + (f" ({v.item})" if v.item else ""),
            ) for v in outcome if not v.passed][:1]
        report.failed.update({f.check for f in failures})
        validation.failures.extend(failures)
        validation.passed = not validation.failures
