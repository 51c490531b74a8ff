"""The connected recipe (the default `--prompts`) and the `connected` check, end to end on the
example snapshot with a scripted model; and `--prompts paper` sending today's requests."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.generation.bridges import canonical_name
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records import Candidate
from cuqa_builder.run import load_run_info
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "wiki-sample"
PAPER_REQUESTS = ROOT / "tests" / "fixtures" / "paper_recipe_requests.jsonl"


class ConnectedResponder:
    """Answers the connected recipe's prompts as a chat model would (labels, quotes, a full
    stop), and the `connected` check with "unknown" unless a masked question is scripted."""

    def __init__(self, shortcuts: dict[str, str] | None = None) -> None:
        self.shortcuts = dict(shortcuts or {})  # masked question fragment -> checker's reply
        self.masked: list[str] = []
        self.guessed: list[str] = []

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if prompt.startswith("News of "):
            date = re.match(r"News of ([^:]+):", prompt)[1]
            item = hashlib.sha256(prompt.encode()).hexdigest()[:6]
            return Reply(text=f'Noun phrase: "The one at the centre of news item {item} of '
                         f'{date}."')
        if "asks for a single property of it" in prompt:
            bridge = re.search(r'names "([^"]+)" exactly as written', prompt)[1]
            return Reply(text=f"Question: Which place is tied to {bridge}?")
        if prompt.startswith("Passage (as written before") and "category" in prompt:
            return Reply(text="member states of the Commonwealth")
        if prompt.startswith("Someone knows everything that was known up to"):
            self.guessed.append(prompt.split("Question: ", 1)[1].split("\n", 1)[0])
            return Reply(text="unknown")
        if "If the question does not give enough information" in prompt:
            question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
            self.masked.append(question)
            reply = next((r for part, r in self.shortcuts.items() if part in question), None)
            return Reply(text=reply or "unknown")
        return Reply(text="I do not understand.")


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _build(out: Path, llm: ScriptedLLM, stage: str, *extra: str) -> int:
    return main(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                 "--out", str(out), "--limit", "4", "--stage", stage, "-q",
                 "--base-url", llm.base_url, "--model", "scripted", *extra])


def _generated(tmp_path: Path, responder: ConnectedResponder) -> tuple[ScriptedLLM, int]:
    llm = ScriptedLLM(responder)
    llm.__enter__()
    assert _build(tmp_path, llm, "events") == 0
    assert _build(tmp_path, llm, "generate") == 0
    return llm, llm.calls


def test_connected_items_are_the_known_question_with_the_bridge_described(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    responder = ConnectedResponder()
    llm, calls = _generated(tmp_path, responder)
    llm.__exit__(None, None, None)
    summary = capsys.readouterr().out
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert len(items) == 4 and calls == 2 * 4  # a description and a known question each
    info = load_run_info(tmp_path).generation
    assert info is not None and (info.recipe, info.known_source) == ("connected", "wiki")
    for item in items:
        steps = item.intermediates
        assert steps is not None and item.generator.recipe == "connected"
        assert steps.known_source == "wiki" and steps.known_article is not None
        description = steps.bridge_description
        assert description is not None and description.startswith("the one at the centre of")
        assert description.endswith("2023") and steps.cur_ent.text not in description
        assert steps.unknown_question == f"What is {description}?"
        if item.type == "ABC":
            # The merge adds nothing: the known question with the bridge's name replaced.
            assert steps.known_question == f"Which place is tied to {steps.cur_ent.text}?"
            assert item.question == f"Which place is tied to {description}?"
            assert steps.masked_question == (
                f"Which place is tied to a certain {description.removeprefix('the ')}?")
            assert steps.k_ent is not None and steps.k_ent.wiki_title
            assert item.answer == steps.k_ent.wiki_title.split(" (")[0]
        else:
            assert steps.category == "member states of the Commonwealth"
            assert item.question == f"Which of the member states of the Commonwealth is " \
                f"{description}?"
            assert item.answer == canonical_name(steps.cur_ent)
    assert "entities set aside as bridges" in summary or all(
        e.label != "NORP" for item in items for e in [item.intermediates.cur_ent])


def test_the_connected_check_fails_a_shortcut_and_passes_a_connected_item(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One closed-book call per item with the event masked; the item whose masked question the
    checker still answers fails `connected`, with the masked question and the reply as its
    reason. A re-run asks nothing again."""
    responder = ConnectedResponder()
    llm, generated = _generated(tmp_path, responder)
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    shortcut_item = items[0]
    (tmp_path / "articles.jsonl").unlink()  # no grounding: its verdicts are not what is tested
    masked = shortcut_item.intermediates.masked_question
    responder.shortcuts = {masked: f"That would be {shortcut_item.answer}."}
    try:
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3") == 0
        checked = llm.calls - generated
        asked, guessed = responder.masked[:], responder.guessed[:]
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3") == 0
        assert llm.calls - generated == checked  # the cache answers the second run
    finally:
        llm.__exit__(None, None, None)
    # Two calls per item that passed the other checks: the masked question, and the question
    # as a model of the cutoff would answer it.
    assert checked == 2 * len(asked) == len(asked) + len(guessed) and masked in asked
    assert sorted(guessed) == sorted(
        i.question for i in items if i.intermediates.masked_question in asked)
    validated = {c.id: c for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)}
    shortcut = validated[shortcut_item.id].validation
    assert not shortcut.passed
    [failure] = [f for f in shortcut.failures if f.check == "connected"]
    assert masked in failure.reason and shortcut_item.answer in failure.reason
    assert shortcut.connected[0].reply == f"That would be {shortcut_item.answer}."
    assert [v.check for v in shortcut.connected] == ["connected", "unknown_before_cutoff"]
    others = [c.validation for c in validated.values()
              if c.id != shortcut_item.id and c.validation.connected]
    assert others and all(v.passed for o in others for v in o.connected)
    assert all(f.check not in ("connected", "unknown_before_cutoff")
               for v in others for f in v.failures)
    assert "connected:" in capsys.readouterr().out


def test_prompts_paper_sends_the_requests_of_the_paper_recipe_byte_for_byte(
    tmp_path: Path,
) -> None:
    """The requests `--prompts paper` sends on 12 synthetic events equal those recorded from
    the code before the recipes were split (same prompts, sampling and seeds)."""
    write_jsonl(tmp_path / "events.jsonl", make_events(12))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "generate",
                     "-q", "--base-url", llm.base_url, "--model", "scripted",
                     "--concurrency", "1", "--prompts", "paper"]) == 0
        sent = sorted(json.dumps(body, sort_keys=True) for body in llm.requests)
    assert sent == PAPER_REQUESTS.read_text(encoding="utf-8").splitlines()
