"""Benchmark of the README's quick start as a new user meets it (issue 40): from a fresh
virtualenv and empty caches to the run's summary, with one busy loop beside it on the machine.

Steps, each timed: `python3 -m venv`, `pip install` of this checkout, `cuqa-models pull` of the
embedded model (what the first run would download), and the README's own `cuqa-build` command
(read from its quick-start section). The busy loop is a process of its own, started before the
first step and ended by its PID after the last. Caches (pip's, the models') start empty in
BASE unless `--keep-caches`, which uses the user's own (a warm machine).

    python scripts/bench_quickstart.py [--base DIR] [--keep-caches] [--target-s 240]
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench_common import bench_arguments, judged

ROOT = Path(__file__).resolve().parents[1]
BUSY_LOOP = "while True:\n    pass\n"


def quick_start_arguments() -> list[str]:
    """The README quick start's `cuqa-build` arguments (its wrapped lines joined)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("[start:quick-start]", 1)[1].split("[end:quick-start]", 1)[0]
    (command,) = re.findall(r"^cuqa-build (--cutoff .+)$", section.replace("\\\n", " "), re.M)
    return shlex.split(command)


def timed(label: str, argv: Sequence[str], env: dict[str, str], times: dict[str, float]) -> None:
    started = time.perf_counter()
    print(f"{label}: {shlex.join(argv)}", flush=True)
    subprocess.run(argv, env=env, cwd=ROOT, check=True)
    times[label] = time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--base", type=Path, help="working folder (default: a temporary one)")
    parser.add_argument("--keep-caches", action="store_true",
                        help="use the user's pip and model caches instead of empty ones")
    parser.add_argument("--target-s", type=float, default=240.0)
    parser.add_argument("--model", default=None, help="embedded model (default: the default)")
    parser.add_argument("--extra", default="", help="more cuqa-build flags")
    parser.add_argument("--offline-install", action="store_true",
                        help="install this checkout alone, its dependencies taken from this "
                        "Python's (no registry asked)")
    args = bench_arguments(parser, argv, model="smollm2-135m-instruct-q4_1", keep_caches=True,
                           offline_install=True, extra="--check-model none -q")
    base = args.base or Path(tempfile.mkdtemp(prefix="bench-quickstart-"))
    venv, run = base / "venv", base / "runs" / "sample"
    env = {**os.environ}
    if not args.keep_caches:  # a fresh home's caches: nothing downloaded before
        env |= {"PIP_CACHE_DIR": str(base / "pip-cache"),
                "CUQA_MODELS_DIR": str(base / "cache" / "models")}
    env.pop("VIRTUAL_ENV", None)
    if args.offline_install:  # the dependencies are this Python's: no registry asked
        env["PYTHONPATH"] = os.pathsep.join(path for path in sys.path if path)
    times: dict[str, float] = {}
    busy = subprocess.Popen([sys.executable, "-c", BUSY_LOOP])
    print(f"busy loop beside the quick start: pid {busy.pid}", flush=True)
    try:
        timed("venv", [sys.executable, "-m", "venv", str(venv)], env, times)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet",
               "--disable-pip-version-check"]
        timed("pip install", [*pip, *(["--no-deps", "--no-build-isolation"]
                                      if args.offline_install else []), str(ROOT)], env, times)
        model = [args.model] if args.model else ["qwen2.5-coder-1.5b-instruct-q4_k_m"]
        timed("model download", [str(venv / "bin" / "cuqa-models"), "pull", *model], env, times)
        build = [str(venv / "bin" / "cuqa-build"), *quick_start_arguments(),
                 *(["--llm", f"local:{args.model}"] if args.model else []),
                 *shlex.split(args.extra)]
        build[build.index("--out") + 1] = str(run)
        timed("cuqa-build", build, env, times)
    finally:
        busy.kill()  # the busy loop is ours: ended by its own PID
        busy.wait()
    total = sum(times.values())
    print("| step | seconds |\n|---|---|")
    for label, seconds in times.items():
        print(f"| {label} | {seconds:.0f} |")
    print(f"| total | {total:.0f} (target <= {args.target_s:.0f}) |")
    print("caches:", "the user's own" if args.keep_caches else f"empty, in {base}")
    return judged(total <= args.target_s, args)


if __name__ == "__main__":
    sys.exit(main())
