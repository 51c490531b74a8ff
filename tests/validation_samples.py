"""Hand-written candidates for the validate and release tests (the project's own fictional facts).

- `aab()`: a solar car; both sub-questions are answered by "Aurelia 7".
- `abc()`: the bridge is Pellham University (hidden), the answer is the city it is in, Dunmere.
- `river()`: an AAB item about the river of Dunmere, which a hard item builds on.
- `hard()`: `abc()` then `river()`: Dunmere is the bridge between them, the answer is River Osk.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from cuqa_builder.records.candidates import Candidate, Intermediates, Pairing, PromptCall
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import EventRef, GeneratorInfo, SubQuestion

CUTOFF = "2023-04"
GENERATOR = GeneratorInfo(
    model="scripted-generator",
    prompts={"unknown_question_gen": "a" * 64, "merge_questions": "b" * 64},
)


def _event(n: int, day: date, text: str) -> EventRef:
    return EventRef(id=f"ev-{n:016d}", date=day, text=text,
                    source_title=f"Portal:Current events/{day:%Y %B} {day.day}", revid=1000 + n)


def _intermediates(branch: str, cur_ent: Entity, k_ent: Entity | None, unknown_q: str,
                   known_q: str, known_answer: str, merged: str) -> Intermediates:
    return Intermediates(
        branch=branch, cur_ent=cur_ent, k_ent=k_ent,
        known_passage=f"{cur_ent.text} is well documented in the model's memory.",
        unknown_question=unknown_q, known_question=known_q, known_answer=known_answer,
        merged_question=merged,
    )


def aab(**update: Any) -> Candidate:
    car = Entity(text="Aurelia 7", label="PRODUCT", wiki_title="Aurelia 7 (solar car)")
    unknown_q = "Which solar car won the 2023 Trans-Karoo Challenge?"
    known_q = "Which solar car was built by students of Pellham University?"
    merged = "Which solar car built by Pellham University students won the 2023 Trans-Karoo " \
             "Challenge?"
    item = Candidate(
        id="cq-aab0000000000001", question=merged, answer="Aurelia 7", answer_aliases=[],
        type="AAB", difficulty="easy",
        sub_questions=[SubQuestion(question=unknown_q, answer="Aurelia 7", kind="unknown"),
                       SubQuestion(question=known_q, answer="Aurelia 7", kind="known")],
        event=_event(1, date(2023, 9, 10), "The solar car Aurelia 7 won the Trans-Karoo "
                     "Challenge."),
        cutoff=CUTOFF, generator=GENERATOR,
        intermediates=_intermediates("AAB", car, None, unknown_q, known_q, "Aurelia 7", merged),
        seed=0,
    )
    return item.model_copy(update=update)


def abc(**update: Any) -> Candidate:
    university = Entity(text="Pellham University", label="ORG",
                        wiki_title="University of Pellham")
    city = Entity(text="Dunmere", label="GPE", wiki_title="Dunmere")
    unknown_q = "Which university's students won the 2023 Trans-Karoo Challenge?"
    known_q = "In which city is Pellham University located?"
    merged = "In which city is the university whose students won the 2023 Trans-Karoo " \
             "Challenge located?"
    item = Candidate(
        id="cq-abc0000000000002", question=merged, answer="Dunmere",
        answer_aliases=["Dunmere, Karoo"], type="ABC", difficulty="easy",
        sub_questions=[SubQuestion(question=unknown_q, answer="Pellham University",
                                   kind="unknown"),
                       SubQuestion(question=known_q, answer="Dunmere", kind="known")],
        event=_event(2, date(2023, 9, 11), "Students of Pellham University won the Trans-Karoo "
                     "Challenge with a solar car."),
        cutoff=CUTOFF, generator=GENERATOR,
        intermediates=_intermediates("ABC", university, city, unknown_q, known_q, "Dunmere",
                                     merged),
        seed=0,
    )
    return item.model_copy(update=update)


def river(**update: Any) -> Candidate:
    osk = Entity(text="River Osk", label="LOC")
    unknown_q = "Which river flooded Dunmere in October 2023?"
    known_q = "Which river flows through Dunmere?"
    merged = "Which river that flows through Dunmere flooded the city in October 2023?"
    item = Candidate(
        id="cq-aab0000000000003", question=merged, answer="River Osk", answer_aliases=["Osk"],
        type="AAB", difficulty="easy",
        sub_questions=[SubQuestion(question=unknown_q, answer="River Osk", kind="unknown"),
                       SubQuestion(question=known_q, answer="River Osk", kind="known")],
        event=_event(3, date(2023, 10, 2), "The River Osk flooded Dunmere."),
        cutoff=CUTOFF, generator=GENERATOR,
        intermediates=_intermediates("AAB", osk, None, unknown_q, known_q, "River Osk", merged),
        seed=0,
    )
    return item.model_copy(update=update)


def hard(**update: Any) -> Candidate:
    first, second = abc(), river()
    merged = "Which river flooded in October 2023 the city whose university's students won " \
             "the 2023 Trans-Karoo Challenge?"
    item = Candidate(
        id="cqh-0000000000000004", question=merged, answer=second.answer,
        answer_aliases=second.answer_aliases, type="ABC", difficulty="hard",
        sub_questions=[*first.sub_questions, *second.sub_questions],
        event=second.event, cutoff=CUTOFF, generator=GENERATOR,
        sub_items=[first, second], seed=0,
        pairing=Pairing(link="question", bridge=first.answer, call=PromptCall(
            function="MergeQuestions", template_hash="b" * 64, raw=merged, parsed=merged)),
    )
    return item.model_copy(update=update)
