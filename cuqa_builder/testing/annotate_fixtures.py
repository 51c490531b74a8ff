"""Hand-built candidates and Label Studio results for the annotation round-trip tests."""

from __future__ import annotations

from datetime import date
from typing import Any

from cuqa_builder.records.candidates import Candidate, CheckFailure, Intermediates, Validation
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import EventRef, GeneratorInfo, SubQuestion

PASSED = Validation(passed=True)
NOT_UNKNOWN = Validation(
    passed=False,
    failures=[CheckFailure(check="probe_not_unknown",
                           reason="the target model answered it closed-book: Lake Vostrel")],
)


def candidate(n: int, validation: Validation | None = PASSED) -> Candidate:
    """An ABC item: the bridge (a ferry) is hidden, the answer is the lake it crosses."""
    bridge, answer = f"MV Harrowgate {n}", f"Lake Vostrel {n}"
    return Candidate(
        id=f"cand-{n:04d}",
        question=f"Which lake does the ferry launched in Tarnby in event {n} cross?",
        answer=answer,
        answer_aliases=[f"Vostrel {n}"],
        type="ABC",
        difficulty="easy",
        sub_questions=[
            SubQuestion(question=f"Which ferry was launched in Tarnby in event {n}?",
                        answer=bridge, kind="unknown"),
            SubQuestion(question=f"Which lake does the {bridge} cross?", answer=answer,
                        kind="known"),
        ],
        event=EventRef(id=f"ev-{n:016x}", date=date(2023, 9, 10),
                       text=f"The ferry {bridge} is launched in Tarnby.",
                       source_title="Portal:Current events/2023 September 10", revid=1000 + n),
        cutoff="2023-04",
        generator=GeneratorInfo(model="scripted", prompts={"MergeQuestions": "ab" * 32}),
        intermediates=Intermediates(
            branch="ABC",
            cur_ent=Entity(text=bridge, label="PRODUCT"),
            k_ent=Entity(text=answer, label="LOC"),
            known_passage=f"The {bridge} has crossed {answer} since the spring.",
            unknown_question=f"Which ferry was launched in Tarnby in event {n}?",
            known_question=f"Which lake does the {bridge} cross?",
            known_answer=answer,
            merged_question=f"Which lake does the ferry launched in Tarnby in event {n} cross?",
        ),
        seed=n,
        validation=validation,
    )


def choices(name: str, *values: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": "question", "type": "choices",
            "value": {"choices": list(values)}}


def text(name: str, value: str, to_name: str | None = None) -> dict[str, Any]:
    target = to_name or ("answer" if name == "answer_fix" else "question")
    return {"from_name": name, "to_name": target, "type": "textarea", "value": {"text": [value]}}


def accept(rewrite: str | None = None, answer: str | None = None) -> list[dict[str, Any]]:
    result = [choices("verdict", "accept")]
    if rewrite is not None:
        result.append(text("rewrite", rewrite))
    if answer is not None:
        result.append(text("answer_fix", answer))
    return result


def reject(*reasons: str) -> list[dict[str, Any]]:
    return [choices("verdict", "reject"), *([choices("reasons", *reasons)] if reasons else [])]


def unsure() -> list[dict[str, Any]]:
    return [choices("verdict", "unsure")]
