"""The Label Studio round trip without a server: tasks out, a hand-written full JSON export in."""

from __future__ import annotations

import json
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
from cuqa_builder.annotation.review import chosen_edit, review_export
from cuqa_builder.annotation.tasks import build_task, select_candidates, suggested_reasons
from cuqa_builder.cli.annotate import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records import Candidate, CheckFailure, CuqaItem
from cuqa_builder.testing.annotate_fixtures import (
    NOT_UNKNOWN,
    accept,
    candidate,
    choices,
    reject,
    text,
)
from cuqa_builder.validation.checks import CHECK_NAMES
from cuqa_builder.validation.probes import PROBE_CHECKS, PROBE_ERROR

CONFIG = load_labeling_config()
REASONS = {"answer wrong", "not unknown", "known part wrong", "unnatural", "other"}


def annotation(ann_id: int, user: int, result: list[Any], *, cancelled: bool = False,
               lead_time: float = 10.0) -> dict[str, Any]:
    return {"id": ann_id, "completed_by": user, "result": result, "was_cancelled": cancelled,
            "lead_time": lead_time, "updated_at": f"2024-05-01T10:00:{ann_id:02d}Z"}


def export_task(task_id: int, candidate_id: str, *annotations: dict[str, Any]) -> dict[str, Any]:
    return {"id": task_id, "data": {"candidate_id": candidate_id, "question": "..."},
            "meta": {"candidate_id": candidate_id}, "annotations": list(annotations),
            "predictions": [1]}


@pytest.fixture
def run(tmp_path: Path) -> Path:
    candidates = [candidate(n) for n in range(1, 8)] + [candidate(99, NOT_UNKNOWN)]
    write_jsonl(tmp_path / "candidates.jsonl", candidates)
    return tmp_path


# --- the labeling config ------------------------------------------------------------------


def test_config_declares_the_review_controls() -> None:
    assert CONFIG.controls["verdict"].options == {"accept", "reject"}
    assert not CONFIG.controls["verdict"].multiple
    assert CONFIG.reasons == REASONS and CONFIG.controls["reasons"].multiple
    assert CONFIG.controls["rewrite"].type == "textarea"
    assert CONFIG.controls["answer_fix"].to_name == "answer"


def test_config_without_a_verdict_control_is_refused() -> None:
    xml = CONFIG.xml.replace('name="verdict"', 'name="decision"')
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


# --- tasks ----------------------------------------------------------------------------------


def test_every_task_fills_every_variable_of_the_config() -> None:
    hard = candidate(2).model_copy(update={"difficulty": "hard", "intermediates": None,
                                           "sub_items": [candidate(3), candidate(4)]})
    for item in (candidate(1), candidate(5, NOT_UNKNOWN), candidate(6, None), hard):
        data = build_task(item, CONFIG)["data"]
        assert CONFIG.data_fields <= data.keys()
        assert all(isinstance(v, str) for v in data.values())
    hard_data = build_task(hard, CONFIG)["data"]
    assert "MV Harrowgate 3" in hard_data["known_passage"]
    assert "MV Harrowgate 4" in hard_data["known_passage"]


def test_task_shows_the_source_revision_and_ties_back_to_the_candidate() -> None:
    task = build_task(candidate(1), CONFIG)
    assert task["meta"] == {"candidate_id": "cand-0001", "tool": f"cuqa-builder {__version__}"}
    # Stable across releases: Label Studio pre-labels only with the project's model version.
    assert task["predictions"][0]["model_version"] == "cuqa-builder-checks"
    assert "oldid=1001" in task["data"]["revision_link"]
    assert task["data"]["known_pair"].startswith("Q: Which lake does the MV Harrowgate 1 cross?")
    assert task["data"]["event_date"] == "2023-09-10"


def test_predictions_carry_the_verdicts_and_prefill_the_text_areas() -> None:
    passed = build_task(candidate(1), CONFIG)["predictions"][0]["result"]
    failed = build_task(candidate(2, NOT_UNKNOWN), CONFIG)["predictions"][0]["result"]
    unvalidated = build_task(candidate(3, None), CONFIG)["predictions"][0]["result"]
    read = [dict(CONFIG.read_result(i) for i in result)
            for result in (passed, failed, unvalidated)]
    assert read[0]["verdict"] == ("accept",) and "reasons" not in read[0]
    assert read[1]["verdict"] == ("reject",) and read[1]["reasons"] == ("not unknown",)
    assert "verdict" not in read[2]
    assert read[0]["rewrite"] == candidate(1).question
    assert read[0]["answer_fix"] == "Lake Vostrel 1"


CHECK_REASONS = [  # the names the validators and probes use (cuqa_builder/validation)
    ("one_question", "unnatural"),
    ("question_length", "unnatural"),
    ("template_residue", "unnatural"),
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
    out = run / "all.json"
    assert main(["export", "--run", str(run), "--only", "all", "--out", str(out)]) == 0
    assert len(json.loads(out.read_text())) == 8


# --- the review ----------------------------------------------------------------------------


def hand_written_export() -> list[dict[str, Any]]:
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
                    annotation(7, 3, reject("answer wrong", "not unknown"))),
        # bogus results are reported, not trusted; the valid vote still counts
        export_task(4, "cand-0004",
                    annotation(8, 2, [choices("verdict", "maybe"), choices("mood", "happy")]),
                    annotation(9, 3, [*accept(), choices("reasons", "too easy")])),
        # an answer correction
        export_task(5, "cand-0005", annotation(10, 2, accept(answer="Lake Vostrel-Ost"))),
        # nobody has looked yet
        export_task(6, "cand-0006"),
        # an annotator who changed their mind counts once, with the later verdict
        export_task(7, "cand-0007",
                    annotation(11, 2, reject("other")), annotation(12, 2, accept())),
        # a task whose candidate is not in this run
        export_task(8, "cand-elsewhere", annotation(13, 2, accept())),
    ]


def test_import_resolves_votes_and_writes_accepted_items(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    export_file = run / "export.json"
    export_file.write_text(json.dumps(hand_written_export()))
    assert main(["import", str(export_file), "--run", str(run)]) == 0
    printed = capsys.readouterr().out

    items = {i.id: i for i in read_jsonl(run / "cuqa.jsonl", CuqaItem)}
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

    assert items["cand-0004"].review.annotators == ["annotator-3"]
    assert items["cand-0007"].review.annotators == ["annotator-2"]

    report = json.loads((run / "review-report.json").read_text())
    assert report["tasks"] == 7 and report["pending"] == 1 and report["reviewed"] == 6
    assert (report["accepted"], report["rejected"], report["ties"]) == (4, 1, 1)
    assert report["accept_rate"] == pytest.approx(4 / 6, abs=1e-4)
    assert report["cancelled"] == 1 and report["annotations"] == 13
    assert report["reject_reasons"] == {"unnatural": 1, "other": 1, "answer wrong": 1,
                                        "not unknown": 1}
    assert report["multi_annotated"] == 2
    assert report["mean_agreement"] == pytest.approx((2 / 3 + 1 / 2) / 2, abs=1e-3)
    # counted votes only: 40 + 20 + 30 on task 1, then six more votes of 10 s
    assert report["seconds_per_task"] == pytest.approx(150 / 9, abs=1e-3)
    assert report["unknown_candidates"] == ["cand-elsewhere"]
    messages = [p["message"] for p in report["problems"]]
    assert any("unknown choice 'maybe'" in m for m in messages)
    assert any("unknown control 'mood'" in m for m in messages)
    assert any("unknown choice 'too easy'" in m for m in messages)
    assert any("no valid verdict" in m for m in messages)
    assert "4 accepted, 1 rejected, 1 tied, 1 pending of 7 tasks" in printed


def test_same_export_gives_the_same_items_either_way(run: Path) -> None:
    """`import` of a file and `review_export` of the same list agree (pull uses the latter)."""
    candidates = read_jsonl(run / "candidates.jsonl", Candidate)
    outcome = review_export(hand_written_export(), candidates, CONFIG)
    export_file = run / "export.json"
    export_file.write_text(json.dumps(hand_written_export()))
    assert main(["import", str(export_file), "--run", str(run)]) == 0
    assert read_jsonl(run / "cuqa.jsonl", CuqaItem) == outcome.items


def test_an_edit_that_lets_the_question_name_the_answer_is_flagged(
    run: Path, capsys: pytest.CaptureFixture
) -> None:
    fine = "Which lake does the ferry launched in Tarnby cross?"
    by_alias = "Which lake, Vostrel 2, does the ferry launched in Tarnby cross?"
    by_bridge = "Which lake does the MV Harrowgate 3 cross?"
    export = [export_task(n, f"cand-000{n}", annotation(n, 2, accept(rewrite=rewrite)))
              for n, rewrite in ((1, fine), (2, by_alias), (3, by_bridge))]
    # A corrected answer that the (unchanged) question already names.
    export.append(export_task(4, "cand-0004", annotation(4, 2, accept(answer="Tarnby"))))
    export_file = run / "export.json"
    export_file.write_text(json.dumps(export))
    assert main(["import", str(export_file), "--run", str(run)]) == 0
    report = json.loads((run / "review-report.json").read_text())
    assert report["rewrites_leaking_answer"] == ["cand-0002", "cand-0003", "cand-0004"]
    assert ("check these edited items, the question names the answer or the bridge: "
            "cand-0002, cand-0003, cand-0004" in capsys.readouterr().out)


def test_edits_follow_the_most_common_then_the_latest() -> None:
    original = "Which lake?"
    assert chosen_edit(original, ["Which lake?", "  Which   lake? ", ""]) == original
    assert chosen_edit(original, ["A?", "B?", "B?"]) == "B?"
    assert chosen_edit(original, ["A?", "B?"]) == "B?"


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
