"""A scripted model for the connected recipe's pooled prompts (tests and benchmarks).

It answers as a chat model would (labels, bold, a lead-in) and every answer is a pure function
of the prompt: it describes every named thing of an event ("the subject of news item TAG, part
N, of May 2023"), writes one birthplace question per named thing whose article links something
(its first link the answer) and one category for every other one, guesses wrong unless a test
says an event's questions are guessed (`guessed`: a word of the news -> "masked" or "whole"),
and answers each question with its item's answer in the open book.
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
_JUDGED = re.compile(r"^Q(\d+)\. Question: .*\nPrediction: (.*)\nGround-truth Answer: (.*)$",
                     re.MULTILINE)
_OPEN_BOOK_BLOCK = re.compile(r"^Q(\d+)\. News of [^:]+: (.*)\n.*\nQuestion: (.+)$", re.MULTILINE)


@dataclass
class PoolResponder:
    guessed: dict[str, str] = field(default_factory=dict)  # word of the news -> which guesses
    skip: frozenset[str] = frozenset()  # named things the describer skips as foreseeable
    bridge_of: dict[tuple[str, str], str] = field(default_factory=dict)  # (tag, part) -> name
    news_of: dict[str, str] = field(default_factory=dict)  # tag -> the news described
    answer_of: dict[str, str] = field(default_factory=dict)  # bridge -> its hop's answer
    asked: list[str] = field(default_factory=list)  # every question guessed at
    recurs: frozenset[str] = frozenset()  # words of the news whose kind of event recurs

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if "For each named thing listed, write a description" in prompt:
            return Reply(text=self._describe(prompt))
        if "write up to three questions" in prompt:
            return Reply(text=self._facts(prompt))
        if prompt.startswith("Imagine you know everything"):
            if "\nQuestion: " in prompt:  # one question (validate's checker, one item a call)
                asked = prompt.rsplit("\nQuestion: ", 1)[1].strip()
                return Reply(text=self._guess(f"Q1. {asked}").removeprefix("Q1: "))
            return Reply(text=self._guess(prompt))
        if prompt.startswith("Each question below comes with a news item"):
            return Reply(text=self._open_book(prompt))
        if "answer the question below" in prompt:
            news = prompt.split("\n", 1)[0]
            asked = prompt.split("\nQuestion: ", 1)[1].split("\n", 1)[0]
            return Reply(text=self._open_book_part(news, asked))
        if prompt.endswith("Output Yes or No:"):  # the judge: the same words, the same answer
            said = prompt.split("Prediction:\n", 1)[1].split("\n", 1)[0].strip().lower()
            answers = prompt.split("Ground-truth Answer:\n", 1)[1].lower().splitlines()
            return Reply(text="Yes" if said in answers else "No")
        if prompt.startswith("In each task below"):  # the judge of many pairs, alike
            return Reply(text="\n".join(
                f"Q{n}: {'Yes' if said.strip().lower() in answers.lower().split(' | ') else 'No'}"
                for n, said, answers in _JUDGED.findall(prompt)))
        return Reply(text="I do not understand.")

    def _describe(self, prompt: str) -> str:
        month = _NEWS.search(prompt)[1]
        tag = hashlib.sha256(prompt.encode()).hexdigest()[:6]
        self.news_of[tag] = prompt.split("\n", 1)[0]
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
            answer = first or f"Marlow Heath {number}"
            self.answer_of[name] = answer
            lines.append(f"**T{number}** | birthplace | {answer} | What is the birthplace of "
                         f"{name}?")
        return "\n".join(lines)

    def _answer(self, question: str) -> str:
        found = _DESCRIBED.search(question)
        bridge = self.bridge_of.get((found[1], found[2]), "") if found else ""
        if question.startswith("Which of the "):
            return bridge  # AAB: the bridge is the answer
        return next((a for name, a in self.answer_of.items() if bridge and (
            bridge.endswith(name) or name.endswith(bridge))), "")

    def _answers_of(self, tag: str) -> list[str]:
        """Every answer of an event's questions (a masked question does not say which)."""
        bridges = [b for (t, _), b in self.bridge_of.items() if t == tag]
        return [a for name, a in self.answer_of.items()
                if any(b.endswith(name) or name.endswith(b) for b in bridges)] + bridges

    def _guess(self, prompt: str) -> str:
        lines = []
        for _, number, question in _LISTED.findall(prompt):
            self.asked.append(question)
            tag = re.search(r"news item (\w+)", question)
            news = self.news_of.get(tag[1], "") if tag else ""
            kind = "masked" if " a certain " in question else "whole"
            hit = any(word in news and which == kind for word, which in self.guessed.items())
            guesses = ["Atlantis", *self._answers_of(tag[1])] if hit and tag else [NOT_IT]
            lines.append(f"Q{number}: {'; '.join(guesses)}")
        return "\n".join(lines)

    def _open_book(self, prompt: str) -> str:
        """Each question's answer; elsewhere in the world, "recurs" for the news with a word
        of `recurs`, else none."""
        return "\n".join(f"Q{number}\n{self._open_book_part(news, question)}"
                         for number, news, question in _OPEN_BOOK_BLOCK.findall(prompt))

    def _open_book_part(self, news: str, question: str) -> str:
        elsewhere = "recurs" if any(word in news for word in self.recurs) else "none"
        return (f"Answer: {self._answer(question)}\nOther things the description fits: none\n"
                f"Other right answers: none\nElsewhere in the world that month: {elsewhere}")
