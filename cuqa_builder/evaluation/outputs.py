"""What an evaluation writes, one model per file: `eval.json` (`EvalSettings`),
`predictions.jsonl` (`Prediction`), `metrics.json` (`MetricsFile`), `sweep.json` (`SweepFile`)
and `gap.json` (`GapFile`). Every writer and reader of these files goes through the models."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError, computed_field, model_validator

from cuqa_builder.errors import CuqaError
from cuqa_builder.evaluation.datasets import GoldQuestion
from cuqa_builder.jsonio import atomic_write_text
from cuqa_builder.solvers.base import SolverOptions, SolverStep

PREDICTIONS = "predictions.jsonl"
METRICS = "metrics.json"
SETTINGS = "eval.json"
SWEEP = "sweep.json"
GAP = "gap.json"

M = TypeVar("M", bound=BaseModel)


class OutputFileError(CuqaError, ValueError):
    """An evaluation file that cannot be read back as what it should hold."""


# --- settings and predictions ------------------------------------------------------------


class RetrieverInfo(BaseModel):
    """Which retriever a run used: enough to tell two corpora or services apart."""

    name: str
    service: str | None = None  # web: serper or searxng
    corpus_sha256: str | None = None  # bm25
    api: str | None = None  # a search service's URL
    exclude_source_event: bool = False  # each question's own event kept from its searches


class Scoring(BaseModel):
    """The choices of ours in scoring (docs/evaluation.md says why each default is what it is)."""

    aliases: bool = True  # a CuQA item's answer_aliases count as gold answers
    yes_no_first_word: bool = False  # em/f1 read "Yes, because ..." as "yes" for a yes/no gold


class EvalSettings(BaseModel):
    """What a run directory holds (`eval.json`); a re-run with other settings is refused."""

    method: str
    options: SolverOptions
    model: str
    api: str = "chat"  # the endpoint's chat or (legacy) completions API
    data: str
    split: str | None = None
    retriever: RetrieverInfo | None = None
    judge_model: str | None = None
    judge_prompt: str | None = None  # cuqa_builder.judge.JUDGE_PROMPTS, with a judge model
    judge_api: str | None = None
    scoring: Scoring = Field(default_factory=Scoring)
    part: str | None = None  # a gap run's half: "composed" or "sub-questions"

    @model_validator(mode="before")
    @classmethod
    def _self_dc_before_filling(cls, data: Any) -> Any:
        """A Self-DC run recorded before sub-questions' "#k" were filled asked them as
        written: read so, its directory is not resumed under the other setting."""
        if not isinstance(data, dict) or data.get("method") != "self-dc":
            return data
        options = data.get("options")
        if isinstance(options, dict) and "self_dc_dependent" not in options:
            return {**data, "options": {**options, "self_dc_dependent": "literal"}}
        return data


class Prediction(GoldQuestion):
    """One line of `predictions.jsonl`: the answer, its scores, the full trace and the counts."""

    prediction: str
    output: str = ""  # the model's whole final output, which the prediction was read from
    cover_em: float = 0.0  # the paper's EM: a gold answer contained in the prediction
    em: float  # SQuAD's
    f1: float
    acc: bool | None = None  # None: no judge was set
    # Every decision of the method ("self-dc:decompose": 1, "self-dc:retrieve": 2), and the
    # first one with its confidence: Self-DC's route for the question itself (section 6.4).
    routes: dict[str, int] = Field(default_factory=dict)
    route: str | None = None
    confidence: float | None = None
    # FreshQA's groups (Table 11, Figure 7): "before-2022" ... "2024"; "one-hop", "multi-hop".
    effective_year: str | None = None
    hops: str | None = None
    retrieval_calls: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    trace: list[SolverStep] = Field(default_factory=list)

    @computed_field  # written to predictions.jsonl for readers; recomputed when read back
    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def correct(self) -> bool:
        """The judge's verdict when there is one, else an exact match."""
        return self.acc if self.acc is not None else self.em == 1.0


# --- aggregates --------------------------------------------------------------------------


class CountStats(BaseModel):
    mean: float = 0.0
    total: float = 0.0


class Scores(BaseModel):
    """Means of EM/F1 (Acc over the judged items), mean and total of every count."""

    n: int
    cover_em: float = 0.0
    em: float
    f1: float
    acc: float | None = None
    judged: int = 0
    retrieval_calls: CountStats = Field(default_factory=CountStats)
    llm_calls: CountStats = Field(default_factory=CountStats)
    tokens: CountStats = Field(default_factory=CountStats)
    cost: CountStats = Field(default_factory=CountStats)


class MetricsFile(Scores):
    """`metrics.json`: the run's settings, whether every item was answered, the scores."""

    run: EvalSettings
    complete: bool
    by_type: dict[str, Scores] = Field(default_factory=dict)
    by_difficulty: dict[str, Scores] = Field(default_factory=dict)
    by_effective_year: dict[str, Scores] = Field(default_factory=dict)
    by_hops: dict[str, Scores] = Field(default_factory=dict)


class SweepRow(Scores):
    value: float
    complete: bool
    by_effective_year: dict[str, Scores] = Field(default_factory=dict)  # Figure 7


class SweepFile(BaseModel):
    """`sweep.json`: one row per value of the swept parameter."""

    param: str
    run: EvalSettings
    settings: list[SweepRow] = Field(default_factory=list)


class GapResult(BaseModel):
    """Counts behind the gap, so a reader can check it (the paper's table columns)."""

    items: int  # composed questions that have sub-questions
    subs_all_right: int
    subs_right_composed_right: int
    subs_right_composed_wrong: int
    gap: float | None  # subs_right_composed_wrong / subs_all_right; None when nothing qualifies


class GapFile(GapResult):
    """`gap.json`: the gap of a method and how correctness was decided."""

    run: EvalSettings
    correct_by: str


# --- reading and writing -----------------------------------------------------------------


def write_output(path: Path, record: BaseModel) -> None:
    atomic_write_text(path, record.model_dump_json(indent=2) + "\n")


def read_output(path: Path, model: type[M]) -> M:
    """One evaluation file as its model; a file that is not one is a one-line error."""
    try:
        return model.model_validate_json(path.read_bytes())
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise OutputFileError(
            f"{path}: not a {path.name} written by cuqa-eval ({where}: {first['msg']})"
        ) from None
