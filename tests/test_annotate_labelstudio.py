"""The round trip against a real Label Studio server: push, annotate as annotators would, pull."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from label_studio_sdk import LabelStudio

from cuqa_builder.annotation.config import load_labeling_config
from cuqa_builder.cli.annotate import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.testing.annotate_fixtures import (
    NOT_UNKNOWN,
    accept,
    candidate,
    choices,
    reject,
    unsure,
)
from cuqa_builder.testing.labelstudio_server import LabelStudioServer

pytestmark = pytest.mark.labelstudio


@pytest.fixture
def sdk(label_studio: LabelStudioServer) -> LabelStudio:
    return LabelStudio(base_url=label_studio.url, api_key=label_studio.token)


@pytest.fixture
def run(tmp_path: Path, label_studio: LabelStudioServer, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    write_jsonl(tmp_path / "candidates.jsonl",
                [candidate(n) for n in range(1, 7)] + [candidate(99, NOT_UNKNOWN)])
    return tmp_path


def cli(*args: str) -> int:
    return main(list(args))


def tasks_by_candidate(sdk: LabelStudio, project_id: int) -> dict[str, Any]:
    tasks = sdk.tasks.list(project=project_id, fields="all", page_size=100)
    return {t.meta["candidate_id"]: t for t in tasks}


def annotators(sdk: LabelStudio, count: int) -> list[int]:
    """Distinct reviewer accounts, created through the API as an admin would."""
    tag = secrets.token_hex(3)
    return [sdk.users.create(email=f"annotator{n}-{tag}@example.com", username=f"a{n}-{tag}").id
            for n in range(count)]


def project_id_of(sdk: LabelStudio, title: str) -> int:
    return next(p.id for p in sdk.projects.list(title=title) if p.title == title)


def test_push_sets_up_the_review_and_is_idempotent(
    run: Path, label_studio: LabelStudioServer, sdk: LabelStudio, capsys: pytest.CaptureFixture
) -> None:
    assert cli("push", "--run", str(run), "--url", label_studio.url) == 0
    printed = capsys.readouterr().out
    assert "pushed 6 new tasks to created project" in printed
    assert "each task goes to 2 annotators" in printed
    assert cli("push", "--run", str(run), "--url", label_studio.url) == 0
    assert "pushed 0 new tasks to existing project" in capsys.readouterr().out
    assert cli("push", "--run", str(run), "--url", label_studio.url, "--only", "all") == 0
    assert "pushed 1 new tasks" in capsys.readouterr().out

    project = sdk.projects.get(project_id_of(sdk, f"CuQA {run.name}"))
    assert project.maximum_annotations == 2
    assert project.show_instruction is True and project.show_skip_button is True
    assert project.expert_instruction.startswith("<h3>Reviewing CuQA questions")
    assert project.show_collab_predictions is False
    tasks = tasks_by_candidate(sdk, project.id)
    assert len(tasks) == 7  # no duplicates after three pushes
    assert tasks["cand-0001"].data["question"] == candidate(1).question
    assert tasks["cand-0001"].data["evidence"] == ""
    assert tasks["cand-0099"].data["evidence"].startswith("✗ probe_not_unknown")
    assert all(not t.predictions for t in tasks.values())  # nothing pre-selected or pre-filled
    assert {t.meta["annotators"] for t in tasks.values()} == {2}

    assert cli("push", "--run", str(run), "--url", label_studio.url, "--annotators", "3") == 0
    assert "asked for 2 annotations per task before; now 3" in capsys.readouterr().out
    assert sdk.projects.get(project.id).maximum_annotations == 3


def test_annotations_come_back_as_reviewed_items(
    run: Path, label_studio: LabelStudioServer, sdk: LabelStudio, capsys: pytest.CaptureFixture
) -> None:
    project = "CuQA round trip " + secrets.token_hex(3)
    assert cli("push", "--run", str(run), "--url", label_studio.url, "--project", project) == 0
    project_id = project_id_of(sdk, project)
    tasks = {cid: t.id for cid, t in tasks_by_candidate(sdk, project_id).items()}
    ann1, ann2, ann3 = annotators(sdk, 3)

    def annotate(cid: str, user: int, result: list[dict[str, Any]], **extra: Any) -> None:
        sdk.annotations.create(id=tasks[cid], result=result, completed_by=user, lead_time=20.0,
                               **extra)

    annotate("cand-0001", ann1, accept(rewrite="Which lake does Tarnby's new ferry cross?"))
    annotate("cand-0001", ann2, accept())
    annotate("cand-0001", ann3, reject("unnatural"))
    annotate("cand-0002", ann1, accept())
    annotate("cand-0002", ann2, reject("not unknown"))
    annotate("cand-0003", ann1, accept(), was_cancelled=True)
    annotate("cand-0003", ann2, reject("answer wrong"))
    annotate("cand-0003", ann3, unsure())
    annotate("cand-0004", ann1, [choices("verdict", "definitely"), choices("mood", "happy")])
    annotate("cand-0004", ann2, accept())
    annotate("cand-0004", ann3, accept())
    annotate("cand-0005", ann1, accept(answer="Lake Vostrel-Ost"))
    annotate("cand-0005", ann3, accept(answer="Lake Vostrel-Ost"))
    annotate("cand-0006", ann1, accept(rewrite="Which lake? <b>x</b>"))
    annotate("cand-0006", ann2, accept(rewrite="Which lake? <b>x</b>"))
    capsys.readouterr()

    assert cli("pull", "--run", str(run), "--url", label_studio.url, "--project", project) == 0
    printed = capsys.readouterr().out
    assert ("3 accepted, 0 rejected, 1 tied, 0 disputed, 1 need more reviews, "
            "1 sent back, 0 pending of 6 tasks") in printed

    items = {i.id: i for i in read_jsonl(run / "cuqa.jsonl", CuqaItem)}
    assert list(items) == ["cand-0001", "cand-0004", "cand-0005"]
    assert items["cand-0001"].question == "Which lake does Tarnby's new ferry cross?"
    assert items["cand-0001"].review.rewritten is True
    assert items["cand-0001"].review.agreement == pytest.approx(2 / 3)
    assert len(items["cand-0001"].review.annotators) == 3
    assert items["cand-0004"].review.annotators == [f"annotator-{ann2}", f"annotator-{ann3}"]
    assert items["cand-0005"].answer == "Lake Vostrel-Ost"
    assert items["cand-0005"].review.model_dump()["answer_corrected"] is True

    report = json.loads((run / "review-report.json").read_text())
    assert report["cancelled"] == 1 and report["unsure"] == 1 and report["annotators"] == 3
    assert report["needs_more_reviews"] == ["cand-0003"]
    assert report["sent_back"][0]["candidate"] == "cand-0006"
    assert report["reject_reasons"] == {"unnatural": 1, "not unknown": 1, "answer wrong": 1}
    assert report["seconds_per_task"] == pytest.approx(20.0)
    third = report["per_annotator"][f"annotator-{ann3}"]
    assert (third["judgements"], third["accept_rate"], third["unsure"]) == (3, 0.6667, 1)
    assert report["most_disagreed"][0]["candidate"] == "cand-0002"
    messages = " ".join(p["message"] for p in report["problems"])
    assert "unknown choice 'definitely'" in messages and "unknown control 'mood'" in messages

    # Under-annotated items are decided only when told, and an empty project never replaces
    # the reviewed items.
    assert cli("pull", "--run", str(run), "--url", label_studio.url, "--project", project,
               "--allow-under-annotated") == 0
    assert "decided with fewer judgements than required, as told: cand-0003" in (
        capsys.readouterr().out)
    empty = "CuQA empty " + secrets.token_hex(3)
    sdk.projects.create(title=empty, label_config=load_labeling_config().xml)
    assert cli("pull", "--run", str(run), "--url", label_studio.url, "--project", empty) == 1
    assert "it holds 3 reviewed items and this run has 0" in capsys.readouterr().err
    assert len(read_jsonl(run / "cuqa.jsonl", CuqaItem)) == 3


def test_server_errors_are_one_line_without_the_key(
    run: Path, label_studio: LabelStudioServer, capsys: pytest.CaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert cli("pull", "--run", str(run), "--url", label_studio.url, "--project", "absent") == 1
    assert "no project titled 'absent'" in capsys.readouterr().err

    wrong_key = "wrong-" + secrets.token_hex(8)
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", wrong_key)
    assert cli("push", "--run", str(run), "--url", label_studio.url) == 1
    captured = capsys.readouterr()
    assert "refused the API key" in captured.err and len(captured.err.strip().splitlines()) == 1
    assert wrong_key not in captured.err + captured.out
