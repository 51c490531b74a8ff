"""The automatic checks of the validate stage (SPEC 2.5, the paper's "automatic quality control").

Each check is a small function named after what it checks; it returns a `CheckFailure` whose
reason a person can read, or None. Checks look at the merged question, which for a hard item is
the 4-hop question; the bridges hidden in it include those of its easy sub-items. Duplicates are
the one check that needs every candidate at once (`find_duplicates`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from functools import cache

from cuqa_builder.records.candidates import Candidate, CheckFailure, Validation
from cuqa_builder.records.events import answer_aliases
from cuqa_builder.records.items import EventRef
from cuqa_builder.similarity import SIMILAR, wording_similarity
from cuqa_builder.text import contains_answer, normalize_answer
from cuqa_builder.validation.limits import Limits
from cuqa_builder.validation.near_duplicates import NEAR_DUPLICATE, find_near_duplicates
from cuqa_builder.verification.question_form import RESIDUE, second_question, unbalanced_quotes
from cuqa_builder.window import WindowError, parse_cutoff

# A "?" that ends a sentence: closing quotes/brackets may follow, then the end or a new sentence
# (a capital, digit or opening quote). A "?" inside a title ("the film Why Not? was") is not one.
_QUESTION_END = re.compile(r"\?[\"'”’)\]]*(?=\s*$|\s+[^\sa-z])")
# Markup a plain question or answer never holds: HTML tags, wiki links and templates, bold
# quotes, character entities, URLs (a pasted page, or a reviewer's edit box gone wrong).
_MARKUP = re.compile(
    r"</?[A-Za-z!][^<>]*>|\[\[|\]\]|\{\{|\}\}|'''|&#?\w+;|\bhttps?://|\bwww\.",
    re.IGNORECASE,
)
_QUOTE_CHARS = 60  # how much of a long text a reason quotes
MAX_CHARS_PER_WORD = 15  # a question of at most N words is at most 15 N characters long
_NON_WORD = re.compile(r"[^\w\s]")


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return f'"{text}"' if len(text) <= _QUOTE_CHARS else f'"{text[:_QUOTE_CHARS]}…"'


# --- what a candidate hides and where its events are ------------------------------------------


def _easy_abc_items(candidate: Candidate) -> list[Candidate]:
    """The candidate itself if it is an easy ABC item, else its easy ABC sub-items."""
    if candidate.difficulty == "easy":
        return [candidate] if candidate.type == "ABC" else []
    return [abc for sub in candidate.sub_items for abc in _easy_abc_items(sub)]


def _bridge_names(item: Candidate) -> list[str]:
    """The bridge entity (cur_ent) of an easy ABC item: its text and Wikipedia title."""
    if item.intermediates is not None:
        cur_ent = item.intermediates.cur_ent
        return [cur_ent.text, *answer_aliases(cur_ent)]
    return [s.answer for s in item.sub_questions if s.kind == "unknown"]


def hidden_bridges(candidate: Candidate) -> list[str]:
    """Every intermediate answer the merged question must not give away."""
    names = [name for item in _easy_abc_items(candidate) for name in _bridge_names(item)]
    if candidate.pairing is not None and candidate.pairing.link != "answer":
        first = candidate.sub_items[0] if candidate.sub_items else None
        names += [candidate.pairing.bridge, *(first.answer_aliases if first else [])]
    return list(dict.fromkeys(n for n in names if n.strip()))


def _events(candidate: Candidate) -> Iterator[EventRef]:
    yield candidate.event
    for sub in candidate.sub_items:
        yield from _events(sub)


@cache
def _cutoff_day(cutoff: str) -> date:
    return parse_cutoff(cutoff)


def _duplicate_key(question: str) -> str:
    # Punctuation becomes a space first, so "Trans-Karoo" and "Trans Karoo" are the same words.
    return normalize_answer(_NON_WORD.sub(" ", question))


# --- the checks --------------------------------------------------------------------------------


def one_question(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    question = candidate.question.strip()
    if not question:
        return CheckFailure(check="one_question", reason="the question is empty")
    if "\n" in question:
        lines = len(question.splitlines())
        return CheckFailure(check="one_question", reason=f"the question spans {lines} lines")
    if not question.endswith("?"):
        return CheckFailure(
            check="one_question", reason=f'does not end with "?": {_quote(question[-40:])}'
        )
    ends = len(_QUESTION_END.findall(question))
    if ends > 1:
        return CheckFailure(
            check="one_question", reason=f"asks {ends} questions in one: {_quote(question)}"
        )
    if joined := second_question(question):
        return CheckFailure(
            check="one_question",
            reason=f"asks two questions joined by {_quote(joined)}: {_quote(question)}",
        )
    if mark := unbalanced_quotes(question):
        return CheckFailure(
            check="one_question", reason=f"a quotation mark {mark} without its pair: "
            f"{_quote(question)}",
        )
    return None


def question_length(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    words = len(candidate.question.split())
    if not limits.min_question_words <= words <= limits.max_question_words:
        bounds = f"{limits.min_question_words}-{limits.max_question_words}"
        return CheckFailure(
            check="question_length", reason=f"the question has {words} words (allowed {bounds})"
        )
    chars, most = len(candidate.question), limits.max_question_words * MAX_CHARS_PER_WORD
    if chars > most:  # a few giant "words": pasted markup, a run of characters
        return CheckFailure(
            check="question_length", reason=f"the question has {chars} characters (at most {most})"
        )
    return None


def template_residue(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    found = RESIDUE.search(candidate.question)
    if found is None:
        return None
    return CheckFailure(
        check="template_residue",
        reason=f"prompt text or a placeholder left in the question: {_quote(found.group(0))}",
    )


def markup(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    for what, text in (("question", candidate.question), ("answer", candidate.answer)):
        found = _MARKUP.search(text)
        if found is not None:
            return CheckFailure(
                check="markup", reason=f"markup in the {what}: {_quote(found.group(0))}"
            )
    return None


def _echo_sources(candidate: Candidate) -> Iterator[tuple[str, str]]:
    """(what, text) of every question the merge was given: the sub-questions and, for a hard
    item, the two easy questions it joins."""
    structural = candidate.intermediates and candidate.intermediates.bridge_description
    for sub in candidate.sub_questions:
        # A merge that only puts the bridge's description in the known question holds the
        # unknown sub-question ("What is <description>?") almost word for word by design.
        if not (structural and sub.kind == "unknown"):
            yield f"the {sub.kind} sub-question", sub.question
    for item in candidate.sub_items:
        yield f"the easy item {item.id}", item.question


def prompt_echo(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    # A merge that hands back one of its inputs, even reworded, has dropped the other part.
    question = _duplicate_key(candidate.question)
    for what, text in _echo_sources(candidate):
        if _duplicate_key(text) == question:
            return CheckFailure(
                check="prompt_echo",
                reason=f"the question only repeats {what} {_quote(text)} instead of merging",
            )
        if (score := wording_similarity(candidate.question, text)) >= SIMILAR:
            return CheckFailure(
                check="prompt_echo",
                reason=f"the question only rewords {what} {_quote(text)} ({score:.0f}% alike) "
                "instead of merging",
            )
    return None


def short_answer(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    words = len(candidate.answer.split())
    if words == 0:
        return CheckFailure(check="short_answer", reason="the answer is empty")
    if words > limits.max_answer_words:
        return CheckFailure(
            check="short_answer",
            reason=f"the answer has {words} words (at most {limits.max_answer_words}): "
            f"{_quote(candidate.answer)}",
        )
    return None


def answer_in_question(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    for form in (candidate.answer, *candidate.answer_aliases):
        if contains_answer(candidate.question, form, in_compounds=True):
            what = "the answer" if form == candidate.answer else "the answer's alias"
            return CheckFailure(
                check="answer_in_question",
                reason=f"{what} {_quote(form)} appears in the question",
            )
    return None


def bridge_in_question(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    for name in hidden_bridges(candidate):
        if contains_answer(candidate.question, name, in_compounds=True):
            return CheckFailure(
                check="bridge_in_question",
                reason=f"the bridge entity {_quote(name)} appears in the question; the unknown "
                "sub-question should stand in for it",
            )
    return None


def known_question_mentions_bridge(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    for item in _easy_abc_items(candidate):
        names = _bridge_names(item)
        where = "" if item is candidate else f"sub-item {item.id}: "
        for sub in item.sub_questions:
            if sub.kind == "known" and not any(contains_answer(sub.question, n) for n in names):
                return CheckFailure(
                    check="known_question_mentions_bridge",
                    reason=f"{where}the known question {_quote(sub.question)} does not mention "
                    f"the bridge {_quote(names[0])}",
                )
    return None


def event_after_cutoff(candidate: Candidate, limits: Limits) -> CheckFailure | None:
    try:
        cutoff = _cutoff_day(candidate.cutoff)
    except WindowError as exc:
        return CheckFailure(check="event_after_cutoff", reason=str(exc))
    for event in _events(candidate):
        if event.date <= cutoff:
            return CheckFailure(
                check="event_after_cutoff",
                reason=f"the event {event.id} is dated {event.date}, not after the cutoff "
                f"{candidate.cutoff} ({cutoff}): the model may know it",
            )
    return None


# --- the registry and the whole-file pass -------------------------------------------------------

CheckFunction = Callable[[Candidate, Limits], CheckFailure | None]


def _always(candidate: Candidate) -> bool:
    return True


@dataclass(frozen=True)
class Check:
    function: CheckFunction
    summary: str  # what passing means, for the dataset card; {fields} of Limits are filled in
    applies: Callable[[Candidate], bool] = _always
    # Whether the check reads the question or answer text, so a reviewer's edit can break it.
    on_edit: bool = True

    @property
    def name(self) -> str:
        return self.function.__name__


CHECKS: tuple[Check, ...] = (
    Check(one_question, "one question ending in `?`"),
    Check(question_length, "{min_question_words}-{max_question_words} words (at most "
          f"{MAX_CHARS_PER_WORD} characters a word on average)"),
    Check(template_residue, "no prompt residue"),
    Check(markup, "no HTML or wiki markup, entities or URLs in the question or answer"),
    Check(prompt_echo, "not a mere repeat of one sub-question"),
    Check(short_answer, "a non-empty answer of at most {max_answer_words} words"),
    Check(answer_in_question, "the answer (or an alias) absent from the question"),
    Check(bridge_in_question, "in ABC items the bridge entity absent from the question",
          applies=lambda c: bool(hidden_bridges(c))),
    Check(known_question_mentions_bridge, "the known question of ABC items mentions the bridge",
          applies=lambda c: bool(_easy_abc_items(c)), on_edit=False),
    Check(event_after_cutoff, "the event dated after the cutoff", on_edit=False),
)
DUPLICATE = "duplicate"
CHECK_NAMES: tuple[str, ...] = (*(c.name for c in CHECKS), DUPLICATE, NEAR_DUPLICATE)


def describe_checks(limits: Limits) -> dict[str, str]:
    """Check name -> what an item that passed it satisfies, in check order."""
    bounds = limits.model_dump()
    return {**{check.name: check.summary.format(**bounds) for check in CHECKS},
            DUPLICATE: "no duplicate questions",
            NEAR_DUPLICATE: "no near-duplicates (the same event and answer, or a reworded "
                            "question)"}


def find_duplicates(
    candidates: list[Candidate], failures: list[list[CheckFailure]]
) -> dict[int, CheckFailure]:
    """Candidates whose normalised question repeats another's, by index. Of each group the
    first candidate without other failures is kept (else the first), the rest point to it."""
    groups: defaultdict[str, list[int]] = defaultdict(list)
    for index, candidate in enumerate(candidates):
        groups[_duplicate_key(candidate.question)].append(index)
    duplicates: dict[int, CheckFailure] = {}
    for indexes in groups.values():
        if len(indexes) < 2:
            continue
        kept = next((i for i in indexes if not failures[i]), indexes[0])
        for index in indexes:
            if index != kept:
                duplicates[index] = CheckFailure(
                    check=DUPLICATE, reason=f"duplicate of {candidates[kept].id}"
                )
    return duplicates


@dataclass
class CheckReport:
    """Every candidate's verdict (same order as the input) and per-check counts."""

    validations: list[Validation]
    applied: Counter[str] = field(default_factory=Counter)
    failed: Counter[str] = field(default_factory=Counter)
    # (error check, who): candidates a model could not be asked about, by its role's words
    unasked: Counter[tuple[str, str]] = field(default_factory=Counter)
    given_up: set[str] = field(default_factory=set)  # of those, whose batch calls failed for good


def _run_checks(candidate: Candidate, limits: Limits, applied: Counter[str]) -> list[CheckFailure]:
    failures: list[CheckFailure] = []
    for check in CHECKS:
        if check.applies(candidate):
            applied[check.name] += 1
            if (failure := check.function(candidate, limits)) is not None:
                failures.append(failure)
    return failures


def check_edit(candidate: Candidate, limits: Limits) -> list[CheckFailure]:
    """Every check of the question and answer text, on a candidate a reviewer has edited."""
    failures = (c.function(candidate, limits) for c in CHECKS if c.on_edit and c.applies(candidate))
    return [failure for failure in failures if failure is not None]


def check_all(
    candidates: list[Candidate], limits: Limits, earlier: list[list[CheckFailure]] | None = None
) -> CheckReport:
    """Run every check on every candidate; duplicates last, so a clean copy is the one kept.
    `earlier`: failures found before (grounding), per candidate, counted with the others."""
    applied: Counter[str] = Counter()
    failures = [_run_checks(candidate, limits, applied) for candidate in candidates]
    if earlier is not None:
        failures = [[*before, *found] for before, found in zip(earlier, failures, strict=True)]
    for index, failure in find_duplicates(candidates, failures).items():
        failures[index].append(failure)
    for index, failure in find_near_duplicates(candidates, failures).items():
        if not any(f.check == DUPLICATE for f in failures[index]):
            failures[index].append(failure)
    applied[DUPLICATE] = applied[NEAR_DUPLICATE] = len(candidates)
    failed = Counter(name for found in failures for name in {f.check for f in found})
    validations = [Validation(passed=not found, failures=found) for found in failures]
    return CheckReport(validations=validations, applied=applied, failed=failed)
