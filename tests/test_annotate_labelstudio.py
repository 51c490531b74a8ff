"""The round trip against a real Label Studio server: push, annotate as annotators would, pull."""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any

import pytest
from label_studio_sdk import LabelStudio

from cuqa_builder.cli.annotate import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records import CuqaItem
from cuqa_builder.testing.annotate_fixtures import NOT_UNKNOWN, accept, candidate, choices, reject
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


def test_push_is_idempotent_and_carries_the_checks(
    run: Path, label_studio: LabelStudioServer, sdk: LabelStudio, capsys: pytest.CaptureFixture
) -> None:
    assert cli("push", "--run", str(run), "--url", label_studio.url) == 0
    assert "pushed 6 new tasks to created project" in capsys.readouterr().out
    assert cli("push", "--run", str(run), "--url", label_studio.url) == 0
    assert "pushed 0 new tasks to existing project" in capsys.readouterr().out
    assert cli("push", "--run", str(run), "--url", label_studio.url, "--only", "all") == 0
    assert "pushed 1 new tasks" in capsys.readouterr().out

    project = next(p for p in sdk.projects.list(title=f"CuQA {run.name}"))
    tasks = tasks_by_candidate(sdk, project.id)
    assert len(tasks) == 7  # no duplicates after three pushes
    assert tasks["cand-0001"].data["question"] == candidate(1).question
    verdicts = {cid: [r for r in t.predictions[0].result if r["from_name"] == "verdict"]
                for cid, t in tasks.items()}
    assert verdicts["cand-0001"][0]["value"]["choices"] == ["accept"]
    assert verdicts["cand-0099"][0]["value"]["choices"] == ["reject"]
    # Label Studio pre-labels a task with the predictions of the project's model version.
    prediction_version = tasks["cand-0001"].predictions[0].model_version
    assert sdk.projects.get(project.id).model_version == prediction_version


def test_annotations_come_back_as_reviewed_items(
    run: Path, label_studio: LabelStudioServer, sdk: LabelStudio, capsys: pytest.CaptureFixture
) -> None:
    project = "CuQA round trip " + secrets.token_hex(3)
    assert cli("push", "--run", str(run), "--url", label_studio.url, "--project", project) == 0
    project_id = next(p.id for p in sdk.projects.list(title=project) if p.title == project)
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
    annotate("cand-0004", ann1, [choices("verdict", "definitely"), choices("mood", "happy")])
    annotate("cand-0004", ann2, accept())
    annotate("cand-0005", ann3, accept(answer="Lake Vostrel-Ost"))
    capsys.readouterr()

    assert cli("pull", "--run", str(run), "--url", label_studio.url, "--project", project) == 0
    printed = capsys.readouterr().out
    assert "3 accepted, 1 rejected, 1 tied, 1 pending of 6 tasks" in printed

    items = {i.id: i for i in read_jsonl(run / "cuqa.jsonl", CuqaItem)}
    assert list(items) == ["cand-0001", "cand-0004", "cand-0005"]
    assert items["cand-0001"].question == "Which lake does Tarnby's new ferry cross?"
    assert items["cand-0001"].review.rewritten is True
    assert items["cand-0001"].review.agreement == pytest.approx(2 / 3)
    assert len(items["cand-0001"].review.annotators) == 3
    assert items["cand-0004"].review.annotators == [f"annotator-{ann2}"]
    assert items["cand-0005"].answer == "Lake Vostrel-Ost"
    assert items["cand-0005"].review.model_dump()["answer_corrected"] is True

    report = json.loads((run / "review-report.json").read_text())
    assert report["cancelled"] == 1 and report["annotators"] == 3
    assert report["reject_reasons"] == {"unnatural": 1, "not unknown": 1, "answer wrong": 1}
    assert report["seconds_per_task"] == pytest.approx(20.0)
    messages = " ".join(p["message"] for p in report["problems"])
    assert "unknown choice 'definitely'" in messages and "unknown control 'mood'" in messages


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
