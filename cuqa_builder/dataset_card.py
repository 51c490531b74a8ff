"""A release's figures (`stats.json`) and its dataset card, a Markdown template filled from them
(and the `CHANGELOG.md` that `cuqa-build diff` writes, from its own template).

The card's text lives in `templates/dataset_card.md.j2`; this module only supplies typed data and
a few filters. Jinja2 is used here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from importlib import resources

import jinja2
from pydantic import BaseModel, Field

from cuqa_builder import __version__
from cuqa_builder.cutoff_estimate import ProbeModelCheck
from cuqa_builder.refresh import ChangeCounts
from cuqa_builder.review_report import ReviewReport
from cuqa_builder.run import DATASET, MANIFEST, ValidationInfo
from cuqa_builder.wiki.wikitext import revision_url

SCHEMA = "schema.json"
STATS = "stats.json"
CARD = "README.md"
CHANGELOG = "CHANGELOG.md"
PAGES_LISTED = 25  # the card links this many source pages; stats.json lists them all
# What each recipe (`--prompts`) is, as the card says how the items were made.
RECIPES = {
    "paper": "Algorithm 1 of the Self-DC paper, with the prompts of its Tables 5-9 "
             "(`--prompts paper`)",
    "connected": "cuqa-builder's connected recipe (`--prompts connected`), which departs from "
                 "Algorithm 1 of the Self-DC paper so that the known part never answers alone: "
                 "the bridge is described only through the event, the known hop asks one "
                 "property of the bridge (or a category that holds it), and the merge replaces "
                 "the bridge's name by its description",
}
_TEMPLATE = "dataset_card.md.j2"
_CHANGELOG_TEMPLATE = "changelog.md.j2"


class ReleaseWindow(BaseModel):
    cutoff: str = Field(description="the knowledge cutoff as given to cuqa-build")
    known_until: date = Field(description="last day the target model is assumed to know")
    first_unknown_day: date
    until: date = Field(description="last day of the unknown events")


class CutoffSubset(BaseModel):
    """One subset of a multi-cutoff release: the items still unknown to a model with a later
    cutoff (every event they are built on is dated after it)."""

    config: str = Field(description="config name in the card, for datasets.load_dataset")
    path: str = Field(description="its cuqa.jsonl, relative to the release folder")
    window: ReleaseWindow
    items: int
    by_type: dict[str, int]
    by_difficulty: dict[str, int]


class CheckRun(BaseModel):
    """One automatic check that validation ran, and the candidates it passed and failed."""

    name: str
    requires: str = Field(description="what an item that passes it satisfies, in words")
    passed: int | None = Field(None, description="None: not recorded, or a model that could "
                               "not be asked (nothing measured)")
    failed: int | None = Field(None, description="None: not recorded (validated by an older "
                               "cuqa-build)")


class Composition(BaseModel):
    """How the released items were composed: written by a language model (a generation call
    of the recipe gave their text), or from structure (no generation call: the event
    sentence's parse and templated questions about the bridge's infobox)."""

    by_model: int
    from_structure: int
    models: list[str] = Field(description="the models that wrote the items of `by_model`")


class ItemChange(BaseModel):
    id: str
    fields: list[str] = Field(description="question, answer, review and/or other")


class ReleaseDiff(BaseModel):
    """What changed between two releases, by item id (`cuqa-build diff OLD NEW`)."""

    old: str = Field(description="the older release: name and version")
    new: str
    old_items: int
    new_items: int
    added: list[str]
    removed: list[str]
    changed: list[ItemChange]
    by_field: dict[str, int] = Field(description="changed items per field that changed")
    by_cutoff: dict[str, ChangeCounts] = Field(description="per subset: items matched by id")
    by_month: dict[str, ChangeCounts] = Field(description="event month (YYYY-MM)")
    by_type: dict[str, ChangeCounts] = Field(description="AAB / ABC")
    by_difficulty: dict[str, ChangeCounts] = Field(description="easy / hard")


class ReleaseStats(BaseModel):
    """`stats.json`: the figures of the dataset card."""

    name: str
    version: str | None = Field(None, description="--release-version, default the release date")
    released: date
    tool: str
    items: int
    window: ReleaseWindow
    by_type: dict[str, int]
    by_difficulty: dict[str, int]
    by_month: dict[str, int]
    by_category: dict[str, int]
    by_property: dict[str, int] = Field(
        default_factory=dict, description="what the known hop asks (`birthplace`, `district`, "
        "`category`...): a release is seen not to be one kind of question")
    by_review_status: dict[str, int]
    generator_models: list[str] = Field(description="the run's generator model(s), as each "
                                        "item records it (it may have written none: "
                                        "`composed`)")
    composed: Composition | None = Field(
        None, description="by the model / from structure; None when the run has no "
        "candidates.jsonl to tell")
    recipes: list[str] = Field(default_factory=list, description="how the items were composed "
                               "(`--prompts`): `paper` (Algorithm 1) and/or `connected`")
    prompts: dict[str, list[str]] = Field(description="template name -> sha256 hashes used")
    seed: int | None
    validation: ValidationInfo | None = Field(description="checks' limits, probe model and judge")
    probe_model_check: ProbeModelCheck | None = Field(
        None, description="whether the probe model knew the first events after the cutoff")
    checks_run: list[CheckRun] = Field(
        default_factory=list, description="every automatic check that ran, with what it "
        "requires and the run's candidates it passed and failed")
    source_pages: dict[str, int | None] = Field(description="page title -> revision used")
    failed_automatic_checks: int | None = Field(
        description="released items whose candidate failed a check or probe (kept by review); "
        "None when the run has no candidates.jsonl"
    )
    review: ReviewReport | None
    subsets: list[CutoffSubset] = Field(
        default_factory=list, description="one per cutoff of a multi-cutoff release; empty: "
        "one cutoff, the items in the folder's own cuqa.jsonl"
    )
    stale_held_back: int = Field(
        0, description="reviewed items left out because their event changed since generation"
    )
    changes: ReleaseDiff | None = Field(None, description="set by `cuqa-build diff OLD THIS`")


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
        revision_url=lambda revid, title, index_url: revision_url(title, revid, index_url),
    )
    return env


def _template(name: str) -> jinja2.Template:
    return _environment().from_string(
        (resources.files("cuqa_builder") / "templates" / name).read_text("utf-8")
    )


def render_changelog(diff: ReleaseDiff) -> str:
    """`CHANGELOG.md`: every added, removed and changed item id, and the breakdowns."""
    return _template(_CHANGELOG_TEMPLATE).render(diff=diff)


@dataclass(frozen=True)
class PageOrigin:
    """Where the release's source pages came from, and so whether their revisions get links:
    a wiki the run fetched them from (its index.php), or a local snapshot whose revision ids
    nobody checked (the shipped example's are placeholders such as 1 and 2)."""

    index_url: str | None  # None: no links
    snapshot: str | None = None  # its directory name
    snapshot_sha256: str | None = None


def render_card(stats: ReleaseStats, has_manifest: bool, prompt_sources: dict[str, str],
                origin: PageOrigin) -> str:
    """The card; `prompt_sources` maps each template to its cited source (or a note)."""
    template = _template(_TEMPLATE)
    pages = list(stats.source_pages.items())
    return template.render(
        stats=stats,
        has_manifest=has_manifest,
        origin=origin,
        recipes=RECIPES,
        prompt_sources=prompt_sources,
        listed_pages=pages[:PAGES_LISTED],
        more_pages=len(pages) - PAGES_LISTED,
        files={"dataset": DATASET, "schema": SCHEMA, "stats": STATS, "manifest": MANIFEST,
               "changelog": CHANGELOG},
        version=__version__,
    )
