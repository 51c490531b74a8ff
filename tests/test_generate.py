"""Algorithm 1 (the generate stage) against a scripted OpenAI-compatible server on loopback."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.generation.hard import choose_pairs, hard_id
from cuqa_builder.generation.output_parsing import OutputError, parse_passage, parse_question
from cuqa_builder.generation.seeding import candidate_id, draw
from cuqa_builder.generation.steps import load_templates
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.llm.cache import CallCache
from cuqa_builder.ner_memo import NerMemo
from cuqa_builder.passage_entities import PassageEntities
from cuqa_builder.prompts import load_prompt
from cuqa_builder.records.candidates import Candidate, GenerationFailure
from cuqa_builder.records.events import Entity, Event, EventSource, answer_aliases, event_id
from cuqa_builder.run import GENERATION_FAILURES as FAILURES
from cuqa_builder.testing.algorithm_llm import (
    PASSAGE_ENTITIES,
    AlgorithmResponder,
    algorithm_answer,
    make_events,
)
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM
from cuqa_builder.text import normalize_answer

# Appendix A.1 of the Self-DC paper, Tables 5-9, word for word.
PAPER_TEMPLATES = {
    "unknown_question_gen": (
        "Table 5",
        "Unknown: {unknown_event} According to the unknown event, please generate a question "
        "to which the answer is the entity {unknown_entity}.",
    ),
    "known_events_gen": ("Table 6", "Generate a detailed passage about {entity}"),
    "known_question_gen": (
        "Table 7",
        "Known: {known_event} According to known events, please generate a question to which "
        "the answer is be the entity {entity}.",
    ),
    "known_question_gen2": (
        "Table 8",
        "Seen: {known_passage} Generate a question that meets the following conditions: "
        "1. contains the terms {unknown_entity} in question, 2. the answer is {known_entity}.",
    ),
    "merge_questions": (
        "Table 9",
        "Question One: {unknown_question} Question Two: {known_question} Generate a more "
        "natural combined question of question one and question two.",
    ),
}


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def generate(out: Path, llm: ScriptedLLM, *extra: str) -> int:
    return main([
        "--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage", "generate", "-q",
        "--base-url", llm.base_url, "--model", "scripted", "--concurrency", "8", *extra,
    ])


def write_events(out: Path, events: list[Event]) -> None:
    write_jsonl(out / "events.jsonl", events)


def candidates(out: Path) -> list[Candidate]:
    return read_jsonl(out / "candidates.jsonl", Candidate)


# --- templates and randomness ---------------------------------------------------------------


def test_templates_are_the_papers_tables_word_for_word() -> None:
    templates = load_templates()
    assert set(templates) == set(PAPER_TEMPLATES)
    for name, (table, text) in PAPER_TEMPLATES.items():
        assert templates[name].text == text
        assert table in templates[name].source
        assert templates[name].sha256 == load_prompt(name).sha256


def test_branch_is_aab_four_times_in_nine() -> None:
    draws = [draw(0, f"ev-{i:04d}", 3) for i in range(900)]
    share = sum(d.aab for d in draws) / len(draws)
    assert abs(share - 4 / 9) < 0.05  # 3 standard deviations at n = 900
    assert {d.cur_index for d in draws} == {0, 1, 2}
    assert all(0 <= d.k_fraction < 1 and 0 <= d.api_seed < 2**31 for d in draws)


def test_draws_depend_only_on_seed_and_event() -> None:
    assert draw(7, "ev-x", 4) == draw(7, "ev-x", 4)
    assert any(draw(7, f"ev-{i}", 4) != draw(8, f"ev-{i}", 4) for i in range(20))
    assert candidate_id(7, "ev-x") == candidate_id(7, "ev-x") != candidate_id(8, "ev-x")


# --- output parsing -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "question"),
    [
        ("Question: Who won the 2023 final?", "Who won the 2023 final?"),
        ('**Merged question:** "Which two G7 members signed it?"\n\nAnswer: Japan',
         "Which two G7 members signed it?"),
        ("1. Who won the final?\n2. Where was it held?", "Who won the final?"),
        ("Sure! Here is a question: Who won the final?", "Who won the final?"),
        ("Here's a more natural combined question:\n\n“Which city hosted the summit?”",
         "Which city hosted the summit?"),
        ("Question One: Who came first? Question Two: Who came second?", "Who came first?"),
        ("Merged-Q: Did it take place in an African country? Merged-A: No",
         "Did it take place in an African country?"),
        ("<think>Is this right? yes</think>\nQ1: What is the treaty called?",
         "What is the treaty called?"),
        ("- 'Which agency launched the probe?'", "Which agency launched the probe?"),
        ("Who did the U.S. president meet in Hanoi? He met the premier.",
         "Who did the U.S. president meet in Hanoi?"),
        ("Name the city that hosted the summit", "Name the city that hosted the summit"),
        ("Sure.\nQuestion: In which year did the bridge open", "In which year did the bridge open"),
    ],
)
def test_messy_model_text_gives_the_first_question(raw: str, question: str) -> None:
    assert parse_question(raw) == question


@pytest.mark.parametrize(
    "raw",
    [
        "", "   \n", "Question:", "**Merged question:**\n\n",
        "The entity I'm referring to is the entity Solace Party.",  # a statement, not a question
        "Alleged Entity: Aurora Station",
    ],
)
def test_text_without_a_question_is_an_output_error(raw: str) -> None:
    with pytest.raises(OutputError):
        parse_question(raw)


def test_passage_loses_lead_in_and_markdown_but_keeps_its_words() -> None:
    raw = ("Sure! Here is a detailed passage about Paris:\n\n## Paris\n**Paris** is the capital "
           "of France.\n\n- It hosts the Louvre.")
    assert parse_passage(raw) == "Paris\nParis is the capital of France.\nIt hosts the Louvre."
    assert parse_passage("Here is where it was signed: Paris.") == (
        "Here is where it was signed: Paris."
    )
    with pytest.raises(OutputError):
        parse_passage("<think>nothing</think>")


def test_aliases_come_from_the_wiki_title() -> None:
    assert answer_aliases(Entity(text="Lumen Institute", label="ORG",
                                 wiki_title="Lumen Research Institute")) == [
        "Lumen Research Institute"]
    assert answer_aliases(Entity(text="Aurora Station", label="FAC",
                                 wiki_title="Aurora Station (spacecraft)")) == []
    assert answer_aliases(Entity(text="Warsaw", label="GPE")) == []


# --- the stage ------------------------------------------------------------------------------


def test_stage_follows_algorithm_1_and_keeps_every_intermediate(tmp_path: Path, capsys) -> None:
    events = make_events(30)
    write_events(tmp_path, events)
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm) == 0
        first_run_calls = llm.calls
        summary = capsys.readouterr().out
        assert generate(tmp_path, llm) == 0  # nothing left: no call, no duplicate
        assert llm.calls == first_run_calls
        rerun_summary = capsys.readouterr().out
        requests = list(llm.requests)

    items = {c.event.id: c for c in candidates(tmp_path)}
    assert len(items) == len(candidates(tmp_path)) == 30
    assert first_run_calls == 4 * 30
    hashes = {name: t.sha256 for name, t in load_templates().items()}
    branches = {"AAB": 0, "ABC": 0}
    for event in events:
        item = items[event.id]
        draws = draw(0, event.id, len(event.entities))
        cur_ent = event.entities[draws.cur_index]
        steps = item.intermediates
        assert steps is not None and steps.cur_ent == cur_ent
        assert item.type == steps.branch == ("AAB" if draws.aab else "ABC")
        branches[item.type] += 1
        if item.type == "AAB":
            assert item.answer == cur_ent.text and steps.k_ent is None
            assert item.answer_aliases == answer_aliases(cur_ent)
        else:
            assert steps.k_ent is not None and item.answer == steps.k_ent.text
            assert item.answer in PASSAGE_ENTITIES and item.answer != cur_ent.text
            assert any(f"the answer is {item.answer}." in str(r["messages"]) for r in requests)
            assert cur_ent.text in steps.known_question  # the bridge is in the known question
        assert steps.fallback is None
        assert [(s.kind, s.answer) for s in item.sub_questions] == [
            ("unknown", cur_ent.text), ("known", item.answer)]
        assert [s.question for s in item.sub_questions] == [
            steps.unknown_question, steps.known_question]
        known_function = "KnownQuestionGen" if item.type == "AAB" else "KnownQuestionGen2"
        assert [c.function for c in steps.calls] == [
            "UnknownQuestionGen", "KnownEventsGen", known_function, "MergeQuestions"]
        assert steps.calls[0].raw.startswith("**Question:**")
        assert steps.calls[0].parsed == steps.unknown_question
        assert steps.unknown_question.startswith("Which party is behind unknown fact")
        assert steps.known_passage.startswith(f"{cur_ent.text} worked with Marie Curie")
        assert steps.calls[3].raw.startswith("Merged question:")
        assert item.question == steps.merged_question and item.question.endswith("?")
        assert not item.question.startswith(("Merged", '"'))
        assert {c.template_hash for c in steps.calls} <= set(hashes.values())
        assert item.generator.model == "scripted"
        assert item.generator.prompts == {
            name: h for name, h in hashes.items()
            if name != ("known_question_gen2" if item.type == "AAB" else "known_question_gen")
        }
        assert item.id == candidate_id(0, event.id) and item.seed == 0
        assert (item.difficulty, item.cutoff, item.review.status) == ("easy", "2023-04",
                                                                      "unreviewed")
        assert (item.event.date, item.event.text, item.event.revid) == (
            event.date, event.text, event.source.revid)
    assert branches["AAB"] and branches["ABC"]
    assert f"AAB {branches['AAB']}, ABC {branches['ABC']}" in summary
    assert "0 new candidates" in rerun_summary and "30 already done" in rerun_summary
    cache = CallCache(tmp_path / "llm-cache.sqlite")
    totals = cache.summary()
    cache.close()
    assert totals.prompt_tokens and totals.completion_tokens
    assert (f"LLM scripted: {first_run_calls} calls, 0 cache hits, {totals.prompt_tokens} tokens "
            f"in, {totals.completion_tokens} out, $0.0000; wall ") in summary
    assert all(r["temperature"] == 0.7 and isinstance(r["seed"], int) for r in requests)
    info = json.loads((tmp_path / "run.json").read_text())["generation"]
    assert info["model"] == "scripted" and info["seed"] == 0
    assert info["sampling"]["temperature"] == 0.7 and info["prompts"] == hashes


def test_same_choices_whatever_the_limit_and_order(tmp_path: Path) -> None:
    events = make_events(12)
    full, part = tmp_path / "full", tmp_path / "part"
    write_events(full, events)
    write_events(part, list(reversed(events)))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(full, llm) == 0
        assert generate(part, llm, "--limit", "5") == 0
    whole = {c.id: c for c in candidates(full)}
    subset = candidates(part)
    assert {c.event.id for c in subset} == {e.id for e in events[-5:]}
    assert all(c.model_dump() == whole[c.id].model_dump() for c in subset)


def test_another_seed_makes_other_choices(tmp_path: Path) -> None:
    events = make_events(12)
    runs = {seed: tmp_path / f"seed-{seed}" for seed in (1, 2)}
    with ScriptedLLM(AlgorithmResponder()) as llm:
        for seed, out in runs.items():
            write_events(out, events)
            assert generate(out, llm, "--seed", str(seed)) == 0
    by_seed = {seed: {c.event.id: c for c in candidates(out)} for seed, out in runs.items()}
    assert len(by_seed[1]) == len(by_seed[2]) == 12
    assert not set(c.id for c in by_seed[1].values()) & set(c.id for c in by_seed[2].values())
    assert any(by_seed[1][e.id].intermediates != by_seed[2][e.id].intermediates for e in events)


def test_a_new_seed_on_a_run_is_refused_unless_reseeded(tmp_path: Path, capsys) -> None:
    write_events(tmp_path, make_events(3))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm, "--seed", "1") == 0
        capsys.readouterr()
        assert generate(tmp_path, llm, "--seed", "2") == 2  # two seeds would mix in one file
        assert capsys.readouterr().err.strip() == (
            f"cuqa-build: error: {tmp_path} was generated with --seed 1; --seed 2 would mix two "
            "seeds' candidates: use another --out, or add --reseed to set the old ones aside"
        )
        assert {c.seed for c in candidates(tmp_path)} == {1}
        assert generate(tmp_path, llm, "--seed", "2", "--reseed") == 0
    assert {c.seed for c in candidates(tmp_path)} == {2} and len(candidates(tmp_path)) == 3
    set_aside = read_jsonl(tmp_path / "candidates.seed-1.jsonl", Candidate)
    assert {c.seed for c in set_aside} == {1} and len(set_aside) == 3


def test_the_seed_is_recorded_with_the_first_candidate(tmp_path: Path, capsys) -> None:
    """Issue 20: the events stage recorded `"seed": 0` before any candidate existed, and
    generate --seed 21 was then refused. The seed is generation's; a resume keeps it, and only
    candidates of another seed refuse a new one."""
    (tmp_path / "empty-snapshot").mkdir()
    events = ["--out", str(tmp_path), "--cutoff", "2023-04", "--until", "2026-12-31",
              "--stage", "events", "--source", str(tmp_path / "empty-snapshot"), "-q"]
    main(events)  # fails (no page in the snapshot), as a stage that writes no candidate
    assert "seed" not in json.loads((tmp_path / "run.json").read_text())
    write_events(tmp_path, make_events(3))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm, "--seed", "21") == 0
        assert json.loads((tmp_path / "run.json").read_text())["seed"] == 21
        calls = llm.calls
        main(events)
        assert generate(tmp_path, llm) == 0  # resumed with the recorded seed: nothing to pay
        assert llm.calls == calls
        capsys.readouterr()
        assert generate(tmp_path, llm, "--seed", "22") == 2
        assert "was generated with --seed 21; --seed 22 would mix" in capsys.readouterr().err
    assert {c.seed for c in candidates(tmp_path)} == {21} and len(candidates(tmp_path)) == 3


def test_events_without_entities_or_outside_the_window_are_skipped(
    tmp_path: Path, capsys
) -> None:
    events = make_events(3)
    bare = events[1].model_copy(update={"entities": []})
    early = events[2].model_copy(update={"date": events[2].date.replace(month=3)})
    write_events(tmp_path, [events[0], bare, early])
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm) == 0
        assert llm.calls == 4
    assert [c.event.id for c in candidates(tmp_path)] == [events[0].id]
    assert "2 skipped (1 without entities, 1 outside the window)" in capsys.readouterr().out


def _abc_event_named(entity: Entity) -> Event:
    """A single-entity event whose seeded draw takes the ABC branch."""
    for day in range(100):
        text = f"{entity.text} reopened on day {day}."
        if not draw(0, event_id("2023", text), 1).aab:
            return Event(id=event_id("2023", text), date="2023-06-01", text=text,
                         source=EventSource(title="2023", revid=1, url="https://example.org/w"),
                         entities=[entity])
    raise AssertionError("no ABC draw in 100 events")


def test_abc_without_a_known_entity_falls_back_to_aab(tmp_path: Path, capsys) -> None:
    quiet = Entity(text="Quiet Harbour", label="LOC")
    event = _abc_event_named(quiet)
    write_events(tmp_path, [event])
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm) == 0
    (item,) = candidates(tmp_path)
    assert item.type == "AAB" and item.answer == "Quiet Harbour"
    assert item.intermediates is not None and item.intermediates.k_ent is None
    assert "Quiet Harbour" in (item.intermediates.fallback or "")
    assert item.intermediates.calls[2].function == "KnownQuestionGen"
    assert "1 took the other branch" in capsys.readouterr().out


def _unknown_question_of(event: Event) -> str:
    """The scripted unknown question of an event (to aim a failure at its merge step)."""
    cur_ent = event.entities[draw(0, event.id, len(event.entities)).cur_index]
    prompt = load_prompt("unknown_question_gen").render(
        unknown_event=event.text, unknown_entity=cur_ent.text)
    return parse_question(algorithm_answer(prompt))


def test_failures_are_recorded_the_run_goes_on_and_a_rerun_retries(
    tmp_path: Path, capsys
) -> None:
    events = make_events(6)
    write_events(tmp_path, events)
    refused, unusable = events[1], events[4]
    refused_marker = f"Unknown: {refused.text}"
    unusable_marker = f"Question One: {_unknown_question_of(unusable)}"
    responder = AlgorithmResponder(broken={
        refused_marker: Reply(status=500, text="server exploded"),
        unusable_marker: Reply(text="**Merged question:**"),
    })
    with ScriptedLLM(responder) as llm:
        assert generate(tmp_path, llm, "--max-retries", "0") == 0
        assert "2 failed" in capsys.readouterr().out
        failures = {f.event_id: f for f in read_jsonl(tmp_path / FAILURES, GenerationFailure)}
        assert set(failures) == {refused.id, unusable.id}
        assert failures[refused.id].step == "UnknownQuestionGen"
        assert failures[unusable.id].step == "MergeQuestions"
        assert "no question" in failures[unusable.id].reason
        assert failures[unusable.id].candidate_id == candidate_id(0, unusable.id)
        merge_tries = [r for r in llm.requests if unusable_marker in str(r["messages"])]
        assert len(merge_tries) == 3  # --attempts 3 (the default), each with its own seed
        assert len({r["seed"] for r in merge_tries}) == 3
        assert {c.event.id for c in candidates(tmp_path)} == {
            e.id for e in events} - {refused.id, unusable.id}

        del responder.broken[refused_marker]  # the endpoint recovers
        calls_before = llm.calls
        assert generate(tmp_path, llm, "--max-retries", "0") == 0
        # The refused event's known passage was cached: only its three other calls are made;
        # the unusable merge answers come from the cache and fail the same way.
        assert llm.calls - calls_before == 3
    assert len(candidates(tmp_path)) == 5
    retried = read_jsonl(tmp_path / FAILURES, GenerationFailure)
    assert [f.event_id for f in retried] == [unusable.id]


# --- hard items -----------------------------------------------------------------------------


def test_hard_items_merge_two_composable_easy_items(tmp_path: Path) -> None:
    events = make_events(10)
    write_events(tmp_path, events)
    entities = {e.id: e.entities for e in events}
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm, "--hard", "2") == 0
        assert llm.calls == 4 * 10 + 2
        assert generate(tmp_path, llm, "--hard", "2") == 0
        assert llm.calls == 4 * 10 + 2  # resumed: nothing to do
        assert generate(tmp_path, llm, "--hard", "3") == 0
        assert llm.calls == 4 * 10 + 3

    items = candidates(tmp_path)
    easy = {c.id: c for c in items if c.difficulty == "easy"}
    hard = [c for c in items if c.difficulty == "hard"]
    assert len(easy) == 10 and len(hard) == 3 == len({h.id for h in hard})
    used = [s.id for h in hard for s in h.sub_items]
    assert len(used) == len(set(used)) == 6
    for item in hard:
        first, second = item.sub_items
        assert first.model_dump() == easy[first.id].model_dump()
        assert second.model_dump() == easy[second.id].model_dump()
        assert item.id == hard_id(first.id, second.id)
        assert item.sub_questions == [*first.sub_questions, *second.sub_questions]
        assert len(item.sub_questions) == 4
        assert item.answer == second.answer and item.event == second.event
        pairing = item.pairing
        assert pairing is not None and pairing.bridge == first.answer
        bridge = normalize_answer(first.answer)
        if pairing.link == "question":
            assert f" {bridge} " in f" {normalize_answer(second.question)} "
        elif pairing.link == "entities":
            assert bridge in {normalize_answer(e.text) for e in entities[second.event.id]}
        assert pairing.call.function == "MergeQuestions"
        assert item.question == pairing.call.parsed and item.question.endswith("?")
        assert item.type == ("AAB" if pairing.link == "answer" else "ABC")
        assert "merge_questions" in item.generator.prompts

    easy_items = list(easy.values())
    pairs = [p.id for p in choose_pairs(easy_items, entities, 0, 3)]
    random.Random(5).shuffle(easy_items)
    assert [p.id for p in choose_pairs(easy_items, entities, 0, 3)] == pairs
    assert {h.id for h in hard} == set(pairs)


def test_pairing_prefers_a_bridge_in_the_question(tmp_path: Path) -> None:
    write_events(tmp_path, make_events(4))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert generate(tmp_path, llm) == 0
    a, b, c, d = candidates(tmp_path)
    a = a.model_copy(update={"answer": "Orchid Ministry"})
    b = b.model_copy(update={"question": "Which body audits the Orchid Ministry budget?",
                             "answer": "Glass Tribunal"})
    c = c.model_copy(update={"answer": "Copper Guild"})
    d = d.model_copy(update={"answer": "copper guild"})  # the same answer: a weaker link
    (pair,) = choose_pairs([d, c, b, a], {}, seed=0, count=1)
    assert (pair.first.id, pair.second.id, pair.link) == (a.id, b.id, "question")
    both = choose_pairs([d, c, b, a], {}, seed=0, count=2)
    assert [p.link for p in both] == ["question", "answer"]
    assert {both[1].first.id, both[1].second.id} == {c.id, d.id}
    assert choose_pairs([a, b, c, d], {}, seed=0, count=0) == []
    assert choose_pairs([b, c], {}, seed=0, count=5) == []  # nothing composes


# --- NER on known passages, kept --------------------------------------------------------------

PASSAGE = "Ada Lovelace wrote about the Analytical Engine with Charles Babbage in London."


def _entities_of(passage: str, memo: Path) -> list[Entity]:
    finder = PassageEntities("en_core_web_sm", memo)
    try:
        return asyncio.run(finder(passage))
    finally:
        finder.close()


def test_a_new_passage_runs_ner_and_keeps_its_entities(tmp_path: Path) -> None:
    found = _entities_of(PASSAGE, tmp_path / "memo.sqlite")
    assert "Ada Lovelace" in {entity.text for entity in found}
    memo = NerMemo(tmp_path / "memo.sqlite", pipeline="en_core_web_sm")
    assert memo.get(PASSAGE) == found
    memo.close()


def test_a_passage_seen_before_takes_its_entities_from_the_memo(tmp_path: Path) -> None:
    """A resumed run draws k_ent from the entities found before, without running NER again
    (these planted ones are not what spaCy would find)."""
    planted = [Entity(text="Planted Institute", label="ORG")]
    memo = NerMemo(tmp_path / "memo.sqlite", pipeline="en_core_web_sm")
    memo.put(PASSAGE, planted)
    memo.close()
    assert _entities_of(PASSAGE, tmp_path / "memo.sqlite") == planted
    assert _entities_of(PASSAGE + " Later.", tmp_path / "memo.sqlite") != planted


def test_a_damaged_memo_is_one_clear_error_naming_it(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    write_jsonl(out / "events.jsonl", make_events(4))
    (out / "passage-entities.sqlite").write_bytes(b"not a database at all" * 100)
    with ScriptedLLM(AlgorithmResponder()) as llm:
        assert main(["--out", str(out), "--cutoff", "2023-04", "--prompts", "paper", "--stage",
                     "generate", "-q",
                     "--base-url", llm.base_url, "--model", "scripted"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"{out / 'passage-entities.sqlite'} is not a usable cache database" in err
    assert err.endswith("move it aside: the entities are found again as they are needed")
