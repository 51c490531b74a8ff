"""The architecture's promises, checked on the code itself so they cannot drift: the README's
stage table is the registry's, the documentation names files that exist and folders git ignores,
and the "never" rules of the house hold."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cuqa_builder.stages.registry import STAGES, markdown_table
from tests.documentation import README, every_page

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
    """The README's pipeline map, which the docs' overview includes, is the registry's table."""
    readme = README.read_text(encoding="utf-8")
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


def test_prompts_and_annotation_files_live_at_the_top_level_only() -> None:
    """The design card's layout: people find the templates in `prompts/` and the labeling config
    and guidelines in `annotation/`; the package folders of those names hold only their code."""
    templates = [path for path in (ROOT / "prompts").iterdir() if path.is_file()]
    assert templates and all(path.suffix == ".txt" or path.name.endswith(".reply.json")
                             for path in templates)
    for schema in (ROOT / "prompts").glob("*.reply.json"):  # a reply format beside its template
        assert schema.with_name(schema.name.removesuffix(".reply.json") + ".txt").is_file()
    annotation = sorted(path.name for path in (ROOT / "annotation").iterdir())
    assert annotation == ["GUIDELINES.md", "labeling_config.xml"]
    for folder in ("prompts", "annotation"):
        data = [p for p in (PACKAGE / folder).iterdir() if p.is_file() and p.suffix != ".py"]
        assert data == [], f"move {data} to the top-level {folder}/ folder"


def test_the_docs_name_prompt_and_annotation_files_where_they_are() -> None:
    pattern = r"[\w/]*\b(?:prompts|annotation)/[\w.]+\.(?:txt|md|xml)\b"
    named = {(path, name) for path, text in every_page().items()
             for name in re.findall(pattern, text)}
    assert named, "the docs no longer name a template or an annotation file"
    assert sorted((path, name) for path, name in named if not (ROOT / name).is_file()) == []


def test_only_the_run_lock_imports_filelock() -> None:
    importers = {
        path.relative_to(PACKAGE).as_posix() for path in modules()
        if any(name.split(".")[0] == "filelock" for name in imported_names(path))
    }
    assert importers == {"run_lock.py"}


def test_only_the_html_reader_imports_lxml() -> None:
    importers = {
        path.relative_to(PACKAGE).as_posix() for path in modules()
        if any(name == "lxml" or name.startswith("lxml.") for name in imported_names(path))
    }
    assert importers == {"wiki/html.py"}


def test_following_the_docs_leaves_the_checkout_clean() -> None:
    """Every folder a command of the README or the docs writes into (`--out`, `--batch-files`, a
    release's `output/NAME/`, and `site/` of `mkdocs build`) is ignored by git, so a newcomer's
    checkout shows nothing untracked."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    commands = [line for text in every_page().values()
                for block in re.findall(r"```bash\n(.*?)```", text, re.S)
                for line in block.replace("\\\n", " ").splitlines() if "--estimate" not in line]
    written = {path for line in commands
               for path in re.findall(r"--(?:out|batch-files)\s+(\S+)", line)}
    written |= {f"output/{name.strip(chr(34))}" for line in commands
                for name in re.findall(r"--name\s+(\S+)", line)}
    assert {"runs/sample", "evals/table1", "probes/gpt-4o", "rounds", "output/cuqa-2023-04"} \
        <= written
    written.add("site")  # `mkdocs build` without --site-dir
    for path in sorted(written):
        ignored = subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT)
        assert ignored.returncode == 0, f"{path} would show as untracked"
    tracked = subprocess.run(["git", "check-ignore", "-q", "output/README.md"], cwd=ROOT)
    assert tracked.returncode == 1  # the folder's own README stays in the repository
