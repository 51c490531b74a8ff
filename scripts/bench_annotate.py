"""Time `cuqa-annotate push` and `pull` of 1,000 tasks against a real Label Studio server.

Starts a server from `$CUQA_LS_VENV` the way the test fixture does (or uses `--url` with
$LABEL_STUDIO_API_KEY), writes 1,000 candidates to a temporary run directory, then times:
push (bulk import), a second push (idempotent: nothing new) and pull (full export + review +
cuqa.jsonl) of a project whose 1,000 tasks carry two annotations each (3 in 4 tasks accepted by
both). Run from the repository root:

    python scripts/bench_annotate.py [--tasks 1000] [--url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from bench_common import bench_arguments

from cuqa_builder.annotation.client import ProjectSettings, ReviewServer
from cuqa_builder.annotation.config import load_labeling_config
from cuqa_builder.annotation.guidelines import guidelines_html
from cuqa_builder.cli.annotate import main as annotate
from cuqa_builder.cli.annotate import review_tasks
from cuqa_builder.jsonio import write_jsonl
from cuqa_builder.testing.annotate_fixtures import accept, candidate, reject
from cuqa_builder.testing.labelstudio_server import start_label_studio


def timed(action: Callable[[], int]) -> float:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        status = action()
    if status != 0:
        raise SystemExit(f"bench_annotate: the command failed (exit {status})")
    return time.perf_counter() - start


@contextlib.contextmanager
def server(url: str | None, data_dir: Path) -> Iterator[tuple[str, str]]:
    if url:
        yield url, os.environ["LABEL_STUDIO_API_KEY"]
        return
    started = time.perf_counter()
    with start_label_studio(data_dir) as ls:
        print(f"server ready in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        yield ls.url, ls.token


def annotated_project(run: Path, url: str, token: str, title: str) -> float:
    """A project holding the same tasks, each with two annotations, imported in bulk.

    Creating 2,000 annotations one API call at a time takes minutes on a busy machine and says
    nothing about pull; an inline import gives the export the same annotation records. They all
    come from the importing user, so pull decides them with --allow-under-annotated.
    """
    start = time.perf_counter()
    tasks = review_tasks(run, "all")
    for n, task in enumerate(tasks):
        result = reject("unnatural") if n % 4 == 0 else accept()
        task["annotations"] = [{"result": result, "lead_time": 15.0}] * 2
    review_server = ReviewServer(url, token)
    settings = ProjectSettings(load_labeling_config(), guidelines_html(), annotators=2)
    project_id, _, _ = review_server.ensure_project(title, settings)
    review_server.import_tasks(project_id, tasks)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--url", help="use this server (API key from $LABEL_STUDIO_API_KEY)")
    args = bench_arguments(parser, tasks=5)

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        write_jsonl(run / "candidates.jsonl", [candidate(n) for n in range(args.tasks)])
        with server(args.url, Path(tmp) / "label-studio") as (url, token):
            os.environ["LABEL_STUDIO_API_KEY"] = token
            title = f"bench {time.time_ns()}"
            push = ["push", "--run", str(run), "--url", url, "--project", title]
            pull = ["pull", "--run", str(run), "--url", url, "--project", f"{title} annotated",
                    "--allow-under-annotated"]
            figures = {
                "tasks": args.tasks,
                "push_s": timed(lambda: annotate(push)),
                "push_again_s": timed(lambda: annotate(push)),
                "annotated_setup_s": annotated_project(run, url, token, f"{title} annotated"),
                "pull_s": timed(lambda: annotate(pull)),
            }
        accepted = sum(1 for _ in (run / "cuqa.jsonl").open())
    figures["accepted"] = accepted
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v
                      for k, v in figures.items()}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
