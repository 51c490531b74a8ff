"""An item's question with its event masked: what the question says of the bridge without the
event. The connected recipe records it when it composes an item (the known question with the
bridge's description cut to its head, "a certain Danish cyclist"); for the paper's recipe it is
the known question with the bridge masked (ABC), or the known question as it is (AAB: it asks for
the answer itself)."""

from __future__ import annotations

import re

from cuqa_builder.records.candidates import Candidate
from cuqa_builder.verification.names import kind_of, names_of, substitute, without_the

# The small words a noun phrase's head never ends with: a head cut before its object ("a
# certain town near") would leave the masked question dangling. A closed class.
_FUNCTION_WORDS = frozenset({
    "a", "an", "the", "of", "in", "at", "on", "from", "by", "during", "near", "to", "through",
    "with", "under", "over", "for", "into", "across", "against", "behind", "beside", "between",
    "within", "around", "after", "before", "along", "among", "about", "and", "or", "but", "its",
    "their", "his", "her", "whose", "that", "which", "who", "whom", "where", "when", "as",
})
_PREPOSITIONS = (
    "in|at|on|from|by|during|near|to|through|with|under|over|for|into|across|against|behind"
    "|beside|between|within|around|after|before|along|among|of"
)
# A part of the head's members that opens a relative clause: "three of whose members", "one of
# which", "several areas of which", "most of its". Lower case only, so a name's number stays
# ("the Big Three", "the Group of Seven"). A closed class, like the small words above.
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen"
    "|sixteen|seventeen|eighteen|nineteen|(?:twenty|thirty|forty|fifty|sixty|seventy|eighty"
    "|ninety)(?:-[a-z]+)?|hundred|dozens|hundreds|thousands|millions"
)
_QUANTIFIERS = (
    rf"\d[\d,.]*|{_NUMBER_WORDS}|some|many|several|most|all|each|both|part|half|few|none|much"
    "|any|either|neither|parts"
)
_PART_OF = (
    rf"(?:{_QUANTIFIERS})(?:\s+[a-z][\w'-]*){{0,2}}?\s+of\s+(?:which|whom|whose|its|their)"
)
# Where a description's head (what the bridge is) ends and the event's part begins.
_EVENT_PART = re.compile(
    rf"\s+(?:whose|that|which|who|whom|where|when|(?:{_PREPOSITIONS})\s+(?:which|whom|whose)"
    rf"|{_PART_OF})\b"
    r"|,|\s+\w+(?:ed|ing)\b"
    # a reduced relative clause: a new noun phrase or a verb right after the head ("the
    # shipwreck a submersible was diving to")
    r"|\s+(?:a|an|the|its|their|his|her|this|that|was|were|is|are|has|had|have)\b"
    # the irregular past participles a description opens its event with
    r"|\s+(?:struck|hit|held|won|lost|led|made|sent|found|built|chosen|taken|given|shot|beaten"
    r"|seen|known|run|born|drawn|set|put|cut|sold|bought|met|told|brought|fought|caught)\b"
)


def masked_description(description: str) -> str:
    """The description with the event's part taken out: "the Danish cyclist who won ..." ->
    "a certain Danish cyclist". What is left is what the merged question says of the bridge
    without the event, so the checker sees a nationality or a home city it gives. The head
    never ends with a preposition or another small word ("the town near which ..." ->
    "a certain town")."""
    words = _EVENT_PART.split(without_the(description), maxsplit=1)[0].split()
    while words and words[-1].lower() in _FUNCTION_WORDS:
        words.pop()
    return f"a certain {' '.join(words) or 'one'}"


def masked_question(item: Candidate) -> str:
    """The easy item's question with the event masked."""
    steps = item.intermediates
    assert steps is not None, "an easy item keeps its intermediates"
    if steps.masked_question:
        return steps.masked_question
    if steps.branch == "AAB":
        return steps.known_question
    masked = substitute(steps.known_question, names_of(steps.cur_ent),
                        f"a certain {kind_of(steps.cur_ent)}")
    return masked or steps.known_question
