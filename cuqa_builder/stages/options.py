"""What each stage of `cuqa-build` may be told: one typed, frozen options model per stage.

`cli/build.py` builds these once from the command line (its flags, defaults and help are derived
from the fields below) and the stages read nothing else. Kept free of heavy imports, so that
`cuqa-build --help` stays instant.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cuqa_builder.llm.settings import LLMOptions
from cuqa_builder.validation.limits import Limits
from cuqa_builder.verification import DEFAULT_GUESSES_COUNTED, GUESSES_ASKED
from cuqa_builder.wiki.titles import parse_sources

WIKIPEDIA_API = "https://en.wikipedia.org/w/api.php"


class StageOptions(BaseModel):
    model_config = ConfigDict(frozen=True)


class SourceOptions(StageOptions):
    """Where pages come from (fetch and events)."""

    source: Path | None = Field(
        None, description="read a snapshot directory (NAME.wiki + NAME.json) offline"
    )
    wiki_api: str = Field(WIKIPEDIA_API, description="MediaWiki api.php URL")
    sources: str = Field(
        "year,portal", description="page kinds: year articles, Current events portal pages"
    )
    revisions: Path | None = Field(
        None, description="manifest.json of an earlier run: fetch those revisions"
    )
    contact: str | None = Field(
        None, description="contact put in the User-Agent (default: $CUQA_CONTACT or the "
        "project's URL)",
    )
    wiki_interval: float = Field(
        1.0, ge=0, description="minimum pause between two MediaWiki API requests",
        json_schema_extra={"flag": {"metavar": "SECONDS"}},
    )
    settle: int = Field(
        14, ge=0, description="a page fetched less than DAYS after its date (a day page's day, "
        "a year article's 31 December) is re-checked for a new revision by the next run, "
        "one cheap request per 50 pages, and fetched again only if it changed",
        json_schema_extra={"flag": {"metavar": "DAYS"}},
    )
    spacy_model: str = Field("en_core_web_sm", description="spaCy pipeline for NER")

    @field_validator("sources")
    @classmethod
    def _known_kinds(cls, sources: str) -> str:
        parse_sources(sources)  # a usage error before anything runs, not a failed stage
        return sources


class GenerateOptions(StageOptions):
    """Algorithm 1's run: which events, which seed, how many hard items."""

    limit: int | None = Field(
        None, ge=0, description="generate from at most N events",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    seed: int = Field(
        0, description="base random seed (default: the run's recorded seed, else 0)",
        json_schema_extra={"flag": {"default": None}},  # None on the command line: not given
    )
    hard: int = Field(
        0, ge=0, description="also merge N pairs of easy items into hard ones",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    attempts: int = Field(
        3, ge=1, description="tries per Algorithm 1 step: an output its step check refuses is "
        "asked again with a new sampling seed (1: no repair)",
        json_schema_extra={"flag": {"metavar": "N"}},
    )
    prompts: Literal["connected", "paper"] = Field(
        "connected", description="the recipe: `connected` composes items that need the event "
        "(the bridge described only through it, a known hop asking one property of the bridge "
        "or a category holding it); `paper` is Algorithm 1 with Tables 5-9 word for word "
        "(default: the run's recorded recipe, else connected)",
        json_schema_extra={"flag": {"default": None}},  # None on the command line: not given
    )
    pool_size: int = Field(
        12, ge=1, description="connected recipe: questions of an event's pool screened by the "
        "checker, best ranked first (every bridge x each lasting property; the rest are "
        "recorded in pool.jsonl as not screened)", json_schema_extra={"flag": {"metavar": "N"}},
    )
    per_event: int = Field(
        2, ge=1, description="items kept per event, each of another bridge and another "
        "property (validate keeps the best ranked of those that passed; the others fail "
        "`per_event`)", json_schema_extra={"flag": {"metavar": "N"}},
    )
    known_source: Literal["model", "wiki"] | None = Field(
        None, description="the known passage: the generator's own knowledge or the lead of the "
        "bridge's Wikipedia article at the cutoff (default: wiki for --prompts connected, model "
        "for paper)",
    )


class ValidateOptions(StageOptions):
    """The automatic checks' limits and the optional probes of a target model."""

    limits: Limits = Field(default_factory=Limits)
    check_model: str | None = Field(
        None, description="checker model of the four checks: its guesses without the event "
        "(the question masked, and whole), its answer with the event (default: the generator; "
        "`none`: no checks; local[:NAME]: an embedded model)",
    )
    check_base_url: str | None = Field(
        None, description="endpoint of the checker model (default: --base-url)"
    )
    guesses: int = Field(
        DEFAULT_GUESSES_COUNTED, ge=1, le=GUESSES_ASKED, description="how many of the checker's "
        f"{GUESSES_ASKED} ranked guesses count: an item whose answer is among them is guessable "
        "without its event",
        json_schema_extra={"flag": {"metavar": "K"}},
    )
    probe_model: str | None = Field(
        None, description="target model asked closed-book by the probes, a model whose knowledge "
        "ends at the cutoff: it also makes the guesses at the whole question (local[:NAME]: an "
        "embedded model)",
    )
    probe_base_url: str | None = Field(
        None, description="endpoint of the probe model (default: --base-url)"
    )
    judge_model: str | None = Field(
        None, description="LLM judge for probe answers (default: normalised match)"
    )
    allow_late_probe_model: bool = Field(
        False, description="go on, with a warning, when the probe model answers the questions "
        "about the first events after the cutoff (it seems to know them: by default the run "
        "stops)",
    )
    max_share: float = Field(
        0.4, gt=0, le=1, description="the largest share of the items one property may have "
        "(birthplace, district, category...): the lowest ranked items of a property above it "
        "fail `max_share` (one item of each property is always kept)",
        json_schema_extra={"flag": {"metavar": "SHARE"}},
    )
    critic_model: str | None = Field(
        None, description="critic model judging each item on four criteria (local[:NAME]: an "
        "embedded model)",
    )
    critic_base_url: str | None = Field(
        None, description="endpoint of the critic model (default: --base-url)"
    )
    critic_advisory: bool = Field(
        False, description="record the critic's verdicts without failing items on them"
    )


_RELEASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a folder name, never a path
RELEASE_NEEDS_NAME = "the release stage needs --name NAME (it writes OUTPUT_ROOT/NAME/)"


class ReleaseOptions(StageOptions):
    name: str | None = Field(None, description="dataset name: writes OUTPUT_ROOT/NAME/")
    output_root: Path = Field(Path("output"), description="where releases go")
    release_version: str | None = Field(
        None, description="version written in the card and stats.json (default: the release "
        "date, YYYY-MM-DD; --version prints the program's own version)",
        json_schema_extra={"flag": {"metavar": "VERSION"}},
    )
    # From --cutoff (a comma-separated list for one subset per cutoff), not a flag of its own.
    cutoffs: tuple[str, ...] = Field(
        (), description="the cutoffs of the release's subsets (default: the run's cutoff)"
    )

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str | None) -> str | None:
        if name is not None and not _RELEASE_NAME.match(name):
            raise ValueError(f"{name!r}: use letters, digits, '.', '_' and '-' only")
        return name


class BuildOptions(StageOptions):
    """Everything one `cuqa-build` invocation was told, stage by stage."""

    source: SourceOptions = Field(default_factory=SourceOptions)
    llm: LLMOptions = Field(default_factory=LLMOptions)
    generate: GenerateOptions = Field(default_factory=GenerateOptions)
    checks: ValidateOptions = Field(default_factory=ValidateOptions)
    release: ReleaseOptions = Field(default_factory=ReleaseOptions)
    quiet: bool = Field(
        False, description="no progress bars and no INFO log lines (warnings and the "
        "summaries stay)", json_schema_extra={"flag": {"aliases": ("-q",)}}
    )
    force: bool = Field(
        False, description="let a stage replace its output with an empty or much smaller one "
        "(refused otherwise: it usually means a bad input)",
    )
    reseed: bool = Field(
        False, description="start generation afresh with a --seed that differs from the run's "
        "(the old candidates are kept aside as candidates.seed-N.jsonl)",
    )
