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

from cuqa_builder.jsonio import count_records, read_jsonl
from cuqa_builder.records.pool import PoolRecord
from cuqa_builder.run import load_run_info
from cuqa_builder.testing.openai_server import ScriptedLLM
from cuqa_builder.testing.pool_llm import PoolResponder
from tests.test_connected import _api_key, _build  # noqa: F401  (_api_key: an autouse fixture)

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
    assert len(refused) == 9  # every question of the control's pools told its answer
    # the one left is the Turkish assembly's, described by another bridge's answer
    [left] = [m for p in pools for m in p.members]
    assert left.bridge == "Grand National Assembly of Turkey" and left.answer not in left.question
    # no guess and no open book was paid for the others: each event asked its two requests,
    # and the events checked together one request each for the question left
    assert len(asked) == 2 * len(pools) + 3 + 1  # and the second look at its guesses
    assert sorted(leaky.asked) == sorted([left.masked_question, left.question])
    assert count_records(tmp_path / "run" / "candidates.jsonl") == 0


def _records(run: Path) -> dict[str, PoolRecord]:
    records = read_jsonl(run / "pool.jsonl", PoolRecord)
    assert len(records) == len({r.event_id for r in records})  # one record per event
    return {r.event_id: r for r in records}


def test_an_event_tried_again_replaces_its_record(tmp_path: Path) -> None:
    """Issue 40.5: the Thai election's question is guessed, its event fails and is tried again
    by every re-run; pool.jsonl keeps one record per event, not one more each run."""
    with ScriptedLLM(PoolResponder(guessed={"Move Forward": "masked"})) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate") == 0
        first = _records(tmp_path)
        for _ in range(2):
            assert _build(tmp_path, llm, "generate") == 0
    assert count_records(tmp_path / "pool.jsonl") == len(first) == 4
    assert _records(tmp_path) == first


@pytest.mark.parametrize("damage", ["deleted", "emptied", "last line torn"])
def test_pool_records_lost_between_runs_are_rebuilt_from_the_cache_at_no_cost(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedLLM(PoolResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate") == 0
        before, calls = _records(tmp_path), llm.calls
        pool = tmp_path / "pool.jsonl"
        if damage == "deleted":
            pool.unlink()
        elif damage == "emptied":
            pool.write_text("")
        else:  # what a kill in mid-write leaves
            data = pool.read_bytes()
            pool.write_bytes(data[: data.rstrip(b"\n").rfind(b"\n") + 1 + 300])
        lost = len(before) if damage != "last line torn" else 1
        capsys.readouterr()
        assert _build(tmp_path, llm, "generate") == 0
        assert llm.calls == calls  # nothing asked
    summary = capsys.readouterr().out
    assert _records(tmp_path) == before
    assert (f"pool.jsonl lacked the records of {lost} events done before (the file deleted or "
            f"emptied, or its last line cut by a kill): {lost} rebuilt from the call cache, "
            "nothing asked") in summary
    assert "pool (the whole run): 4 events, 10 of 10 named things described" in summary


def test_pool_records_that_cannot_be_rebuilt_are_said_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without the cache (--no-cache) nothing can be rebuilt for free: nothing is asked, and
    the summary says what was lost."""
    with ScriptedLLM(PoolResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate") == 0
        calls = llm.calls
        (tmp_path / "pool.jsonl").unlink()
        capsys.readouterr()
        assert _build(tmp_path, llm, "generate", "--no-cache") == 0
        assert llm.calls == calls
    summary = capsys.readouterr().out
    assert "0 rebuilt from the call cache, nothing asked; 4 lost, their calls not all in the " \
        "cache (their candidates stand)" in summary
    assert count_records(tmp_path / "pool.jsonl") == 0


def test_the_pool_size_is_recorded_and_a_new_one_said_not_to_change_what_is_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedLLM(PoolResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate", "--limit", "3") == 0
        assert load_run_info(tmp_path).generation.pool_size == 12
        capsys.readouterr()
        assert _build(tmp_path, llm, "generate", "--pool-size", "1") == 0
    summary = capsys.readouterr().out
    assert "--pool-size 1 screens the events still to try; the 2 already done keep what " \
        "--pool-size 12 screened" in summary
    assert load_run_info(tmp_path).generation.pool_size == 1
    sizes = sorted(r.pool_size for r in _records(tmp_path).values())
    assert sizes == [1, 1, 12, 12]


def test_a_directory_where_the_pool_file_belongs_is_refused_with_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedLLM(PoolResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        (tmp_path / "pool.jsonl").mkdir()
        assert _build(tmp_path, llm, "generate") == 1
    error = capsys.readouterr().err
    assert f"{tmp_path / 'pool.jsonl'} is a directory, where the run's pool.jsonl belongs: move " \
        "it aside (nothing in it is the run's) and run the command again" in error
    assert "Errno" not in error
