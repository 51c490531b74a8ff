"""Turn free model text into the one question (or passage) a generation step asked for.

Models wrap their answer in labels ("Merged question:", "Question One:"), markdown, quotes,
numbering, a polite preamble or several alternatives; the first question is the one we keep.
The raw text is recorded next to the parsed one by the caller, so nothing is lost here.
"""

from __future__ import annotations

import re

from cuqa_builder.errors import CuqaError

_THINKING = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_EMPHASIS = re.compile(r"\*\*|__|`")
_LINE_MARKER = re.compile(r"^(?:[-*•>]\s*|#+\s*|\(?\d{1,2}[.)]\s+|\(?[a-d]\)\s+)+")
# "Question:", "Merged question:", "Question One:", "Combined Question 2:", "Merged-Q:", "Q1:"
_LABEL = re.compile(
    r"(?<![\w-])(?:(?:merged|combined|final|new|known|unknown|more|natural|generated|resulting"
    r"|multi-hop)[\s-]+)*(?:question|q)(?:\s*(?:one|two|\d))?\s*:\s*",
    re.IGNORECASE,
)
# "Passage:", "Sure! Here is a detailed passage about X:"
_PASSAGE_LABEL = re.compile(
    r"^(?:(?:sure|certainly|okay)\W*)?"
    r"(?:here(?:'s| is)\b[^:\n]{0,80}?\b(?:passage|overview|summary)\b[^:\n]{0,80}|passage)"
    r"\s*:\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'“”‘’«»"
# How a question reads when a model leaves out its "?" ("Name the city that hosted it").
_QUESTION_START = re.compile(
    r"(?:who|whom|whose|what|which|when|where|why|how|is|are|was|were|do|does|did|can|could"
    r"|will|would|should|has|have|had|in|on|at|for|from|to|by|name|identify)\b",
    re.IGNORECASE,
)


class OutputError(CuqaError, ValueError):
    """The model's text holds nothing usable for this step."""


def _plain_lines(raw: str) -> list[str]:
    """Lines without reasoning blocks, emphasis marks, list markers or surrounding quotes."""
    text = _EMPHASIS.sub("", _THINKING.sub("", raw))
    lines = (_LINE_MARKER.sub("", line.strip()) for line in text.splitlines())
    return [line for line in lines if line]


def _after_last_label(text: str) -> str:
    """Drop a preamble such as "Sure! Here is the merged question:" before the question."""
    labels = list(_LABEL.finditer(text))
    return text[labels[-1].end():] if labels else text


def _unquote(text: str) -> str:
    return _LINE_MARKER.sub("", text.strip().strip(_QUOTES).strip())


def parse_question(raw: str) -> str:
    """The first question in the text, up to and including its first `?`.

    Failing a `?`, the first line worded as a question is kept as it is (the format validator
    reports the missing mark); a text holding no question at all raises OutputError.
    """
    lines = _plain_lines(raw)
    for line in lines:
        if "?" in line:
            question = _unquote(_after_last_label(line[: line.index("?") + 1]))
            if question.strip("?").strip():
                return question
    for line in lines:
        candidate = _unquote(_after_last_label(line))
        if _QUESTION_START.match(candidate):
            return candidate
    raise OutputError("no question in the model output")


def parse_passage(raw: str) -> str:
    """The passage as plain paragraphs: no reasoning block, markdown emphasis or lead-in label."""
    lines = _plain_lines(raw)
    if lines and (label := _PASSAGE_LABEL.match(lines[0])):
        lines[0] = lines[0][label.end():]
    passage = "\n".join(line for line in lines if line).strip()
    if not passage:
        raise OutputError("empty passage")
    return passage
