"""A candidate's grounding and critic verdicts as short plain-text lines, for annotators (made
to join the Label Studio task's `evidence` text, built in `annotation/tasks.py`) and for people
reading `candidates.jsonl`. Each function gives no line when there is nothing to show."""

from __future__ import annotations

from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.items import Evidence, GroundingVerdict


def evidence_source(evidence: Evidence) -> str:
    """`Title, revision N of TIMESTAMP: URL` (the URL only when the revid is a real one)."""
    source = f"{evidence.title}, revision {evidence.revid} of {evidence.timestamp}"
    if evidence.via:
        source += f" ({evidence.via})"
    return f"{source}: {evidence.url}" if evidence.url else source


def verdict_lines(verdict: GroundingVerdict) -> list[str]:
    mark = "✓" if verdict.passed else "✗"
    where = f" [{verdict.item}]" if verdict.item else ""
    lines = [f"{mark} {verdict.check}{where}: {verdict.reason}"]
    for evidence in verdict.evidence:
        lines += [f"  “{sentence}”" for sentence in evidence.sentences]
        lines.append(f"  — {evidence_source(evidence)}")
    return lines


def grounding_lines(candidate: Candidate) -> list[str]:
    """Every grounding verdict of the candidate with its evidence sentences and their source
    (none when the candidate was not checked against Wikipedia)."""
    return [line for verdict in candidate.grounding for line in verdict_lines(verdict)]


def critic_lines(candidate: Candidate) -> list[str]:
    """The critic model's verdict on each criterion, one line each (none when not asked)."""
    validation = candidate.validation
    if validation is None or not validation.critic:
        return []
    return [f"{'✓' if verdict.passed else '✗'} critic, {name.replace('_', ' ')}: "
            f"{verdict.note or '(no reason given)'}" for name, verdict in validation.critic.items()]


def checker_lines(candidate: Candidate) -> list[str]:
    """What the checker said without the event (its guesses) and with it (its answer), one line
    per check (none when not asked)."""
    validation = candidate.validation
    if validation is None:
        return []
    lines = []
    for verdict in validation.connected:
        mark = "✓" if verdict.passed else "✗"
        on = f" ({verdict.item})" if verdict.item else ""
        guesses = "; ".join(verdict.guesses[: verdict.counted or None]) or "(no guesses)"
        if verdict.check == "connected":
            lines.append(f'{mark} connected{on}: with the event masked, "{verdict.question}" '
                         f"-> {verdict.model} guesses: {guesses}")
        elif verdict.check == "unknown_before_cutoff":
            who = ("knowing only what was known at the cutoff" if verdict.knowledge == "cutoff"
                   else "told to know nothing after the cutoff")
            lines.append(f"{mark} unknown before the cutoff: {verdict.model}, {who}, guesses: "
                         f"{guesses}")
        elif verdict.check == "answered_with_event":
            lines.append(f"{mark} answered with the event: {verdict.model}, given the event, "
                         f'answers "{verdict.answer}"')
        else:
            others = "; ".join(verdict.others) or "nothing"
            lines.append(f"{mark} one answer: {verdict.model} finds that else fits: {others}")
    return lines
