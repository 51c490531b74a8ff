"""The wheel carries the top-level `prompts/` and `annotation/` folders inside the package, and the
code finds them there once installed (not only in a checkout, where they sit beside the package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ANNOTATION_FILES = ("labeling_config.xml", "GUIDELINES.md")


def run(*command: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def tracked_files() -> list[str]:
    return [name for name in run("git", "ls-files", "-z").split("\0") if (ROOT / name).is_file()]


def clean_copy(dest: Path) -> Path:
    """What a fresh clone holds: the tracked files only (no caches, runs or stray local files)."""
    for name in tracked_files():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    return dest


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = clean_copy(tmp_path_factory.mktemp("clone"))
    out = tmp_path_factory.mktemp("dist")
    # The backend installed beside the tests (the `test` extra): no registry needed.
    run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
        "--wheel-dir", str(out), str(source))
    (built,) = out.glob("cuqa_builder-*.whl")
    return built


def test_the_wheel_carries_every_template_and_both_annotation_files(wheel: Path) -> None:
    templates = sorted(path.name for path in (ROOT / "prompts").iterdir() if path.is_file())
    assert templates, "no templates in the top-level prompts/ folder"
    expected = {f"cuqa_builder/prompts/{name}" for name in templates}
    expected |= {f"cuqa_builder/annotation/{name}" for name in ANNOTATION_FILES}
    with zipfile.ZipFile(wheel) as archive:
        assert expected <= set(archive.namelist())


INSTALLED_LOOKUPS = """
from cuqa_builder.annotation.config import labeling_config_path, load_labeling_config
from cuqa_builder.annotation.guidelines import guidelines_html
from cuqa_builder.prompts import load_prompt, prompt_file

assert load_prompt("merge_questions").placeholders
assert load_labeling_config().reasons and "<h3>" in guidelines_html()
print(prompt_file("merge_questions"))
print(labeling_config_path())
"""


def test_an_installed_wheel_reads_its_own_copies(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
        str(wheel))
    env = {**os.environ, "PYTHONPATH": str(site)}  # ahead of any editable install of a checkout
    found = run(sys.executable, "-c", INSTALLED_LOOKUPS, cwd=tmp_path, env=env).split()
    assert found == [
        str(site / "cuqa_builder" / "prompts" / "merge_questions.txt"),
        str(site / "cuqa_builder" / "annotation" / "labeling_config.xml"),
    ]


def test_the_hf_extra_brings_datasets_for_the_card_s_snippet(wheel: Path) -> None:
    """Issue 32.10: `pip install .[hf]` installs what a release's card loads it with; the test
    extra has it too, so the card's snippet is tested."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode("utf-8").splitlines()
    assert "Provides-Extra: hf" in metadata
    wanted = {line for line in metadata if line.startswith("Requires-Dist: datasets")}
    assert wanted == {"Requires-Dist: datasets>=2.19; extra == 'hf'",
                      "Requires-Dist: datasets>=2.19; extra == 'test'"}
