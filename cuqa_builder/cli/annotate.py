"""`cuqa-annotate`: the human review of a run's candidates in Label Studio, online or offline.

push/export turn DIR/candidates.jsonl into review tasks (to a server, or to an import file);
pull/import turn a full JSON export back into DIR/cuqa.jsonl (accepted items only) and
DIR/review-report.json. The online and offline paths share the same code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from cuqa_builder import __version__
from cuqa_builder.annotation.client import (
    API_KEY_ENV,
    ReviewServer,
    api_key_from_env,
)
from cuqa_builder.annotation.config import load_labeling_config
from cuqa_builder.annotation.review import review_export
from cuqa_builder.annotation.tasks import Only, build_tasks, select_candidates
from cuqa_builder.cli.shell import add_verbosity_flags, run_command
from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import JsonlError, atomic_write_json, read_jsonl, write_jsonl
from cuqa_builder.records import Candidate
from cuqa_builder.run import CANDIDATES, DATASET, REVIEW_REPORT

URL_ENV = "LABEL_STUDIO_URL"
TASKS_FILE = "label-studio-tasks.json"
EPILOG = f"""\
The API key is read from ${API_KEY_ENV} (never from the command line). --url defaults to
${URL_ENV}. The project defaults to "CuQA <run directory name>".

examples:
  cuqa-annotate push --run runs/2023-04 --url http://localhost:8080
  cuqa-annotate pull --run runs/2023-04 --url http://localhost:8080
  cuqa-annotate export --run runs/2023-04 --only all --out tasks.json
  cuqa-annotate import project-1-at-2024-05-01.json --run runs/2023-04
"""


class CommandError(CuqaError, RuntimeError):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cuqa-annotate",
        description="Review CuQA candidates in Label Studio: push tasks, pull annotations.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    add_verbosity_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    push = commands.add_parser("push", help="send candidates to a Label Studio project")
    _run_argument(push)
    _server_arguments(push)
    _only_argument(push)

    pull = commands.add_parser("pull", help="fetch annotations; write cuqa.jsonl + review report")
    _run_argument(pull)
    _server_arguments(pull)

    export = commands.add_parser("export", help="write a Label Studio import file (offline push)")
    _run_argument(export)
    _only_argument(export)
    export.add_argument("--out", type=Path, help=f"output file (default: DIR/{TASKS_FILE})")

    imp = commands.add_parser("import", help="read a Label Studio JSON export (offline pull)")
    imp.add_argument("file", type=Path, help="full JSON export of the project (not JSON_MIN)")
    _run_argument(imp)
    return parser


def _run_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", type=Path, required=True, metavar="DIR",
                        help=f"run directory holding {CANDIDATES}")


def _server_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--url", default=os.environ.get(URL_ENV),
                        help=f"Label Studio base URL (default: ${URL_ENV})")
    parser.add_argument("--project", help='project title (default: "CuQA <run directory name>")')


def _only_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", choices=("passed", "all"), default="passed",
                        help="candidates that passed validation, or all (default: passed)")


def read_candidates(run: Path) -> list[Candidate]:
    path = run / CANDIDATES
    if not path.is_file():
        raise CommandError(f"{path} does not exist: run cuqa-build on {run} first")
    try:
        return read_jsonl(path, Candidate)
    except JsonlError as exc:  # names the file and line
        raise CommandError(str(exc)) from None


def review_tasks(run: Path, only: Only) -> list[dict[str, Any]]:
    """What push and export send: one task per selected candidate."""
    return build_tasks(select_candidates(read_candidates(run), only), load_labeling_config())


def apply_review(run: Path, export: Any) -> str:
    """What pull and import do with an export: write the accepted items and the report."""
    outcome = review_export(export, read_candidates(run), load_labeling_config())
    written = write_jsonl(run / DATASET, outcome.items)
    atomic_write_json(run / REVIEW_REPORT, outcome.report.model_dump(mode="json"))
    return (f"{outcome.report.summary()}\nwrote {written} accepted items to {run / DATASET} "
            f"and the report to {run / REVIEW_REPORT}")


def project_title(args: argparse.Namespace) -> str:
    return args.project or f"CuQA {args.run.resolve().name}"


def server(args: argparse.Namespace) -> ReviewServer:
    if not args.url:
        raise CommandError(f"--url is required (or set ${URL_ENV})")
    review_server = ReviewServer(args.url, api_key_from_env())
    review_server.check_access()
    return review_server


def push(args: argparse.Namespace) -> str:
    tasks = review_tasks(args.run, args.only)
    review_server = server(args)
    title = project_title(args)
    result = review_server.push(title, load_labeling_config(), tasks)
    state = "created" if result.created_project else "existing"
    return (f"pushed {result.imported} new tasks to {state} project {title!r} "
            f"(id {result.project_id}); {result.skipped} were already there\n"
            f"review them at {review_server.url}/projects/{result.project_id}/data")


def pull(args: argparse.Namespace) -> str:
    review_server = server(args)
    project_id = review_server.project_id(project_title(args))
    return apply_review(args.run, review_server.export(project_id))


def export(args: argparse.Namespace) -> str:
    tasks = review_tasks(args.run, args.only)
    out = args.out or args.run / TASKS_FILE
    atomic_write_json(out, tasks)
    return (f"wrote {len(tasks)} tasks to {out}; import it into a project set up with "
            "annotation/labeling_config.xml")


def import_export(args: argparse.Namespace) -> str:
    try:
        exported = json.loads(args.file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"{args.file} does not exist") from None
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{args.file} is not JSON: {exc}") from None
    return apply_review(args.run, exported)


COMMANDS = {"push": push, "pull": pull, "export": export, "import": import_export}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def annotate_command(args: argparse.Namespace) -> int:
        print(COMMANDS[args.command](args))
        return 0

    return run_command("cuqa-annotate", args, annotate_command)


if __name__ == "__main__":
    sys.exit(main())
