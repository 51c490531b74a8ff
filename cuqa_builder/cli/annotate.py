"""`cuqa-annotate`: the human review of a run's candidates in Label Studio, online or offline.

push/export turn DIR/candidates.jsonl into review tasks (to a server, or to an import file);
pull/import turn a full JSON export back into DIR/cuqa.jsonl (accepted items only) and
DIR/review-report.json. The online and offline paths share the same code. A review that would
empty or more than halve the reviewed items of an existing cuqa.jsonl is refused without --force.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from cuqa_builder import __version__
from cuqa_builder.annotation.client import (
    API_KEY_ENV,
    ProjectSettings,
    ReviewServer,
    api_key_from_env,
)
from cuqa_builder.annotation.config import load_labeling_config
from cuqa_builder.annotation.guidelines import guidelines_html
from cuqa_builder.annotation.review import (
    ReviewOutcome,
    ReviewRules,
    review_export,
)
from cuqa_builder.annotation.tasks import (
    DEFAULT_ANNOTATORS,
    Only,
    SourceLinks,
    build_tasks,
    select_candidates,
)
from cuqa_builder.cli.flags import add_wait_for_lock_flag, positive_int
from cuqa_builder.cli.shell import CommandParser, add_verbosity_flags, run_command
from cuqa_builder.errors import CuqaError
from cuqa_builder.jsonio import JsonlError, atomic_write_json, read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.run import (
    CANDIDATES,
    DATASET,
    MANIFEST,
    REVIEW_REPORT,
    Manifest,
    load_run_info,
    refuse_shrinking,
)
from cuqa_builder.run_lock import run_lock
from cuqa_builder.validation.limits import Limits

PROG = "cuqa-annotate"
URL_ENV = "LABEL_STUDIO_URL"
TASKS_FILE = "label-studio-tasks.json"
EPILOG = f"""\
The API key is read from ${API_KEY_ENV} (never from the command line). --url defaults to
${URL_ENV}. The project defaults to "CuQA <run directory name>".

Each task goes to --annotators people (default {DEFAULT_ANNOTATORS}): one person's click never
releases an item, and disagreement shows. pull and import leave an item with fewer judgements
(accept or reject) than that unaccepted unless --allow-under-annotated.

pull and import write into the run: while another command (cuqa-build, say) writes the same
run they are refused, or wait with --wait-for-lock.

examples:
  cuqa-annotate push --run runs/2023-04 --url http://localhost:8080 --annotators 3
  cuqa-annotate pull --run runs/2023-04 --url http://localhost:8080
  cuqa-annotate export --run runs/2023-04 --only all --out tasks.json
  cuqa-annotate import project-1-at-2024-05-01.json --run runs/2023-04
"""


class CommandError(CuqaError, RuntimeError):
    pass


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog=PROG,
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
    _annotators_argument(push)

    pull = commands.add_parser("pull", help="fetch annotations; write cuqa.jsonl + review report")
    _run_argument(pull)
    _server_arguments(pull)
    _review_arguments(pull)

    export = commands.add_parser("export", help="write a Label Studio import file (offline push)")
    _run_argument(export)
    _only_argument(export)
    _annotators_argument(export)
    export.add_argument("--out", type=Path, help=f"output file (default: DIR/{TASKS_FILE})")

    imp = commands.add_parser("import", help="read a Label Studio JSON export (offline pull)")
    imp.add_argument("file", type=Path, help="full JSON export of the project (not JSON_MIN)")
    _run_argument(imp)
    _review_arguments(imp)
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


def _annotators_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--annotators", type=positive_int, default=DEFAULT_ANNOTATORS, metavar="N",
                        help="independent judgements each task needs, the project's overlap "
                        f"(default: {DEFAULT_ANNOTATORS}: one person's click never releases an "
                        "item, and disagreement becomes visible)")


def _review_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--allow-under-annotated", action="store_true",
                        help="decide items with fewer judgements than their task asks for by "
                        "the judgements they have (default: leave them unaccepted, reported)")
    parser.add_argument("--force", action="store_true",
                        help=f"write {DATASET} even when it would empty or more than halve the "
                        "reviewed items it holds")
    add_wait_for_lock_flag(parser)



def read_candidates(run: Path) -> list[Candidate]:
    path = run / CANDIDATES
    if not path.is_file():
        raise CommandError(f"{path} does not exist: run cuqa-build on {run} first")
    try:
        return read_jsonl(path, Candidate)
    except JsonlError as exc:  # names the file and line
        raise CommandError(str(exc)) from None


def review_tasks(
    run: Path, only: Only, annotators: int = DEFAULT_ANNOTATORS
) -> list[dict[str, Any]]:
    """What push and export send: one task per selected candidate."""
    candidates = select_candidates(read_candidates(run), only)
    return build_tasks(candidates, source_links(run), annotators)


def source_links(run: Path) -> SourceLinks:
    """Revision links only for pages the run fetched itself: a local snapshot's revision ids
    are not checked against any wiki (the shipped example's are placeholders)."""
    path = run / MANIFEST
    try:
        manifest = Manifest.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return SourceLinks.unverified("a run without a page manifest")
    except (OSError, ValueError):
        return SourceLinks.unverified("a run whose page manifest cannot be read")
    if manifest.index_url is None or manifest.api is None:
        return SourceLinks.unverified(f"the local snapshot {manifest.snapshot}")
    return SourceLinks.fetched(manifest.index_url, manifest.api)


def run_limits(run: Path) -> Limits:
    """The length limits the run was validated with (run.json), which edits must meet too."""
    validation = load_run_info(run).validation
    return validation.limits if validation is not None else Limits()


def apply_review(run: Path, export: Any, rules: ReviewRules, force: bool = False) -> str:
    """What pull and import do with an export: write the accepted items and the report."""
    rules = replace(rules, limits=run_limits(run))
    outcome = review_export(export, read_candidates(run), load_labeling_config(), rules)
    refuse_losing_reviewed_items(run / DATASET, outcome, force)
    written = write_jsonl(run / DATASET, outcome.items)
    atomic_write_json(run / REVIEW_REPORT, outcome.report.model_dump(mode="json"))
    return (f"{outcome.report.summary()}\nwrote {written} accepted items to {run / DATASET} "
            f"and the report to {run / REVIEW_REPORT}")


def refuse_losing_reviewed_items(path: Path, outcome: ReviewOutcome, force: bool) -> None:
    """Reviewed items are people's work: a new review may not empty or halve them. Items that
    only passed the checks (written by validate) may be replaced by fewer, but not by none."""
    if force:
        return
    try:
        old = read_jsonl(path, CuqaItem)
    except JsonlError as exc:
        raise CommandError(f"{exc}; move it aside or pass --force") from None
    reviewed = [item.id for item in old if item.review.status != "unreviewed"]
    new = [item.id for item in outcome.items]
    baseline = reviewed or ([item.id for item in old] if not new else [])
    kept = set(new)
    refuse_shrinking(
        path, len(baseline), len(new), "reviewed items" if reviewed else "items", force,
        dropped=[item for item in baseline if item not in kept],
    )


def project_title(args: argparse.Namespace) -> str:
    return args.project or f"CuQA {args.run.resolve().name}"


def server(args: argparse.Namespace) -> ReviewServer:
    if not args.url:
        raise CommandError(f"--url is required (or set ${URL_ENV})")
    review_server = ReviewServer(args.url, api_key_from_env())
    review_server.check_access()
    return review_server


def push(args: argparse.Namespace) -> str:
    tasks = review_tasks(args.run, args.only, args.annotators)
    review_server = server(args)
    title = project_title(args)
    settings = ProjectSettings(load_labeling_config(), guidelines_html(), args.annotators)
    result = review_server.push(title, settings, tasks)
    state = "created" if result.created_project else "existing"
    lines = [
        f"pushed {result.imported} new tasks to {state} project {title!r} "
        f"(id {result.project_id}); {result.skipped} were already there",
        f"each task goes to {args.annotators} annotators; the guidelines are the project's "
        "instructions, shown before the first task",
    ]
    if result.annotators_before not in (None, args.annotators):
        lines.append(f"the project asked for {result.annotators_before} annotations per task "
                     f"before; now {args.annotators}")
    lines.append(f"review them at {review_server.url}/projects/{result.project_id}/data")
    return "\n".join(lines)


def review_rules(args: argparse.Namespace, default_annotators: int) -> ReviewRules:
    return ReviewRules(default_annotators=default_annotators,
                       allow_under_annotated=args.allow_under_annotated)


def pull(args: argparse.Namespace) -> str:
    review_server = server(args)
    project_id = review_server.project_id(project_title(args))
    # Tasks pushed before their meta said how many judgements they need: the project's overlap.
    rules = review_rules(args, review_server.project_annotators(project_id))
    return apply_review(args.run, review_server.export(project_id), rules, args.force)


def export(args: argparse.Namespace) -> str:
    tasks = review_tasks(args.run, args.only, args.annotators)
    out = args.out or args.run / TASKS_FILE
    atomic_write_json(out, tasks)
    return (f"wrote {len(tasks)} tasks to {out}; import it into a project set up with "
            "the shipped labeling config, GUIDELINES.md as its instructions "
            f"(shown before labeling) and {args.annotators} annotations per task")


def import_export(args: argparse.Namespace) -> str:
    try:
        exported = json.loads(args.file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CommandError(f"{args.file} does not exist") from None
    except OSError as exc:
        raise CommandError(f"cannot read {args.file}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"{args.file} is not JSON: {exc}") from None
    return apply_review(args.run, exported, review_rules(args, DEFAULT_ANNOTATORS), args.force)


COMMANDS = {"push": push, "pull": pull, "export": export, "import": import_export}
WRITING_THE_RUN = ("pull", "import")  # they write DIR/cuqa.jsonl: one at a time, as cuqa-build


def run_lock_of(args: argparse.Namespace) -> AbstractContextManager[None]:
    if args.command not in WRITING_THE_RUN:
        return nullcontext()
    if not args.run.is_dir():
        raise CommandError(f"{args.run} is not a run directory: run cuqa-build --out {args.run} "
                           "first")
    return run_lock(args.run, PROG, wait=args.wait_for_lock)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def annotate_command(args: argparse.Namespace) -> int:
        with run_lock_of(args):
            print(COMMANDS[args.command](args))
        return 0

    return run_command(PROG, args, annotate_command)


if __name__ == "__main__":
    sys.exit(main())
