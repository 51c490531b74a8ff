"""The `connected` and `unknown_before_cutoff` checks: does the item need its event? (MuSiQue's
filter against disconnected reasoning, asked of a checker model closed-book.)

- `connected`: the item's question with the event masked. The connected recipe records it when
  it composes the item (the known question with the bridge's description cut to its head: "a
  certain Danish cyclist"); for the paper's recipe it is the known question with the bridge
  masked (ABC), or the known question as it is (AAB: it is asked for the answer itself). A
  checker that still gives the item's answer did not need the event: a shortcut.
- `unknown_before_cutoff`: the checker, told to answer only from what was known before the
  cutoff, is asked the whole question. Giving the answer means the item is guessable without
  the event (a tourist island names its country; the only incumbent is the one "re-elected").
A hard item is connected when its two easy items are. Calls go through the gateway with greedy
decoding, so they are cached, batched and counted like every other.
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
UNKNOWN_BEFORE_CUTOFF = "unknown_before_cutoff"
CONNECTED_CHECKS = (CONNECTED, UNKNOWN_BEFORE_CUTOFF)
CONNECTED_ERROR = "connected_error"
CONNECTED_TEMPLATE = "connected_check"
GUESS_TEMPLATE = "unknown_before_cutoff"
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
    """Whether the reply names the item's answer or an alias (a plural too: "Armenians" gives
    "Armenian")."""
    said = extract_answer(reply)
    names = (item.answer, *item.answer_aliases)
    return any(contains_answer(said, name) or contains_answer(said, f"{name}s") for name in names)


@dataclass
class ConnectedChecker:
    gateway: Gateway
    cutoff: str

    async def _ask(self, template: str, values: dict[str, str]) -> str:
        result = await self.gateway.prompt(load_prompt(template), values, **CHECK_SAMPLING)
        return result.text.strip()

    async def _connected(self, item: Candidate) -> ConnectedVerdict:
        question = masked_question(item)
        reply = await self._ask(CONNECTED_TEMPLATE, {"question": question})
        return ConnectedVerdict(question=question, reply=reply, model=self.gateway.model,
                                passed=not gives_answer(reply, item))

    async def verdicts(self, candidate: Candidate) -> list[ConnectedVerdict]:
        """`connected` for the easy item (each of a hard item's two), then
        `unknown_before_cutoff` for the item's own question."""
        if candidate.difficulty == "easy":
            found = [await self._connected(candidate)]
        else:
            found = [(await self._connected(sub)).model_copy(update={"item": sub.id})
                     for sub in candidate.sub_items]
        reply = await self._ask(GUESS_TEMPLATE, {"question": candidate.question,
                                                 "cutoff": self.cutoff})
        return [*found, ConnectedVerdict(
            check=UNKNOWN_BEFORE_CUTOFF, question=candidate.question, reply=reply,
            model=self.gateway.model, passed=not gives_answer(reply, candidate),
        )]


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
        reason = (f"{verdict.model}, told to know nothing after the cutoff, still answers "
                  f'"{verdict.reply[:80]}"')
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
