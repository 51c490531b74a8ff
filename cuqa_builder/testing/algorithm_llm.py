"""Synthetic unknown events and a scripted model for the five Algorithm 1 prompts.

The responder recognises each prompt by its template's wording (Tables 5-9) and answers the way
chat models do: labels, markdown, quotes, numbering, a chatty lead-in. Every answer is a pure
function of the prompt, so identical prompts get identical answers and runs can be compared.
Known passages name people and places spaCy's small English model finds ("Marie Curie",
"Warsaw", "Geneva"), except for entities named "Quiet ...", whose passage has no other entity.
"""

from __future__ import annotations

import hashlib
import re
from datetime import date, timedelta
from typing import Any

from cuqa_builder.records.events import Entity, Event, EventSource, event_id
from cuqa_builder.testing.openai_server import Reply, last_user_message

ENTITY_POOL = (
    Entity(text="Aurora Station", label="FAC", wiki_title="Aurora Station (spacecraft)"),
    Entity(text="Kestrel Bank", label="ORG", wiki_title="Kestrel Bank"),
    Entity(text="Northwind Council", label="ORG"),
    Entity(text="Lumen Institute", label="ORG", wiki_title="Lumen Research Institute"),
    Entity(text="Harbor League", label="ORG"),
    Entity(text="Solace Party", label="NORP"),
    Entity(text="Tidewater Court", label="ORG"),
)
PASSAGE_ENTITIES = frozenset({"Marie Curie", "Warsaw", "Poland", "United Nations", "Geneva"})
_PARTNER_OF = re.compile(r"^Which partner of (.+?) is (known fact \w+\?)$")
_QUESTIONS = re.compile(
    r"^Question One: (.+?) Question Two: (.+?) Generate a more natural", re.DOTALL
)


def make_events(count: int, *, first_day: date = date(2023, 5, 1), per_event: int = 3,
                pool: tuple[Entity, ...] = ENTITY_POOL) -> list[Event]:
    """`count` distinct events after a 2023-04 cutoff, each naming `per_event` pool entities."""
    events = []
    for i in range(count):
        entities = [pool[(i + 3 * j) % len(pool)] for j in range(per_event)]
        text = (f"On day {i} of the summit, " + ", ".join(e.text for e in entities)
                + f" signed accord number {i}.")
        events.append(Event(
            id=event_id("2023", text),
            date=first_day + timedelta(days=i % 200),
            text=text,
            source=EventSource(title="2023", revid=1000 + i, url="https://example.org/wiki/2023"),
            entities=entities,
        ))
    return events


def _tag(prompt: str) -> str:
    return hashlib.sha256(prompt.encode()).hexdigest()[:8]


def algorithm_answer(prompt: str) -> str:
    """What the scripted model says to one of the five prompts."""
    tag = _tag(prompt)
    if "According to the unknown event" in prompt:
        return f'**Question:** "Which party is behind unknown fact {tag}?"\n\nAnswer: it'
    if prompt.startswith("Generate a detailed passage about "):
        entity = prompt.removeprefix("Generate a detailed passage about ").strip()
        if entity.startswith("Quiet"):
            return "it was very quiet."
        return (f"Sure! Here is a detailed passage about {entity}:\n\n**{entity}** worked with "
                "Marie Curie in Warsaw, Poland, and later joined the United Nations in Geneva.")
    if "According to known events" in prompt:
        return f"1. Which body is described by known fact {tag}?\n2. Another question?"
    if "Generate a question that meets the following conditions" in prompt:
        unknown = prompt.split("1. contains the terms ", 1)[1].split(" in question,", 1)[0]
        return f"Question: Which partner of {unknown} is known fact {tag}?"
    if match := _QUESTIONS.search(prompt):
        first, second = match.groups()
        if bridged := _PARTNER_OF.match(second):  # ABC: the unknown question stands in for it
            who = first.removeprefix("Which party is behind ").rstrip("?")
            return f'Merged question: "Which partner of the one behind {who} is {bridged[2]}"'
        # AAB: one subject, both predicates ("Which party is behind ... and is described by
        # ...?"); a second "which" would glue on a second question.
        predicate = (second.split(" ", 2)[2] if second.startswith("Which ")
                     else second[0].lower() + second[1:])
        return f'Merged question: "{first.rstrip("?")} and {predicate}"'
    return "I do not understand."


class AlgorithmResponder:
    """`ScriptedLLM` responder for Algorithm 1; `delay_s` per reply, `broken` prompt markers.

    `broken` maps a substring of a prompt to the reply that prompt gets instead (an error status,
    an unusable answer), so tests can fail chosen steps of chosen events.
    """

    def __init__(self, delay_s: float = 0.0, broken: dict[str, Reply] | None = None) -> None:
        self.delay_s = delay_s
        self.broken = dict(broken or {})

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        for marker, reply in self.broken.items():
            if marker in prompt:
                return reply
        return Reply(text=algorithm_answer(prompt), delay_s=self.delay_s)
