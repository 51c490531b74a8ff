"""The architecture's promises, checked on the code itself so they cannot drift: the README's
stage table is the registry's, and the "never" rules of the house hold."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cuqa_builder.stages.registry import STAGES, markdown_table

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cuqa_builder"


def modules(*, outside: tuple[str, ...] = ()) -> list[Path]:
    return [
        path for path in sorted(PACKAGE.rglob("*.py"))
        if not any(path.relative_to(PACKAGE).parts[0] == part for part in outside)
    ]


def imported_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_the_readme_stage_table_is_the_registry() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(
        r"<!-- stage-registry:start -->\n(.*?)\n<!-- stage-registry:end -->", readme, re.S
    )
    assert found, "README.md lost its stage-registry markers"
    assert found.group(1) == markdown_table()


def test_every_stage_module_exists_and_has_a_run() -> None:
    for stage in STAGES:
        source = (PACKAGE / "stages" / f"{stage.name}.py").read_text(encoding="utf-8")
        assert "\ndef run(ctx: RunContext) -> str:" in source, stage.name


def test_nothing_below_cli_parses_arguments_prints_or_exits() -> None:
    for path in modules(outside=("cli", "testing")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert "argparse" not in imported_names(path), path
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"print", "exit"}, f"{path}:{node.lineno}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                assert (node.value.id, node.attr) != ("sys", "exit"), f"{path}:{node.lineno}"


def test_stages_never_import_the_cli() -> None:
    for path in modules(outside=("cli",)):
        assert not any(name.startswith("cuqa_builder.cli") for name in imported_names(path)), path


def test_only_the_gateway_imports_openai() -> None:
    importers = {
        path.relative_to(PACKAGE).as_posix() for path in modules()
        if any(name == "openai" or name.startswith("openai.") for name in imported_names(path))
    }
    assert importers == {"llm/gateway.py"}


def test_only_the_run_lock_imports_filelock() -> None:
    importers = {
        path.relative_to(PACKAGE).as_posix() for path in modules()
        if any(name.split(".")[0] == "filelock" for name in imported_names(path))
    }
    assert importers == {"run_lock.py"}
