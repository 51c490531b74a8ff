"""Candidates -> Label Studio tasks that show the automatic verdicts as information only.

Each task's `data` fills every `$variable` of the labeling config (the server refuses a task
missing one) and `meta` ties it back to `candidates.jsonl` and says how many independent
judgements it needs. Tasks carry no prediction: a pre-selected verdict or a pre-filled text box
invites a one-click accept and makes "no change" and "I checked it" look the same, so the
checks' suggestion and evidence are shown beside the decision instead.
"""

from __future__ import annotations

import hashlib
import html
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from cuqa_builder import __version__
from cuqa_builder.grounding.evidence import checker_lines, critic_lines, grounding_lines
from cuqa_builder.records.candidates import Candidate, CheckFailure, Validation
from cuqa_builder.records.items import EventRef, SubQuestion
from cuqa_builder.review_report import quoted
from cuqa_builder.validation.checks import hidden_bridges
from cuqa_builder.validation.critic import CRITIC_CHECKS
from cuqa_builder.validation.probes import ProbeAnswer, ProbeResult
from cuqa_builder.verification.checker import CHECKER_CHECKS
from cuqa_builder.wiki.wikitext import revision_url

Only = Literal["passed", "all"]
TOOL = f"cuqa-builder {__version__}"
CANDIDATE_ID = "candidate_id"
ANNOTATORS = "annotators"  # task meta: how many independent judgements the task needs
# Two, so that no item reaches the release on one person's click: an accept needs a second
# independent accept (1-1 is a tie, not an accept), and disagreement becomes measurable. Three
# would settle ties by majority at half as much again of the reviewing time.
DEFAULT_ANNOTATORS = 2
# Task meta: a hash of the question and answer the task shows. A refresh may remake a candidate
# under the same id; an annotation applies only to the text its annotator saw.
SHOWN = "shown"

# Check names come from the validators and probes; the first keyword found in a failed check's
# name picks the reject reason the checks point to ("other" when none matches).
_REASON_KEYWORDS: tuple[tuple[str, str], ...] = (
    ("bridge known before cutoff", "known part wrong"),  # grounding: the known hop
    ("known hop grounded", "known part wrong"),
    ("known answer supported", "known part wrong"),  # the critic's criterion (d)
    ("not unknown", "not unknown"),
    ("connected", "not unknown"),  # a shortcut: answered without the event
    ("cutoff", "not unknown"),
    ("known part", "known part wrong"),
    ("mentions bridge", "known part wrong"),
    ("compose", "answer wrong"),
    ("leak", "other"),
    ("in question", "other"),
    ("duplicate", "other"),
    ("answer", "answer wrong"),
    ("markup", "unnatural"),
    ("residue", "unnatural"),
    ("echo", "unnatural"),
    ("length", "unnatural"),
    ("question", "unnatural"),
)
FALLBACK_REASON = "other"
_SHOWN_BRIDGES = 3


@dataclass(frozen=True)
class SourceLinks:
    """Whether the run's revision ids are real, and so may become links.

    A run whose pages were fetched knows its revisions exist on that wiki; a local snapshot's
    revision ids are whatever its sidecars say (the shipped example's are placeholders such as
    1 and 2, which on Wikipedia are ancient, unrelated revisions), so they get no link.
    """

    index_url: str | None  # the wiki's index.php; None: no links
    origin: str  # where the pages came from, as the task says it

    @classmethod
    def fetched(cls, index_url: str, api_url: str) -> SourceLinks:
        return cls(index_url=index_url, origin=f"as fetched from {api_url}")

    @classmethod
    def unverified(cls, origin: str) -> SourceLinks:
        return cls(index_url=None, origin=origin)


NO_LINKS = SourceLinks.unverified("the run has no page manifest")


def select_candidates(candidates: Iterable[Candidate], only: Only) -> list[Candidate]:
    """`passed`: only candidates whose validation passed; `all`: every candidate."""
    if only == "all":
        return list(candidates)
    return [c for c in candidates if c.validation is not None and c.validation.passed]


def build_tasks(
    candidates: Iterable[Candidate], links: SourceLinks = NO_LINKS,
    annotators: int = DEFAULT_ANNOTATORS,
) -> list[dict[str, Any]]:
    return [build_task(candidate, links, annotators) for candidate in candidates]


def build_task(
    candidate: Candidate, links: SourceLinks = NO_LINKS, annotators: int = DEFAULT_ANNOTATORS
) -> dict[str, Any]:
    return {
        "data": task_data(candidate, links),
        "meta": {CANDIDATE_ID: candidate.id, ANNOTATORS: annotators, SHOWN: shown_hash(candidate),
                 "tool": TOOL},
    }


def shown_hash(candidate: Candidate) -> str:
    """What the annotator is asked to judge: the question and the answer."""
    shown = json.dumps([candidate.question, candidate.answer], ensure_ascii=False)
    return hashlib.sha256(shown.encode()).hexdigest()[:16]


def shown_hash_of(task: dict[str, Any]) -> str | None:
    """The hash a task was made with (None: its meta lost it, or never had it; then nothing
    says which text its annotators judged)."""
    meta = task.get("meta")
    shown = meta.get(SHOWN) if isinstance(meta, dict) else None
    return shown if isinstance(shown, str) else None


TaskKey = tuple[str | None, str | None]  # (candidate id, hash of the text shown)


def task_key(task: dict[str, Any]) -> TaskKey:
    return candidate_id_of(task), shown_hash_of(task)


def tasks_to_import(tasks: Iterable[dict[str, Any]], present: set[TaskKey]) -> list[dict[str, Any]]:
    """The tasks a project does not hold yet. A candidate whose text changed since its task was
    pushed gets a new task, and so does one whose task no longer says what it showed."""
    return [task for task in tasks if task_key(task) not in present]


def changed_since_shown(task: dict[str, Any], candidate: Candidate) -> bool:
    """The candidate's question or answer is no longer what the task showed."""
    shown = shown_hash_of(task)
    return shown is not None and shown != shown_hash(candidate)


def candidate_id_of(task: dict[str, Any]) -> str | None:
    """The candidate a Label Studio task was made from (meta first, data as a fallback)."""
    for holder in (task.get("meta"), task.get("data")):
        if isinstance(holder, dict) and isinstance(holder.get(CANDIDATE_ID), str):
            return holder[CANDIDATE_ID]
    return None


def required_annotators(task: dict[str, Any], default: int) -> int:
    """The judgements a task needs: what push wrote into its meta, else `default`."""
    meta = task.get("meta")
    wanted = meta.get(ANNOTATORS) if isinstance(meta, dict) else None
    return wanted if isinstance(wanted, int) and wanted >= 1 else default


def task_data(candidate: Candidate, links: SourceLinks = NO_LINKS) -> dict[str, str]:
    event = candidate.event
    return {
        CANDIDATE_ID: candidate.id,
        "question": candidate.question,
        "answer": candidate.answer,
        "aliases": _aliases_line(candidate.answer_aliases),
        "kind": f"{candidate.type} · {candidate.difficulty} · knowledge cutoff {candidate.cutoff}",
        "type_note": type_note(candidate),
        "unknown_pair": _pairs(candidate.sub_questions, "unknown"),
        "known_pair": _pairs(candidate.sub_questions, "known"),
        "event_date": f"dated {event.date.isoformat()}",
        "event_text": event.text,
        "revision_link": revision_link(event, links),
        "known_passage": "\n\n".join(known_passages(candidate)),
        "checks": checks_summary(candidate.validation),
        "evidence": evidence(candidate),
    }


def type_note(candidate: Candidate) -> str:
    """One line on what AAB / ABC and the bridge mean for this item."""
    if candidate.type == "AAB":
        note = ("AAB: the unknown and the known part have the same answer; the question asks "
                "for it through both descriptions at once.")
    else:
        bridges = hidden_bridges(candidate)[:_SHOWN_BRIDGES]
        named = f" (here: {' / '.join(bridges)})" if bridges else ""
        note = (f"ABC: the unknown part's answer is the bridge{named}; the known part asks about "
                "it. The question must describe the bridge through the event, never name it.")
    if candidate.difficulty == "hard":
        note = "Hard: two easy items joined once more (4 hops). " + note
    return note


def revision_link(event: EventRef, links: SourceLinks) -> str:
    """HTML: a link to the exact revision when it is real, else a line saying why there is none."""
    title = html.escape(event.source_title)
    if event.revid is None:
        return f"{title} (no revision recorded: no link)"
    if links.index_url is None:
        return html.escape(
            f"{event.source_title}, revision id {event.revid} from {links.origin}: not a "
            "verified Wikipedia revision, so no link is given."
        )
    href = html.escape(revision_url(event.source_title, event.revid, links.index_url), quote=True)
    label = f"{title}, revision {event.revid}"
    return (f'<a href="{href}" target="_blank" rel="noopener">{label}</a> '
            f"{html.escape(links.origin)}")


def checks_summary(validation: Validation | None) -> str:
    """The checks' suggestion, worded as information."""
    if validation is None:
        return "Not validated: the checks suggest nothing."
    if validation.passed:
        return "Checks suggest: accept. Every automatic check passed."
    reasons = ", ".join(suggested_reasons(validation.failures)) or FALLBACK_REASON
    count = len(validation.failures)
    return f"Checks suggest: reject ({reasons}). {count} check{'s' * (count != 1)} failed:"


def evidence(candidate: Candidate) -> str:
    """What the automatic verdicts found, one plain-text line each; "" when there is nothing.

    The one place a task's evidence is put together: failed checks, probe answers, the grounding
    sentences of the entity articles as of the cutoff, what the checker answered without the
    event, and the critic's notes.
    """
    validation = candidate.validation
    shown_below = {v.check for v in candidate.grounding} | set(CRITIC_CHECKS) | set(
        CHECKER_CHECKS)  # each shown below with its evidence
    lines = [f"✗ {f.check}: {f.reason}" for f in validation.failures
             if f.check not in shown_below] if validation else []
    lines += _probe_lines(validation.probes) if validation else []
    lines += [*grounding_lines(candidate), *checker_lines(candidate), *critic_lines(candidate)]
    return "\n".join(lines)


def _probe_lines(probes: dict[str, Any]) -> list[str]:
    if not probes:
        return []
    try:
        result = ProbeResult.model_validate(probes)
    except ValidationError:
        return ["Probe results are recorded in a form this version cannot read."]
    lines = [
        _probe_line(f"{result.model} closed-book", result.closed_book,
                    right="may already know it", wrong="as an unknown question should be"),
        *(_probe_line(f"known part {quoted(p.question)}", p, right="known, as it should be",
                      wrong="the known part may not be common knowledge")
          for p in result.known),
        _probe_line("given the unknown part's answer", result.with_unknown_answer,
                    right="the parts compose", wrong="the parts may not compose"),
    ]
    return lines


def _probe_line(what: str, answer: ProbeAnswer, *, right: str, wrong: str) -> str:
    verdict = f"right: {right}" if answer.correct else f"wrong: {wrong}"
    return f"• {what}: said {quoted(answer.prediction)} ({verdict})"


def suggested_reasons(
    failures: Iterable[CheckFailure], allowed: frozenset[str] | None = None
) -> list[str]:
    """Reject reasons that the failed checks point to, in the config's vocabulary."""
    reasons = dict.fromkeys(_reason_for(f.check) for f in failures)
    return [r for r in reasons if allowed is None or r in allowed]


def known_passages(candidate: Candidate) -> list[str]:
    """The model-written passages behind the known parts (a hard item has one per easy item)."""
    if candidate.intermediates is not None:
        return [candidate.intermediates.known_passage]
    return [p for sub in candidate.sub_items for p in known_passages(sub)]


def _reason_for(check: str) -> str:
    name = check.lower().replace("_", " ").replace("-", " ")
    return next((reason for key, reason in _REASON_KEYWORDS if key in name), FALLBACK_REASON)


def _aliases_line(aliases: list[str]) -> str:
    return f"Also accepted: {'; '.join(aliases)}" if aliases else ""


def _pairs(sub_questions: list[SubQuestion], kind: str) -> str:
    pairs = [f"Q: {s.question}\nA: {s.answer}" for s in sub_questions if s.kind == kind]
    if len(pairs) <= 1:
        return "".join(pairs)
    return "\n\n".join(f"({n}) {pair}" for n, pair in enumerate(pairs, start=1))
