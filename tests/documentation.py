"""The documentation as the tests read it: the short README.md and the pages of docs/ (the MkDocs
site). A test that keeps a text true reads the page that holds it."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def docs_page(name: str) -> str:
    """One page of docs/, e.g. `docs_page("batch.md")`."""
    return (DOCS / name).read_text(encoding="utf-8")


def every_page() -> dict[str, str]:
    """README.md and every page of docs/, by path relative to the checkout."""
    files = [README, *sorted(DOCS.glob("*.md"))]
    return {path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in files}
