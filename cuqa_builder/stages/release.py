"""The release stage: the run's reviewed `cuqa.jsonl` -> `OUTPUT_ROOT/NAME/`, ready to share.

The folder holds the items (`cuqa.jsonl`, as the annotation pull step left them, each with its
review), the JSON Schema of an item, a dataset card (`README.md`, whose YAML header the `datasets`
library reads), `stats.json` (the card's figures, machine-readable) and the run's page manifest.
Every file is replaced atomically, so a re-release never leaves a half-written file behind.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from datetime import date, timedelta
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from cuqa_builder import __version__
from cuqa_builder.annotation.review import REVIEW_REPORT, ReviewReport
from cuqa_builder.dataset import load
from cuqa_builder.jsonio import atomic_write_json, atomic_write_text, iter_jsonl, write_jsonl
from cuqa_builder.prompts import PromptError, load_prompt
from cuqa_builder.records import Candidate, CuqaItem, Event
from cuqa_builder.run import CANDIDATES, DATASET, EVENTS, MANIFEST, RunContext, load_run_info
from cuqa_builder.wiki.wikitext import revision_url

SCHEMA = "schema.json"
STATS = "stats.json"
CARD = "README.md"
NO_CATEGORY = "(none)"  # year-article events carry no portal category
PAGES_LISTED = 25  # the card links this many source pages; stats.json lists them all
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

SELF_DC_BIBTEX = """\
@article{wang2024selfdc,
  title   = {Self-DC: When to retrieve and When to generate? Self Divide-and-Conquer for
             Compositional Unknown Questions},
  author  = {Wang, Hongru and Xue, Boyang and Zhou, Baohang and Zhang, Tianhua and
             Wang, Cunxiang and Chen, Guanhua and Wang, Huimin and Wong, Kam-Fai},
  journal = {arXiv preprint arXiv:2402.13514},
  year    = {2024}
}"""


class Window(BaseModel):
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
    window: Window
    by_type: dict[str, int]
    by_difficulty: dict[str, int]
    by_month: dict[str, int]
    by_category: dict[str, int]
    by_review_status: dict[str, int]
    generator_models: list[str]
    prompts: dict[str, list[str]] = Field(description="template name -> sha256 hashes used")
    seed: int | None
    validation: dict | None = Field(description="checks' limits, probe model and judge")
    source_pages: dict[str, int | None] = Field(description="page title -> revision used")
    failed_automatic_checks: int | None = Field(
        description="released items whose candidate failed a check or probe (kept by review); "
        "None when the run has no candidates.jsonl"
    )
    review: ReviewReport | None


def _release_dir(ctx: RunContext) -> Path:
    name = ctx.options.name
    if not name:
        raise ValueError("the release stage needs --name NAME (it writes OUTPUT_ROOT/NAME/)")
    if not _NAME.match(name):
        raise ValueError(f"--name {name!r}: use letters, digits, '.', '_' and '-' only")
    return Path(ctx.options.output_root) / name


def _read_items(ctx: RunContext) -> list[CuqaItem]:
    items = load(ctx.path(DATASET))
    if not items:
        raise ValueError(f"{ctx.path(DATASET)} holds no items: nothing to release")
    if stray := sorted({item.cutoff for item in items} - {ctx.window.label}):
        raise ValueError(
            f"items with cutoff {', '.join(stray)} in a run whose cutoff is {ctx.window.label}"
        )
    return items


def _categories(ctx: RunContext, items: list[CuqaItem]) -> dict[str, str]:
    """Event id -> portal category, for the items' events (from the run's events.jsonl)."""
    wanted = {item.event.id for item in items}
    return {
        event.id: event.category or NO_CATEGORY
        for event in iter_jsonl(ctx.path(EVENTS), Event)
        if event.id in wanted
    }


def _failed_automatic_checks(ctx: RunContext, items: list[CuqaItem]) -> int | None:
    """How many released items failed validation: reviewers can accept those (`--only all`)."""
    path = ctx.path(CANDIDATES)
    if not path.exists():
        return None
    released = {item.id for item in items}
    return sum(
        1 for c in iter_jsonl(path, Candidate)
        if c.id in released and c.validation is not None and not c.validation.passed
    )


def _review_report(ctx: RunContext) -> ReviewReport | None:
    path = ctx.path(REVIEW_REPORT)
    if not path.exists():
        return None
    try:
        return ReviewReport.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        raise ValueError(f"{path} is not a review report: {exc.errors()[0]['msg']}") from None


def _counts(values: Iterable[str]) -> dict[str, int]:
    """Most frequent first, then alphabetical."""
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def compute_stats(ctx: RunContext, name: str, items: list[CuqaItem]) -> ReleaseStats:
    categories = _categories(ctx, items)
    info = load_run_info(ctx.out)
    prompts: dict[str, set[str]] = {}
    for item in items:
        for template, sha in item.generator.prompts.items():
            prompts.setdefault(template, set()).add(sha)
    return ReleaseStats(
        name=name,
        released=date.today(),
        tool=f"cuqa-builder {__version__}",
        items=len(items),
        window=Window(
            cutoff=ctx.window.label,
            known_until=ctx.window.cutoff,
            first_unknown_day=ctx.window.cutoff + timedelta(days=1),
            until=ctx.window.until,
        ),
        by_type=_counts(item.type for item in items),
        by_difficulty=_counts(item.difficulty for item in items),
        by_month=dict(sorted(Counter(f"{item.event.date:%Y-%m}" for item in items).items())),
        by_category=_counts(categories.get(item.event.id, NO_CATEGORY) for item in items),
        by_review_status=_counts(item.review.status for item in items),
        generator_models=sorted({item.generator.model for item in items}),
        prompts={template: sorted(hashes) for template, hashes in sorted(prompts.items())},
        seed=info.get("seed"),
        validation=info.get("validation"),
        source_pages=dict(sorted({i.event.source_title: i.event.revid for i in items}.items())),
        failed_automatic_checks=_failed_automatic_checks(ctx, items),
        review=_review_report(ctx),
    )


# --- the dataset card ----------------------------------------------------------------------------


def _size_category(n: int) -> str:
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K")):
        if n < bound:
            return label
    return "100K<n<1M"


def _yaml_header(stats: ReleaseStats) -> str:
    pretty = f"CuQA {stats.name} (knowledge cutoff {stats.window.cutoff})"
    return f"""\
---
pretty_name: "{pretty}"
license: cc-by-sa-4.0
language:
- en
task_categories:
- question-answering
task_ids:
- open-domain-qa
size_categories:
- {_size_category(stats.items)}
tags:
- compositional-questions
- unknown-questions
- multi-hop
configs:
- config_name: default
  data_files:
  - split: test
    path: {DATASET}
---
"""


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: tuple[str, ...], rows: Iterable[tuple[object, ...]]) -> str:
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(_cell(c) for c in row) + " |" for row in rows),
    ]
    return "\n".join(lines)


def _count_table(title: str, counts: dict[str, int], total: int) -> str:
    rows = ((key, n, f"{n / total:.0%}") for key, n in counts.items())
    return _table((title, "items", "share"), rows)


def _prompt_source(template: str, hashes: list[str]) -> str:
    """The template's cited source, when the installed file is the one that was used."""
    try:
        prompt = load_prompt(template)
    except PromptError:
        return ""
    if prompt.sha256 not in hashes:
        return "(the installed template differs)"
    source = re.sub(r"^source:\s*", "", prompt.source.splitlines()[0]) if prompt.source else ""
    return source


def _intro(stats: ReleaseStats) -> str:
    window = stats.window
    return f"""\
# CuQA: {stats.name}

CuQA (Compositional unknown Question Answering) asks questions that combine a part a language
model cannot know with a part it does know. Each item merges an *unknown* sub-question, about an
event Wikipedia dates after the model's knowledge cutoff, with a *known* sub-question the model
can answer from its own knowledge. In **AAB** items both sub-questions share the answer; in
**ABC** items the unknown sub-question's answer is a hidden bridge to the known one, whose answer
is the item's. **Easy** items have two hops; **hard** items merge two easy items (four hops).
The dataset and the recipe come from the Self-DC paper (Wang et al., 2024, section 3); this
release was rebuilt with cuqa-builder for a given cutoff.

- Knowledge cutoff: **{window.cutoff}**: the target model is assumed to know everything up to
  {window.known_until}.
- Unknown events: dated **{window.first_unknown_day}** to **{window.until}**.
- Items: **{stats.items}** (one split, `test`).
"""


def _contents(stats: ReleaseStats) -> str:
    n = stats.items
    return "\n\n".join([
        "## Contents",
        _count_table("type", stats.by_type, n),
        _count_table("difficulty", stats.by_difficulty, n),
        _count_table("event month", stats.by_month, n),
        _count_table("event category", stats.by_category, n),
        _count_table("review status", stats.by_review_status, n),
    ])


def _usage() -> str:
    return f"""\
## Using it

Each line of `{DATASET}` is one item: `id`, `question`, `answer`, `answer_aliases`, `type`
(`AAB`/`ABC`), `difficulty` (`easy`/`hard`), `sub_questions` (question, answer, kind
`unknown`/`known`), `event` (id, date, text, source page and revision), `cutoff`, `generator`
(model and prompt hashes) and `review`. `{SCHEMA}` is its JSON Schema.

```python
import json
items = [json.loads(line) for line in open("{DATASET}", encoding="utf-8")]

import datasets
cuqa = datasets.load_dataset("path/to/this/folder", split="test")  # reads this card's header
cuqa = datasets.load_dataset("json", data_files="{DATASET}", split="train")  # the file alone

import cuqa_builder
items = cuqa_builder.load(".")  # typed items
```
"""


def _source_pages(stats: ReleaseStats, has_manifest: bool) -> str:
    pages = list(stats.source_pages.items())
    listed = [
        f"- [{title}]({revision_url(title, revid)})" + ("" if revid else " (revision unknown)")
        for title, revid in pages[:PAGES_LISTED]
    ]
    more = len(pages) - PAGES_LISTED
    if more > 0:
        listed.append(f"- … and {more} more, listed in `{STATS}` (`source_pages`)")
    manifest = (
        f"`{MANIFEST}` is the run's page manifest (every page the run read, title -> revision id): "
        "`cuqa-build --revisions manifest.json` fetches exactly those revisions again."
        if has_manifest
        else "The run left no page manifest; the revisions used are in "
        f"`{STATS}` (`source_pages`)."
    )
    return "\n".join([
        f"Events come from {len(pages)} Wikipedia pages (year articles and Current events "
        "pages), at these revisions:", "", *listed, "", manifest,
    ])


def _provenance(stats: ReleaseStats, has_manifest: bool) -> str:
    prompt_rows = (
        (f"`{template}`", ", ".join(f"`{h[:16]}`" for h in hashes),
         _prompt_source(template, hashes))
        for template, hashes in stats.prompts.items()
    )
    validation = stats.validation or {}
    limits = validation.get("limits")
    words = (
        f", {limits['min_question_words']}-{limits['max_question_words']} words, answers of at "
        f"most {limits['max_answer_words']} words" if limits else ""
    )
    checks = (
        f"one question ending in `?`{words}, no prompt residue, not a mere repeat of one "
        "sub-question, a non-empty answer, no answer or bridge entity in the question, the "
        "known question of ABC items mentions the bridge, the event is dated after the cutoff, "
        "no duplicate questions"
    )
    probes = (
        f"Probes asked **{validation['probe_model']}** closed-book (judge: "
        f"{validation.get('judge')}): items it already answered, items whose known part it did "
        "not know, and items it could not answer even given the unknown part failed. "
        "Probe prompts: "
        + ", ".join(f"`{n}` (`{h[:16]}`)" for n, h in validation.get("prompts", {}).items())
        + "."
        if validation.get("probe_model")
        else "No probe model was used."
    )
    return "\n\n".join([
        "## How it was built",
        f"Built with {stats.tool} (`cuqa-build --cutoff {stats.window.cutoff}`), following "
        "Algorithm 1 of the Self-DC paper with every intermediate step kept.",
        f"- Generator model(s): {', '.join(f'`{m}`' for m in stats.generator_models)}\n"
        f"- Random seed: {stats.seed if stats.seed is not None else 'not recorded'} (choices "
        "are seeded per event, so the same seed and pages give the same items)",
        "Prompt templates (sha256 prefixes; the full hashes are in every item's `generator`):",
        _table(("template", "sha256", "source"), prompt_rows),
        f"Automatic checks: {checks}. {probes} {_overrides(stats.failed_automatic_checks)}",
        _source_pages(stats, has_manifest),
    ])


def _overrides(failed: int | None) -> str:
    if failed is None:
        return ""
    if not failed:
        return "Every released item passed every check and probe."
    return (f"{failed} released items failed a check or probe and are kept because reviewers "
            "accepted them (they were pushed with `cuqa-annotate push --only all`).")


def _review(stats: ReleaseStats) -> str:
    report = stats.review
    if report is None:
        return (
            "## Review\n\nNo human review report was found for this run: these items passed the "
            "automatic checks only (review status `unreviewed`)."
        )
    rate = f"{report.accept_rate:.0%}" if report.accept_rate is not None else "n/a"
    rows = [
        ("tasks reviewed", f"{report.reviewed} of {report.tasks}"),
        ("accepted / rejected / tied", f"{report.accepted} / {report.rejected} / {report.ties}"),
        ("needing more reviews / sent back after a failing edit",
         f"{report.incomplete} / {len(report.sent_back)}"),
        ("accept rate", rate),
        ("questions rewritten", report.rewritten),
        ("answers corrected", report.answers_corrected),
        ("annotators", report.annotators),
        ("votes (cancelled annotations not counted)", f"{report.votes} ({report.cancelled})"),
        ("unsure / submitted without a verdict", f"{report.unsure} / {report.undecided}"),
    ]
    if report.decided_with_fewer:
        rows.append(("decided with fewer judgements than asked (--allow-under-annotated)",
                     len(report.decided_with_fewer)))
    if report.mean_agreement is not None:
        rows.append(("agreement (multi-annotated tasks)",
                     f"{report.mean_agreement:.2f} over {report.multi_annotated}"))
    if report.seconds_per_task is not None:
        rows.append(("seconds per task", f"{report.seconds_per_task:.1f}"))
    reasons = ", ".join(f"{r} ({n})" for r, n in report.reject_reasons.items()) or "none"
    return "\n\n".join([
        "## Review",
        "Annotators reviewed the items in Label Studio, as in the paper's section 3.2: they "
        "rejected items whose answer was wrong, that were not unknown, whose known part was "
        "wrong or that read unnaturally, and rewrote questions to read naturally. No verdict "
        "was pre-selected for them. An item is kept when it had the independent judgements its "
        "task asked for and most of them accepted it (a tie is not an accept; unsure is not a "
        "vote), and its edited question and answer passed the automatic checks again.",
        _table(("", "figure"), rows),
        f"Reject reasons: {reasons}.",
    ])


def _licence_and_citation(stats: ReleaseStats) -> str:
    tool = f"""\
@software{{cuqa_builder,
  title   = {{cuqa-builder: building CuQA datasets of compositional unknown questions}},
  author  = {{{{cuqa-builder developers}}}},
  version = {{{__version__}}},
  year    = {{{stats.released.year}}}
}}"""
    return f"""\
## Licence

CC BY-SA 4.0 (https://creativecommons.org/licenses/by-sa/4.0/). The event texts are adapted from
Wikipedia articles by Wikipedia contributors, licensed CC BY-SA 4.0; the pages and revisions are
listed above and in `{STATS}`. The questions were generated by a language model from those texts
(and reviewed as described above); the dataset is shared under the same licence.

## Citation

The CuQA recipe and the Self-DC paper:

```bibtex
{SELF_DC_BIBTEX}
```

The tool that built this release:

```bibtex
{tool}
```
"""


def render_card(stats: ReleaseStats, has_manifest: bool) -> str:
    sections = [
        _intro(stats), _contents(stats), _usage(), _provenance(stats, has_manifest),
        _review(stats), _licence_and_citation(stats),
    ]
    return _yaml_header(stats) + "\n" + "\n\n".join(s.strip("\n") for s in sections) + "\n"


# --- the stage ----------------------------------------------------------------------------------


def _copy_manifest(ctx: RunContext, dest: Path) -> bool:
    source = ctx.path(MANIFEST)
    if not source.exists():
        (dest / MANIFEST).unlink(missing_ok=True)  # never leave an older run's manifest behind
        return False
    atomic_write_text(dest / MANIFEST, source.read_text(encoding="utf-8"))
    return True


def run(ctx: RunContext) -> str:
    dest = _release_dir(ctx)
    items = _read_items(ctx)
    stats = compute_stats(ctx, dest.name, items)
    dest.mkdir(parents=True, exist_ok=True)
    write_jsonl(dest / DATASET, items)
    atomic_write_json(dest / SCHEMA, CuqaItem.model_json_schema())
    atomic_write_json(dest / STATS, stats.model_dump(mode="json"))
    has_manifest = _copy_manifest(ctx, dest)
    atomic_write_text(dest / CARD, render_card(stats, has_manifest))
    reviewed = stats.by_review_status.get("accepted", 0)
    return (
        f"release: {stats.items} items ({reviewed} accepted by review) -> {dest}/ "
        f"({DATASET}, {SCHEMA}, {CARD}, {STATS}" + (f", {MANIFEST})" if has_manifest else ")")
    )
