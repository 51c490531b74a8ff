"""Reading the checker's replies, each as a small grammar that returns what it read **or**
`Unreadable` (SPEC 2.9, "fail closed"): a reply a check cannot read has measured nothing, and the
check that asked it fails its item as `unreadable`, the reply quoted, never passes it.

The shapes models write are read: numbered or bulleted lines, labelled lines ("Guess 1: X"),
one line of semicolons, a JSON list or an object holding the guesses or the answer, a fenced
block, bold labels. Anything else (a refusal, a sentence, a JSON object of other fields, a
missing line) is unreadable. Pooled replies (one request for all the questions of an event)
are split into one section per question number first (`sections`), each read by the same
grammar.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from cuqa_builder.answer_parsing import parse_yes_no, unfenced

_QUOTE_CHARS = 160  # of an unreadable reply, quoted in its failure


@dataclass(frozen=True)
class Unreadable:
    """A reply the grammar could not read: why, and the reply itself."""

    why: str
    reply: str

    def quoted(self) -> str:
        text = " ".join(self.reply.split())
        return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 1] + "…"

    def __str__(self) -> str:
        return f'{self.why}: "{self.quoted()}"'


# --- one guess, one name --------------------------------------------------------------------

_BULLET = re.compile(r"^\s*(?:[-*•+]|\(?\d{1,2}[.):]|#\d{1,2}:?)\s*")
# A label before the guess itself: "Guess 1:", "Answer #2 -", "Option 3)".
_ITEM_LABEL = re.compile(r"^\s*\**(?:guess|answer|option|candidate)\s*#?\s*\d*\s*\**\s*"
                         r"[:.)–—-]\s*\**\s*", re.IGNORECASE)
# A line that only introduces the list: "Guesses:", "Here are my five best guesses:".
_LEAD_IN = re.compile(r"^[^:\n]{0,80}:\s*$")
# An explanation after the guess: "NATO – most of them are members", "Paris (the capital)".
_EXPLANATION = re.compile(r"\s+[–—-]\s+.*$|\s*\([^)]*\)\s*$")
_WRAPPING = " \t\"'`*_“”‘’."
# "Nothing (more)": an empty list said in words, left out of the names.
_NO_NAME = re.compile(r"^(?:none|no|nothing|n/?a|-|no other\b.*|nothing else\b.*)$", re.IGNORECASE)

# A guess names something; a line that names nothing is a refusal, and fails closed. The rule
# (not a list of refusals: a list cannot close the class): a line names nothing when it holds no
# letter or digit ("?", "…"), or when every word of it is either a function word (negations,
# modals, auxiliaries, pronouns, determiners, prepositions, degree and quality words) or a word
# of knowing, determining, guessing, saying, information or time (`_KNOWING`, by its stem:
# "undeterminable" is un + determin(e) + able). So "Cannot determine", "Beyond my knowledge
# cutoff", "Not enough information to guess", "Unknowable", "Pass" name nothing, while one
# word of another kind makes a name: "Pass Christian", "Clear Lake", "No Name Key", "Unity",
# "The Guess Who". A name made only of such words ("It", "Guess") is read as a refusal: failing
# closed costs an item, reading a refusal as a guess passes one.
_FUNCTION_WORDS = frozenset(re.findall(r"\S+", """
a an the this that these those it its it's there here i i'm i'd i've me my mine we our us you
your one anyone anybody someone somebody nobody everyone no not non none nothing never neither
nor cannot can't cant can could couldn't would wouldn't will won't shall should shouldn't may
might must do does did don't doesn't didn't is isn't are aren't was wasn't were weren't be been
being am have has had haven't hasn't hadn't to of for from on in at about with without by
beyond after past outside before since than as so yet too enough very much more most less
little any some all at really truly quite currently still just only even way further any
and or but if whether what which given later earlier good better best real firm solid
confident definite definitive specific particular single educated informed other able unable
go up out over into upon get make
"""))
_KNOWING = frozenset(re.findall(r"\S+", """
know known knowledge aware awareness determine determinate conclude conclusive guess say tell
answer identify specify predict speculate confirm verify recall remember estimate infer deduce
decide disclose reveal comment certain sure clear obvious evident apparent ambiguous vague
possible available applicable reliable sufficient idea clue information info data detail context
evidence basis source record report cutoff cut off training date recent
event events question unclear unknown mystery pass skip abstain decline refuse hard difficult
doubt doubtful sorry lack early soon late now rely time moment present confidence
"""))
_NEGATING = ("un", "in", "im", "ir", "non")
_ENDINGS = ("abilities", "ability", "ibility", "ations", "ation", "ably", "able", "ible", "edly",
            "ness", "ment", "ive", "ful", "ing", "ed", "es", "ly", "ate", "ty", "s", "d", "n")


def _is_knowing(word: str) -> bool:
    """Whether a word is a word of knowing, by its stem: without a negating prefix, an ending,
    or both ("unknowable", "undetermined", "unidentifiable", "insufficient")."""
    bases = [word, *(word[len(p):] for p in _NEGATING if word.startswith(p))]
    for base in bases:
        if base in _KNOWING:
            return True
        for ending in _ENDINGS:
            stem = base.removesuffix(ending)
            if stem != base and len(stem) >= 3 and any(
                    form in _KNOWING for form in (stem, stem + "e", stem[:-1] + "y")):
                return True
    return False


def names_nothing(line: str) -> bool:
    """Whether a line of a reply names nothing: punctuation alone, or a statement about
    knowing, an adjective of (un)certainty, "pass" (see the rule above)."""
    words = [w.removesuffix("'s") for w in
             re.findall(r"[^\W_]+(?:'[^\W_]+)?", line.casefold().replace("’", "'"))]
    return all(w in _FUNCTION_WORDS or _is_knowing(w) for w in words)
# What opens a sentence rather than a name: a refusal, a hedge, a pronoun.
_SENTENCE_START = re.compile(
    r"^(?:i|i'm|i'd|i've|i\s+am|as\s+an?|as\s+of|sorry|unfortunately|it|it's|this|these|that"
    r"|there|since|because|without|based|my|we|you|please|note|however|given)\b",
    re.IGNORECASE,
)
# A sentence boundary after a word (not an initial or "St."), or the words of a refusal.
_SENTENCE_INSIDE = re.compile(r"[a-z]{3}[.!?]\s+[A-Z]|\b(?:cannot|can't|unable|impossible)\b")
# An open-book answer that says the event does not answer the question: no answer.
_NO_ANSWER = re.compile(r"\b(?:cannot|can't|unable|not (?:possible|clear|known|stated|given|"
                        r"mentioned)|no (?:answer|information)|not enough information|unclear"
                        r"|undetermined)\b", re.IGNORECASE)
_MAX_NAME_WORDS = 12


def _name(item: str) -> str:
    """An item of a list as a name: no bullet, label, wrapping or explanation."""
    item = _ITEM_LABEL.sub("", _BULLET.sub("", item.strip()))
    return _EXPLANATION.sub("", item).strip(_WRAPPING)


def _sentence(name: str) -> bool:
    return bool(_SENTENCE_START.match(name) or _SENTENCE_INSIDE.search(name)
                or len(name.split()) > _MAX_NAME_WORDS)


def _names(items: Iterable[str], reply: str, what: str) -> list[str] | Unreadable:
    """The items as names, "none"-like ones left out; a line that names nothing or a sentence
    among them makes the whole reply unreadable (a refusal or a hedge is no guess, and a name
    misread as one must not be dropped from the list as if never said)."""
    names = []
    for item in items:
        name = _name(str(item))
        if not name or _NO_NAME.match(name):
            continue
        if _sentence(name):
            return Unreadable(f"{what}: a sentence, not a name ({name[:60]!r})", reply)
        if names_nothing(name):
            return Unreadable(f"{what}: a line that names nothing ({name[:60]!r})", reply)
        names.append(name)
    return list(dict.fromkeys(names))


# --- JSON -----------------------------------------------------------------------------------

def _json(text: str) -> object | None:
    text = text.strip()
    if not text.startswith(("[", "{")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def _field(found: dict[str, object], names: tuple[str, ...]) -> object | None:
    by_name = {re.sub(r"[\s_-]+", "_", str(k).strip().lower()): v for k, v in found.items()}
    return next((by_name[name] for name in names if name in by_name), None)


_GUESS_FIELDS = ("guesses", "guess", "answers", "final_answers", "final_answer", "answer",
                 "best_guesses")


# --- guesses --------------------------------------------------------------------------------

def read_guesses(reply: str) -> list[str] | Unreadable:
    """The ranked guesses of a reply, most likely first. Unreadable: an empty reply, a refusal
    or any sentence where a guess should be, a JSON object without a guesses field, a reply
    that names nothing."""
    text = unfenced(reply).strip()
    if not text:
        return Unreadable("an empty reply", reply)
    found = _json(text)
    if isinstance(found, dict):
        found = _field(found, _GUESS_FIELDS)
        if found is None:
            return Unreadable("a JSON object without guesses", reply)
        if isinstance(found, str):
            found = [found]
    items = [str(x) for x in found] if isinstance(found, list) else _guess_lines(text)
    names = _names(items, reply, "guesses")
    if isinstance(names, list) and not names:
        return Unreadable("no guess given", reply)
    return names


def _guess_lines(text: str) -> list[str]:
    """The list's lines: the numbered or bulleted ones when there are some (a note around
    them is not a guess), else every line but lead-ins; one line of several guesses is split
    at its semicolons (or commas)."""
    lines = [line for line in text.splitlines() if line.strip()]
    listed = [line for line in lines if _BULLET.match(line) or _ITEM_LABEL.match(line)]
    if len(listed) >= 2:
        return listed
    lines = [line for line in lines if not _LEAD_IN.match(line)]
    if len(lines) != 1:
        return lines
    if ";" in lines[0]:
        return re.split(r"\s*;\s*", lines[0])
    parts = re.split(r",\s+", lines[0])  # "Paris, France" is one guess; three parts are not
    return parts if len(parts) >= 3 else lines


# --- the open book --------------------------------------------------------------------------

@dataclass(frozen=True)
class OpenBookReply:
    answer: str  # "" when the checker gave no answer
    other_fits: list[str] = field(default_factory=list)  # other things the description fits
    other_answers: list[str] = field(default_factory=list)  # other right answers
    # why what else fits could not be read (the `one_answer` check then measured nothing)
    others_unreadable: Unreadable | None = None
    # what else in the world that month the description fits (`one_thing`), when asked: the
    # things named, RECURS, or why it could not be read; None when the reply has no such line
    elsewhere: list[str] | Unreadable | None = None


_OPEN_BOOK_FIELDS = {
    "answer": re.compile(r"^\s*[*_]*answer[*_]*\s*:\s*[*_]*\s*(.*)$", re.IGNORECASE),
    "other_fits": re.compile(r"^\s*[*_]*other\s+things?\b[^:]*:\s*[*_]*\s*(.*)$",
                             re.IGNORECASE),
    "other_answers": re.compile(r"^\s*[*_]*other\s+(?:right\s+)?answers?\b[^:]*:\s*[*_]*\s*(.*)$",
                                re.IGNORECASE),
    "elsewhere": re.compile(r"^\s*[*_]*elsewhere\b[^:]*:\s*[*_]*\s*(.*)$", re.IGNORECASE),
}
# What the `one_thing` line says when the description's kind of event happens many times a
# month, instead of naming the other things ("recurs", "it recurs: many arrests that month").
RECURS = "recurs"
_RECURS = re.compile(r"\brecur|\bmany (?:times|such|similar|others?)\b|\b(?:common|frequent|"
                     r"routine|numerous|countless)\b", re.IGNORECASE)


def _open_book_values(text: str) -> dict[str, str]:
    found = _json(text)
    values: dict[str, str] = {}
    if isinstance(found, dict):
        for key, value in found.items():
            key = str(key).replace("_", " ")
            said = "; ".join(map(str, value)) if isinstance(value, list) else str(value)
            for name, pattern in _OPEN_BOOK_FIELDS.items():
                if name not in values and pattern.match(f"{key}: {said}"):
                    values[name] = said
        return values
    for line in text.splitlines():
        for name, pattern in _OPEN_BOOK_FIELDS.items():
            if name not in values and (match := pattern.match(line)):
                values[name] = match.group(1)
                break
    return values


def _listed(text: str, reply: str) -> list[str] | Unreadable:
    parts = re.split(r"\s*;\s*" if ";" in text else r",\s+|\s+and\s+", text)
    return _names(parts, reply, "what else fits")


def read_open_book(reply: str) -> OpenBookReply | Unreadable:
    """`Answer: X` / `Other things ...: none` / `Other right answers: none`, in any order or
    case, or a JSON object with those keys. Unreadable without an answer line. Without both
    "other" lines, or with a sentence in one, what else fits is unreadable (`one_answer` then
    measured nothing; the answer still counts)."""
    text = unfenced(reply).strip()
    values = _open_book_values(text)
    if "answer" not in values:
        return Unreadable("no 'Answer:' line", reply)
    answer = _name(values["answer"])
    answer = "" if _NO_NAME.match(answer) or _NO_ANSWER.search(answer) \
        or names_nothing(answer) else answer
    if answer and _sentence(answer):
        return Unreadable(f"the answer is a sentence, not a name ({answer[:60]!r})", reply)
    missing = [label for name, label in (("other_fits", "Other things the description fits"),
                                         ("other_answers", "Other right answers"))
               if name not in values]
    if missing:
        return OpenBookReply(answer, others_unreadable=Unreadable(
            f"no {' / '.join(repr(m + ':') for m in missing)} line", reply))
    elsewhere = _elsewhere(values["elsewhere"], reply) if "elsewhere" in values else None
    fits, others = _listed(values["other_fits"], reply), _listed(values["other_answers"], reply)
    if isinstance(fits, Unreadable) or isinstance(others, Unreadable):
        return OpenBookReply(answer, others_unreadable=next(
            x for x in (fits, others) if isinstance(x, Unreadable)), elsewhere=elsewhere)
    return OpenBookReply(answer, fits, others, elsewhere=elsewhere)


def _elsewhere(text: str, reply: str) -> list[str] | Unreadable:
    """The things of the world the description fits too: [RECURS] when the reply says its kind
    recurs, else the names listed (none: []); a sentence that says neither is unreadable."""
    if _RECURS.search(text):
        return [RECURS]
    return _listed(text, reply)


# --- the judge ------------------------------------------------------------------------------

def read_yes_no(reply: str) -> bool | Unreadable:
    """A judge's Yes or No; unreadable when it says neither."""
    verdict = parse_yes_no(reply)
    return Unreadable("said neither Yes nor No", reply) if verdict is None else verdict


# --- pooled replies: one section per question -----------------------------------------------

_SECTION = re.compile(r"^[\s*#>_-]*(?:Q|Question)\s*(\d{1,3})\b[*_]*\s*[:.)–—-]?[*_]*\s*(.*)$",
                      re.IGNORECASE)


def cut_short(reply: str) -> Unreadable:
    """A reply that ended at its token limit (`finish_reason` "length"): what it was writing
    when cut may have lost its end ("Atlantis; El Dor"), so it measured nothing."""
    return Unreadable("cut by the token limit (finish_reason \"length\"): its last part may "
                      "be incomplete", reply)


def sections(reply: str, count: int, cut: bool = False) -> dict[int, str | Unreadable]:
    """The part of a pooled reply about each of the questions 1..count: the rest of its
    "Q3:" line and the lines up to the next question's (or a JSON object keyed "Q3"/"3", or a
    list of objects with an id). A question the reply says nothing about, or twice, is
    unreadable; with `cut` (the reply ended at its token limit) so is the question it was
    answering when cut: the last one it reached, and every one after it."""
    text = unfenced(reply).strip()
    parts = _json_sections(text)
    if parts is None:
        parts = _line_sections(text)
    reached = list(parts)[-1] if cut and parts else None  # the last part written
    read: dict[int, str | Unreadable] = {}
    for number in range(1, count + 1):
        said = parts.get(number, [])
        read[number] = said[0] if len(said) == 1 else Unreadable(
            f"no line for Q{number}" if not said else f"Q{number} answered twice", reply)
        if number == reached:
            read[number] = cut_short(reply)
    return read


# A header of the bare number ("3: No", "3. Paris; Lyon"), as the pooled prompts' "its number,
# a colon" allows: read only in a reply with no "Q3" header, where a numbered list inside one
# question's part cannot be taken for it.
_BARE_SECTION = re.compile(r"^[\s*#>_-]*(\d{1,3})[*_]*\s*[:.)][*_]*\s*(.*)$")


def _line_sections(text: str) -> dict[int, list[str]]:
    """Each question's parts, in the order of their last header (the last written, last)."""
    lines = text.splitlines()
    header_of = _SECTION if any(_SECTION.match(line) for line in lines) else _BARE_SECTION
    parts: dict[int, list[str]] = {}
    number: int | None = None
    for line in lines:
        if header := header_of.match(line):
            number = int(header.group(1))
            parts[number] = [*parts.pop(number, []), header.group(2)]
        elif number is not None:
            parts[number][-1] += "\n" + line
    return {n: [s.strip() for s in said] for n, said in parts.items()}


def _json_sections(text: str) -> dict[int, list[str]] | None:
    found = _json(text)
    if isinstance(found, dict):
        items = list(found.items())
    elif isinstance(found, list) and all(isinstance(x, dict) for x in found):
        items = [(x.get("id", x.get("question", "")), x) for x in found]
    else:
        return None
    parts: dict[int, list[str]] = {}
    for key, value in items:
        number = re.fullmatch(r"\s*(?:Q|Question)?\s*(\d{1,3})\s*", str(key), re.IGNORECASE)
        if number is not None:
            key = int(number.group(1))
            parts[key] = [*parts.pop(key, []), json.dumps(value)]
    return parts
