"""What a generated question must not look like, shared by the validators and by generation's
step checks (so a bad output is asked again at once instead of failing validation later)."""

from __future__ import annotations

import re

from cuqa_builder.ner import interrogative_clauses

# Labels, instructions and placeholders of the generation prompts (Tables 5-9) that a model may
# echo into its output, and chat preambles that are not part of a question. One leading \b for
# all the phrases keeps the search fast (it is tried at word starts only).
RESIDUE = re.compile(
    r"\b(?:question\s+(?:one|two|1|2)\b"
    r"|(?:merged|combined|final|natural)\s+question\s*:"
    r"|according\s+to\s+(?:the\s+)?(?:unknown|known)\s+events?\b"
    r"|the\s+(?:event|passage|text)\s+(?:described|above|given|mentioned)\b"
    r"|the\s+(?:unknown|known|given|above)\s+(?:event|passage)\b"
    r"|generate\s+(?:a|an)\b"
    r"|to\s+which\s+the\s+answer\s+is\b"
    r"|contains\s+the\s+terms\b"
    r"|meets\s+the\s+following\s+conditions\b"
    r"|here(?:'s|\s+is|\s+are)\s+(?:a|an|the)\b"
    r"|as\s+an\s+ai\b)"
    r"|^\s*(?:(?:unknown|known|seen|question|answer)\s*:|(?:sure|certainly|okay)\b)"
    r"|\{[^{}]*\}",
    re.IGNORECASE,
)
# A second interrogative clause glued on with "and" ("..., and who is the queen consort?"): two
# questions in one, whatever follows.
SECOND_QUESTION = re.compile(
    r"\band\s+(?:what|who|whom|where|when|how|why)\s+(?:is|was|are|were|did|does|do|will|would"
    r"|can|could|has|have|had)\b"
    r"|,\s*and\s+(?:which|what|who)\b",
    re.IGNORECASE,
)
# A wh-word after "and", "or" or a comma that may start a second question or a relative clause
# ("... and which party was founded" vs "the party which won ... and which was founded"): only
# the parse tells, and only these questions pay for one.
MAYBE_SECOND_QUESTION = re.compile(
    r"(?:\b(?:and|or)|,)\s+(?:which|what|who|whom|whose|where|when|how|why)\b", re.IGNORECASE
)


def second_question(question: str) -> str | None:
    """The words that join a second question to the first, or None when it asks one."""
    if found := SECOND_QUESTION.search(question):
        return found.group(0)
    found = MAYBE_SECOND_QUESTION.search(question)
    if found is not None and interrogative_clauses(question) > 1:
        return found.group(0)
    return None


def unbalanced_quotes(question: str) -> str | None:
    """The quotation mark left open (a title whose closing quote a merge dropped), or None.
    Single quotes are left alone: most are apostrophes."""
    if question.count('"') % 2:
        return '"'
    if question.count("“") != question.count("”"):
        return "“" if question.count("“") > question.count("”") else "”"
    return None


def form_problem(question: str) -> str | None:
    """Why a question reads wrong (prompt residue, two questions in one, a quotation left
    open), or None."""
    if found := RESIDUE.search(question):
        return f"prompt text or a placeholder left in the question: {found.group(0)!r}"
    if mark := unbalanced_quotes(question):
        return f"a quotation mark {mark} without its pair"
    if joined := second_question(question):
        return f"two questions joined by {joined!r}"
    return None


def category_question(category: str) -> str:
    """The known sub-question of a connected AAB item (Table 10's "What are the G7 member
    countries?")."""
    return f"What are the {category}?"


def membership_question(category: str, member: str) -> str:
    """The known part of an AAB item asked so that a closed-book reply can show it: a list of
    ten to sixty members names only the famous ones, whatever the model knows of the rest."""
    return f"Is {member} one of the {category}? Answer yes or no."
