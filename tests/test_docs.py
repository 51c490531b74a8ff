"""The documentation: a README short enough for a newcomer that links every page of the MkDocs
site in docs/, a strict build of that site that fails on a broken link or anchor, a page left out
of the nav or a lost README section, and the README's example item kept what the quick start
composes."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

from cuqa_builder.cli.build import main
from cuqa_builder.records.items import CuqaItem
from tests.documentation import DOCS, README, ROOT, docs_page

README_LINES = 250
# The README's link to a page of the site, with an optional anchor: [text](docs/NAME.md#anchor)
DOCS_LINK = re.compile(r"\]\(docs/([\w-]+\.md)(?:#([\w-]+))?\)")


class _MkDocsLoader(yaml.SafeLoader):
    """mkdocs.yml names Python objects (`!!python/name:` for the Mermaid fence): read as text."""


_MkDocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix)


def nav_pages() -> set[str]:
    def pages(entries: list) -> list[str]:
        found: list[str] = []
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            found += pages(value) if isinstance(value, list) else [value]
        return found

    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), _MkDocsLoader)
    return set(pages(config["nav"]))


def heading_anchors(text: str) -> set[str]:
    """The ids MkDocs (and GitHub) give the headings of a page, outside code blocks."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return {slugify(title.replace("`", ""), "-")
            for title in re.findall(r"^#{1,6} (.+)$", prose, re.M)}


def build_site(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    # Not --quiet: it hides the warnings that --strict counts, and the build then passes.
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=project, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )


def readme_section(name: str) -> str:
    """A section the site includes from the README (`<!-- --8<-- [start:NAME] -->` ... end)."""
    found = re.search(rf"<!-- --8<-- \[start:{name}\] -->\n(.*?)<!-- --8<-- \[end:{name}\] -->",
                      README.read_text(encoding="utf-8"), re.S)
    assert found, f"README.md lost its {name} section"
    return found.group(1)


def readme_item() -> dict:
    """The README's example item: one line of a released `cuqa.jsonl`, shown over several."""
    block = readme_section("item")
    return json.loads(block.removeprefix("```json\n").removesuffix("```\n"))


def test_the_readme_is_short_and_links_every_page_of_the_site() -> None:
    readme = README.read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= README_LINES
    links = DOCS_LINK.findall(readme)
    on_disk = {path.name for path in DOCS.glob("*.md")}
    assert {name for name, _ in links} == nav_pages() == on_disk
    for name, anchor in links:
        assert not anchor or anchor in heading_anchors(docs_page(name)), f"docs/{name}#{anchor}"


def test_the_site_builds_strictly_with_the_readme_sections_it_includes(tmp_path: Path) -> None:
    done = build_site(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr
    overview = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "<td><code>stages/release.py</code></td>" in overview  # the stage table
    dataset = (tmp_path / "site" / "dataset" / "index.html").read_text(encoding="utf-8")
    assert readme_item()["id"] in dataset  # the example item


FAULTS = {
    "a link to no page": ("docs/models.md", "\n[gone](gone.md)\n",
                          "contains a link 'gone.md', but the target is not found"),
    "an anchor no page has": ("docs/models.md", "\n[gone](recipes.md#gone)\n",
                              "does not contain an anchor '#gone'"),
    "a page left out of the nav": ("docs/extra.md", "# Extra\n",
                                   "exist in the docs directory, but are not included in the"),
}


@pytest.mark.parametrize("fault", [*FAULTS, "a README section the site includes, lost"])
def test_the_strict_build_fails_on_what_drifts(tmp_path: Path, fault: str) -> None:
    project = tmp_path / "project"
    shutil.copytree(DOCS, project / "docs")
    for name in ("mkdocs.yml", "README.md"):
        shutil.copy2(ROOT / name, project / name)
    if fault in FAULTS:
        name, added, expected = FAULTS[fault]
        with (project / name).open("a", encoding="utf-8") as file:
            file.write(added)
    else:
        readme = project / "README.md"
        readme.write_text(readme.read_text(encoding="utf-8").replace("[start:licence]", ""),
                          encoding="utf-8")
        expected = "Snippet section 'licence' could not be located"
    done = build_site(project, tmp_path / "site")
    assert done.returncode != 0 and expected in done.stdout + done.stderr, done.stderr


def test_the_readme_item_is_what_the_quick_start_composes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quick start's own command, stage by stage up to validate, on the embedded model (which
    composes from structure and is asked nothing but the checks: `--check-model none` leaves them
    out, so the model is never loaded). The README's item is one line of its `cuqa.jsonl`."""
    joined = readme_section("quick-start").replace("\\\n", " ")  # its wrapped lines
    (command,) = re.findall(r"^cuqa-build (--cutoff .+)$", joined, re.M)
    arguments = shlex.split(command)
    arguments[arguments.index("--out") + 1] = str(tmp_path / "sample")
    monkeypatch.chdir(ROOT)  # the command's --source is relative to the checkout
    for stage in ("events", "generate", "ground", "validate"):
        assert main([*arguments, "--stage", stage, "--llm", "local", "--check-model", "none",
                     "-q"]) == 0, capsys.readouterr().err
    lines = (tmp_path / "sample" / "cuqa.jsonl").read_text(encoding="utf-8").splitlines()
    shown = CuqaItem.model_validate(readme_item()).model_dump(mode="json")
    now = "\n".join(lines)
    assert shown in [json.loads(line) for line in lines], f"the quick start composes now:\n{now}"
