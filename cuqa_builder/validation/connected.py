"""The `connected` and `bridge_hidden` checks: does the item need its event? (MuSiQue's
filter against disconnected reasoning, asked of a checker model closed-book.)

- `connected`: the item's question with the event masked. The connected recipe records it when
  it composes the item (the known question with the bridge's description cut to its head: "a
  certain Danish cyclist"); for the paper's recipe it is the known question with the bridge
  masked (ABC), or the known question as it is (AAB: it is asked for the answer itself). A
  checker that still gives the item's answer did not need the event: a shortcut.
- `bridge_hidden` (items with a description of the bridge): the checker, told to use only what
  was known before the cutoff, is asked which one the description points to. Naming the bridge
  means the unknown part is guessable without the event (a tourist island names its country).
A hard item is judged by its two easy items. Calls go through the gateway with greedy decoding,
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
BRIDGE_HIDDEN = "bridge_hidden"
CONNECTED_CHECKS = (CONNECTED, BRIDGE_HIDDEN)
CONNECTED_ERROR = "connected_error"
CONNECTED_TEMPLATE = "connected_check"
GUESS_TEMPLATE = "connected_guess"
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


def _says_any(reply: str, names: Sequence[str]) -> bool:
    said = extract_answer(reply)
    return any(contains_answer(said, name) for name in names if name)


@dataclass
class ConnectedChecker:
    gateway: Gateway
    cutoff: str

    async def _ask(self, template: str, values: dict[str, str]) -> str:
        result = await self.gateway.prompt(load_prompt(template), values, **CHECK_SAMPLING)
        return result.text.strip()

    async def _verdicts(self, item: Candidate) -> list[ConnectedVerdict]:
        question = masked_question(item)
        reply = await self._ask(CONNECTED_TEMPLATE, {"question": question})
        found = [ConnectedVerdict(
            question=question, reply=reply, model=self.gateway.model,
            passed=not _says_any(reply, [item.answer, *item.answer_aliases]),
        )]
        steps = item.intermediates
        if steps is not None and steps.bridge_description:
            reply = await self._ask(GUESS_TEMPLATE, {"description": steps.bridge_description,
                                                     "cutoff": self.cutoff})
            found.append(ConnectedVerdict(
                check=BRIDGE_HIDDEN, question=steps.bridge_description, reply=reply,
                model=self.gateway.model, passed=not _says_any(reply, names_of(steps.cur_ent)),
            ))
        return found

    async def verdicts(self, candidate: Candidate) -> list[ConnectedVerdict]:
        if candidate.difficulty == "easy":
            return await self._verdicts(candidate)
        return [verdict.model_copy(update={"item": sub.id})
                for sub in candidate.sub_items for verdict in await self._verdicts(sub)]


async def check_connected_all(
    checker: ConnectedChecker, candidates: Sequence[Candidate], *, progress: bool = False
) -> list[list[ConnectedVerdict] | LLMError]:
    return await ask_each(candidates, checker.verdicts, "connected", progress)


def _failure(verdict: ConnectedVerdict) -> CheckFailure:
    on = f" ({verdict.item})" if verdict.item else ""
    if verdict.check == CONNECTED:
        reason = (f'with the event masked, "{verdict.question}", {verdict.model} still answers '
                  f'"{verdict.reply[:80]}"{on}')
    else:
        reason = (f'without the event, {verdict.model} tells the bridge from "{verdict.question}"'
                  f': "{verdict.reply[:80]}"{on}')
    return CheckFailure(check=verdict.check, reason=reason)


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
            report.applied.update({v.check for v in outcome})
            failures = list({v.check: _failure(v) for v in outcome if not v.passed}.values())
        report.failed.update({f.check for f in failures})
        validation.failures.extend(failures)
        validation.passed = not validation.failures
