"""Rendered text: what a reader sees of some markup (wikitext, or MediaWiki's own HTML), with
where each link sits in it, so that a parser can cut text and keep the links that go with it.

Renderers leave marks in the raw text that `clean_text` removes: where a citation sat, where a
line of a value or an item of a list ends, and around names in another language or script and
pronunciations (which a passage leaves out together with the brackets around them; see
`drop_asides`).
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from cuqa_builder.records.events import Link

# Where a citation sat in the text: a character no page contains, so that what editors put
# between and around citations (", ", "and", parentheses, "(in Spanish)") goes with them.
CITATION_MARK = "\x1f"
# Between two lines of a value (`<br>`) or two items of a list (`{{ubl|A|B}}`, `* A`).
ITEM_BREAK = "\x1e"
# Around a name in another language ({{lang|uk|Київ}}, <span lang="uk">) or a pronunciation
# (nothing between the two marks: its text is never kept).
FOREIGN_OPEN, FOREIGN_CLOSE = "\x0e", "\x0f"
_MARKS = str.maketrans({ITEM_BREAK: " ", FOREIGN_OPEN: "", FOREIGN_CLOSE: ""})

# Invisible characters editors leave in pages. Joiners (ZWNJ/ZWJ) matter between letters of some
# scripts, so only those touching a space are dropped.
INVISIBLE = str.maketrans("", "", "\u200b\u200e\u200f\u2060\ufeff")
_LOOSE_JOINERS = re.compile(r"(?<=\s)[\u200c\u200d]+|[\u200c\u200d]+(?=\s)")
_SPACE_BEFORE_CLOSER = re.compile(r"\s+([.,;:!?)\]])")
_SPACE_AFTER_OPENER = re.compile(r"([(\[])\s+")
_CITATION_RUN = r"\x1f(?:[\s,;]*(?:\band\b|&)?[\s,;]*\x1f)*"
_CITATIONS = re.compile(
    rf"(?:\(\s*{_CITATION_RUN}\s*\)|{_CITATION_RUN})(?:\s*\((?:in|en)\s[A-Z][^()\x1f]{{0,40}}\))?"
)
# Placeholders left by old tools and bots, e.g. <<NEWSLINK MISSING>>.
_PLACEHOLDER = re.compile(r"<<[^<>\n]{1,60}>>")
# An entity the parser left as text (double-encoded `&amp;nbsp;`, or inside a parameter).
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_EMPTY_BRACKETS = re.compile(r"\(\s*\)|\[\s*\]")
_SUPERSCRIPT_NUMBER = re.compile(r"[0-9]{1,3}|[-−+][0-9]{1,2}")
_SUPERSCRIPTS = str.maketrans("0123456789+-−", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻")


@dataclass(frozen=True)
class LinkSpan:
    start: int
    end: int
    link: Link


@dataclass
class Rendered:
    """Plain text of some markup with its links (and where they are) and its citation URLs."""

    raw: str = ""
    spans: list[LinkSpan] = field(default_factory=list)
    citations: list[str] = field(default_factory=list)

    @functools.cached_property
    def text(self) -> str:
        return clean_text(self.raw)

    @property
    def links(self) -> list[Link]:
        """Links in text order, each distinct (title, label) once."""
        unique: dict[tuple[str, str], Link] = {}
        for span in self.spans:
            unique.setdefault((span.link.title, span.link.text), span.link)
        return list(unique.values())

    def after(self, offset: int) -> Rendered:
        """The text from `offset` on, with the links that start there or later."""
        return Rendered(self.raw[offset:], self._spans_within(offset, len(self.raw)),
                        list(self.citations))

    def before(self, offset: int) -> Rendered:
        """The text up to `offset`, with the links that end there or earlier."""
        spans = [span for span in self.spans if span.end <= offset]
        return Rendered(self.raw[:offset], spans, [])

    def _spans_within(self, start: int, end: int) -> list[LinkSpan]:
        return [LinkSpan(span.start - start, span.end - start, span.link)
                for span in self.spans if span.start >= start and span.end <= end]

    def items(self) -> list[Rendered]:
        """The lines of a value or items of a list (split at `ITEM_BREAK`), each with its links;
        empty ones left out."""
        pieces, start = [], 0
        for end in [*(i for i, ch in enumerate(self.raw) if ch == ITEM_BREAK), len(self.raw)]:
            piece = Rendered(self.raw[start:end], self._spans_within(start, end))
            if piece.text:
                pieces.append(piece)
            start = end + 1
        return pieces

    def cut(self, ranges: Iterable[tuple[int, int]]) -> Rendered:
        """The text without these [start, end) ranges; a link in a cut range goes with it."""
        cuts = sorted(ranges)
        kept: list[str] = []
        shift: list[tuple[int, int]] = []  # (position in the old text, characters cut before it)
        cursor = removed = 0
        for start, end in cuts:
            start = max(start, cursor)
            if end <= start:
                continue
            kept.append(self.raw[cursor:start])
            removed += end - start
            shift.append((end, removed))
            cursor = end
        kept.append(self.raw[cursor:])

        def moved(position: int) -> int:
            return position - next((n for at, n in reversed(shift) if at <= position), 0)

        spans = [LinkSpan(moved(s.start), moved(s.end), s.link) for s in self.spans
                 if not any(start < s.end and s.start < end for start, end in cuts)]
        return Rendered("".join(kept), spans, list(self.citations))

    def between_links(self) -> str:
        """The text outside the links."""
        rest, cursor = [], 0
        for span in self.spans:
            rest.append(self.raw[cursor : span.start])
            cursor = span.end
        rest.append(self.raw[cursor:])
        return "".join(rest)

    def only_links(self) -> bool:
        """Whether the text is links and punctuation only (a topic bullet, not news)."""
        return bool(self.spans) and not any(ch.isalnum() for ch in self.between_links())

    def with_titles(self) -> str:
        """The plain text with each link shown by the title of its article."""
        parts, cursor = [], 0
        for span in self.spans:
            parts.append(self.raw[cursor : span.start])
            parts.append(span.link.title)
            cursor = span.end
        parts.append(self.raw[cursor:])
        return clean_text("".join(parts))


@dataclass
class Section:
    """A section of a page as rendered: its heading (lower case; "" for the lead), its level
    (2 for `== H ==`, 0 for the lead) and its paragraphs and list items."""

    heading: str
    level: int
    lines: list[Rendered] = field(default_factory=list)


class TextBuilder:
    """Text emitted piece by piece, and the links recorded over the labels they show (what a
    renderer builds a `Rendered` from)."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.spans: list[LinkSpan] = []

    def raw(self) -> str:
        return "".join(self.parts)

    def emit(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    def record_link(self, title: str | None, start: int, first_part: int) -> None:
        """A link to `title` over what was emitted since `start` (from part `first_part` on)."""
        label = " ".join("".join(self.parts[first_part:]).translate(INVISIBLE)
                         .translate(_MARKS).split())
        if title and label:
            self.spans.append(LinkSpan(start, self.length, Link(title=title, text=label)))


def clean_text(raw: str) -> str:
    """Single spaces, none left before punctuation where a citation or template was removed;
    entities as their characters; no citation separators, placeholders or marks left behind."""
    text = raw.translate(INVISIBLE).translate(_MARKS)
    if "&" in text:
        text = _ENTITY.sub(lambda entity: html.unescape(entity.group()), text)
    if CITATION_MARK in text:
        text = _CITATIONS.sub(" ", text)
    if "<<" in text:
        text = _PLACEHOLDER.sub(" ", text)
    if "(" in text or "[" in text:
        text = _EMPTY_BRACKETS.sub(" ", text)
    if "\u200c" in text or "\u200d" in text:
        text = _LOOSE_JOINERS.sub("", text)
    text = " ".join(text.split())
    text = _SPACE_BEFORE_CLOSER.sub(r"\1", text)
    return _SPACE_AFTER_OPENER.sub(r"\1", text).strip()


def superscript(text: str) -> str:
    """What a `<sup>` shows in plain text: an exponent as superscript digits (`km<sup>2</sup>`
    -> "km²"), nothing for a note mark (`Santiago<sup>a</sup>`, `<sup>[1]</sup>`)."""
    text = text.strip()
    return text.translate(_SUPERSCRIPTS) if _SUPERSCRIPT_NUMBER.fullmatch(text) else ""


# --- asides: pronunciations and foreign names in brackets ----------------------------------

# What introduces a foreign name in an aside: a language ("Russian:", "Ancient Greek:") or a
# short label ("romanized:", "lit."), and the words between names ("or", "locally").
_ASIDE_LABEL = re.compile(
    r"^\s*(?:[A-Z][\w'’.-]*(?:\s+[\w'’.-]+){0,2}\s*:|(?i:abbr|lit|tr|transl|translit|"
    r"romani[sz]ed|transliterated|pronounced|pron|literally|translation)\b\.?\s*:?)"
)
_ASIDE_FILLER = re.compile(
    r"\b(?:or|and|also|locally|lit|literally|tr|transl|translit|romani[sz]ed|pronounced|pron|"
    r"pronunciation|listen|help|info)\b\.?|ⓘ", re.IGNORECASE
)
_FOREIGN = re.compile(f"{FOREIGN_OPEN}[^{FOREIGN_CLOSE}]*{FOREIGN_CLOSE}?")
_SEPARATORS = frozenset(",;")
_INNER_GROUP = re.compile(r"\([^()]*\)")
_DOUBLED_SEPARATOR = re.compile(r"([,;])(?:\s*[,;])+")
_SEPARATOR_AFTER_OPENER = re.compile(r"\(\s*[,;:]+\s*")
_SEPARATOR_BEFORE_CLOSER = re.compile(r"\s*[,;:]+\s*\)")


def drop_asides(rendered: Rendered) -> Rendered:
    """Prose without what a passage leaves out of brackets: pronunciations, names in other
    languages or scripts and their labels ("Kyiv (Ukrainian: Київ, pronounced ...)" -> "Kyiv"),
    and brackets emptied by dropped templates ("(;)"). A bracket keeps what else it says:
    "(; born 24 June 1941)" -> "(born 24 June 1941)"."""
    raw = rendered.raw
    if "(" not in raw:
        return rendered
    gone = [False] * len(raw)
    for start, end in _bracket_groups(raw):
        parts = _parts(raw, start + 1, end - 1)
        asides = [p for p in parts if _is_aside("".join(raw[i] for i in range(*p) if not gone[i]))]
        if len(asides) == len(parts):
            space = start
            while space > 0 and raw[space - 1] == " ":
                space -= 1
            _mark(gone, space, end)
        else:
            for part_start, part_end in asides:
                _mark(gone, *_with_separator(raw, part_start, part_end, start, end))
    return rendered.cut(_ranges(gone))


def tidy_separators(text: str) -> str:
    """Prose without separators left doubled or hanging in brackets by what was dropped
    ("(, born 1941;)" -> "(born 1941)")."""
    if "," in text or ";" in text or ":" in text:
        text = _DOUBLED_SEPARATOR.sub(r"\1", text)
        text = _SEPARATOR_AFTER_OPENER.sub("(", text)
        text = _SEPARATOR_BEFORE_CLOSER.sub(")", text)
        text = clean_text(text)
    return text


def _bracket_groups(raw: str) -> list[tuple[int, int]]:
    """(start, end) of each balanced "(...)" group, inner groups before the ones holding them."""
    groups, open_at = [], []
    for index, char in enumerate(raw):
        if char == "(":
            open_at.append(index)
        elif char == ")" and open_at:
            groups.append((open_at.pop(), index + 1))
    return groups


def _parts(raw: str, start: int, end: int) -> list[tuple[int, int]]:
    """The ";"/","-separated parts of a group's content, not splitting inside inner brackets or
    a foreign name ("Liberté, égalité")."""
    parts, depth, foreign, part_start = [], 0, False, start
    for index in range(start, end):
        char = raw[index]
        depth += (char == "(") - (char == ")")
        foreign = (foreign or char == FOREIGN_OPEN) and char != FOREIGN_CLOSE
        if char in _SEPARATORS and depth == 0 and not foreign:
            parts.append((part_start, index))
            part_start = index + 1
    parts.append((part_start, end))
    return parts


def _is_aside(part: str) -> bool:
    """A part of a bracket that says nothing in English: a pronunciation or foreign name (with
    its label), a name in another script, or nothing at all."""
    outer = _FOREIGN.sub(" ", part)
    while "(" in outer and outer != (inner := _INNER_GROUP.sub(" ", outer)):
        outer = inner  # "грн (hrn in the Latin alphabet)": judged by what it glosses
    rest = _ASIDE_LABEL.sub("", outer, count=1)
    letters = [ch for ch in rest if ch.isalpha()]
    if letters and not any(ch.isascii() for ch in letters):
        return True  # a name in another script, written without a template
    return not any(ch.isalnum() for ch in _ASIDE_FILLER.sub(" ", rest))


def _with_separator(raw: str, start: int, end: int, group_start: int, group_end: int
                    ) -> tuple[int, int]:
    """A part's range with the separator that joins it to the next part (or the previous one,
    for the last part)."""
    if end < group_end - 1:
        return start, end + 1
    before = start - 1
    return (before if before > group_start else start), end


def _mark(gone: list[bool], start: int, end: int) -> None:
    for index in range(start, end):
        gone[index] = True


def _ranges(gone: list[bool]) -> list[tuple[int, int]]:
    ranges, start = [], None
    for index, flag in enumerate([*gone, False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            ranges.append((start, index))
            start = None
    return ranges
