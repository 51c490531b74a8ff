"""The connected recipe (the default `--prompts`) and the `connected` check, end to end on the
example snapshot with a scripted model; and `--prompts paper` sending today's requests."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import cuqa_builder
from cuqa_builder.annotation.tasks import evidence
from cuqa_builder.cli.build import main
from cuqa_builder.generation.algorithm import KnownArticle
from cuqa_builder.generation.connected import (
    THE_EVENT_ITSELF,
    ConnectedGenerator,
    _bridge,
    about_the_event,
    choice_check,
    giveaways,
    property_check,
    unknown_question,
    without_giveaways,
)
from cuqa_builder.generation.structural import describe_from_parse
from cuqa_builder.grounding.article_text import article_text
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.ner import parse_tokens
from cuqa_builder.records import (
    Candidate,
    Entity,
    Event,
    Evidence,
    GenerationFailure,
    Link,
    Page,
    PageMeta,
)
from cuqa_builder.run import load_run_info
from cuqa_builder.snapshot import articles_dir, iter_snapshot
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder, make_events
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message
from cuqa_builder.verification.masking import masked_description
from cuqa_builder.verification.names import canonical_name

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "examples" / "wiki-sample"
PAPER_REQUESTS = ROOT / "tests" / "fixtures" / "paper_recipe_requests.jsonl"


NOT_IT = "1. Atlantis\n2. El Dorado\n3. Avalon\n4. Lemuria\n5. Shangri-La"


class ConnectedResponder:
    """Answers the connected recipe's prompts as a chat model would (labels, quotes, a full
    stop), and the checker: guesses that miss unless a question is scripted as a shortcut, and
    the item's answer with the event."""

    def __init__(self, shortcuts: dict[str, str] | None = None) -> None:
        # masked question fragment -> the checker's guesses; "ANSWER" stands for the answer
        self.shortcuts = dict(shortcuts or {})
        self.masked: list[str] = []
        self.guessed: list[str] = []
        self.bridge_of: dict[str, str] = {}  # the tag in a description -> its bridge
        self.answer_of: dict[str, str] = {}  # ABC: bridge -> the known question's answer

    def _answer(self, question: str) -> str:
        tag = re.search(r"news item (\w+)", question)
        bridge = self.bridge_of.get(tag[1], "") if tag else ""
        return self.answer_of.get(bridge, bridge)

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        question = prompt.rsplit("Question: ", 1)[-1].split("\n", 1)[0]
        if "Background, as written before" in prompt:
            return Reply(text=f"Answer: {self._answer(question)}\nOther things the description "
                         "fits: none\nOther right answers: none")
        if prompt.startswith("News of "):
            date = re.match(r"News of ([^:]+):", prompt)[1]
            item = hashlib.sha256(prompt.encode()).hexdigest()[:6]
            if listed := re.search(r"Named things in this news:\n- (.+)", prompt):
                self.bridge_of[item] = listed[1]  # the first of those not tried yet
                return Reply(text=f"Named thing: {listed[1]}\nDescription: The subject of "
                             f"news item {item} of {date}.")
            self.bridge_of[item] = re.search(r"identifies (.+?) only through", prompt)[1]
            return Reply(text=f'Noun phrase: "The subject of news item {item} of '
                         f'{date}."')
        if "Choose the one of these named things" in prompt:
            bridge = re.search(r'single property of "([^"]+)"', prompt)[1]
            listed = prompt.split("Named things in the passage:\n", 1)[1].split("\n", 1)[0]
            self.answer_of[bridge] = listed.removeprefix("- ")
            return Reply(text=f"Answer: {self.answer_of[bridge]}.\n"
                         f"Question: Which place is tied to {bridge}?")
        if prompt.startswith("Passage (as written before") and "category" in prompt:
            return Reply(text="member states of the Commonwealth")
        if prompt.startswith("Imagine you know everything"):
            masked = " a certain " in question
            (self.masked if masked else self.guessed).append(question)
            reply = next((r for part, r in self.shortcuts.items() if masked and part in question),
                         None)
            return Reply(text=(reply or NOT_IT).replace("ANSWER", self._answer(question)))
        return Reply(text="I do not understand.")


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-dummy")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


def _build(out: Path, llm: ScriptedLLM, stage: str, *extra: str) -> int:
    return main(["--cutoff", "2023-04", "--until", "2023-12-31", "--source", str(SAMPLE),
                 "--out", str(out), "--limit", "5", "--stage", stage, "-q",
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
    # a description, a known question or category, and the checker's three calls each
    assert len(items) == 4 and calls == 4 * 5
    info = load_run_info(tmp_path).generation
    assert info is not None and (info.recipe, info.known_source) == ("connected", "wiki")
    for item in items:
        steps = item.intermediates
        assert steps is not None and item.generator.recipe == "connected"
        assert steps.known_source == "wiki" and steps.known_article is not None
        description = steps.bridge_description
        assert description is not None and description.startswith("the subject of news item")
        assert description.endswith("2023") and steps.cur_ent.text not in description
        assert steps.unknown_question == f"What is {description}?"
        assert {"guess_answers", "answer_with_event"} <= item.generator.prompts.keys()
        if item.type == "ABC":
            # The merge adds nothing: the known question with the bridge's name replaced.
            assert steps.known_question == f"Which place is tied to {steps.cur_ent.text}?"
            assert item.question == f"Which place is tied to {description}?"
            assert steps.masked_question == (
                f"Which place is tied to a certain {description.removeprefix('the ')}?")
            assert steps.k_ent is not None and steps.k_ent.wiki_title
            assert item.answer == steps.k_ent.wiki_title.split(" (")[0]
            assert not about_the_event(steps.k_ent, _event_of(tmp_path, item))
        else:
            assert steps.category == "member states of the Commonwealth"
            assert item.question == f"Which of the member states of the Commonwealth is " \
                f"{description}?"
            assert item.answer == canonical_name(steps.cur_ent)
    assert "entities set aside as bridges" in summary or all(
        e.label != "NORP" for item in items for e in [item.intermediates.cur_ent])


def _event_of(run: Path, item: Candidate) -> Event:
    return next(e for e in read_jsonl(run / "events.jsonl", Event) if e.id == item.event.id)


def test_a_shortcut_bridge_is_replaced_and_the_check_fails_an_item_with_none_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checker guesses the answer of every masked question of the coronation (6 May):
    generation tries three of its bridges, each refused after its first check, and the last item
    goes to validation, which fails it `connected` from the cache. The other events pass the
    three checks at once."""
    responder = ConnectedResponder(shortcuts={"of 6 May 2023?": "Atlantis\nANSWER\nAvalon"})
    llm, generated = _generated(tmp_path, responder)
    made = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    [coronation] = [item for item in made if item.event.date.isoformat() == "2023-05-06"]
    items = {item.id: item for item in made if item is not coronation}
    tried = [c for c in coronation.intermediates.calls if c.rejected]
    assert len(tried) == 3 and all("the next bridge is tried" in c.rejected for c in tried)
    assert [c.function for c in coronation.intermediates.calls].count("GuessAnswers") == 6
    assert [c.function for c in coronation.intermediates.calls].count("AnswerWithEvent") == 0
    for item in items.values():
        assert [c.rejected for c in item.intermediates.calls] == [None] * 5
    # two guesses per bridge at once; none is answered with the event
    assert generated == 3 * 4 + 5 * len(items)
    (tmp_path / "articles.jsonl").unlink()  # no grounding: its verdicts are not what is tested
    try:
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3") == 0
        # The generator asked the checks already: nothing is new (the coronation's guesses
        # failed it, so it is not asked with the event).
        assert llm.calls == generated
        # Another checker model is asked anew: three calls per item that passed the checks,
        # two for the shortcut (its guesses fail it).
        responder.shortcuts = {coronation.intermediates.masked_question: "ANSWER"}
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3",
                      "--check-model", "checker") == 0
        assert llm.calls == generated + 3 * len(items) + 2
    finally:
        llm.__exit__(None, None, None)
    validated = {c.id: c for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)}
    shortcut = validated[coronation.id].validation
    assert not shortcut.passed and shortcut.connected[0].model == "checker"
    [failure] = [f for f in shortcut.failures if f.check == "connected"]
    assert coronation.intermediates.masked_question in failure.reason
    assert sorted(v.check for v in shortcut.connected) == ["connected", "unknown_before_cutoff"]
    shown = evidence(validated[coronation.id])  # what the annotator reads beside the item
    assert f'✗ connected: with the event masked, "{coronation.intermediates.masked_question}"' \
        in shown and "-> checker guesses:" in shown and shown.count("✗ connected") == 1
    others = [validated[item.id].validation for item in items.values()]
    assert all(v.passed and len(v.connected) == 4 for v in others)
    out = capsys.readouterr().out
    assert "checker: 4 candidates asked by checker; guesses counted: the first 3 of 5" in out
    assert "told to know nothing after the end of April 2023" in out


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


def test_a_model_that_cannot_describe_the_bridge_gets_a_description_from_the_parse(
    tmp_path: Path,
) -> None:
    """A model whose choices name the bridge in every try: the event sentence's parse then
    gives a description in the event's own words, a name in it that gives the bridge away said
    by its kind; the refused tries stay in the item's calls."""

    class Unhelpful(ConnectedResponder):
        def __call__(self, body: dict[str, Any]) -> Reply:
            prompt = last_user_message(body)
            if listed := re.search(r"Named things in this news:\n- (.+)", prompt):
                return Reply(text=f"Named thing: {listed[1]}\nDescription: The {listed[1]}")
            return super().__call__(body)

    with ScriptedLLM(Unhelpful()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate") == 0
        # each repair says why the last reply was refused
        told = [last_user_message(b) for b in llm.requests if "Named things in this news"
                in last_user_message(b) and "Your previous reply was refused: the description "
                "names the bridge" in last_user_message(b)]
        assert told
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    [crowned] = [i for i in items if i.event.text.startswith("The coronation")]
    # the abbey's article names London: said by its kind, it gives the city away no more
    assert (crowned.intermediates.cur_ent.text, crowned.intermediates.bridge_description) == (
        "London", "the settlement where the coronation of Charles III and Camilla takes place "
        "at a church, in May 2023")
    refused = [c for c in crowned.intermediates.calls if c.function == "ChooseBridge"
               and "'London'" in c.rejected]
    assert len(refused) == 3 and all("names the bridge" in c.rejected for c in refused)
    # the Thai party's sentence names the election (the event itself, scheduled): no description
    failed = read_jsonl(tmp_path / "generation-failures.jsonl", GenerationFailure)
    assert any("'Move Forward Party'" in f.reason for f in failed)


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


def test_a_small_generator_takes_the_known_hop_from_the_infobox() -> None:
    """With `structure_first` (the embedded model), ABC's known question is the template of one
    infobox relation that the article's text also names, and k_ent is that relation's link; a
    relation the event itself names is not asked."""
    page = next(p for p in iter_snapshot(articles_dir(SAMPLE)) if p.meta.title == "Morocco")
    text = article_text(page)
    relations = {r.parameter: r for r in text.relations}
    assert text.kind == "country" and relations["capital"].values[0].title == "Rabat"
    known = {"Morocco": KnownArticle(
        passage=text.passage, links=text.lead_links, kind=text.kind,
        evidence=Evidence(title="Morocco", revid=1, timestamp="2023-01-01T00:00:00Z"),
        relations=[relations["capital"], relations["leader_name2"]])}
    generator = ConnectedGenerator(None, None, seed=0, cutoff="2023-04",  # type: ignore[arg-type]
                                   known_articles=known, structure_first=True)
    bridge = _bridge(Entity(text="Morocco", label="GPE", wiki_title="Morocco"), known)
    [event] = make_events(1)
    k_ent, question = generator._infobox_hop(event, bridge, 0.0)
    # leader_name2 has no template (a leader changes): the capital is the one relation asked
    assert (k_ent.wiki_title, question) == ("Rabat", "What is the capital of Morocco?")
    in_the_news = event.model_copy(update={"text": "An earthquake shakes Rabat."})
    assert generator._infobox_hop(in_the_news, bridge, 0.0) is None


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


def test_the_templated_known_hop_names_the_bridge_as_its_article_does() -> None:
    """Issue 25: "the Kestrian Isles", as the lead writes it ("The Kestrian Isles ... is"); a
    list value (two official languages) has no single answer to ask for."""
    text = article_text(Page(
        meta=PageMeta(title="Kestrian Isles", revid=1, timestamp="2023-01-01T00:00:00Z"),
        wikitext=(ROOT / "tests/fixtures/articles/Kestrian_Isles.wiki").read_text("utf-8")))
    known = {"Kestrian Isles": KnownArticle(
        passage=text.passage, links=text.lead_links, kind=text.kind, relations=text.relations,
        evidence=Evidence(title="Kestrian Isles", revid=1, timestamp="2023-01-01T00:00:00Z"),
        names=text.names, definite=text.definite)}
    generator = ConnectedGenerator(None, None, seed=0, cutoff="2023-04",  # type: ignore[arg-type]
                                   known_articles=known, structure_first=True)
    bridge = Entity(text="Kestrian Isles", label="GPE", wiki_title="Kestrian Isles")
    [event] = make_events(1)
    hops = [generator._infobox_hop(event, _bridge(bridge, known), f) for f in (0.0, 0.4, 0.7)]
    assert [(k_ent.wiki_title, question) for k_ent, question in hops] == [  # type: ignore[misc]
        ("Port Aldren", "What is the capital of the Kestrian Isles?"),
        ("Port Aldren", "What is the largest city of the Kestrian Isles?"),
        ("Kestrian krone", "What is the currency of the Kestrian Isles?"),
    ]


@pytest.mark.parametrize(("text", "bridge", "kind", "described"), [
    ("A business jet crashes in Tver Oblast, Russia, killing all ten people aboard.",
     "Tver Oblast", "place", "the place where a business jet crashes, killing all ten people "
     "aboard, in August 2023"),
    ("Wildfires on Maui, Hawaii, destroy most of the town of Lahaina.", "Maui", "island",
     "the island where wildfires destroy most of the town of Lahaina, in August 2023"),
    ("The opposition Move Forward Party wins the most seats in the Thai general election.",
     "Move Forward Party", "political party", "the political party that wins the most seats "
     "in the Thai general election, in August 2023"),
    ("Nippon Steel agrees to buy U.S. Steel for $14.1 billion.", "U.S. Steel", "company",
     "the company that Nippon Steel agrees to buy for $14.1 billion, in August 2023"),
    ("ISRO's lander touches down near the Moon's south pole, making India the first country to "
     "land there.", "India", "country", None),  # a small clause: no verb's subject or object
    # the object of a verb: that verb in the passive, its subject the agent
    ("Bernardo Arévalo of the Semilla movement wins the presidential runoff in Guatemala, "
     "defeating former first lady Sandra Torres.", "Sandra Torres", "person",
     "the person defeated by Bernardo Arévalo of the Semilla movement in Guatemala, in August "
     "2023"),
    ("Recep Tayyip Erdoğan defeats Kemal Kılıçdaroğlu in the runoff and is re-elected President "
     "of Turkey.", "Kemal Kılıçdaroğlu", "person",
     "the person defeated by Recep Tayyip Erdoğan in the runoff, in August 2023"),
    ("Spain beats England 1–0 in the final in Sydney to win the FIFA Women's World Cup for the "
     "first time.", "FIFA Women's World Cup", "tournament",
     "the tournament won by Spain for the first time in the final in Sydney, in August 2023"),
    # what was only agreed keeps its relative clause
    ("Nippon Steel agrees to buy U.S. Steel for $14.1 billion.", "U.S. Steel", "company",
     "the company that Nippon Steel agrees to buy for $14.1 billion, in August 2023"),
    # a name that opens the sentence keeps its capital
    ("Spain beats England 1–0 in the final in Sydney.", "Sydney", "city",
     "the city where Spain beats England 1–0 in the final, in August 2023"),
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
     "the person who is elected head of government of Mexico City, in August 2023"),
    ("Francesco Bagnaia wins at the Mugello Circuit for the third year running, and his "
     "teammate Enea Bastianini finishes second.", "Francesco Bagnaia", "person",
     "the person who wins at the Mugello Circuit for the third year running, in August 2023"),
    # an acronym and a name that end in capitals or "s" keep them
    ("OPEC+ ministers meeting in Riyadh agree to keep their output cut until the end of 2025.",
     "Riyadh", "city", "the city where OPEC+ ministers meeting agree to keep their output cut "
     "until the end of 2025, in August 2023"),
    ("Harris concedes in a speech at Howard University in Washington.", "Washington", "city",
     "the city where Harris concedes in a speech at Howard University, in August 2023"),
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
    ("islands", "the islands where wildfires destroy most of the town of Lahaina, in August 2023",
     "What are the islands where wildfires destroy most of the town of Lahaina, in August 2023?"),
    ("person", "the person defeated by Bernardo Arévalo in Guatemala, in August 2023",
     "Who is the person defeated by Bernardo Arévalo in Guatemala, in August 2023?"),
    ("political party", "the political party that wins the most seats, in May 2023",
     "What is the political party that wins the most seats, in May 2023?"),
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


def test_a_model_of_the_cutoff_guesses_at_the_whole_question_while_composing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With --probe-model, that model (whose knowledge ends at the cutoff) makes the guesses at
    the whole question, while composing as in validate: validate finds every checker call in
    the cache and asks only the probes."""
    with ScriptedLLM(ConnectedResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate", "--probe-model", "cutoff-model") == 0
        generated = llm.calls
        guessers = {body["model"] for body in llm.requests
                    if last_user_message(body).startswith("Imagine you know everything")
                    and " a certain " not in last_user_message(body)}
        assert guessers == {"cutoff-model"}
        assert "cutoff-model (a model of the cutoff) guessed at the whole questions: 4 calls" \
            in capsys.readouterr().out
        (tmp_path / "articles.jsonl").unlink()  # grounding is not what is tested
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3",
                      "--probe-model", "cutoff-model") == 0
        asked = [last_user_message(body) for body in llm.requests[generated:]]
        assert asked and not any(a.startswith("Imagine you know everything")
                                 or "Background, as written before" in a for a in asked)
    out = capsys.readouterr().out
    assert "the whole question guessed by cutoff-model, a model whose knowledge ends at the " \
        "cutoff (--probe-model)" in out
    items = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert all(v.knowledge == "cutoff" for item in items for v in item.validation.connected
               if v.check == "unknown_before_cutoff")


def test_the_check_model_is_the_checker_while_composing_too(tmp_path: Path) -> None:
    """With --check-model, that model (not the generator) is asked the checks while composing,
    so validate with the same flag finds every checker call in the cache."""
    with ScriptedLLM(ConnectedResponder()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate", "--check-model", "checker") == 0
        generated = llm.calls
        checked_by = {body["model"] for body in llm.requests
                      if last_user_message(body).startswith("Imagine you know everything")}
        assert checked_by == {"checker"}
        (tmp_path / "articles.jsonl").unlink()  # grounding is not what is tested
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3",
                      "--check-model", "checker") == 0
        assert llm.calls == generated


def test_an_event_with_no_bridge_worth_describing_costs_one_call(tmp_path: Path) -> None:
    """The model finds no named thing of the coronation that a reader of the cutoff could not
    guess (NONE): the event fails after that one call, with the reason; the others go on."""

    class Scheduled(ConnectedResponder):
        def __call__(self, body: dict[str, Any]) -> Reply:
            prompt = last_user_message(body)
            if "Named things in this news" in prompt and "coronation" in prompt:
                return Reply(text="NONE")
            return super().__call__(body)

    with ScriptedLLM(Scheduled()) as llm:
        assert _build(tmp_path, llm, "events") == 0
        assert _build(tmp_path, llm, "generate") == 0
        coronation = [b for b in llm.requests if "coronation" in last_user_message(b)]
    [failure] = read_jsonl(tmp_path / "generation-failures.jsonl", GenerationFailure)
    assert (failure.step, failure.reason) == (
        "ChooseBridge", "no named thing of the news can be described without giving itself away")
    assert len(coronation) == 1 and [c.function for c in failure.calls] == ["ChooseBridge"]
    assert len(read_jsonl(tmp_path / "candidates.jsonl", Candidate)) == 3


def _known(title: str, lead: str, kind: str | None = None, links: tuple[str, ...] = ()
           ) -> KnownArticle:
    return KnownArticle(passage=lead, links=[Link(title=t, text=t) for t in links], kind=kind,
                        evidence=Evidence(title=title, revid=1, timestamp="2023-01-01T00:00:00Z"))


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
    described = "the island where wildfires destroy most of the town of Lahaina, in August 2023"
    assert [e.text for e in giveaways(described, maui, event, known)] == ["Lahaina"]
    assert without_giveaways(described, [lahaina], event, known) == (
        "the island where wildfires destroy most of a town, in August 2023")
    assert giveaways("the island where fires spread near Hilo in August 2023", maui, event,
                     known) == []
    refused = choice_check([maui], event, known)(
        f"Named thing: Maui\nDescription: {described}")
    assert refused == "the description names 'Lahaina', which gives 'Maui' away without the news"
    morocco = Entity(text="Morocco", label="GPE", wiki_title="Morocco")
    atlas = Entity(text="High Atlas", label="LINK", wiki_title="High Atlas")
    quake = event.model_copy(update={"entities": [atlas, morocco]})
    known = {"Morocco": _known("Morocco", "Morocco lies south of Spain.", links=("High Atlas",)),
             "High Atlas": _known("High Atlas", "A range of peaks.", "mountain range")}
    struck = "the country where a quake strikes the High Atlas in 2023"
    assert without_giveaways(struck, giveaways(struck, morocco, quake, known), quake, known) == (
        "the country where a quake strikes a mountain range in 2023")
    # a name that modifies a noun, or the event itself, cannot be said by a kind: no description
    slam = Entity(text="Grand Slam", label="LINK", wiki_title="Grand Slam (tennis)")
    assert without_giveaways("the player who wins his 24th Grand Slam title in 2023", [slam],
                             quake, known) is None
    cup = Entity(text=f"{quake.date.year} Rugby World Cup", label="EVENT")
    assert without_giveaways(f"the country that hosts the {cup.text}", [cup], quake, known) \
        is None
    # a name whose article gives no plain kind would read "in a place": no description
    guatemala = Entity(text="Guatemala", label="GPE", wiki_title="Guatemala")
    assert without_giveaways("the person defeated in Guatemala in 2023", [guatemala], quake,
                             known) is None


def test_the_card_counts_every_check_that_ran_and_who_wrote_the_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32.9: the card listed the format checks only, though the checker's four decided
    items; and it said a model wrote the questions whatever made them. Its table holds the
    validate summary's counts, the checker's included."""
    responder = ConnectedResponder(shortcuts={"of 6 May 2023?": "Atlantis\nANSWER\nAvalon"})
    llm, _ = _generated(tmp_path, responder)
    (tmp_path / "articles.jsonl").unlink()  # no grounding: the checker decides here
    try:
        capsys.readouterr()
        assert _build(tmp_path, llm, "validate", "--min-question-words", "3") == 0
        validated = capsys.readouterr().out
        assert _build(tmp_path, llm, "release", "--name", "card",
                      "--output-root", str(tmp_path / "output")) == 0
    finally:
        llm.__exit__(None, None, None)
    card = (tmp_path / "output" / "card" / "README.md").read_text(encoding="utf-8")
    table = {name: (int(passed), int(failed)) for name, passed, failed in
             re.findall(r"^  (\w+) +(\d+) +(\d+)$", validated, re.MULTILINE)}
    assert table["connected"] == (3, 1) and len(table) == 13 + 4, validated
    for name, (passed, failed) in table.items():
        assert re.search(rf"^\| `{name}` \| [^|]+ \| {passed} \| {failed} \|$", card,
                         re.MULTILINE), name
    assert ("| `connected` | with the event masked, none of the first 3 guesses of the checker "
            "model names the answer") in card
    released = len(cuqa_builder.load(tmp_path / "output" / "card"))
    assert f"- Written by a language model: **{released}** items, by `scripted`" in card
    assert "Composed from structure" not in card
    assert "The questions were generated by a language model from those texts" in card
