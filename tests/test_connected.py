"""The connected recipe (the default `--prompts`): an event's pool of bridges and known hops,
described, asked about and checked in a few requests, end to end on the example snapshot with a
scripted model; its parts (descriptions, known hops, ranking, the kept items); and `--prompts
paper` sending the paper's requests."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import date
from pathlib import Path
from typing import Any

import pytest

import cuqa_builder
from cuqa_builder.cli.build import main
from cuqa_builder.generation.algorithm import KnownArticle
from cuqa_builder.generation.bridges import named
from cuqa_builder.generation.connected import ConnectedGenerator
from cuqa_builder.generation.describing import (
    THE_EVENT_ITSELF,
    giveaways,
    read_descriptions,
    without_giveaways,
)
from cuqa_builder.generation.known_facts import (
    BridgeFacts,
    Hop,
    about_the_event,
    category_problem,
    infobox_hops,
    property_check,
)
from cuqa_builder.generation.pool import Bridge, rank, unknown_question
from cuqa_builder.generation.structural import describe_from_parse
from cuqa_builder.grounding.article_text import article_text
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.ner import parse_tokens
from cuqa_builder.records.candidates import Candidate, GenerationFailure, Intermediates
from cuqa_builder.records.events import Entity, Event, Link
from cuqa_builder.records.items import EventRef, Evidence, GeneratorInfo
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.records.pool import PoolRecord
from cuqa_builder.run import load_run_info
from cuqa_builder.snapshot import articles_dir, iter_snapshot
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.testing.pool_llm import PoolResponder
from cuqa_builder.validation.selection import MAX_SHARE, PER_EVENT, select
from cuqa_builder.verification.masking import masked_description

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "wiki-sample"
PAPER_REQUESTS = ROOT / "tests" / "fixtures" / "paper_recipe_requests.jsonl"
EVENT_CALLS = ["DescribeBridges", "KnownFacts", "GuessAnswers", "GuessAnswers",
               "AnswerWithEvent"]


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _build(out: Path, llm: ScriptedLLM, stage: str, *extra: str) -> int:
    return main(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                 "--out", str(out), "--limit", "5", "--stage", stage, "-q",
                 "--base-url", llm.base_url, "--model", "scripted", *extra])


def _generated(out: Path, responder: PoolResponder, *extra: str) -> ScriptedLLM:
    llm = ScriptedLLM(responder)
    llm.__enter__()
    assert _build(out, llm, "events") == 0
    assert _build(out, llm, "generate", *extra) == 0
    return llm


def test_the_pool_line_of_a_resumed_run_counts_every_event_of_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A command that finishes a run made partly before says what the whole run's pools held,
    not only the events it made itself."""
    with ScriptedLLM(PoolResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate", "--limit", "2") == 0
        capsys.readouterr()
        assert _build(tmp_path, llm, "generate") == 0
    summary = capsys.readouterr().out
    assert len({p.event_id for p in _pools(tmp_path)}) == 4
    assert "pool (the whole run): 4 events, 10 of 10 named things described" in summary
    assert "9 left in 4 events" in summary


def test_without_a_checker_while_composing_nothing_is_called_screened_or_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no checker while composing (the embedded model, or --check-model none) the pool
    keeps the best --per-event questions of each event unchecked: the others were not kept
    because another ranked higher, which is neither screened nor failed (issue 40, item 6)."""
    llm = _generated(tmp_path, PoolResponder(), "--check-model", "none")
    llm.__exit__(None, None, None)
    summary = capsys.readouterr().out
    members = [m.outcome.split(" (")[0] for p in _pools(tmp_path) for m in p.members]
    kept, not_kept = members.count("kept"), members.count("not kept")
    assert kept and not_kept and kept + not_kept == len(members)
    assert (f"{len(members)} questions composed ({len(members) / 4:.1f} per event; 0 known "
            f"hops refused): {kept} kept unchecked (validate checks them), {not_kept} not kept "
            "(another bridge or property ranked higher)\n") in summary
    assert "screened" not in summary and "failed:" not in summary


def test_the_yield_counts_the_failures_the_generate_line_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An event skipped (no entity with an article) is in generation-failures.jsonl but was
    never tried: the yield line does not count it as failed in generation (issue 40, item 6:
    the generate line said 22 failed, the yield line 24)."""
    llm = _generated(tmp_path, PoolResponder())
    try:
        assert _build(tmp_path, llm, "validate") == 0
    finally:
        llm.__exit__(None, None, None)
    summary = capsys.readouterr().out
    failures = read_jsonl(tmp_path / "generation-failures.jsonl", GenerationFailure)
    assert [f.step for f in failures] == ["Select"]
    assert ", 0 failed\n" in summary.split("generate: ", 1)[1]
    (all_line,) = [line for line in summary.splitlines() if line.startswith("  all ")]
    assert "of    9 (0 failed in generation)" in all_line


def _pools(run: Path) -> list[PoolRecord]:
    return read_jsonl(run / "pool.jsonl", PoolRecord)


def test_each_event_s_pool_is_described_and_asked_about_and_checked_across_events(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every named thing of an event described in one request and its known facts written in
    another; the masked and whole questions of all the events guessed in one request each; the
    survivors answered with their events in one more (issue 37). Every survivor is a
    candidate: the known question with the bridge's name replaced by its description."""
    llm = _generated(tmp_path, PoolResponder())
    llm.__exit__(None, None, None)
    summary = capsys.readouterr().out
    pools = _pools(tmp_path)
    # and a second look at the 10 survivors: their 60 counted guesses judged, 40 a request
    assert len(pools) == 4 and llm.calls == 2 * len(pools) + 3 + 2
    assert all([c.function for c in p.calls][:2] == EVENT_CALLS[:2] for p in pools)
    # each request of the checks is recorded once, on the event of its first question
    assert sorted(c.function for p in pools for c in p.calls[2:]) == sorted(
        [*EVENT_CALLS[2:], "SameAnswer", "SameAnswer"])
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert len(items) == sum(len(p.members) for p in pools) - 1 == 9  # the Assembly: no answer
    # the event's calls are counted once, on its first item
    assert sum(len(i.intermediates.calls) for i in items) == llm.calls
    info = load_run_info(tmp_path).generation
    assert info is not None and (info.recipe, info.known_source) == ("connected", "wiki")
    for item in items:
        steps = item.intermediates
        assert steps is not None and item.generator.recipe == "connected"
        description = steps.bridge_description
        assert description is not None and description.startswith("the subject of news item")
        assert description.endswith("2023") and steps.cur_ent.text not in item.question
        assert steps.unknown_question in (f"What is {description}?", f"Who is {description}?")
        assert (item.property, steps.known_from, steps.known_source) == (
            "birthplace", "article", "wiki")
        assert steps.known_question.startswith("What is the birthplace of ")
        assert steps.known_question.endswith(f"{steps.cur_ent.text}?")
        assert item.question == f"What is the birthplace of {description}?"
        assert steps.masked_question == "What is the birthplace of a certain subject of news " \
            f"item {description.split()[5].rstrip(',')}?"
        assert [(v.check, v.passed) for v in steps.screening] == [
            ("connected", True), ("unknown_before_cutoff", True), ("answered_with_event", True),
            ("one_answer", True), ("one_thing", True)]
        assert {"connected_describe_bridges", "connected_known_facts", "guess_answers_many",
                "answer_with_event_many"} <= item.generator.prompts.keys()
    assert "pool (the whole run): 4 events, 10 of 10 named things described" in summary
    assert ("10 questions composed (2.5 per event; 0 known hops refused): 10 screened by the "
            "checker") in summary
    assert "9 left in 4 events; by property: birthplace 9" in summary
    # events as events (5 = 1 + 0 + 4 + 0), candidates as candidates (issue 40, item 3)
    assert ("generate: 5 events: 1 skipped (without an entity that had an article at the "
            "cutoff), 0 already done, 4 gave 9 new candidates (AAB 0, ABC 9), 0 failed\n"
            ) in summary
    # every event of the window is in one of the two files
    events = read_jsonl(tmp_path / "events.jsonl", Event)[:5]
    failures = read_jsonl(tmp_path / "generation-failures.jsonl", GenerationFailure)
    assert {i.event.id for i in items} | {f.event_id for f in failures} == {
        e.id for e in events if e.date > date(2023, 4, 30)}
    assert [f.step for f in failures] == ["Select"]


def test_a_guessed_question_fails_in_its_pool_and_validate_asks_nothing_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checker guesses the answer of the Thai election's masked question: its only member
    fails `connected` (pool.jsonl says so), it is not asked with the event, and the event fails
    with the pool's count. Validate finds every check in the candidates and asks nothing; another
    checker model is asked anew, three calls an item."""
    responder = PoolResponder(guessed={"Move Forward": "masked"})
    llm = _generated(tmp_path, responder)
    generated = llm.calls
    # each event's two, then the checks of all four, and the second look at 9 survivors
    assert generated == 2 * 4 + 3 + 2
    [thai] = [p for p in _pools(tmp_path) if len(p.members) == 1
              and p.bridges[0].entity.text == "Move Forward Party"]
    [member] = thai.members
    assert member.outcome.startswith("connected: with the event masked")
    [failure] = [f for f in read_jsonl(tmp_path / "generation-failures.jsonl",
                                       GenerationFailure) if f.step == "Pool"]
    assert failure.reason == "none of the 1 questions of 1 described named things passed: " \
        "1 connected"
    (tmp_path / "articles.jsonl").unlink(missing_ok=True)  # grounding is not what is tested
    try:
        assert _build(tmp_path, llm, "validate", "--max-share", "1", "--per-event", "5") == 0
        assert llm.calls == generated
        # the checker asks the items that passed the format checks (the scripted questions
        # differ only by their tags: some are near-duplicates)
        checked = [c for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)
                   if c.validation.connected]
        assert all(len(c.validation.connected) == 5 for c in checked) and checked
        assert _build(tmp_path, llm, "validate", "--max-share", "1", "--per-event", "5",
                      "--check-model", "checker") == 0
        # three calls an item, the masked questions alike within an event asked once
        masked = {c.intermediates.masked_question for c in checked}
        assert llm.calls == generated + len(masked) + 2 * len(checked)
    finally:
        llm.__exit__(None, None, None)
    validated = [c for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)
                 if c.validation.connected]
    assert {v.model for c in validated for v in c.validation.connected} == {"checker"}
    assert all(v.passed for c in validated for v in c.validation.connected)
    assert f"checker: {len(checked)} candidates asked by checker" in capsys.readouterr().out


def test_a_pooled_reply_missing_a_question_s_line_fails_it_as_unreadable(tmp_path: Path) -> None:
    """The whole questions get a reply without a line for Q2: that question has measured
    nothing and fails `unreadable`, the reply quoted; the others are judged."""
    dropped: list[str] = []

    class LosesALine(PoolResponder):
        def __call__(self, body: dict[str, Any]) -> Reply:
            reply = super().__call__(body)
            prompt = last_user_message(body)
            if prompt.startswith("Imagine") and " a certain " not in prompt:
                dropped.append(re.search(r"^Q2\. (.+)$", prompt, re.MULTILINE)[1])
                reply.text = "\n".join(line for line in reply.text.splitlines()
                                       if not line.startswith("Q2:"))
            return reply

    llm = _generated(tmp_path, LosesALine())
    llm.__exit__(None, None, None)
    members = [m for p in _pools(tmp_path) for m in p.members]
    [lost] = [m for m in members if m.outcome.startswith("unreadable")]
    assert [lost.question] == dropped
    assert "cannot be read (no line for Q2)" in lost.outcome
    assert [v.unreadable for v in lost.verdicts if v.unreadable] == ["no line for Q2"]
    assert sum(m.outcome == "survived" for m in members) == len(members) - 1


def test_a_model_of_the_cutoff_guesses_at_the_whole_questions_while_composing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --probe-model, that model makes the whole questions' guesses (one request for
    the events checked together), the checker the masked ones; validate finds both in the
    candidates."""
    llm = _generated(tmp_path, PoolResponder(), "--probe-model", "cutoff-model")
    try:
        generated = llm.calls
        guessers = {(body["model"], " a certain " in last_user_message(body))
                    for body in llm.requests
                    if last_user_message(body).startswith("Imagine you know everything")}
        assert guessers == {("cutoff-model", False), ("scripted", True)}
        assert "cutoff-model (a model of the cutoff) guessed at the whole questions: 1 calls" \
            in capsys.readouterr().out
        (tmp_path / "articles.jsonl").unlink(missing_ok=True)
        assert _build(tmp_path, llm, "validate", "--probe-model", "cutoff-model") == 0
        asked = [last_user_message(body) for body in llm.requests[generated:]]
        assert asked and not any(a.startswith("Imagine you know everything") for a in asked)
    finally:
        llm.__exit__(None, None, None)
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert all(v.knowledge == "cutoff" for item in items for v in item.validation.connected
               if v.check == "unknown_before_cutoff")


def test_the_check_model_is_the_checker_while_composing_too(tmp_path: Path) -> None:
    llm = _generated(tmp_path, PoolResponder(), "--check-model", "checker")
    try:
        generated = llm.calls
        checked_by = {body["model"] for body in llm.requests
                      if last_user_message(body).startswith("Imagine you know everything")}
        assert checked_by == {"checker"}
        (tmp_path / "articles.jsonl").unlink(missing_ok=True)
        assert _build(tmp_path, llm, "validate", "--check-model", "checker") == 0
        assert llm.calls == generated
    finally:
        llm.__exit__(None, None, None)


def test_an_event_whose_named_things_are_all_foreseeable_costs_two_calls(tmp_path: Path) -> None:
    """Every named thing of the coronation skipped as foreseeable: the event fails after its
    two composing requests, with the reasons counted; the others go on."""
    responder = PoolResponder(skip=frozenset({"Charles III", "Camilla", "Westminster Abbey",
                                              "London"}))
    llm = _generated(tmp_path, responder)
    llm.__exit__(None, None, None)
    [failure] = [f for f in read_jsonl(tmp_path / "generation-failures.jsonl",
                                       GenerationFailure) if f.step == "Pool"]
    assert failure.reason == ("no question to ask: 0 of 4 named things described (4 skipped), "
                              "no known hop for any")
    assert [c.function for c in failure.calls] == ["DescribeBridges", "KnownFacts"]
    [coronation] = [p for p in _pools(tmp_path) if len(p.bridges) == 4]
    assert all(t.set_aside == "skipped: foreseeable: expected" for t in coronation.bridges)


def test_a_description_the_checks_refuse_gives_way_to_the_parse_s(tmp_path: Path) -> None:
    """A model whose descriptions name their bridge: each is refused with the reason, and the
    event sentence's parse describes the bridge instead, a name in it that gives the bridge
    away said by its kind."""

    class NamesIt(PoolResponder):
        def __call__(self, body: dict[str, Any]) -> Reply:
            prompt = last_user_message(body)
            if "For each named thing listed, write a description" in prompt:
                import re
                return Reply(text="\n".join(f"B{n}: the {name} of 2023" for _, n, name in
                                            re.findall(r"^(B)(\d+)\. (.+)$", prompt, re.M)))
            return super().__call__(body)

    with ScriptedLLM(NamesIt()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        # the scripted checker knows only its own descriptions: it answers none of the parse's
        # questions with the event, so no candidate is made (exit 1); the pools are kept
        assert _build(tmp_path, llm, "generate") == 1
    [coronation] = [p for p in _pools(tmp_path) if len(p.bridges) == 4]
    london = next(t for t in coronation.bridges if t.entity.text == "London")
    # the abbey's article names London: said by its kind, it gives the city away no more
    assert london.description == ("the settlement where the coronation of Charles III and "
                                  "Camilla took place at a church in May 2023")
    refused = [t for t in coronation.bridges if t.description is None]
    assert refused and all(t.set_aside.startswith("refused: the description names the bridge")
                           for t in refused)


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


@pytest.mark.parametrize(("question", "refused"), [
    ("What is the capital of Niger State?", None),
    ("What is the birthplace of Sandra Torres?", None),
    ("Where was Sandra Torres born?", "goes on after the bridge"),
    ("Which country borders Greece to the north?", "goes on after the bridge"),
    ("Which is the oldest Grand Slam?", "between an article and the bridge"),
    ("What is Minna, the capital of Niger State?", "names its own answer"),
    ("What is the capital of Nigeria?", "does not name the bridge"),
])
def test_the_known_question_asks_one_property_and_ends_with_the_bridge(
    question: str, refused: str | None
) -> None:
    check = property_check(["Niger State", "Sandra Torres", "Greece", "Grand Slam"], ["Minna"])
    problem = check(question)
    assert (problem is None) if refused is None else (refused in problem)


@pytest.mark.parametrize(("description", "masked"), [
    ("the Danish cyclist who won the Tour de France for the second year in a row in July 2023",
     "a certain Danish cyclist"),
    ("the club in Hoylake, England, where an American won the Open in July 2023",
     "a certain club in Hoylake"),
    ("the mountain range struck by a magnitude 6.8 earthquake in September 2023",
     "a certain mountain range"),
    ("the Nigerian state in which a boat capsized in September 2023", "a certain Nigerian state"),
    ("the city hosting talks a day after a ceasefire in September 2023", "a certain city"),
])
def test_the_masked_question_keeps_what_the_description_says_without_the_event(
    description: str, masked: str
) -> None:
    assert masked_description(description) == masked


def _facts(entity: Entity, kind: str, links: list[Entity] | None = None) -> BridgeFacts:
    return BridgeFacts(entity, [entity.text], kind, links or [])


def test_the_infobox_makes_a_known_hop_of_each_lasting_relation() -> None:
    """Each infobox relation with a template (and one named value) is a hop, asked without a
    call; a relation the event itself names is not, nor one that changes (a leader)."""
    page = next(p for p in iter_snapshot(articles_dir(SAMPLE)) if p.meta.title == "Morocco")
    text = article_text(page)
    relations = {r.parameter: r for r in text.relations}
    known = KnownArticle(
        passage=text.passage, links=text.lead_links, kind=text.kind,
        evidence=Evidence(title="Morocco", revid=1, timestamp="2023-01-01T00:00:00Z"),
        relations=[relations["capital"], relations["leader_name2"]])
    morocco = Entity(text="Morocco", label="GPE", wiki_title="Morocco")
    [event] = make_events(1)
    hops, _ = infobox_hops(known, _facts(morocco, "country"), event)
    assert [(h.property, h.answer.wiki_title, h.question, h.known_from) for h in hops] == [
        ("capital", "Rabat", "What is the capital of Morocco?", "infobox")]
    in_the_news = event.model_copy(update={"text": "An earthquake shakes Rabat."})
    assert infobox_hops(known, _facts(morocco, "country"), in_the_news)[0] == []


def test_the_templated_known_hop_names_the_bridge_as_its_article_does() -> None:
    """"the Kestrian Isles", as the lead writes it; a list value (two official languages) has
    no single answer to ask for."""
    text = article_text(Page(
        meta=PageMeta(title="Kestrian Isles", revid=1, timestamp="2023-01-01T00:00:00Z"),
        wikitext=(ROOT / "tests/fixtures/articles/Kestrian_Isles.wiki").read_text("utf-8")))
    known = KnownArticle(
        passage=text.passage, links=text.lead_links, kind=text.kind, relations=text.relations,
        evidence=Evidence(title="Kestrian Isles", revid=1, timestamp="2023-01-01T00:00:00Z"),
        names=text.names, definite=text.definite)
    isles = Entity(text="Kestrian Isles", label="GPE", wiki_title="Kestrian Isles")
    [event] = make_events(1)
    hops, _ = infobox_hops(known, _facts(isles, "islands"), event)
    assert [(h.answer.wiki_title, h.question) for h in hops] == [
        ("Port Aldren", "What is the capital of the Kestrian Isles?"),
        ("Port Aldren", "What is the largest city of the Kestrian Isles?"),
        ("Kestrian krone", "What is the currency of the Kestrian Isles?"),
    ]


@pytest.mark.parametrize(("name", "about"), [
    ("2023 Guatemalan general election", True),  # dated the event's year
    ("Guatemalan general election", True),  # a topic the event is filed under
    ("Semilla", True),  # named by the event itself
    ("Guatemala City", False),
])
def test_the_known_answer_is_never_the_event_or_named_by_it(name: str, about: bool) -> None:
    [event] = make_events(1)
    event = event.model_copy(update={
        "text": "Bernardo Arévalo of Semilla wins the presidential runoff.",
        "topics": ["Guatemalan general election"], "date": event.date})
    assert about_the_event(Entity(text=name, label="LINK", wiki_title=name), event) is about


@pytest.mark.parametrize(("kind", "category", "problem"), [
    ("country", "member states of NATO", None),
    ("team", "member states of NATO", "holds states, not a team"),
    ("national football team", "member states of NATO", "holds states"),
    ("team", "Africa Cup of Nations participants", None),
    ("district", "districts of Tamil Nadu", None),
    ("district", "Tamil", "not a short plural noun phrase"),
])
def test_a_category_holds_things_of_the_bridge_s_kind(kind: str, category: str,
                                                      problem: str | None) -> None:
    """A national team is no member state (issue 31: "Which of the member states of NATO is
    the country whose national team won ...?" answered by the team)."""
    bridge = Entity(text="Germany men's national basketball team", label="ORG")
    found = category_problem(category, _facts(bridge, kind))
    assert (found is None) if problem is None else (problem in found)


def test_a_link_that_gives_only_the_start_of_its_title_is_named_by_the_title() -> None:
    team = Entity(text="Germany", label="GPE",
                  wiki_title="Germany men's national basketball team")
    assert named(team).text == "Germany men's national basketball team"
    assert named(Entity(text="Maui", label="GPE", wiki_title="Maui")).text == "Maui"


def _known(title: str, lead: str, kind: str | None = None, links: tuple[str, ...] = (),
           size: int = 0) -> KnownArticle:
    return KnownArticle(passage=lead, links=[Link(title=t, text=t) for t in links], kind=kind,
                        evidence=Evidence(title=title, revid=1, timestamp="2023-01-01T00:00:00Z"),
                        size=size)


def test_the_pool_is_ranked_by_what_predicts_that_a_question_survives() -> None:
    """A little-known person's birthplace first; a famous one's later; a country's capital,
    and an answer the news points to, last."""
    person = Entity(text="Fernando Villavicencio", label="PERSON")
    country = Entity(text="Ecuador", label="GPE")
    birth = Hop("birthplace", "infobox", "What is the birthplace of X?", person)
    capital = Hop("capital", "infobox", "What is the capital of X?", country)

    def bridge(entity: Entity, kind: str, size: int) -> Bridge:
        return Bridge(entity, entity.text, [entity.text], kind, _known(entity.text, ".",
                                                                      size=size))

    little = rank(bridge(person, "person", 6_000), birth, "Alausí", frozenset())
    famous = rank(bridge(person, "person", 200_000), birth, "Alausí", frozenset())
    pointed = rank(bridge(person, "person", 6_000), birth, "Quito", frozenset({"quito"}))
    capital_rank = rank(bridge(country, "country", 6_000), capital, "Quito", frozenset())
    assert little > famous > capital_rank and little > pointed


def _item(item_id: str, event: str, bridge: str, prop: str, rank_: float) -> Candidate:
    steps = Intermediates(branch="ABC", cur_ent=Entity(text=bridge, label="PERSON"),
                          known_passage="", unknown_question="", known_question="",
                          known_answer="", merged_question="", rank=rank_)
    return Candidate(
        id=item_id, question="?", answer="a", type="ABC", difficulty="easy", sub_questions=[],
        event=EventRef(id=event, date=date(2024, 1, 1), text="", source_title="", revid=1),
        cutoff="2023-04", generator=GeneratorInfo(model="m"), intermediates=steps, seed=0,
        property=prop)


def test_each_event_keeps_its_best_items_of_other_bridges_and_properties_under_a_share() -> None:
    """Up to --per-event items an event, of different bridges and properties, best ranked
    first; a property over --max-share gives way to the event's next best of another."""
    items = [
        _item("a1", "A", "P", "birthplace", 0.9), _item("a2", "A", "P", "alma mater", 0.8),
        _item("a3", "A", "Q", "district", 0.7), _item("b1", "B", "R", "birthplace", 0.9),
        _item("b2", "B", "S", "founder", 0.5), _item("c1", "C", "T", "birthplace", 0.9),
        _item("c2", "C", "U", "birthplace", 0.8),
    ]
    dropped = select(items, per_event=2, max_share=1.0).dropped
    assert sorted(dropped) == ["a2", "c2"]  # the same bridge; the same property
    assert {f.check for f in dropped.values()} == {PER_EVENT}
    capped = select(items, per_event=2, max_share=0.4).dropped
    kept = sorted(i.id for i in items if i.id not in capped)
    counts = Counter(i.property for i in items if i.id in kept)
    assert max(counts.values()) <= max(1, int(0.4 * len(kept)))
    assert MAX_SHARE in {f.check for f in capped.values()}
    assert "c1" in kept or "a1" in kept


@pytest.mark.parametrize(("text", "bridge", "kind", "described"), [
    ("A business jet crashes in Tver Oblast, Russia, killing all ten people aboard.",
     "Tver Oblast", "place", "the place where a business jet crashed, killing all ten people "
     "aboard in August 2023"),
    ("Wildfires on Maui, Hawaii, destroy most of the town of Lahaina.", "Maui", "island",
     "the island where wildfires destroyed most of the town of Lahaina in August 2023"),
    ("The opposition Move Forward Party wins the most seats in the Thai general election.",
     "Move Forward Party", "political party", "the political party that won the most seats "
     "in the Thai general election in August 2023"),
    ("Nippon Steel agrees to buy U.S. Steel for $14.1 billion.", "U.S. Steel", "company",
     "the company that Nippon Steel agreed to buy for $14.1 billion in August 2023"),
    ("ISRO's lander touches down near the Moon's south pole, making India the first country to "
     "land there.", "India", "country", None),  # a small clause: no verb's subject or object
    # the object of a verb: that verb in the passive, its subject the agent
    ("Bernardo Arévalo of the Semilla movement wins the presidential runoff in Guatemala, "
     "defeating former first lady Sandra Torres.", "Sandra Torres", "person",
     "the person defeated by Bernardo Arévalo of the Semilla movement in Guatemala in August "
     "2023"),
    ("Recep Tayyip Erdoğan defeats Kemal Kılıçdaroğlu in the runoff and is re-elected President "
     "of Turkey.", "Kemal Kılıçdaroğlu", "person",
     "the person defeated by Recep Tayyip Erdoğan in the runoff in August 2023"),
    ("Spain beats England 1–0 in the final in Sydney to win the FIFA Women's World Cup for the "
     "first time.", "FIFA Women's World Cup", "tournament",
     "the tournament won by Spain for the first time in the final in Sydney in August 2023"),
    # what was only agreed keeps its relative clause
    ("Nippon Steel agrees to buy U.S. Steel for $14.1 billion.", "U.S. Steel", "company",
     "the company that Nippon Steel agreed to buy for $14.1 billion in August 2023"),
    # a name that opens the sentence keeps its capital
    ("Spain beats England 1–0 in the final in Sydney.", "Sydney", "city",
     "the city where Spain beat England 1–0 in the final in August 2023"),
    # a pronoun with nothing to refer to, a later sentence that leans on the first, a bridge
    # that is one of two, a verb the tagger found inside a name ("Spurs")
    ("Authorities in Greece call it the largest evacuation in the country's history.", "Greece",
     "country", None),
    ("Wildfires spread on Rhodes. Authorities in Greece call it the largest evacuation in the "
     "country's history.", "Greece", "country", None),
    ("Luisa González of the Citizen Revolution Movement and businessman Daniel Noboa advance to "
     "a runoff in the snap presidential election in Ecuador.", "Luisa González", "person", None),
    ("The San Antonio Spurs select French center Victor Wembanyama with the first overall pick "
     "of the draft.", "Victor Wembanyama", "person", None),
    # the subject's verb with its auxiliary, without a coordinated clause of another subject
    ("Former mayor Clara Brugada of Morena is elected head of government of Mexico City, and "
     "the quick count suggests a large majority for her allies.", "Clara Brugada", "person",
     "the person who was elected head of government of Mexico City in August 2023"),
    ("Francesco Bagnaia wins at the Mugello Circuit for the third year running, and his "
     "teammate Enea Bastianini finishes second.", "Francesco Bagnaia", "person",
     "the person who won at the Mugello Circuit for the third year running in August 2023"),
    # an acronym and a name that end in capitals or "s" keep them
    ("OPEC+ ministers meeting in Riyadh agree to keep their output cut until the end of 2025.",
     "Riyadh", "city", "the city where OPEC+ ministers meeting agreed to keep their output cut "
     "until the end of 2025 in August 2023"),
    ("Harris concedes in a speech at Howard University in Washington.", "Washington", "city",
     "the city where Harris conceded in a speech at Howard University in August 2023"),
    # a place in a clause that opens the sentence, an infinitive's subject, a list of events, a
    # region the cut would leave behind
    ("Making a surprise visit to Singapore, President Volodymyr Zelenskyy asks Asian leaders to "
     "attend the peace summit.", "Singapore", "city", None),
    ("Zelenskyy accuses China of helping Russia to discourage countries from attending the "
     "summit.", "Russia", "country", None),
    ("Matchday 4: Inter Milan beat Arsenal 1–0 at San Siro; Barcelona win 5–2 at Red Star "
     "Belgrade.", "San Siro", "stadium", None),
    ("Ukrainian drones strike an arsenal near Toropets, Tver Oblast, setting off explosions.",
     "Toropets", "town", None),
])
def test_a_description_from_the_parse_keeps_the_event_s_words(
    text: str, bridge: str, kind: str, described: str | None
) -> None:
    start = text.index(bridge)
    tokens = parse_tokens(text, "en_core_web_sm")
    assert describe_from_parse(tokens, start, start + len(bridge), kind, "August 2023") == (
        described)


@pytest.mark.parametrize(("kind", "description", "question"), [
    ("islands", "the islands where wildfires destroyed most of the town of Lahaina in August "
     "2023", "What are the islands where wildfires destroyed most of the town of Lahaina in "
     "August 2023?"),
    ("person", "the person defeated by Bernardo Arévalo in Guatemala in August 2023",
     "Who is the person defeated by Bernardo Arévalo in Guatemala in August 2023?"),
])
def test_the_unknown_question_agrees_with_the_kind(kind: str, description: str,
                                                   question: str) -> None:
    assert unknown_question(kind, description) == question


def test_a_resumed_run_keeps_its_recipe_and_another_is_refused(tmp_path: Path) -> None:
    """Like the seed, the recipe is the run's: a re-run without --prompts goes on with the one
    recorded, and another one would mix two recipes' candidates."""
    write_jsonl(tmp_path / "events.jsonl", make_events(3))
    with ScriptedLLM(AlgorithmResponder()) as llm:
        argv = ["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "generate", "-q",
                "--base-url", llm.base_url, "--model", "scripted"]
        assert main([*argv, "--prompts", "paper"]) == 0
        paid = llm.calls
        assert main(argv) == 0 and llm.calls == paid  # the paper recipe, all done: no call
        assert main([*argv, "--prompts", "connected"]) == 2
    info = load_run_info(tmp_path).generation
    assert info is not None and info.recipe == "paper"


def test_the_event_itself_is_no_bridge() -> None:
    """An election dated the event's year (or the topic the event is filed under) was scheduled
    before the cutoff: described by its own news, it gives itself away."""
    [event] = make_events(1)
    event = event.model_copy(update={"entities": [
        Entity(text="Guatemalan general election", label="LINK",
               wiki_title=f"{event.date.year} Guatemalan general election"),
        Entity(text="Semilla", label="ORG", wiki_title="Movimiento Semilla"),
    ]})
    counted: Counter[str] = Counter()
    assert [e.text for e in ConnectedGenerator.bridge_candidates(event, counted)] == ["Semilla"]
    assert counted == {THE_EVENT_ITSELF: 1}


def test_a_name_that_gives_the_bridge_away_is_refused_or_said_by_its_kind() -> None:
    """"the town of Lahaina" leads a reader of the cutoff to Maui (Lahaina's article names
    Maui), "the High Atlas" to Morocco (Morocco's article links it): a strong model's
    description naming it is refused with the reason; the parse's description says it by its
    kind. A name unrelated to the bridge stays."""
    [event] = make_events(1)
    maui = Entity(text="Maui", label="GPE", wiki_title="Maui")
    lahaina = Entity(text="Lahaina", label="GPE", wiki_title="Lahaina, Hawaii")
    hilo = Entity(text="Hilo", label="GPE", wiki_title="Hilo, Hawaii")
    event = event.model_copy(update={"entities": [maui, lahaina, hilo], "text":
                                     "Wildfires on Maui destroy most of the town of Lahaina."})
    known = {"Maui": _known("Maui", "Maui is the second-largest island of Hawaii.", "island"),
             "Lahaina, Hawaii": _known("Lahaina", "Lahaina is a town on the west coast of Maui.",
                                       "census-designated place"),
             "Hilo, Hawaii": _known("Hilo", "Hilo is a town on Hawaii Island.", "town")}
    described = f"the island where wildfires destroyed most of the town of Lahaina in " \
        f"{event.date:%B %Y}"
    assert [e.text for e in giveaways(described, maui, event, known)] == ["Lahaina"]
    assert without_giveaways(described, [lahaina], event, known) == (
        f"the island where wildfires destroyed most of a town in {event.date:%B %Y}")
    assert giveaways("the island where fires spread near Hilo in August 2023", maui, event,
                     known) == []
    [refused] = read_descriptions(f"B1: {described}", [maui], event, known)
    assert refused.set_aside == ("refused: the description names 'Lahaina', which gives 'Maui' "
                                 "away without the news")
    morocco = Entity(text="Morocco", label="GPE", wiki_title="Morocco")
    atlas = Entity(text="High Atlas", label="LINK", wiki_title="High Atlas")
    quake = event.model_copy(update={"entities": [atlas, morocco]})
    known = {"Morocco": _known("Morocco", "Morocco lies south of Spain.", links=("High Atlas",)),
             "High Atlas": _known("High Atlas", "A range of peaks.", "mountain range")}
    struck = "the country where a quake struck the High Atlas in 2023"
    assert without_giveaways(struck, giveaways(struck, morocco, quake, known), quake, known) == (
        "the country where a quake struck a mountain range in 2023")
    # a person's article names their country, and the country gives them away to no one
    arevalo = Entity(text="Bernardo Arévalo", label="PERSON", wiki_title="Bernardo Arévalo")
    country = Entity(text="Guatemala", label="GPE", wiki_title="Guatemala")
    runoff = event.model_copy(update={"entities": [arevalo, country]})
    at_cutoff = {
        "Bernardo Arévalo": _known("Bernardo Arévalo", "Arévalo is a Guatemalan politician.",
                                   "person", links=("Guatemala",)),
        "Guatemala": _known("Guatemala", "Guatemala is a country in Central America.",
                            "country")}
    won = "the politician who won Guatemala's presidential runoff in August 2023"
    assert giveaways(won, arevalo, runoff, at_cutoff) == []
    assert [e.text for e in giveaways(struck, morocco, quake, known)] == ["High Atlas"]
    # a name that modifies a noun, or the event itself, cannot be said by a kind: no description
    slam = Entity(text="Grand Slam", label="LINK", wiki_title="Grand Slam (tennis)")
    assert without_giveaways("the player who won his 24th Grand Slam title in 2023", [slam],
                             quake, known) is None
    cup = Entity(text=f"{quake.date.year} Rugby World Cup", label="EVENT")
    assert without_giveaways(f"the country that hosted the {cup.text}", [cup], quake, known) \
        is None
    # a name whose article gives no plain kind would read "in a place": no description
    guatemala = Entity(text="Guatemala", label="GPE", wiki_title="Guatemala")
    assert without_giveaways("the person defeated in Guatemala in 2023", [guatemala], quake,
                             known) is None


def test_a_description_that_leans_on_the_event_s_topic_line_is_refused() -> None:
    """"the death toll from the earthquake rose" under the topic "2023 Al Haouz earthquake":
    in a question "the earthquake" refers to nothing."""
    [event] = make_events(1)
    event = event.model_copy(update={"topics": ["2023 Al Haouz earthquake"]})
    morocco = Entity(text="Morocco", label="GPE", wiki_title="Morocco")
    [said] = read_descriptions(
        f"B1: the country where the death toll from the earthquake rose above 2,000 in "
        f"{event.date:%B %Y}", [morocco], event, {})
    assert said.set_aside == ("refused: the description says 'the earthquake', which only the "
                              "event's topic line names")


def test_a_checker_down_fails_the_events_checked_together_and_a_re_run_asks_only_that(
    tmp_path: Path,
) -> None:
    """Issue 31, with the checks asked across events (issue 37): the checker fails for good on
    the masked guesses (HTTP 500, no retry): every event checked with them fails as not
    answered, with its calls; the same command then asks only the failed call again, and
    every request the events were dealt into is the same (the rest come from the cache)."""

    class DownOnce(PoolResponder):
        down = True

        def __call__(self, body: dict[str, Any]) -> Reply:
            prompt = last_user_message(body)
            if self.down and prompt.startswith("Imagine") and " a certain " in prompt:
                return Reply(status=500, text="checker down")
            return super().__call__(body)

    responder = DownOnce()
    with ScriptedLLM(responder) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate", "--max-retries", "0") == 1
        assert not read_jsonl(tmp_path / "candidates.jsonl", Candidate)
        failures = [f for f in read_jsonl(tmp_path / "generation-failures.jsonl",
                                          GenerationFailure) if f.step != "Select"]
        assert len(failures) == 4 and all(f.step == "Check" and f.reason.startswith(
            "the checker scripted could not be asked while composing: ") for f in failures)
        assert all("DescribeBridges" in [c.function for c in f.calls] for f in failures)
        responder.down = False
        before = llm.calls
        assert _build(tmp_path, llm, "generate") == 0
        # the masked guesses (the whole ones were answered and cached), the second look at
        # the survivors' guesses (two requests), then the open book
        assert llm.calls - before == 4
    assert len(read_jsonl(tmp_path / "candidates.jsonl", Candidate)) == 9


def test_a_known_facts_reply_in_another_step_s_shape_is_refused() -> None:
    """Issue 31: a reply in another step's shape ("Answer: ..." / "Question: ...") is no line
    of known facts (asked again); a category that is no plural phrase is refused."""
    from cuqa_builder.generation.known_facts import parse_facts
    from cuqa_builder.generation.output_parsing import OutputError

    with pytest.raises(OutputError):
        parse_facts("Answer: San Jose, California\nQuestion: Where is the company based?")
    company = _facts(Entity(text="Cisco", label="ORG"), "company")
    assert "not a plural noun phrase" in category_problem("San Jose, California", company)
    assert category_problem("Fortune 500 companies", company) is None


def test_a_known_question_not_ending_with_the_bridge_is_asked_by_its_template() -> None:
    """"Which university did X attend?" strands a verb after the description: a property the
    infobox templates know is asked their way ("What is the alma mater of X?"); one they do not
    know is refused."""
    from cuqa_builder.generation.known_facts import read_facts

    [event] = make_events(1)
    scholz = Entity(text="Olaf Scholz", label="PERSON", wiki_title="Olaf Scholz")
    hamburg = Entity(text="University of Hamburg", label="LINK",
                     wiki_title="University of Hamburg")
    facts = BridgeFacts(scholz, ["Olaf Scholz"], "person", [hamburg], "Olaf Scholz")
    hops, refused = read_facts(
        "T1 | university | University of Hamburg | Which university did Olaf Scholz attend?\n"
        "T1 | trained at | University of Hamburg | Where was Olaf Scholz trained at?",
        [facts], event, "article")
    assert [(h.property, h.question) for h in hops[0]] == [
        ("alma mater", "What is the alma mater of Olaf Scholz?")]
    assert len(refused) == 1 and "goes on after the bridge" in refused[0]


def test_the_card_counts_every_check_that_ran_and_who_wrote_the_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32.9: the card listed the format checks only, though the checker's four decided
    items; and it said a model wrote the questions whatever made them. Its table holds the
    validate summary's counts, the checker's included."""
    llm = _generated(tmp_path, PoolResponder())
    (tmp_path / "articles.jsonl").unlink()  # no grounding: the checker decides here
    try:
        capsys.readouterr()
        assert _build(tmp_path, llm, "validate", "--max-share", "1") == 0
        validated = capsys.readouterr().out
        assert _build(tmp_path, llm, "release", "--name", "card",
                      "--output-root", str(tmp_path / "output")) == 0
    finally:
        llm.__exit__(None, None, None)
    card = (tmp_path / "output" / "card" / "README.md").read_text(encoding="utf-8")
    table = {name: (int(passed), int(failed)) for name, passed, failed in
             re.findall(r"^  (\w+) +(\d+) +(\d+)$", validated, re.MULTILINE)}
    assert table["connected"] == (9, 0) and table["per_event"][1] > 0, validated
    for name, (passed, failed) in table.items():
        assert re.search(rf"^\| `{name}` \| [^|]+ \| {passed} \| {failed} \|$", card,
                         re.MULTILINE), name
    assert ("| `connected` | with the event masked, none of the first 3 guesses of the checker "
            "model names the answer") in card
    released = len(cuqa_builder.load(tmp_path / "output" / "card"))
    assert f"- Written by a language model: **{released}** items, by `scripted`" in card
    assert "Composed from structure" not in card
    assert "The questions were generated by a language model from those texts" in card
    # the mix by what the known hop asks (issue 33): here every item asks a birthplace
    assert "| known property | items | share |" in card
    assert f"| birthplace | {released} | 100% |" in card


def test_an_empty_known_facts_reply_is_no_hop_not_a_refusal() -> None:
    """The prompt lets the model write nothing for a thing with no lasting property."""
    from cuqa_builder.generation.known_facts import parse_facts

    assert parse_facts("") == "" and parse_facts("NONE") == ""


def test_the_pool_summary_counts_one_refusal_reason_once() -> None:
    from cuqa_builder.generation.pool_report import _head

    assert _head("refused: the description names the bridge 'Sittwe'") == _head(
        "refused: the description names the bridge 'Turkey'")


def test_the_pool_model_answers_a_question_it_did_not_describe_with_nothing() -> None:
    responder = PoolResponder(answer_of={"Sittwe": "Kaladan River", "Turkey": "Anatolia"})
    assert responder._answer("What is the birthplace of the person who won in May 2023?") == ""
