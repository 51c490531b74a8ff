"""A scripted model for the connected recipe's pooled prompts (tests and benchmarks).

It answers as a chat model would (labels, bold, a lead-in) and every answer is a pure function
of the prompt: it describes every named thing of an event ("the subject of news item TAG, part
N, of May 2023"), writes one birthplace question per named thing whose article links something
(its first link the answer) and one category for every other one, guesses wrong unless a test
says a question is guessed (`guessed`: a part of a question -> its guesses, `ANSWER` standing
for the item's answer), and answers each question with its item's answer in the open book.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

from cuqa_builder.testing.openai_server import Reply, last_user_message

NOT_IT = "Atlantis; El Dorado; Avalon; Lemuria; Shangri-La"
CATEGORY = "member states of the Commonwealth"
_NEWS = re.compile(r"^News of \d{1,2} (\w+ \d{4}): ", re.MULTILINE)
_LISTED = re.compile(r"^([BTQ])(\d+)\. (.+)$", re.MULTILINE)
_DESCRIBED = re.compile(r"news item (\w+), part (\d+)")


@dataclass
class PoolResponder:
    guessed: dict[str, str] = field(default_factory=dict)  # part of a question -> guesses
    skip: frozenset[str] = frozenset()  # named things the describer skips as foreseeable
    bridge_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (tag, part) -> name
    answer_of: dict[str, str] = field(default_factory=dict)  # bridge -> its hop's answer
    asked: list[str] = field(default_factory=list)  # every question guessed at

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if "For each named thing listed, write a description" in prompt:
            return Reply(text=self._describe(prompt))
        if "write up to three questions" in prompt:
            return Reply(text=self._facts(prompt))
        if prompt.startswith("Imagine you know everything"):
            return Reply(text=self._guess(prompt))
        if "answer each question below" in prompt:
            return Reply(text=self._open_book(prompt))
        return Reply(text="I do not understand.")

    def _describe(self, prompt: str) -> str:
        month = _NEWS.search(prompt)[1]
        tag = hashlib.sha256(prompt.encode()).hexdigest()[:6]
        lines = []
        for _, number, name in _LISTED.findall(prompt):
            self.bridge_of[(tag, number)] = name
            lines.append(f"B{number}: SKIP foreseeable: expected" if name in self.skip else
                         f"B{number}: The subject of news item {tag}, part {number}, of {month}.")
        return "Here are the descriptions:\n" + "\n".join(lines)

    def _facts(self, prompt: str) -> str:
        lines = []
        for block in prompt.split("\n\n"):
            found = _LISTED.match(block.strip())
            if found is None or found[1] != "T":
                continue
            number, name = found[2], found[3]
            links = re.search(r"^Links: (.+)$", block, re.MULTILINE)
            first = links[1].split("; ")[0] if links and links[1] != "none" else None
            if first is None and "Article:" in block:
                lines.append(f"T{number} | category | {CATEGORY}")
                continue
            answer = first or f"Atlantis City {number}"
            self.answer_of[name] = answer
            lines.append(f"**T{number}** | birthplace | {answer} | What is the birthplace of "
                         f"{name}?")
        return "\n".join(lines)

    def _answer(self, question: str) -> str:
        found = _DESCRIBED.search(question)
        bridge = self.bridge_of.get((found[1], found[2]), "") if found else ""
        if question.startswith("Which of the "):
            return bridge  # AAB: the bridge is the answer
        return next((a for name, a in self.answer_of.items() if bridge.endswith(name)
                     or name.endswith(bridge)), "")

    def _guess(self, prompt: str) -> str:
        lines = []
        for _, number, question in _LISTED.findall(prompt):
            self.asked.append(question)
            reply = next((g for part, g in self.guessed.items() if part in question), NOT_IT)
            lines.append(f"Q{number}: {reply.replace('ANSWER', self._answer(question))}")
        return "\n".join(lines)

    def _open_book(self, prompt: str) -> str:
        return "\n".join(
            f"Q{number}\nAnswer: {self._answer(question)}\nOther things the description fits: "
            "none\nOther right answers: none"
            for _, number, question in _LISTED.findall(prompt))
