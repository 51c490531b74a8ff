"""`pool.jsonl` and the pool's questions (issue 38.3-38.6 and 38.8, issue 40.5): one record per
event, replaced when the event is tried again; a record lost (the file deleted, emptied or torn
by a kill) rebuilt from the call cache at no cost; the pool size recorded; a directory in its
place refused with what to do; a question that names its own answer dropped before any check is
paid. Through the CLI and the loopback server."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import count_records, read_jsonl
from cuqa_builder.records import PoolRecord
from cuqa_builder.testing.openai_server import ScriptedLLM
from cuqa_builder.testing.pool_llm import PoolResponder

SAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wiki-sample"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _build(out: Path, llm: ScriptedLLM, stage: str, *extra: str) -> int:
    return main(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                 "--out", str(out), "--limit", "5", "--stage", stage, "-q",
                 "--base-url", llm.base_url, "--model", "scripted", *extra])


_DESCRIBED_LINE = re.compile(r"^B(\d+): The subject of news item (\w+), part (\d+), of (.+)\.$",
                             re.MULTILINE)


@dataclass
class SaysItsAnswer(PoolResponder):
    """Describes each named thing by the answer of its known hop ("..., from Marlow Heath,")."""

    told: dict[str, str] = field(default_factory=dict)  # bridge -> its hop's answer

    def _describe(self, prompt: str) -> str:
        def leak(found: re.Match[str]) -> str:
            bridge = self.bridge_of[(found[2], found[1])]
            answer = next((a for name, a in self.told.items()
                           if bridge.endswith(name) or name.endswith(bridge)), None)
            where = f", from {answer}," if answer else ""
            return (f"B{found[1]}: The subject of news item {found[2]}, part {found[3]}{where} "
                    f"of {found[4]}.")
        return _DESCRIBED_LINE.sub(leak, super()._describe(prompt))


def test_a_question_that_names_its_own_answer_is_dropped_before_any_check(
    tmp_path: Path
) -> None:
    control = PoolResponder()
    with ScriptedLLM(control) as llm:
        assert _build(tmp_path / "control", llm, "events") == 0
        assert _build(tmp_path / "control", llm, "generate") == 0
    leaky = SaysItsAnswer(told=dict(control.answer_of))
    with ScriptedLLM(leaky) as llm:
        assert _build(tmp_path / "run", llm, "events") == 0
        _build(tmp_path / "run", llm, "generate")
        asked = list(llm.requests)
    pools = read_jsonl(tmp_path / "run" / "pool.jsonl", PoolRecord)
    refused = [r for p in pools for r in p.refused if "names its own answer" in r]
    assert len(refused) == 9  # every question of the control's pools
    assert not any(p.members for p in pools)
    # no guess and no open book was paid for them: each event asked only its two requests
    assert len(asked) == 2 * len(pools)
    assert not leaky.asked
    assert count_records(tmp_path / "run" / "candidates.jsonl") == 0
