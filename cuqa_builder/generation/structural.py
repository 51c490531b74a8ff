"""A description of the bridge made from the event sentence's parse, for models too small to
write one (the embedded 1.5B model names the bridge or drops the date in most of its tries).

The sentence is kept as it is, minus the bridge: where the bridge is a place in a prepositional
phrase, "A business jet crashes in Tver Oblast, Russia, killing ..." becomes "the place where a
business jet crashes, killing ..., in August 2023"; as the subject, "The San Antonio Spurs select
..." becomes "the organisation that selects ..."; as the object, "Nippon Steel agrees to buy U.S.
Steel for ..." becomes "the organisation that Nippon Steel agrees to buy for ...". Any other role
gives no description. The words are the event's own, so the description adds nothing else.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Prepositions after which the bridge is where the event happened.
_PLACE_PREPOSITIONS = frozenset({"in", "at", "on", "near", "across", "inside", "off", "over"})
_SUBJECT, _OBJECT = frozenset({"nsubj", "nsubjpass"}), frozenset({"dobj"})
_IRREGULAR_THIRD_PERSON = {"are": "is", "have": "has", "were": "was", "do": "does"}


@dataclass(frozen=True)
class Token:
    """What the description needs of one token of spaCy's parse (ner.py makes these)."""

    index: int
    text: str
    space: str  # the whitespace after it
    start: int  # character offset in the text
    dep: str
    head: int  # index of its head (its own index for a sentence's root)
    tag: str  # Penn Treebank tag
    sentence: int  # which sentence of the text it is in


def _subtree(tokens: list[Token], root: int) -> set[int]:
    found = {root}
    grew = True
    while grew:
        grew = False
        for token in tokens:
            if token.index not in found and token.head in found and token.head != token.index:
                found.add(token.index)
                grew = True
    return found


def _third_person(verb: Token) -> str:
    """"select" -> "selects" (a plural subject is replaced by "the ... that")."""
    word = verb.text
    if verb.tag != "VBP":
        return word
    if word.lower() in _IRREGULAR_THIRD_PERSON:
        return _IRREGULAR_THIRD_PERSON[word.lower()]
    if re.search(r"(?:s|sh|ch|x|z|o)$", word):
        return word + "es"
    if re.search(r"[^aeiou]y$", word):
        return word[:-1] + "ies"
    return word + "s"


def _render(tokens: list[Token], changed: dict[int, str]) -> str:
    text = "".join(changed.get(t.index, t.text) + t.space for t in tokens).strip()
    text = re.sub(r"\s+([,.;:])", r"\1", text)
    text = re.sub(r",\s*(?=[,.;:]|$)", "", text)  # a comma left hanging by the cut
    return text.rstrip(" .;:,")


def _common_start(kept: list[Token], sentence: list[Token], changed: dict[int, str]) -> bool:
    """Whether the clause opens with a word capitalised only for starting the sentence: not a
    name ("Recep Tayyip ..."), though the tagger calls a capitalised "Wildfires" a name too."""
    first = kept[0]
    if first.index in changed:
        return False
    if first.tag not in ("NNP", "NNPS"):
        return True
    following = kept[1] if len(kept) > 1 else None
    return first.index == sentence[0].index and following is not None and (
        following.text[:1].islower())


def describe_from_parse(tokens: list[Token], start: int, end: int, kind: str,
                        when: str) -> str | None:
    """The bridge at characters `start`-`end` of the parsed text described by its sentence;
    None when its role is none of the three."""
    span = [t for t in tokens if start <= t.start < end]
    if not span:
        return None
    inside = {t.index for t in span}
    root = next((t for t in span if t.head not in inside or t.head == t.index), span[0])
    head = tokens[root.head]
    sentence = [t for t in tokens if t.sentence == root.sentence]
    changed: dict[int, str] = {}
    if root.dep == "pobj" and head.dep == "prep" and head.text.lower() in _PLACE_PREPOSITIONS:
        cut, opener = _subtree(tokens, head.index), "where"
    elif not head.tag.startswith("VB"):
        return None  # the subject or object of no verb ("making India the first country")
    elif root.dep in _SUBJECT:
        cut, opener = _subtree(tokens, root.index), "that"
        changed[head.index] = _third_person(head)
        sentence = [t for t in sentence if t.index >= min(_subtree(tokens, head.index))]
    elif root.dep in _OBJECT:
        cut, opener = _subtree(tokens, root.index), "that"
    else:
        return None
    kept = [t for t in sentence if t.index not in cut]
    if not kept:
        return None
    clause = _render(kept, changed)
    if _common_start(kept, sentence, changed):
        clause = clause[:1].lower() + clause[1:]
    if opener == "that" and kind == "person":
        opener = "who"
    return f"the {kind} {opener} {clause}, in {when}"
