"""Reading models' free text: short answers, verbalised confidence, sub-question lists, yes/no
(shared by the solvers, the validation probes and the judge).

Models rarely follow a format exactly, so every parser here accepts the shapes seen in practice
and degrades to something usable (or None) instead of raising.
"""

from __future__ import annotations

import json
import re

# Phrases after which the answer itself starts; the last one in a text wins (CoT ends with it).
_ANSWER_MARKER = re.compile(
    r"\bso the (?:final )?answer is\b:?|\bthe (?:final )?answer is\b:?|\b(?:final )?answer\s*:",
    re.IGNORECASE,
)
# A code fence, with its language tag when one follows it on its line (or is `json`): a reply
# "```json\n{...}\n```" is read as its contents, never as the answer "json".
_FENCE = re.compile(r"```(?:[\w+-]+(?=[ \t]*\n)|json\b)?", re.IGNORECASE)
_ANSWER_FIELDS = ("final_answer", "answer")
_FINAL_ANSWER_MARKER = re.compile(r"\bso the final answer is\b\s*:?", re.IGNORECASE)
# Marks that wrap an answer (quotes, Markdown emphasis, brackets): opener -> closer.
_PAIRS = {'"': '"', "'": "'", "`": "`", "*": "*", "_": "_", "“": "”", "‘": "’", "[": "]"}
_CLOSERS = {closer: opener for opener, closer in _PAIRS.items()}
_TRAILING_PUNCTUATION = ".,;"

_SCALE_HINT = re.compile(r"[(\[]\s*0\s*(?:-|–|to)\s*100\s*[)\]]")  # "(0-100)" must not be read
_CONFIDENCE = re.compile(
    r"confidence[^0-9\n]{0,40}?(\d+(?:\.\d+)?)\s*(%|/\s*100\b|percent\b)?", re.IGNORECASE
)
_PERCENTAGE = re.compile(r"(\d+(?:\.\d+)?)\s*%")

_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.):])\s+")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def _clean_short_answer(text: str) -> str:
    """The answer without what wraps it: a pair of marks around the whole of it, marks without
    their pair at either end, and a trailing full stop, comma or semicolon. A quote closing one
    opened inside the answer is part of it, with what it encloses: 'the party "Forward."'."""
    while True:
        cleaned = _unpaired_ends(_unwrapped(text.strip().rstrip(_TRAILING_PUNCTUATION).strip()))
        if cleaned == text:
            return cleaned
        text = cleaned


def _unwrapped(text: str) -> str:
    """`text` without the marks around all of it ("Ankara", **Ankara**, [Ankara])."""
    if len(text) < 2 or _PAIRS.get(text[0]) != text[-1]:
        return text
    opener, closer = text[0], text[-1]
    depth = min(len(text) - len(text.lstrip(opener)), len(text) - len(text.rstrip(closer)))
    inner = text[depth:-depth]
    return text if opener in inner or closer in inner else inner


def _unpaired_ends(text: str) -> str:
    """`text` without a mark at its start that nothing after closes, or at its end that
    nothing before opened."""
    if text and text[0] in _PAIRS and _PAIRS[text[0]] not in text[1:] or (
            text and text[0] in _CLOSERS and text[0] not in _PAIRS):
        text = text[1:]
    if text and text[-1] in _CLOSERS and _CLOSERS[text[-1]] not in text[:-1] or (
            text and text[-1] in _PAIRS and text[-1] not in _CLOSERS):
        text = text[:-1]
    return text


def _first_line(text: str) -> str:
    return next((line for line in text.splitlines() if line.strip()), "")


def unfenced(text: str) -> str:
    """The text without Markdown code fences (```json ... ```), their contents kept."""
    return _FENCE.sub("", text)


def _json_answer(text: str) -> str | None:
    """The answer of a reply that ends with a JSON object (`{"final_answer": "Ankara"}`): its
    "final answer" or "answer" field, else its only text field; None for anything else (a
    reasoning that quotes JSON on its way to "the answer is ..." is read by its marker)."""
    start, end = text.find("{"), text.rstrip().rfind("}")
    if start < 0 or end < start or end != len(text.rstrip()) - 1:
        return None
    try:
        fields = json.loads(text[start:end + 1])
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    by_name = {re.sub(r"[\s_-]+", "_", str(k).strip().lower()): v for k, v in fields.items()}
    chosen = next((by_name[name] for name in _ANSWER_FIELDS if name in by_name), None)
    if chosen is None:
        texts = [value for value in fields.values() if isinstance(value, str)]
        chosen = texts[0] if len(texts) == 1 else None
    if isinstance(chosen, list):  # several guesses: each counts
        chosen = ", ".join(str(value) for value in chosen)
    return None if chosen is None or isinstance(chosen, dict) else str(chosen)


def extract_answer(text: str) -> str:
    """The short answer in a completion: a JSON reply's answer field (fenced or not), else what
    follows the last "answer is" / "Answer:" marker (on its line, or the next line when the
    marker ends one), else the first non-empty line."""
    text = unfenced(text)
    if (found := _json_answer(text)) is not None:
        return _clean_short_answer(found)
    markers = list(_ANSWER_MARKER.finditer(text))
    rest = text[markers[-1].end():] if markers else text
    return _clean_short_answer(_first_line(rest))


def final_answer(text: str) -> str | None:
    """Self-Ask's "So the final answer is: X", or None when the text has no such line."""
    markers = list(_FINAL_ANSWER_MARKER.finditer(text))
    if not markers:
        return None
    return _clean_short_answer(_first_line(text[markers[-1].end():]))


def _to_unit_interval(number: str, unit: str | None) -> float:
    value = float(number)
    # Percent signs and "/100" are explicit; a bare "0.8" is a fraction, a bare "80" a percentage.
    if unit is None and "." in number and value <= 1:
        return value
    return min(max(value / 100, 0.0), 1.0)


def parse_confidence(text: str) -> float | None:
    """A verbalised confidence ("Confidence (0-100): 80%", "confidence level: 0.8", "90/100",
    "[75]%") as a number in [0, 1]; None when the text states none."""
    text = _SCALE_HINT.sub(" ", text)
    stated = list(_CONFIDENCE.finditer(text))
    if stated:
        return _to_unit_interval(stated[-1].group(1), stated[-1].group(2))
    percentages = list(_PERCENTAGE.finditer(text))
    if percentages:
        return _to_unit_interval(percentages[-1].group(1), "%")
    return None


def _sequential_items(text: str) -> list[str] | None:
    """Split at markers numbered 1, 2, 3, ... in order ("#1:", "1.", "2)", "Q3:",
    "Sub-question 4:"), wherever they stand; None unless two are found, or one opens the text."""
    starts: list[tuple[int, int]] = []  # (marker start, item start)
    position = 0
    for number in range(1, 100):
        marker = re.compile(
            rf"(?:^|(?<=[\s,;]))(?:#\s*{number}(?!\d)\s*[:.)]?"
            rf"|(?:(?:sub-?)?question\s*|q)?{number}\s*[.):])\s*",
            re.IGNORECASE,
        )
        found = marker.search(text, position)
        if found is None:
            break
        starts.append((found.start(), found.end()))
        position = found.end()
    if not starts or (len(starts) == 1 and text[: starts[0][0]].strip()):
        return None
    ends = [start for start, _ in starts[1:]] + [len(text)]
    return [text[begin:end] for (_, begin), end in zip(starts, ends, strict=True)]


def _clean_sub_question(item: str) -> str:
    item = " ".join(item.split()).strip(" ,;")
    if item.startswith("[") and item.endswith("]"):
        item = item[1:-1].strip()
    return item


def parse_sub_questions(text: str) -> list[str]:
    """Sub-questions from a decomposition: "#1: ..., #2: ...", numbered lists (one per line or
    inline), bullets, else one per non-empty line."""
    text = re.sub(r"^\s*(?:answer|output)\s*:", "", text, flags=re.IGNORECASE)
    items = _sequential_items(text)
    if items is None:
        lines = [line for line in text.splitlines() if line.strip()]
        bullets = [_BULLET.sub("", line) for line in lines if _BULLET.match(line)]
        items = bullets or lines
    cleaned = (_clean_sub_question(item) for item in items)
    return [item for item in cleaned if item]


def parse_yes_no(text: str) -> bool | None:
    """The first standalone yes or no in the text; None when there is neither."""
    found = _YES_NO.search(text)
    return None if found is None else found.group(1).lower() == "yes"


def first_sentence(text: str) -> str:
    """The text up to its first sentence end or line break (IRCoT keeps one sentence a step)."""
    text = text.strip()
    end = _SENTENCE_END.search(text)
    return text[: end.start()] if end else text


def cut_at_stop(text: str, stop: list[str]) -> str:
    """`text` up to the first stop sequence, for endpoints that do not honour `stop` themselves."""
    ends = [i for i in (text.find(s) for s in stop) if i >= 0]
    return text[: min(ends)] if ends else text
