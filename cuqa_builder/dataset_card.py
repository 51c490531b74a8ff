"""A release's figures (`stats.json`) and its dataset card, a Markdown template filled from them.

The card's text lives in `templates/dataset_card.md.j2`; this module only supplies typed data and
a few filters. Jinja2 is used here and nowhere else.
"""

from __future__ import annotations

from datetime import date
from importlib import resources

import jinja2
from pydantic import BaseModel, Field

from cuqa_builder import __version__
from cuqa_builder.annotation.review import ReviewReport
from cuqa_builder.run import DATASET, MANIFEST, ValidationInfo
from cuqa_builder.wiki.wikitext import revision_url

SCHEMA = "schema.json"
STATS = "stats.json"
CARD = "README.md"
PAGES_LISTED = 25  # the card links this many source pages; stats.json lists them all
_TEMPLATE = "dataset_card.md.j2"


class ReleaseWindow(BaseModel):
    cutoff: str = Field(description="the knowledge cutoff as given to cuqa-build")
    known_until: date = Field(description="last day the target model is assumed to know")
    first_unknown_day: date
    until: date = Field(description="last day of the unknown events")


class ReleaseStats(BaseModel):
    """`stats.json`: the figures of the dataset card."""

    name: str
    released: date
    tool: str
    items: int
    window: ReleaseWindow
    by_type: dict[str, int]
    by_difficulty: dict[str, int]
    by_month: dict[str, int]
    by_category: dict[str, int]
    by_review_status: dict[str, int]
    generator_models: list[str]
    prompts: dict[str, list[str]] = Field(description="template name -> sha256 hashes used")
    seed: int | None
    validation: ValidationInfo | None = Field(description="checks' limits, probe model and judge")
    checks: list[str] = Field(description="what every automatic check required, in words")
    source_pages: dict[str, int | None] = Field(description="page title -> revision used")
    failed_automatic_checks: int | None = Field(
        description="released items whose candidate failed a check or probe (kept by review); "
        "None when the run has no candidates.jsonl"
    )
    review: ReviewReport | None


def _size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < bound:
            return label
    return "100K<n<1M"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
        keep_trailing_newline=True, autoescape=False,  # Markdown, not HTML
    )
    env.filters.update(
        size_category=_size_category,
        cell=lambda text: str(text).replace("|", "\\|").replace("\n", " "),
        percent=lambda share: f"{share:.0%}",
        code=lambda text: f"`{text}`",
        prefix=lambda sha: sha[:16],
        revision_url=lambda revid, title: revision_url(title, revid),
    )
    return env


def render_card(stats: ReleaseStats, has_manifest: bool, prompt_sources: dict[str, str]) -> str:
    """The card; `prompt_sources` maps each template to its cited source (or a note)."""
    template = _environment().from_string(
        (resources.files("cuqa_builder") / "templates" / _TEMPLATE).read_text("utf-8")
    )
    pages = list(stats.source_pages.items())
    return template.render(
        stats=stats,
        has_manifest=has_manifest,
        prompt_sources=prompt_sources,
        listed_pages=pages[:PAGES_LISTED],
        more_pages=len(pages) - PAGES_LISTED,
        files={"dataset": DATASET, "schema": SCHEMA, "stats": STATS, "manifest": MANIFEST},
        version=__version__,
    )
