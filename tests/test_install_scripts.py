"""The shell scripts of the test command: no check that passes or fails by chance.

`cmd | grep -q PATTERN` under `set -o pipefail` fails at random when `cmd` prints more after the
match: grep exits, `cmd`'s next write breaks the pipe, and pipefail reports `cmd`'s failure. So
the install scripts read a command's output whole, then match; a fake `label-studio` that prints
a long report after its version line shows they do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted([*(ROOT / "scripts").glob("*.sh"), *(ROOT / ".ci").iterdir()])
# A reader that may stop before the writer is done.
_EARLY_READER = re.compile(r"\|\s*(?:grep\s+(?:-\w*[qm]|--quiet|--max-count)|head\b)")
VERSION = "1.23.2"


def _fake_label_studio(venv: Path, version: str, *, until: Path | None = None) -> None:
    """`VENV/bin/label-studio version` printing `version` then 200 KB more, as the real one
    prints its JSON report; with `until`, nothing before that file exists."""
    bin_dir = venv / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    guard = f"if not Path({str(until)!r}).exists(): sys.exit(1)\n" if until else ""
    script = bin_dir / "label-studio"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom pathlib import Path\n{guard}"
        f"print('')\nprint('Label Studio version: {version} ')\n"
        "for n in range(20000):\n    print(f'    \"line\": {n},')\n",
        encoding="utf-8",
    )
    script.chmod(0o755)


def _fake_python(path: Path, marker: Path) -> Path:
    """An interpreter for `-m venv` and the venv's `-m pip install`: it only leaves `marker`."""
    path.write_text(f"#!/bin/sh\ntouch {marker}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def _install(venv: Path, python: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CUQA_LS_VENV": str(venv), "PYTHON": str(python or "false")}
    return subprocess.run(["bash", str(ROOT / "scripts" / "install-label-studio.sh")],
                          capture_output=True, text=True, env=env, timeout=60)


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_pipes_into_a_reader_that_stops_early(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    found = [line for line in code if _EARLY_READER.search(line)]
    assert not found, f"{script.name}: read the output whole, then match: {found}"


def test_a_sound_install_is_reused_however_long_its_version_report(tmp_path: Path) -> None:
    """Ten runs against a report of 200 KB after the version line: each one reuses it (the
    piped check failed here nearly every time)."""
    venv = tmp_path / "venv"
    _fake_label_studio(venv, VERSION)
    for _ in range(10):
        done = _install(venv)
        assert done.returncode == 0, done.stderr
        assert f"label-studio {VERSION}: reusing {venv}" in done.stdout


def test_the_check_after_installing_reads_the_whole_report(tmp_path: Path) -> None:
    """The version is checked again once pip is done: the long report passes, another version
    fails with the message."""
    venv, marker = tmp_path / "venv", tmp_path / "installed"
    python = _fake_python(tmp_path / "python", marker)
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_bytes(python.read_bytes())
    (venv / "bin" / "python").chmod(0o755)
    _fake_label_studio(venv, VERSION, until=marker)
    done = _install(venv, python)
    assert done.returncode == 0, done.stderr
    assert f"label-studio {VERSION}: ready in {venv}" in done.stdout

    marker.unlink()
    _fake_label_studio(venv, "1.22.0", until=marker)
    done = _install(venv, python)
    assert done.returncode == 1
    assert f"does not report {VERSION}" in done.stderr


def _without_chromium(tmp_path: Path, **env: str) -> dict[str, str]:
    """An environment without chromium, root or apt-get: PATH holds only an `id` of user 1000."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "id").write_text("#!/bin/sh\necho 1000\n", encoding="utf-8")
    (bin_dir / "id").chmod(0o755)
    kept = {k: v for k, v in os.environ.items() if k not in ("CI", "CUQA_CHROMIUM")}
    return {**kept, "PATH": str(bin_dir), **env}


def _install_chromium(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    bash = shutil.which("bash")
    assert bash is not None
    return subprocess.run([bash, str(ROOT / "scripts" / "install-chromium.sh")],
                          capture_output=True, text=True, env=env, timeout=60)


def test_without_root_a_missing_chromium_is_one_line_and_the_browser_test_skips(
    tmp_path: Path,
) -> None:
    """Issue 32: the script said the browser test would skip, yet exited 1, and scripts/test.sh
    (set -e) then ran no test at all."""
    env = _without_chromium(tmp_path)
    done = _install_chromium(env)
    assert done.returncode == 0, done.stderr
    assert not done.stderr and done.stdout.splitlines() == [
        "chromium: not installed, and installing it needs root and apt-get: the browser test "
        "will skip (as root: apt-get install chromium fonts-dejavu-core, or set CUQA_CHROMIUM "
        "to a Chromium)"]
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rs",
         str(ROOT / "tests" / "test_review_browser.py")],
        capture_output=True, text=True, env={**env, "COLUMNS": "400"}, timeout=300, cwd=ROOT,
    )
    assert tested.returncode == 0, tested.stdout
    assert re.search(r"SKIPPED \[1\] .*chromium is not installed \(as root: "
                     r"scripts/install-chromium\.sh, or apt-get install chromium", tested.stdout)


def test_in_ci_a_missing_chromium_fails_the_install(tmp_path: Path) -> None:
    """CI runs the browser test (it fails there without a browser): the install says so first."""
    done = _install_chromium(_without_chromium(tmp_path, CI="true"))
    assert done.returncode == 1
    assert done.stderr.startswith("install-chromium.sh: chromium is missing and this user "
                                  "cannot install it (as root: apt-get install chromium")
