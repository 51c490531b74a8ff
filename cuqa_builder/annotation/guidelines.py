"""`annotation/GUIDELINES.md` as the HTML a Label Studio project shows as its instructions.

The only module that imports markdown-it-py. Raw HTML in the Markdown is escaped, not passed on:
the instructions are shown inside Label Studio's own page.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt

from cuqa_builder.annotation.config import annotation_file

GUIDELINES_NAME = "GUIDELINES.md"
HEADING_SHIFT = 2  # "# Title" becomes <h3>: Label Studio's own dialog title stays the largest


def render_markdown(text: str, heading_shift: int = HEADING_SHIFT) -> str:
    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = parser.parse(text)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + heading_shift)}"
    return parser.renderer.render(tokens, parser.options, {})


@cache
def guidelines_html(path: Path | None = None) -> str:
    source = path or annotation_file(GUIDELINES_NAME)
    return render_markdown(source.read_text(encoding="utf-8"))
