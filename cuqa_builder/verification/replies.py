"""Reading the checker's replies: a ranked list of guesses, and the open-book answer with what
else fits. Models rarely keep to a format exactly, so each reader takes the shapes seen in
practice (numbered or bulleted lines, one line of semicolons, a JSON list or object, a fenced
block, labels in any case) and gives an empty result rather than raising."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from cuqa_builder.answer_parsing import unfenced

_BULLET = re.compile(r"^\s*(?:[-*•]|\(?\d+[.):]|#\d+:?)\s*")
_LABEL = re.compile(r"^\s*(?:guesses?|answers?|best guesses)\s*:\s*$", re.IGNORECASE)
# An explanation after the guess: "NATO – most of them are members", "Paris (the capital)".
_EXPLANATION = re.compile(r"\s+[–—-]\s+.*$|\s*\([^)]*\)\s*$|\s*:\s+.*$")
_WRAPPING = " \t\"'`*_“”‘’."
_NONE = re.compile(r"^(?:none|no|nothing|n/?a|-|unknown|not sure|i don'?t know|no other\b.*"
                   r"|nothing else\b.*)$", re.IGNORECASE)


def _unfenced(reply: str) -> str:
    return unfenced(reply).strip()


def _json(reply: str) -> object | None:
    text = _unfenced(reply)
    if not text.startswith(("[", "{")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _clean(item: str) -> str:
    item = _EXPLANATION.sub("", _BULLET.sub("", item.strip())).strip(_WRAPPING)
    return "" if _NONE.match(item) else item


def parse_guesses(reply: str) -> list[str]:
    """The guesses of a reply, most likely first, without numbering or explanations."""
    found = _json(reply)
    if isinstance(found, dict):
        found = next((v for v in found.values() if isinstance(v, list)), None)
    if isinstance(found, list):
        items = [str(x) for x in found]
    else:
        lines = [line for line in _unfenced(reply).splitlines()
                 if line.strip() and not _LABEL.match(line)]
        items = lines if len(lines) > 1 else re.split(r"\s*;\s*|,\s+", lines[0]) if lines else []
    return list(dict.fromkeys(g for g in map(_clean, items) if g))


@dataclass(frozen=True)
class OpenBookReply:
    answer: str
    other_fits: list[str] = field(default_factory=list)  # other things the description fits
    other_answers: list[str] = field(default_factory=list)  # other right answers


_FIELDS = {
    "answer": re.compile(r"^\s*\**answer\**\s*:\s*(.*)$", re.IGNORECASE),
    "other_fits": re.compile(r"^\s*\**other\s+things?\b[^:]*:\s*(.*)$", re.IGNORECASE),
    "other_answers": re.compile(r"^\s*\**other\s+(?:right\s+)?answers?\b[^:]*:\s*(.*)$",
                                re.IGNORECASE),
}


def _names(text: str) -> list[str]:
    parts = re.split(r"\s*;\s*" if ";" in text else r",\s+|\s+and\s+", text)
    return [name for name in map(_clean, parts) if name]


def parse_open_book(reply: str) -> OpenBookReply:
    """`Answer: X` / `Other things ...: none` / `Other right answers: none`, in any order or
    case, or a JSON object with those keys; a reply without labels is its first line's answer."""
    found = _json(reply)
    values: dict[str, str] = {}
    if isinstance(found, dict):
        for key, value in found.items():
            key = str(key).replace("_", " ")
            text = "; ".join(map(str, value)) if isinstance(value, list) else str(value)
            for name, pattern in _FIELDS.items():
                if name not in values and pattern.match(f"{key}: {text}"):
                    values[name] = text
    else:
        for line in _unfenced(reply).splitlines():
            for name, pattern in _FIELDS.items():
                if name not in values and (match := pattern.match(line)):
                    values[name] = match.group(1)
                    break
    answer = values.get("answer")
    if answer is None:
        answer = next((line for line in _unfenced(reply).splitlines() if line.strip()), "")
    return OpenBookReply(answer=_clean(answer), other_fits=_names(values.get("other_fits", "")),
                         other_answers=_names(values.get("other_answers", "")))
