"""Dated events and a scripted model that knows them up to a given month, for the cutoff probe.

Each event says which fictional body signed which numbered accord on which day. The model
writes Table 5's question about an event ("Which group signed accord K2023-07-03?") and answers
closed-book: right for a share `hit_rate` of the events of the months it knows, and for a share
`guess_rate` (lucky guesses) of the later ones; which events are "right" is a pure function of
the accord's code, so every run gives the same answers.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date
from typing import Any

from cuqa_builder.records.events import Event, EventSource, event_id
from cuqa_builder.testing.algorithm_llm import ENTITY_POOL
from cuqa_builder.testing.openai_server import Reply, last_user_message

_CODE = re.compile(r"accord (K\d{4}-\d{2}-\d{2})")
UNSURE = "I am not sure."


def accord_code(month: str, number: int) -> str:
    return f"K{month}-{number:02d}"


def dated_events(months: list[str], per_month: int) -> list[Event]:
    """`per_month` events in each YYYY-MM month (days 1-28), each naming one pool entity."""
    events = []
    for month in months:
        year, number = (int(part) for part in month.split("-"))
        for i in range(per_month):
            entity = ENTITY_POOL[i % len(ENTITY_POOL)]
            day = date(year, number, 1 + i % 28)
            text = f"The {entity.text} signed accord {accord_code(month, i)} on {day:%B} {day.day}."
            title = f"Portal:Current events/{day:%Y %B} {day.day}"
            events.append(Event(
                id=event_id(title, text), date=day, text=text, entities=[entity],
                source=EventSource(title=title, revid=1, url="https://example.org/wiki"),
            ))
    return events


def _share(code: str) -> float:
    return int(hashlib.sha256(code.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF


class KnowledgeResponder:
    """`ScriptedLLM` responder: knows the events of `events` dated up to `known_until`."""

    def __init__(self, events: list[Event], known_until: str, hit_rate: float = 0.85,
                 guess_rate: float = 0.05) -> None:
        self.answers: dict[str, tuple[str, str]] = {}  # code -> (month, answer)
        for event in events:
            if match := _CODE.search(event.text):
                self.answers[match[1]] = (f"{event.date:%Y-%m}", event.entities[0].text)
        self.known_until = known_until
        self.hit_rate = hit_rate
        self.guess_rate = guess_rate

    def knows(self, code: str) -> bool:
        month, _ = self.answers[code]
        rate = self.hit_rate if month <= self.known_until else self.guess_rate
        return _share(code) < rate

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        match = _CODE.search(prompt)
        if match is None or match[1] not in self.answers:
            return Reply(text="I do not understand.")
        code = match[1]
        if "According to the unknown event" in prompt:  # Table 5: write the question
            return Reply(text=f"Question: Which group signed accord {code}?")
        if prompt.startswith("Please answer the following question"):  # closed-book
            answer = self.answers[code][1] if self.knows(code) else UNSURE
            return Reply(text=f"The answer is {answer}.")
        return Reply(text="I do not understand.")
