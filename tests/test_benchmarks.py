"""Every benchmark in `scripts/` runs, at a tiny size (`--tiny`), so that none rots unseen: a
renamed option or a changed stage breaks this test instead of the next measurement. Their figures
are not judged here (speed targets live in the benchmarks themselves); the one that needs Label
Studio uses the session's server, the one that needs a real embedded model the small one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = sorted((ROOT / "scripts").glob("bench_*.py"))
NEEDS = {  # benchmark -> the marker of what it needs beyond the package
    "bench_annotate": pytest.mark.labelstudio,
    "bench_yield": pytest.mark.localmodel,
    "bench_quickstart": pytest.mark.localmodel,
}
SMALL = "smollm2-135m-instruct-q4_1"


def _run(script: Path, *extra: str, env: dict[str, str] | None = None) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--tiny", *extra], capture_output=True, text=True,
        cwd=ROOT, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )
    assert done.returncode == 0, f"{script.name}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_every_benchmark_is_run_here() -> None:
    assert {p.stem for p in BENCHMARKS} >= {"bench_validate", "bench_gateway", *NEEDS}


@pytest.mark.parametrize("script", [
    pytest.param(p, id=p.stem, marks=[NEEDS[p.stem]] if p.stem in NEEDS else [])
    for p in BENCHMARKS
])
def test_a_benchmark_runs_at_a_tiny_size(script: Path, request: pytest.FixtureRequest,
                                         tmp_path: Path) -> None:
    if script.stem == "bench_annotate":
        server = request.getfixturevalue("label_studio")
        _run(script, "--url", server.url, env={"LABEL_STUDIO_API_KEY": server.token})
    elif script.stem == "bench_quickstart":
        models = request.getfixturevalue("small_model")
        _run(script, "--base", str(tmp_path), env={"CUQA_MODELS_DIR": str(models)})
    elif script.stem == "bench_yield":
        models = request.getfixturevalue("small_model")
        _run(script, "--base", str(tmp_path), "--llm", f"local:{SMALL}",
             env={"CUQA_MODELS_DIR": str(models)})
    else:
        _run(script)
