"""The Label Studio round trip without a server: tasks out, a hand-written full JSON export in."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder import __version__
from cuqa_builder.annotation.config import (
    LabelingConfig,
    LabelingConfigError,
    ResultError,
    load_labeling_config,
)
from cuqa_builder.annotation.decisions import chosen_edit
from cuqa_builder.annotation.export import ExportAnnotation, read_vote
from cuqa_builder.annotation.guidelines import guidelines_html, render_markdown
from cuqa_builder.annotation.review import ReviewRules, review_export
from cuqa_builder.annotation.tasks import (
    SourceLinks,
    build_task,
    build_tasks,
    candidate_id_of,
    checks_summary,
    evidence,
    select_candidates,
    shown_hash,
    suggested_reasons,
    task_key,
    tasks_to_import,
    type_note,
)
from cuqa_builder.cli.annotate import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate, CheckFailure, Validation
from cuqa_builder.records.items import CuqaItem, Evidence, GroundingVerdict
from cuqa_builder.testing.annotate_fixtures import (
    NOT_UNKNOWN,
    accept,
    candidate,
    choices,
    reject,
    text,
    unsure,
)
from cuqa_builder.validation.checks import CHECK_NAMES
from cuqa_builder.validation.probes import PROBE_CHECKS, PROBE_ERROR

CONFIG = load_labeling_config()
REASONS = {"answer wrong", "not unknown", "known part wrong", "unnatural", "other"}
FETCHED = SourceLinks.fetched("http://127.0.0.1:9/w/index.php", "http://127.0.0.1:9/w/api.php")


def annotation(ann_id: int, user: int, result: list[Any], *, cancelled: bool = False,
               lead_time: float = 10.0) -> dict[str, Any]:
    return {"id": ann_id, "completed_by": user, "result": result, "was_cancelled": cancelled,
            "lead_time": lead_time, "updated_at": f"2024-05-01T10:00:{ann_id:02d}Z"}


def export_task(task_id: int, candidate_id: str, *annotations: dict[str, Any],
                annotators: int | None = None) -> dict[str, Any]:
    """A task of the `run` fixture's candidate `cand-NNNN`, as push made it (saying what it
    showed); another id's task is one of no candidate of the run."""
    meta: dict[str, Any] = {"candidate_id": candidate_id}
    if candidate_id.removeprefix("cand-").isdigit():
        meta["shown"] = shown_hash(candidate(int(candidate_id.removeprefix("cand-"))))
    if annotators is not None:
        meta["annotators"] = annotators
    return {"id": task_id, "data": {"candidate_id": candidate_id, "question": "..."},
            "meta": meta, "annotations": list(annotations), "predictions": []}


def two_accepts(task_id: int, candidate_id: str, first: list[Any] | None = None,
                second: list[Any] | None = None) -> dict[str, Any]:
    return export_task(task_id, candidate_id,
                       annotation(2 * task_id, 2, first or accept()),
                       annotation(2 * task_id + 1, 3, second or accept()))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    candidates = [candidate(n) for n in range(1, 8)] + [candidate(99, NOT_UNKNOWN)]
    write_jsonl(tmp_path / "candidates.jsonl", candidates)
    return tmp_path


def import_export(run: Path, export: list[dict[str, Any]], *flags: str) -> int:
    export_file = run / "export.json"
    export_file.write_text(json.dumps(export))
    return main(["import", str(export_file), "--run", str(run), *flags])


def report_of(run: Path) -> dict[str, Any]:
    return json.loads((run / "review-report.json").read_text())


def released(run: Path) -> dict[str, CuqaItem]:
    return {i.id: i for i in read_jsonl(run / "cuqa.jsonl", CuqaItem)}


# --- the labeling config ------------------------------------------------------------------


def test_config_declares_the_review_controls() -> None:
    assert CONFIG.controls["verdict"].options == {"accept", "reject", "unsure"}
    assert not CONFIG.controls["verdict"].multiple
    assert CONFIG.reasons == REASONS and CONFIG.controls["reasons"].multiple
    assert CONFIG.controls["rewrite"].type == "textarea"
    assert CONFIG.controls["answer_fix"].to_name == "answer"


def test_config_lets_an_untouched_task_be_submitted_and_shows_evidence_as_text() -> None:
    root = ET.fromstring(CONFIG.xml)
    # No control is required: an untouched submission reaches pull, which counts it undecided.
    assert not [el.get("name") for el in root.iter() if el.get("required") == "true"]
    # Evidence is shown as plain text (a Text tag escapes it), never as HTML.
    shown_by = {el.get("value"): el.tag for el in root.iter() if el.get("value", "")[:1] == "$"}
    assert shown_by["$evidence"] == "Text" and shown_by["$checks"] == "Text"
    # The long model-written passage is folded.
    panels = [p for c in root.iter("Collapse") for p in c.iter("Panel")]
    assert any(t.get("value") == "$known_passage" for p in panels for t in p.iter("Text"))


@pytest.mark.parametrize("renamed", ['name="verdict"', '<Choice value="unsure"'])
def test_config_without_the_verdict_choices_is_refused(renamed: str) -> None:
    xml = CONFIG.xml.replace(renamed, renamed.replace("verdict", "decision")
                             .replace("unsure", "maybe"))
    with pytest.raises(LabelingConfigError, match="verdict"):
        LabelingConfig.parse(xml)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        (choices("mood", "happy"), "unknown control 'mood'"),
        (choices("verdict", "maybe"), "unknown choice 'maybe'"),
        (choices("verdict", "accept", "reject"), "expected one choice, got 2"),
        (choices("verdict"), "no choice selected"),
        (text("rewrite", "x", to_name="answer"), "expected type 'textarea' on 'question'"),
        ({"from_name": "rewrite", "to_name": "question", "type": "textarea",
          "value": {"text": [3]}}, "text must be a list of strings"),
        ("accept", "not an object"),
    ],
)
def test_results_the_config_does_not_allow_are_refused(item: Any, message: str) -> None:
    with pytest.raises(ResultError, match=message):
        CONFIG.read_result(item)


def test_allowed_results_are_read() -> None:
    assert CONFIG.read_result(choices("reasons", "unnatural", "other")) == (
        "reasons", ("unnatural", "other"))
    assert CONFIG.read_result(text("rewrite", " Which lake? ")) == ("rewrite", "Which lake?")


# --- the guidelines ---------------------------------------------------------------------------


def test_guidelines_become_the_projects_instructions_as_html() -> None:
    html = guidelines_html()
    assert html.startswith("<h3>Reviewing CuQA questions")  # below the dialog's own title
    assert "<table>" in html and "<strong>unsure</strong>" in html
    assert "bridge" in html and "AAB" in html


def test_raw_html_in_the_guidelines_is_shown_not_run() -> None:
    rendered = render_markdown("# Title\n\n<script>alert(1)</script> and *this*")
    assert "<script>" not in rendered and "&lt;script&gt;" in rendered
    assert "<h3>Title</h3>" in rendered and "<em>this</em>" in rendered


# --- tasks ----------------------------------------------------------------------------------


def hard_candidate() -> Candidate:
    return candidate(2).model_copy(update={"difficulty": "hard", "intermediates": None,
                                           "sub_items": [candidate(3), candidate(4)]})


def test_every_task_fills_every_variable_of_the_config() -> None:
    hard = hard_candidate()
    for item in (candidate(1), candidate(5, NOT_UNKNOWN), candidate(6, None), hard):
        data = build_task(item, FETCHED)["data"]
        assert CONFIG.data_fields <= data.keys()
        assert all(isinstance(v, str) for v in data.values())
    hard_data = build_task(hard)["data"]
    assert "MV Harrowgate 3" in hard_data["known_passage"]
    assert "MV Harrowgate 4" in hard_data["known_passage"]


def test_a_task_prefills_nothing_and_says_how_many_judgements_it_needs() -> None:
    for item in (candidate(1), candidate(2, NOT_UNKNOWN)):
        task = build_task(item, annotators=3)
        assert set(task) == {"data", "meta"}  # no prediction: nothing selected, no box filled
        assert task["meta"] == {"candidate_id": item.id, "annotators": 3,
                                "shown": shown_hash(item), "tool": f"cuqa-builder {__version__}"}
    data = build_task(candidate(1))["data"]
    assert data["known_pair"].startswith("Q: Which lake does the MV Harrowgate 1 cross?")
    assert data["event_date"] == "dated 2023-09-10"


def test_the_checks_suggestion_is_information() -> None:
    assert checks_summary(candidate(1).validation) == (
        "Checks suggest: accept. Every automatic check passed.")
    assert checks_summary(NOT_UNKNOWN) == "Checks suggest: reject (not unknown). 1 check failed:"
    assert checks_summary(None) == "Not validated: the checks suggest nothing."


def test_evidence_lists_what_the_checks_found_and_is_empty_without_findings() -> None:
    assert evidence(candidate(1)) == "" and evidence(candidate(2, None)) == ""
    assert evidence(candidate(2, NOT_UNKNOWN)) == (
        "✗ probe_not_unknown: the target model answered it closed-book: Lake Vostrel")
    marked = Validation(passed=False, failures=[
        CheckFailure(check="markup", reason='markup in the question: "<b>"')])
    assert evidence(candidate(3, marked)) == '✗ markup: markup in the question: "<b>"'


def test_evidence_carries_the_grounding_sentences_once_and_points_to_the_known_part() -> None:
    missing = GroundingVerdict(
        check="known_hop_grounded", passed=False,
        reason="'Lake Vostrel 1' not in MV Harrowgate 1 as of 2023-04-30 (revid 77)",
        evidence=[Evidence(title="MV Harrowgate 1", revid=77, timestamp="2023-03-01T00:00:00Z",
                           sentences=["The ferry crosses a lake near Tarnby."])],
    )
    failed = Validation(passed=False, failures=[
        CheckFailure(check="known_hop_grounded", reason=missing.reason)])
    item = candidate(4, failed).model_copy(update={"grounding": [missing]})
    lines = evidence(item).splitlines()
    assert lines[0] == "✗ known_hop_grounded: " + missing.reason  # once, with its evidence
    assert "  “The ferry crosses a lake near Tarnby.”" in lines
    assert sum("known_hop_grounded" in line for line in lines) == 1
    assert suggested_reasons(failed.failures) == ["known part wrong"]


def test_evidence_shows_what_the_target_model_answered() -> None:
    answer = {"question": "q", "answers": ["Lake Vostrel 1"], "prediction": "no idea",
              "correct": False}
    probes = {"model": "target-7b", "judge": "normalised match", "closed_book": answer,
              "known": [{**answer, "question": "Which lake does the MV Harrowgate 1 cross?",
                         "prediction": "Lake Vostrel 1", "correct": True}],
              "with_unknown_answer": {**answer, "prediction": "Lake Vostrel 1",
                                      "correct": True}}
    lines = evidence(candidate(1, Validation(passed=True, probes=probes))).splitlines()
    assert lines == [
        "• target-7b closed-book: said “no idea” (wrong: as an unknown question should be)",
        "• known part “Which lake does the MV Harrowgate 1 cross?”: said “Lake Vostrel 1” "
        "(right: known, as it should be)",
        "• given the unknown part's answer: said “Lake Vostrel 1” (right: the parts compose)",
    ]


def test_a_line_explains_the_type_and_names_the_bridge() -> None:
    assert type_note(candidate(1)).startswith(
        "ABC: the unknown part's answer is the bridge (here: MV Harrowgate 1)")
    aab = candidate(1).model_copy(update={"type": "AAB"})
    assert type_note(aab).startswith("AAB: the unknown and the known part have the same answer")
    assert type_note(hard_candidate()).startswith("Hard: two easy items joined once more")


def test_revision_links_only_for_revisions_the_run_fetched() -> None:
    linked = build_task(candidate(1), FETCHED)["data"]["revision_link"]
    assert linked.startswith('<a href="http://127.0.0.1:9/w/index.php?title=Portal:Current_'
                             'events/2023_September_10&amp;oldid=1001"')
    unlinked = build_task(candidate(1), SourceLinks.unverified(
        "the local snapshot examples/wiki-sample"))["data"]["revision_link"]
    assert "<a" not in unlinked and "oldid" not in unlinked
    assert unlinked == ("Portal:Current events/2023 September 10, revision id 1001 from the "
                        "local snapshot examples/wiki-sample: not a verified Wikipedia "
                        "revision, so no link is given.")


CHECK_REASONS = [  # the names the validators and probes use (cuqa_builder/validation)
    ("one_question", "unnatural"),
    ("question_length", "unnatural"),
    ("template_residue", "unnatural"),
    ("markup", "unnatural"),
    ("prompt_echo", "unnatural"),
    ("short_answer", "answer wrong"),
    ("answer_in_question", "other"),
    ("bridge_in_question", "other"),
    ("known_question_mentions_bridge", "known part wrong"),
    ("event_after_cutoff", "not unknown"),
    ("duplicate", "other"),
    ("near_duplicate", "other"),
    ("probe_not_unknown", "not unknown"),
    ("probe_known_part_not_known", "known part wrong"),
    ("probe_does_not_compose", "answer wrong"),
    ("probe_error", "other"),
    ("a_check_added_later", "other"),
]


def test_every_registered_check_has_its_expected_reason() -> None:
    assert {*CHECK_NAMES, *PROBE_CHECKS, PROBE_ERROR} <= {name for name, _ in CHECK_REASONS}


@pytest.mark.parametrize(("check", "reason"), CHECK_REASONS)
def test_failed_checks_map_to_reasons_of_the_config(check: str, reason: str) -> None:
    failures = [CheckFailure(check=check, reason="...")]
    assert suggested_reasons(failures, CONFIG.reasons) == [reason]


def test_several_failures_suggest_each_reason_once() -> None:
    failures = [CheckFailure(check=name, reason="...") for name in (
        "probe_not_unknown", "one_question", "event_after_cutoff", "template_residue")]
    assert suggested_reasons(failures, CONFIG.reasons) == ["not unknown", "unnatural"]


def test_only_passed_keeps_validated_passes() -> None:
    items = [candidate(1), candidate(2, NOT_UNKNOWN), candidate(3, None)]
    assert [c.id for c in select_candidates(items, "passed")] == ["cand-0001"]
    assert len(select_candidates(items, "all")) == 3


def test_export_command_writes_an_import_file(run: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["export", "--run", str(run)]) == 0
    tasks = json.loads((run / "label-studio-tasks.json").read_text())
    assert len(tasks) == 7 and "wrote 7 tasks" in capsys.readouterr().out
    assert {t["meta"]["annotators"] for t in tasks} == {2}
    out = run / "all.json"
    assert main(["export", "--run", str(run), "--only", "all", "--out", str(out),
                 "--annotators", "3"]) == 0
    tasks = json.loads(out.read_text())
    assert len(tasks) == 8 and {t["meta"]["annotators"] for t in tasks} == {3}
    assert "GUIDELINES.md" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:
        main(["export", "--run", str(run), "--annotators", "0"])
    assert exited.value.code == 2
    assert "argument --annotators: must be 1 or more, not 0" in capsys.readouterr().err


@pytest.mark.parametrize(("manifest", "linked"), [
    ({"api": "http://127.0.0.1:9/w/api.php", "fetched": "2024-07-01T00:00:00Z",
      "pages": {}}, True),
    ({"api": "http://127.0.0.1:9/w/api.php", "fetched": "2024-07-01T00:00:00Z",
      "pages": {}, "snapshot": "examples/wiki-sample"}, False),
    (None, False),
])
def test_export_links_revisions_only_when_the_run_fetched_them(
    run: Path, manifest: dict[str, Any] | None, linked: bool
) -> None:
    if manifest is not None:
        (run / "manifest.json").write_text(json.dumps(manifest))
    assert main(["export", "--run", str(run)]) == 0
    links = [t["data"]["revision_link"]
             for t in json.loads((run / "label-studio-tasks.json").read_text())]
    assert all(("oldid=" in link) == linked for link in links)
    assert all(("not a verified Wikipedia revision" in link) != linked for link in links)


# --- the review ----------------------------------------------------------------------------


def hand_written_export() -> list[dict[str, Any]]:
    """Eight candidates, two judgements required (no task meta says otherwise)."""
    return [
        # majority accept, one rewrite among the accepting annotators
        export_task(1, "cand-0001",
                    annotation(1, 2, accept(rewrite="Which lake does Tarnby's new ferry cross?"),
                               lead_time=40),
                    annotation(2, 3, accept(), lead_time=20),
                    annotation(3, 4, reject("unnatural"), lead_time=30)),
        # a tie is not an accept
        export_task(2, "cand-0002", annotation(4, 2, accept()), annotation(5, 3, reject("other"))),
        # the cancelled accept does not vote
        export_task(3, "cand-0003", annotation(6, 2, accept(), cancelled=True),
                    annotation(7, 3, reject("answer wrong", "not unknown")),
                    annotation(8, 4, reject("not unknown"))),
        # bogus results are reported, not trusted; the valid votes still count
        export_task(4, "cand-0004",
                    annotation(9, 2, [choices("verdict", "maybe"), choices("mood", "happy")]),
                    annotation(10, 3, [*accept(), choices("reasons", "too easy")]),
                    annotation(11, 4, accept())),
        # an answer correction
        export_task(5, "cand-0005", annotation(12, 2, accept(answer="Lake Vostrel-Ost")),
                    annotation(13, 3, accept())),
        # only an unsure: nobody has judged it yet
        export_task(6, "cand-0006", annotation(14, 2, unsure())),
        # an annotator who changed their mind counts once, with the later verdict
        export_task(7, "cand-0007", annotation(15, 2, reject("other")),
                    annotation(16, 2, accept()), annotation(17, 3, accept())),
        # one accept and one untouched submission: one judgement of the two required
        export_task(8, "cand-0099", annotation(18, 2, accept()), annotation(19, 3, [])),
        # a task whose candidate is not in this run
        export_task(9, "cand-elsewhere", annotation(20, 2, accept())),
    ]


def test_import_resolves_votes_and_writes_accepted_items(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert import_export(run, hand_written_export()) == 0
    printed = capsys.readouterr().out

    items = released(run)
    assert list(items) == ["cand-0001", "cand-0004", "cand-0005", "cand-0007"]

    rewritten = items["cand-0001"]
    assert rewritten.question == "Which lake does Tarnby's new ferry cross?"
    review = rewritten.review.model_dump()
    assert review["status"] == "accepted" and review["rewritten"] is True
    assert review["annotators"] == ["annotator-2", "annotator-3", "annotator-4"]
    assert review["agreement"] == pytest.approx(2 / 3)
    assert review["original_question"] == candidate(1).question
    assert review["reasons"] == {"unnatural": 1} and review["answer_corrected"] is False

    corrected = items["cand-0005"]
    assert corrected.answer == "Lake Vostrel-Ost" and corrected.answer_aliases == []
    assert corrected.sub_questions[1].answer == "Lake Vostrel-Ost"
    assert corrected.sub_questions[0].answer == "MV Harrowgate 5"
    assert corrected.review.model_dump()["original_answer"] == "Lake Vostrel 5"
    assert corrected.review.rewritten is False

    assert items["cand-0004"].review.annotators == ["annotator-3", "annotator-4"]
    assert items["cand-0007"].review.annotators == ["annotator-2", "annotator-3"]

    report = report_of(run)
    assert report["tasks"] == 8 and report["pending"] == 1 and report["reviewed"] == 7
    assert (report["accepted"], report["rejected"], report["ties"]) == (4, 1, 1)
    assert report["incomplete"] == 1 and report["needs_more_reviews"] == ["cand-0099"]
    assert report["accept_rate"] == pytest.approx(4 / 6, abs=1e-4)
    assert (report["cancelled"], report["unsure"], report["undecided"]) == (1, 1, 1)
    assert report["annotations"] == 20 and report["votes"] == 14
    assert report["reject_reasons"] == {"not unknown": 2, "unnatural": 1, "other": 1,
                                        "answer wrong": 1}
    assert report["multi_annotated"] == 6
    assert report["mean_agreement"] == pytest.approx((2 / 3 + 1 / 2 + 4) / 6, abs=1e-3)
    # every counted annotation, unsure and undecided included: 40 + 20 + 30, then 13 of 10 s
    assert report["seconds_per_task"] == pytest.approx(220 / 16, abs=1e-3)
    assert report["unknown_candidates"] == ["cand-elsewhere"]
    messages = [p["message"] for p in report["problems"]]
    assert any("unknown choice 'maybe'" in m for m in messages)
    assert any("unknown control 'mood'" in m for m in messages)
    assert any("unknown choice 'too easy'" in m for m in messages)
    assert any("no valid verdict" in m for m in messages)
    assert ("4 accepted, 1 rejected, 1 tied, 0 disputed, 1 need more reviews, "
            "0 sent back, 1 pending of 8 tasks") in printed


def test_the_report_gives_accept_rates_per_annotator_and_the_most_disagreed(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert import_export(run, hand_written_export()) == 0
    report = report_of(run)
    rates = {name: (s["judgements"], s["accept_rate"], s["unsure"], s["undecided"])
             for name, s in report["per_annotator"].items()}
    assert rates == {"annotator-2": (5, 1.0, 1, 0),
                     "annotator-3": (6, pytest.approx(4 / 6, abs=1e-4), 0, 1),
                     "annotator-4": (3, pytest.approx(1 / 3, abs=1e-4), 0, 0)}
    assert [(d["candidate"], d["accept"], d["reject"]) for d in report["most_disagreed"]] == [
        ("cand-0002", 1, 1), ("cand-0001", 2, 1)]
    printed = capsys.readouterr().out
    assert "accept rate per annotator: annotator-2 100% of 5, annotator-3 67% of 6" in printed
    assert "most disagreed (re-check these): cand-0002 (1 accept, 1 reject), cand-0001" in printed


def test_same_export_gives_the_same_items_either_way(run: Path) -> None:
    """`import` of a file and `review_export` of the same list agree (pull uses the latter)."""
    candidates = read_jsonl(run / "candidates.jsonl", Candidate)
    outcome = review_export(hand_written_export(), candidates, CONFIG)
    assert import_export(run, hand_written_export()) == 0
    assert read_jsonl(run / "cuqa.jsonl", CuqaItem) == outcome.items


# --- overlap, unsure, undecided --------------------------------------------------------------


def test_a_task_needs_the_judgements_its_meta_asks_for(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    export = [
        export_task(1, "cand-0001", annotation(1, 2, accept()), annotation(2, 3, accept()),
                    annotators=3),
        export_task(2, "cand-0002", annotation(3, 2, accept()), annotation(4, 3, accept()),
                    annotation(5, 4, accept()), annotators=3),
        export_task(3, "cand-0003", annotation(6, 2, accept()), annotators=1),
        export_task(4, "cand-0004", annotation(7, 2, accept())),  # no meta: two are needed
    ]
    assert import_export(run, export) == 0
    assert list(released(run)) == ["cand-0002", "cand-0003"]
    assert report_of(run)["needs_more_reviews"] == ["cand-0001", "cand-0004"]
    assert "need more reviews (fewer judgements than required" in capsys.readouterr().out

    assert import_export(run, export, "--allow-under-annotated") == 0
    assert list(released(run)) == ["cand-0001", "cand-0002", "cand-0003", "cand-0004"]
    assert report_of(run)["decided_with_fewer"] == ["cand-0001", "cand-0004"]
    assert "decided with fewer judgements than required, as told" in capsys.readouterr().out


def test_unsure_is_counted_apart_and_never_votes(run: Path) -> None:
    export = [
        export_task(1, "cand-0001", annotation(1, 2, accept()), annotation(2, 3, unsure())),
        export_task(2, "cand-0002", annotation(3, 2, accept()), annotation(4, 3, unsure()),
                    annotation(5, 4, accept())),
        export_task(3, "cand-0003", annotation(6, 2, unsure()), annotation(7, 3, unsure())),
    ]
    assert import_export(run, export) == 0
    items = released(run)
    assert list(items) == ["cand-0002"]
    assert items["cand-0002"].review.annotators == ["annotator-2", "annotator-4"]
    assert items["cand-0002"].review.model_dump()["unsure"] == 1
    report = report_of(run)
    assert report["unsure"] == 4 and report["votes"] == 3
    assert (report["incomplete"], report["pending"]) == (1, 1)


def test_an_untouched_submission_is_undecided_never_an_accept(run: Path) -> None:
    vote, problems = read_vote(ExportAnnotation(id=1, completed_by=2, result=[]), CONFIG)
    assert vote is not None and vote.verdict == "undecided" and problems == []
    # Edits without a verdict do not make a vote either.
    vote, _ = read_vote(ExportAnnotation(result=[text("rewrite", "Which lake?")]), CONFIG)
    assert vote is not None and vote.verdict == "undecided" and vote.rewrite == ""

    export = [export_task(1, "cand-0001", annotation(1, 2, []), annotation(2, 3, []))]
    assert import_export(run, export, "--allow-under-annotated") == 0
    assert released(run) == {}
    report = report_of(run)
    assert (report["undecided"], report["pending"], report["votes"]) == (2, 1, 0)


# --- edits are checked again -----------------------------------------------------------------


GOOD_REWRITE = "Which lake does the ferry launched in Tarnby in 2023 cross?"


@pytest.mark.parametrize(("edit", "check"), [
    (accept(rewrite="x"), "one_question"),
    (accept(rewrite="<div>" + "<p>Which lake?</p>" * 1500 + "</div>"), "question_length"),
    (accept(rewrite="<b>Which</b> lake does the ferry launched in Tarnby cross?"), "markup"),
    (accept(rewrite="Which ferry was launched in Tarnby? Which lake does it cross?"),
     "one_question"),
    (accept(rewrite="Which lake, Vostrel 1, does the ferry launched in Tarnby cross?"),
     "answer_in_question"),
    (accept(rewrite="Which lake does the MV Harrowgate 1 cross, launched in Tarnby?"),
     "bridge_in_question"),
    (accept(rewrite="Question One: which lake does the Tarnby ferry cross?"),
     "template_residue"),
    (accept(answer="The lake that the ferry crosses every single day since the spring"),
     "short_answer"),
    (accept(answer="Tarnby"), "answer_in_question"),
])
def test_an_edit_that_fails_a_check_sends_the_item_back(
    run: Path, capsys: pytest.CaptureFixture, edit: list[dict[str, Any]], check: str
) -> None:
    export = [two_accepts(1, "cand-0001", edit, edit),
              two_accepts(2, "cand-0002", accept(rewrite=GOOD_REWRITE.replace("2023", "event 2")))]
    assert import_export(run, export) == 0
    assert list(released(run)) == ["cand-0002"]  # a passing rewrite is released
    report = report_of(run)
    (sent,) = report["sent_back"]
    assert sent["candidate"] == "cand-0001" and check in {f["check"] for f in sent["failures"]}
    assert report["accepted"] == 1 and report["accept_rate"] == pytest.approx(0.5)
    (line,) = [n for n in capsys.readouterr().out.splitlines() if "sent back, the edit" in n]
    assert line.startswith("  sent back, the edit fails a check: cand-0001: ") and check in line


def test_edits_are_checked_with_the_runs_own_limits(run: Path) -> None:
    (run / "run.json").write_text(json.dumps({"validation": {"limits": {
        "min_question_words": 4, "max_question_words": 8, "max_answer_words": 10}}}))
    export = [two_accepts(1, "cand-0001", accept(rewrite=GOOD_REWRITE))]  # 11 words
    assert import_export(run, export) == 0
    assert report_of(run)["sent_back"][0]["failures"][0]["reason"] == (
        "the question has 11 words (allowed 4-8)")


def test_edits_follow_the_most_common_then_the_latest() -> None:
    original = "Which lake?"
    assert chosen_edit(original, ["Which lake?", "  Which   lake? ", ""]) == original
    assert chosen_edit(original, ["A?", "B?", "B?"]) == "B?"
    assert chosen_edit(original, ["A?", "B?"]) == "B?"


OTHER_REWRITE = "Which lake is crossed by the ferry launched in Tarnby in 2023?"


def test_different_rewrites_are_a_disagreement_and_neither_is_applied(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    export = [
        two_accepts(1, "cand-0001", accept(rewrite=GOOD_REWRITE), accept(rewrite=OTHER_REWRITE)),
        export_task(2, "cand-0002", annotation(4, 2, accept(rewrite=GOOD_REWRITE)),
                    annotation(5, 3, accept(rewrite=OTHER_REWRITE)),
                    annotation(6, 4, accept(rewrite=f"  {GOOD_REWRITE} "))),
        two_accepts(3, "cand-0003", accept(answer="Lake Vostrel"), accept(answer="Vostrel")),
    ]
    assert import_export(run, export) == 0
    items = released(run)
    assert list(items) == ["cand-0002"]  # settled by a majority of the accepting annotators
    assert items["cand-0002"].question == GOOD_REWRITE
    assert items["cand-0002"].review.agreement == pytest.approx(2 / 3)
    report = report_of(run)
    assert [(d["candidate"], d["field"], d["proposals"]) for d in report["disputed"]] == [
        ("cand-0001", "question", {"annotator-2": GOOD_REWRITE, "annotator-3": OTHER_REWRITE}),
        ("cand-0003", "answer", {"annotator-2": "Lake Vostrel", "annotator-3": "Vostrel"}),
    ]
    assert report["accepted"] == 1 and report["rewritten"] == 1
    assert report["mean_agreement"] == pytest.approx((1 / 2 + 2 / 3 + 1 / 2) / 3, abs=1e-3)
    assert {d["candidate"]: d["agreement"] for d in report["most_disagreed"]} == {
        "cand-0001": 0.5, "cand-0003": 0.5, "cand-0002": pytest.approx(2 / 3, abs=1e-4)}
    printed = capsys.readouterr().out
    assert ("disputed, the accepting annotators proposed different questions (not released; "
            f"settle it in Label Studio and pull again): cand-0001: annotator-2 “{GOOD_REWRITE}” "
            f"/ annotator-3 “{OTHER_REWRITE}”") in printed
    # Settled: the second annotator takes the first one's rewrite (a later annotation).
    export[0]["annotations"].append(annotation(9, 3, accept(rewrite=GOOD_REWRITE)))
    assert import_export(run, export) == 0
    settled = released(run)["cand-0001"]
    assert settled.question == GOOD_REWRITE and settled.review.agreement == 1.0


def test_an_annotation_of_a_text_that_changed_since_the_export_is_sent_back(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["export", "--run", str(run), "--out", str(run / "tasks.json")]) == 0
    tasks = json.loads((run / "tasks.json").read_text())
    # A refresh remakes cand-0001 under the same id, with a question nobody has seen.
    candidates = read_jsonl(run / "candidates.jsonl", Candidate)
    candidates[0] = candidates[0].model_copy(update={"question": GOOD_REWRITE})
    write_jsonl(run / "candidates.jsonl", candidates)
    export = [{"id": n, "data": task["data"], "meta": task["meta"],
               "annotations": [annotation(2 * n, 2, accept()), annotation(2 * n + 1, 3, accept())]}
              for n, task in enumerate(tasks, start=1)]
    capsys.readouterr()
    assert import_export(run, export) == 0
    assert "cand-0001" not in released(run) and len(released(run)) == len(tasks) - 1
    assert report_of(run)["changed_since_shown"] == ["cand-0001"]
    assert ("sent back, the question or answer changed since the task was made (a refresh?): "
            "cand-0001; their annotations are not applied") in capsys.readouterr().out
    # The new text gets a task of its own; the others are in the project already.
    present = {task_key(task) for task in tasks}
    fresh = tasks_to_import(build_tasks(candidates[:3]), present)
    assert [candidate_id_of(task) for task in fresh] == ["cand-0001"]
    # A task that does not say what it showed proves nothing: the text gets a task that does.
    assert tasks_to_import(build_tasks(candidates[:3]), {("cand-0001", None)}) == \
        build_tasks(candidates[:3])


@pytest.mark.parametrize("lost", ["deleted", "not a string"])
def test_a_task_that_no_longer_says_what_it_showed_is_sent_back(
    run: Path, capsys: pytest.CaptureFixture, lost: str
) -> None:
    """Issue 26, fault 7: the task of cand-0001 lost its meta.shown in Label Studio; nothing
    proves its annotators saw the question it has now. cand-0002's two tasks: the old one
    without the hash is moot once the new one (pushed again) is judged."""
    export = [two_accepts(1, "cand-0001"), two_accepts(2, "cand-0002"),
              two_accepts(3, "cand-0002"), two_accepts(4, "cand-0003")]
    for task in export[:2]:
        if lost == "deleted":
            del task["meta"]["shown"]
        else:
            task["meta"]["shown"] = 12345
    capsys.readouterr()
    assert import_export(run, export) == 0
    assert sorted(released(run)) == ["cand-0002", "cand-0003"]
    assert report_of(run)["shown_unknown"] == ["cand-0001"]
    assert ("sent back, the task does not say which question and answer it showed (its "
            "meta.shown is missing or not a hash): cand-0001; their annotations are not "
            "applied") in capsys.readouterr().out
    present = {task_key(task) for task in export}
    fresh = tasks_to_import(build_tasks([candidate(1), candidate(3)]), present)
    assert [candidate_id_of(task) for task in fresh] == ["cand-0001"]


def test_review_rules_default_to_two_judgements() -> None:
    assert ReviewRules().default_annotators == 2 and not ReviewRules().allow_under_annotated


# --- never lose reviewed items (issue 15, item 2) ----------------------------------------------


def four_accepted() -> list[dict[str, Any]]:
    return [two_accepts(n, f"cand-000{n}") for n in range(1, 5)]


def test_an_empty_export_never_replaces_reviewed_items(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert import_export(run, four_accepted()) == 0
    before = (run / "cuqa.jsonl").read_text()
    report_before = (run / "review-report.json").read_text()
    capsys.readouterr()

    assert import_export(run, []) == 1
    err = capsys.readouterr().err
    assert "it holds 4 reviewed items and this run has 0" in err
    assert "(4 would be dropped: cand-0001, cand-0002, cand-0003, cand-0004)" in err
    assert "--force" in err and len(err.strip().splitlines()) == 1
    assert (run / "cuqa.jsonl").read_text() == before
    assert (run / "review-report.json").read_text() == report_before

    assert import_export(run, [], "--force") == 0
    assert released(run) == {}


def test_the_summary_counts_every_task_it_lists(run: Path) -> None:
    """Issue 31, item 14: after a refresh remade the four reviewed candidates, `import --force`
    printed "0 sent back ... of 0 tasks", then listed four sent back. The counts now add up to
    the tasks, and each is the number of candidates its line lists."""
    assert import_export(run, four_accepted()) == 0
    candidates = read_jsonl(run / "candidates.jsonl", Candidate)
    for n in range(4):  # a refresh remakes them under the same ids
        candidates[n] = candidates[n].model_copy(update={"question": OTHER_REWRITE})
    write_jsonl(run / "candidates.jsonl", candidates)
    export = [*four_accepted(), two_accepts(5, "cand-0005"),
              two_accepts(6, "cand-0006", accept(rewrite="x")),  # fails a check: sent back
              two_accepts(7, "cand-0007", accept(answer="Lake Vostrel"), accept(answer="Vostrel"))]
    export_file = run / "export.json"
    export_file.write_text(json.dumps(export))
    done = subprocess.run(
        [sys.executable, "-m", "cuqa_builder.cli.annotate", "import", str(export_file), "--run",
         str(run), "--force"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == ("review: 1 accepted, 0 rejected, 0 tied, 1 disputed, 0 need more "
                        "reviews, 5 sent back, 0 pending of 7 tasks (accept rate 50%)")
    assert any(line.startswith("  sent back, the edit fails a check: cand-0006: ")
               for line in lines)
    assert ("  sent back, the question or answer changed since the task was made (a refresh?): "
            "cand-0001, cand-0002, cand-0003, cand-0004; their annotations are not applied: "
            "export or push the new text for review") in lines
    assert sum(line.startswith("  disputed, ") for line in lines) == 1
    assert list(released(run)) == ["cand-0005"]
    report = report_of(run)
    assert report["tasks"] == 7 and report["changed_since_shown"] == [
        "cand-0001", "cand-0002", "cand-0003", "cand-0004"]


def test_a_much_smaller_review_is_refused_and_a_similar_one_is_not(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert import_export(run, four_accepted()) == 0
    one_left = four_accepted()[:1]
    assert import_export(run, one_left) == 1
    assert "it holds 4 reviewed items and this run has 1 (3 would be dropped: cand-0002," in (
        capsys.readouterr().err)
    assert len(released(run)) == 4
    assert import_export(run, four_accepted()[:2]) == 0  # half is not "much smaller"
    assert len(released(run)) == 2


def test_a_first_review_may_keep_fewer_than_validate_passed_but_not_none(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    passed = [candidate(n).to_item() for n in range(1, 8)]  # what validate writes: unreviewed
    write_jsonl(run / "cuqa.jsonl", passed)
    assert import_export(run, []) == 1
    assert "it holds 7 items and this run has 0 (7 would be dropped: cand-0001" in (
        capsys.readouterr().err)
    assert import_export(run, [two_accepts(1, "cand-0001")]) == 0
    assert list(released(run)) == ["cand-0001"]


# --- bad input ---------------------------------------------------------------------------------


def test_json_min_export_is_refused_clearly(run: Path, capsys: pytest.CaptureFixture) -> None:
    export_file = run / "min.json"
    export_file.write_text(json.dumps([{"id": 1, "question": "...", "verdict": "accept"}]))
    assert main(["import", str(export_file), "--run", str(run)]) == 1
    assert "JSON_MIN" in capsys.readouterr().err
    assert not (run / "cuqa.jsonl").exists()


def test_unreadable_or_unwritable_files_fail_in_one_line(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    assert main(["import", str(run), "--run", str(run)]) == 1
    assert capsys.readouterr().err == f"cuqa-annotate: error: cannot read {run}: Is a directory\n"
    assert main(["export", "--run", str(run), "--out", str(run / "candidates.jsonl" / "x")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("cuqa-annotate: error: ") and len(err.splitlines()) == 1


def test_import_without_candidates_says_what_to_do(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    export_file = tmp_path / "export.json"
    export_file.write_text("[]")
    assert main(["import", str(export_file), "--run", str(tmp_path)]) == 1
    assert "run cuqa-build" in capsys.readouterr().err


def test_push_without_an_api_key_fails_in_one_line(
    run: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LABEL_STUDIO_API_KEY", raising=False)
    assert main(["push", "--run", str(run), "--url", "http://127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert "LABEL_STUDIO_API_KEY" in err and len(err.strip().splitlines()) == 1


def test_a_malformed_candidates_file_is_one_line_naming_file_and_line(tmp_path: Path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    good = candidate(1).model_dump_json()
    (run / "candidates.jsonl").write_text(good + "\n" + '{"id": "cq-2"}\n')
    assert main(["export", "--run", str(run)]) != 0
    err = capsys.readouterr().err.strip()
    assert "candidates.jsonl:2" in err and "\n" not in err
