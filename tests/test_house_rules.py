"""The architecture's promises, checked on the code itself so they cannot drift: the README's
stage table is the registry's, the documentation names files that exist and folders git ignores,
and the "never" rules of the house hold."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
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


def test_nothing_below_cli_prints_or_exits() -> None:
    """A contract of pyproject.toml keeps argparse in cli/; a call is no import, so this test."""
    for path in modules(outside=("cli", "testing")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in {"print", "exit"}, f"{path}:{node.lineno}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                assert (node.value.id, node.attr) != ("sys", "exit"), f"{path}:{node.lineno}"


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


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """`lint-imports` on the package and the contracts of pyproject.toml found in `root`."""
    command = "import sys; from importlinter.cli import lint_imports_command as c; sys.exit(c())"
    return subprocess.run([sys.executable, "-c", command, "--no-cache"], cwd=root,
                          capture_output=True, text=True, timeout=120)


def test_a_forbidden_import_breaks_the_contract_that_names_the_rule(tmp_path: Path) -> None:
    """The import rules are the contracts of pyproject.toml (scripts/test.sh runs `lint-imports`).
    On a copy of the package they hold, and one import that breaks a rule fails the command with
    the rule's name."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copytree(PACKAGE, tmp_path / PACKAGE.name,
                    ignore=shutil.ignore_patterns("__pycache__"))
    kept = lint_imports(tmp_path)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    records = tmp_path / PACKAGE.name / "records" / "items.py"
    records.write_text(records.read_text(encoding="utf-8") + "\nimport openai  # noqa\n",
                       encoding="utf-8")
    broken = lint_imports(tmp_path)
    assert broken.returncode == 1
    report = " ".join(broken.stdout.split())  # the report wraps long names
    assert "Only llm/gateway.py imports openai BROKEN" in report
    assert "The records know no model: records/ imports neither llm/ nor a model library " \
        "BROKEN" in report
    assert re.search(r"Contracts: \d+ kept, 2 broken\.", report), report
