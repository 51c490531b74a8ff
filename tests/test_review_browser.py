"""The review screen as an annotator meets it: real Label Studio, headless Chromium, 1366x768.

Screenshots go to the artifacts folder named at the end of the test output (review-browser/).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest
from label_studio_sdk import LabelStudio

from cuqa_builder.cli.annotate import main
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.records.candidates import CheckFailure, Intermediates, Validation
from cuqa_builder.testing.annotate_fixtures import candidate
from cuqa_builder.testing.browser import (
    LAPTOP,
    BrowserUnavailable,
    box_of,
    chromium_executable,
    laptop_page,
    log_in,
)
from cuqa_builder.testing.labelstudio_server import LabelStudioServer

pytestmark = [pytest.mark.labelstudio, pytest.mark.browser]

# A browser's tabs and address bar take about this much of a 768-pixel laptop screen: the
# decision must fit in what is left, not merely in the page's own 768 pixels.
BROWSER_CHROME_PX = 110
VERDICTS = ("accept", "reject", "unsure")
SAVE_WAIT_S = 30.0


def _unavailable(exc: BrowserUnavailable) -> NoReturn:
    if os.environ.get("CI") == "true":  # CI installs it: a missing browser is a failure there
        pytest.fail(str(exc))
    pytest.skip(str(exc))


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The browser, looked for before Label Studio starts (35 s): without one the test skips
    (the tests ask for it first, as session fixtures start in the order they are asked for)."""
    try:
        return chromium_executable()
    except BrowserUnavailable as exc:
        _unavailable(exc)


@pytest.fixture
def page(chromium: Path) -> Iterator[Any]:
    try:
        with laptop_page() as opened:
            yield opened
    except BrowserUnavailable as exc:  # no Playwright
        _unavailable(exc)


def worst_case_candidate() -> Any:
    """A failed item with a long event, a long passage and several findings: the tallest task."""
    item = candidate(1)
    long_event = " ".join([f"The ferry MV Harrowgate 1 is launched in Tarnby (clause {n})."
                           for n in range(8)])
    passage = " ".join(["The MV Harrowgate 1 has crossed Lake Vostrel 1 since the spring."] * 60)
    assert item.intermediates is not None
    intermediates: Intermediates = item.intermediates.model_copy(
        update={"known_passage": passage})
    failures = [CheckFailure(check=name, reason=f"a finding of {name} that a person reads")
                for name in ("probe_not_unknown", "template_residue", "question_length",
                             "duplicate", "probe_does_not_compose")]
    return item.model_copy(update={
        "event": item.event.model_copy(update={"text": long_event}),
        "intermediates": intermediates,
        "validation": Validation(passed=False, failures=failures),
    })


def shot(page: Any, folder: Path, name: str) -> Path:
    path = folder / name
    page.screenshot(path=str(path))
    return path


def assert_fits_the_screen(
    page: Any, locator: Any, what: str, usable: int = LAPTOP["height"] - BROWSER_CHROME_PX
) -> None:
    box = box_of(locator)
    assert box.y >= 0 and box.bottom <= usable, f"{what} is drawn at y {box.y:.0f}-{box.bottom:.0f}"
    assert box.x >= 0 and box.right <= LAPTOP["width"], f"{what} is off the side"
    assert locator.is_visible(), f"{what} is hidden"


def annotations_of(sdk: LabelStudio, project_id: int, wanted: int) -> list[dict[str, Any]]:
    """The project's annotations once Label Studio has saved `wanted` of them."""
    deadline = time.monotonic() + SAVE_WAIT_S
    while True:
        found = [a for t in sdk.projects.exports.as_json(project_id) for a in t["annotations"]]
        if len(found) >= wanted or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_an_annotator_reads_the_guidelines_then_decides_on_one_screen(
    chromium: Path, label_studio: LabelStudioServer, page: Any, tmp_path: Path, artifacts: Path,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
) -> None:
    monkeypatch.setenv("LABEL_STUDIO_API_KEY", label_studio.token)
    run = tmp_path / "run"
    write_jsonl(run / "candidates.jsonl", [worst_case_candidate(), candidate(2)])
    project = "Browser review " + secrets.token_hex(3)
    server = ["--url", label_studio.url, "--project", project]
    assert main(["push", "--run", str(run), "--only", "all", *server]) == 0
    sdk = LabelStudio(base_url=label_studio.url, api_key=label_studio.token)
    project_id = next(p.id for p in sdk.projects.list(title=project) if p.title == project)
    folder = artifacts / "review-browser"
    folder.mkdir(exist_ok=True)

    log_in(page, label_studio)
    page.goto(f"{label_studio.url}/projects/{project_id}/data?labeling=1")
    # The guidelines open by themselves before the first task.
    guidelines = page.get_by_text("Reviewing CuQA questions: guidelines for annotators")
    guidelines.wait_for()
    assert page.get_by_text("Unsure, skip and undecided").is_visible()
    shot(page, folder, "1-guidelines-before-the-first-task.png")
    page.get_by_role("button", name="Close modal").click()
    page.locator(".lsf-modal-ls").wait_for(state="hidden")
    page.get_by_role("heading", name="Your decision").wait_for()
    page.get_by_text(candidate(1).question).wait_for()
    shot(page, folder, "2-task-as-opened.png")

    # Nothing is chosen or filled in for the annotator.
    radios = {v: page.locator(f"input[type=radio][name='{v}']") for v in VERDICTS}
    assert all(r.count() == 1 and not r.is_checked() for r in radios.values())
    assert page.locator("input:checked").count() == 0
    assert page.locator("textarea:visible").count() == 0  # the edit boxes come with an accept
    assert all(box.input_value() == "" for box in page.locator("textarea, input[type=text]").all())
    # The decision, the checks' findings and Submit fit the screen without scrolling.
    assert page.evaluate("() => [...document.querySelectorAll('*')]"
                         ".filter(e => e.scrollTop > 0).length") == 0
    for verdict, radio in radios.items():
        assert_fits_the_screen(page, page.locator("label").filter(has=radio), verdict)
    findings = page.get_by_text("What the automatic checks found (information, not a decision)")
    assert_fits_the_screen(page, findings, "the checks' findings")
    assert_fits_the_screen(page, page.get_by_text("Checks suggest: reject"), "the suggestion")
    submit = page.get_by_test_id("bottombar-submit-button")
    # Label Studio pins its bottom bar to the window's bottom edge, whatever the window's height.
    assert_fits_the_screen(page, submit, "Submit", usable=LAPTOP["height"])
    # The long passage is folded; the type line explains the bridge; no fake revision link.
    assert not page.get_by_text("has crossed Lake Vostrel 1 since the spring").first.is_visible()
    assert page.get_by_text("ABC: the unknown part's answer is the bridge").is_visible()
    assert page.get_by_text("not a verified Wikipedia revision").is_visible()
    assert page.locator("a[href*='oldid=']").count() == 0

    # Submitting untouched is possible, and records no verdict.
    submit.click()
    page.get_by_text(candidate(2).question).wait_for()
    page.locator("label").filter(has=radios["reject"]).click()
    reason = page.locator("label").filter(has=page.locator("input[name='not unknown']"))
    assert_fits_the_screen(page, reason, "the reject reasons")
    reason.click()
    shot(page, folder, "3-reject-with-a-reason.png")
    page.locator("label").filter(has=radios["accept"]).click()
    assert_fits_the_screen(page, page.locator("textarea:visible"), "the rewrite box")
    assert page.locator("textarea:visible").input_value() == ""
    shot(page, folder, "4-accept-opens-empty-edit-boxes.png")
    page.locator("label").filter(has=radios["reject"]).click()
    submit.click()

    saved = annotations_of(sdk, project_id, 2)
    assert sorted(len(a["result"]) for a in saved) == [0, 2]
    capsys.readouterr()
    assert main(["pull", "--run", str(run), "--allow-under-annotated", *server]) == 0
    report = json.loads((run / "review-report.json").read_text())
    assert (report["undecided"], report["rejected"], report["accepted"]) == (1, 1, 0)
    print(f"review screen screenshots: {folder}")
