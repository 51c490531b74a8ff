"""Every method of the solver core, driven through the real gateway against the scripted
OpenAI-compatible server, with an in-memory retriever: each branch, with exact call counts."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.prompts import load_prompt
from cuqa_builder.retrieval.types import Passage
from cuqa_builder.solvers import METHODS, NO_RETRIEVAL, UnknownMethodError, get_solver
from cuqa_builder.solvers.base import SolverOptions, SolverRun, UnsupportedEndpoint
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message

# A small made-up world, so no model could know it and no demonstration mentions it.
CORPUS = [
    Passage(id="e1", text="March 3 – The 2031 Lunar Chess Open is held in Port Vela and is "
            "won by Ada Quill."),
    Passage(id="e2", text="May 9 – Ada Quill is elected mayor of Brindle."),
    Passage(id="e3", text="June 1 – Port Vela opens a harbour bridge."),
    Passage(id="e4", text="July 7 – The Brindle marathon is cancelled because of heat."),
]
QUESTION = "Which town elected the winner of the 2031 Lunar Chess Open as mayor?"
SUB_WINNER = "Who won the 2031 Lunar Chess Open?"
SUB_TOWN = "Which town elected Ada Quill as mayor?"

# Phrases that tell the templates apart.
DIRECT = "with just a few words.\nQuestion:"
COT = "Let’s think step by step.\nQuestion:"
READ = "Refer to the passage below"
GENERATE = "Generate a background document"
CONFIDENCE = "indicate your level of confidence"
DECOMPOSE = "divide the question into smaller"
COMBINE = "Here are all related sub-questions"
SELF_ASK = "Are follow up questions needed here:"
REFINE = "Initial answer:"
KNOW = "Can you use your own knowledge base"
ANSWER = "Give the answer to the question."
RELEVANCE = "Please assess whether this paragraph"
RA_READ = "Using the knowledge from the relevant paragraphs"
RA_DECOMPOSE = "Please break down this question"
RA_COMBINE = "Base on the sub-question answer"


class MemoryRetriever:
    """The Retriever protocol over a list: top-k by shared words, ties in corpus order."""

    name = "memory"

    def __init__(self, passages: list[Passage]) -> None:
        self.passages = passages
        self.queries: list[str] = []

    def search(self, query: str, k: int) -> list[Passage]:
        self.queries.append(query)
        words = set(re.findall(r"\w+", query.lower()))

        def overlap(passage: Passage) -> int:
            return len(words & set(re.findall(r"\w+", passage.text.lower())))

        ranked = sorted(self.passages, key=overlap, reverse=True)[:k]
        return [p.model_copy(update={"score": float(overlap(p))}) for p in ranked]


class PromptRules:
    """Answer with the first rule whose phrases all occur in the prompt (else fail loudly)."""

    def __init__(self, rules: list[tuple[tuple[str, ...], str | Reply]]) -> None:
        self.rules = rules

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        for phrases, answer in self.rules:
            if all(p in prompt for p in phrases):
                return answer if isinstance(answer, Reply) else Reply(text=answer)
        return Reply(status=400, text=f"no scripted answer for: {prompt[-300:]}")


def q(question: str) -> str:
    """How a question appears in every template."""
    return f"{question}\n"


Responder = Callable[[dict[str, Any]], Reply]


def run_method(
    llm: ScriptedLLM, method: str, question: str, retriever: MemoryRetriever | None, **options: Any
) -> tuple[str, SolverRun]:
    settings = LLMSettings(model="scripted", base_url=llm.base_url, max_retries=0)

    async def go() -> tuple[str, SolverRun]:
        async with open_gateway(settings) as gateway:
            run = SolverRun(gateway, retriever, SolverOptions(**options))
            return await get_solver(method)(question, run), run

    calls_before = llm.calls
    prediction, run = asyncio.run(go())
    assert run.llm_calls == llm.calls - calls_before  # each call reached the server (no cache)
    return prediction, run


def solve(
    method: str, question: str, responder: Responder, *, retriever: MemoryRetriever | None = None,
    **options: Any,
) -> tuple[str, SolverRun, ScriptedLLM]:
    retriever = MemoryRetriever(CORPUS) if retriever is None else retriever
    with ScriptedLLM(responder) as llm:
        prediction, run = run_method(llm, method, question, retriever, **options)
    return prediction, run, llm


def prompts_sent(llm: ScriptedLLM) -> list[str]:
    return [last_user_message(body) for body in llm.requests]


def routes(run: SolverRun, name: str) -> list[dict[str, Any]]:
    return [step.data for step in run.trace if step.kind == "route" and step.name == name]


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-dummy-key")


# --- prompts and registry -------------------------------------------------------------------

PLACEHOLDERS = {
    "solver_direct": {"question"},
    "solver_cot": {"question"},
    "solver_read": {"passage", "question"},
    "solver_genread_generate": {"question"},
    "solver_fewshot_cot": {"demonstrations", "question"},
    "solver_self_ask": {"demonstrations", "question", "scratchpad"},
    "solver_iter_retgen": {"demonstrations", "passage", "question"},
    "solver_ircot": {"demonstrations", "passage", "question", "reasoning"},
    "solver_refeed_refine": {"passage", "question", "initial_answer"},
    "solver_self_dc_confidence": {"question"},
    "solver_self_dc_decompose": {"question"},
    "solver_self_dc_combine": {"question", "sub_qas"},
    "solver_ra_isf_know": {"question"},
    "solver_ra_isf_answer": {"question"},
    "solver_ra_isf_relevance": {"question", "passage"},
    "solver_ra_isf_read": {"question", "passages"},
    "solver_ra_isf_decompose": {"question"},
    "solver_ra_isf_combine": {"question", "sub_qas"},
    "solver_demos_self_ask": set(),
    "solver_demos_fewshot_cot": set(),
    "solver_demos_iter_retgen": set(),
}


@pytest.mark.parametrize(("name", "placeholders"), PLACEHOLDERS.items())
def test_solver_prompts_cite_their_source(name: str, placeholders: set[str]) -> None:
    prompt = load_prompt(name, expects=frozenset(placeholders))
    assert prompt.source.startswith("source:")
    assert "Table" in prompt.source or "Appendix E" in prompt.source or "section" in prompt.source


def test_prompts_keep_the_papers_wording() -> None:
    assert load_prompt("solver_direct").text == (
        "Please answer the following question with just a few words.\n"
        "Question: {question}\nThe answer is"
    )
    assert "all related sub-quesions of the original" in load_prompt("solver_self_dc_combine").text
    assert load_prompt("solver_demos_self_ask").text.startswith("Quesion: Which country")


def test_registry_names_and_clear_error() -> None:
    assert list(METHODS) == ["direct", "cot", "fewshot-cot", "genread", "rr", "refeed", "ircot",
                             "self-ask", "iter-retgen", "self-dc", "ra-isf"]
    with pytest.raises(UnknownMethodError, match="choose one of: direct, cot, .*ra-isf"):
        get_solver("selfdc")


# --- methods without retrieval --------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "rules"),
    [
        ("direct", [((DIRECT, q(QUESTION)), " Brindle.")]),
        ("cot", [((COT, q(QUESTION)), "Ada Quill won it. So the answer is Brindle.")]),
        # A server that ignores `stop`: the invented next example must not become the answer.
        ("fewshot-cot", [((q(QUESTION) + "Let’s think step by step",),
                          "Ada Quill won, and she is mayor of Brindle. So the answer is Brindle"
                          "\n\nQuestion: Who won?\nLet’s think step by step\nSo the answer is X")]),
    ],
)
def test_one_call_methods_need_no_retriever(method: str, rules: list) -> None:
    assert method in NO_RETRIEVAL
    with ScriptedLLM(PromptRules(rules)) as llm:
        prediction, run = run_method(llm, method, QUESTION, None)
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls, llm.calls) == (1, 0, 1)
    # The whole final output (cut at the next example) is kept for the judge.
    assert run.output.strip() == rules[0][1].split("\n\nQuestion:")[0].strip()
    body = llm.requests[0]
    assert body["temperature"] == 0.1 and body["top_p"] == 0.1
    if method == "fewshot-cot":
        assert body["stop"] == ["\nQuestion:", "\nQuesion:"]


def test_genread_generates_then_reads_its_own_document() -> None:
    rules = [((GENERATE, QUESTION), "Ada Quill, winner of the 2031 open, became mayor of Brindle."),
             ((READ, "Passage: Ada Quill, winner of the 2031 open", q(QUESTION)), "Brindle")]
    prediction, run, llm = solve("genread", QUESTION, PromptRules(rules))
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (2, 0)


def test_rr_reads_the_top_k_passages() -> None:
    rules = [((READ, q(SUB_TOWN)), "Brindle.")]
    retriever = MemoryRetriever(CORPUS)
    prediction, run, llm = solve("rr", SUB_TOWN, PromptRules(rules), retriever=retriever)
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (1, 1)
    assert retriever.queries == [SUB_TOWN]
    prompt = prompts_sent(llm)[0]
    assert "Passage: May 9 – Ada Quill is elected mayor of Brindle.\n" in prompt
    assert prompt.count(" – ") == 3  # top_k 3 of the 4 passages


# --- iterative retrieval baselines ----------------------------------------------------------


def test_refeed_retrieves_with_the_initial_answer_then_refines() -> None:
    rules = [((DIRECT, q(SUB_TOWN)), "Port Vela"),
             ((REFINE, "Initial answer: Port Vela\n", q(SUB_TOWN)), "Brindle")]
    retriever = MemoryRetriever(CORPUS)
    prediction, run, _ = solve("refeed", SUB_TOWN, PromptRules(rules), retriever=retriever)
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (2, 1)
    assert retriever.queries == [f"{SUB_TOWN} Port Vela"]


def test_iter_retgen_two_iterations_retrieve_with_the_previous_generation() -> None:
    question = "Where does the 2031 open winner hold office?"
    first = "Ada Quill is elected mayor of Brindle. So the answer is Ada Quill"
    rules = [((q(question), "Passage: May 9 – Ada Quill is elected mayor of Brindle.\n"),
              "She holds office in Brindle. So the answer is Brindle."),
             ((q(question),), first)]
    retriever = MemoryRetriever(CORPUS)
    prediction, run, llm = solve("iter-retgen", question, PromptRules(rules), retriever=retriever,
                                 top_k=1)
    # The question alone finds the chess passage; with the first generation, the mayor one.
    assert retriever.queries == [question, f"{question} {first}"]
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (2, 2)
    assert "Tharman Shanmugaratnam" in prompts_sent(llm)[0]  # Table 20 demonstrations


def test_ircot_stops_at_the_answer_sentence() -> None:
    step_one = "Ada Quill won the 2031 Lunar Chess Open."
    step_two = "She was elected mayor of Brindle."
    reasoning = q(QUESTION) + "Let’s think step by step\n"
    rules = [((reasoning + f"{step_one} {step_two}",), "So the answer is Brindle."),
             ((reasoning + step_one,), f"{step_two} So the answer is Brindle."),
             ((reasoning,), f"{step_one} {step_two}")]  # only a first sentence counts
    retriever = MemoryRetriever(CORPUS)
    prediction, run, llm = solve("ircot", QUESTION, PromptRules(rules), retriever=retriever,
                                 top_k=1)
    # Sentences 1 and 2 have no "answer is": retrieve with each; sentence 3 has it: stop.
    assert retriever.queries == [QUESTION, step_one, step_two]
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (3, 3)
    assert routes(run, "ircot") == [{"stop": "answer sentence", "steps": 3}]
    assert run.output == f"{step_one} {step_two} So the answer is Brindle."
    # Passages accumulate across steps.
    assert "May 9 – Ada Quill is elected mayor" in prompts_sent(llm)[2]


def test_ircot_gives_up_after_max_steps() -> None:
    def never_concludes(body: dict[str, Any]) -> Reply:
        steps = last_user_message(body).count("Noted fact")
        return Reply(text=f"Noted fact {steps + 1} about Port Vela.")

    prediction, run, _ = solve("ircot", QUESTION, never_concludes)
    # One retrieval with the question, then one per sentence for four steps; five sentences.
    assert (run.llm_calls, run.retrieval_calls) == (5, 5)
    assert routes(run, "ircot") == [{"stop": "max steps", "steps": 5}]
    assert prediction == "Noted fact 5 about Port Vela"


def test_self_ask_follow_up_loop_and_final_answer() -> None:
    rules = [
        ((SELF_ASK, "Intermediate answer: Brindle\n"), "So the final answer is: Brindle."),
        ((SELF_ASK, "Intermediate answer: Ada Quill\n"), f"Follow up: {SUB_TOWN}"),
        # The model tries to answer its own follow-up: that text must be cut off.
        ((SELF_ASK,), f"Yes.\nFollow up: {SUB_WINNER}\nIntermediate answer: Bob Invented"),
        ((READ, q(SUB_WINNER)), "Ada Quill"),
        ((READ, q(SUB_TOWN)), "Brindle"),
    ]
    retriever = MemoryRetriever(CORPUS)
    prediction, run, llm = solve("self-ask", QUESTION, PromptRules(rules), retriever=retriever)
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (5, 2)
    assert retriever.queries == [SUB_WINNER, SUB_TOWN]
    ask_prompts = [p for p in prompts_sent(llm) if SELF_ASK in p]
    assert ask_prompts[1].endswith(
        f"Question: {QUESTION}\nAre follow up questions needed here: Yes.\n"
        f"Follow up: {SUB_WINNER}\nIntermediate answer: Ada Quill\n"
    )
    assert "Bob Invented" not in "".join(prompts_sent(llm))
    assert llm.requests[0]["stop"][0] == "Intermediate answer:"
    assert routes(run, "self-ask") == [{"stop": "final answer", "follow_ups": 2}]
    assert run.output == (f" Yes.\nFollow up: {SUB_WINNER}\nIntermediate answer: Ada Quill\n"
                          f"Follow up: {SUB_TOWN}\nIntermediate answer: Brindle\n"
                          "So the final answer is: Brindle.")


def test_self_ask_stops_after_max_follow_ups() -> None:
    def keeps_asking(body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if SELF_ASK in prompt:
            asked = prompt.count("Follow up: Detail")
            return Reply(text=f"Follow up: Detail {asked + 1} of Port Vela?")
        asked = re.findall(r"Detail (\d+)", prompt)[-1]  # a read of follow-up "Detail N ...?"
        return Reply(text=f"fact {asked}")

    prediction, run, _ = solve("self-ask", QUESTION, keeps_asking)
    assert (run.llm_calls, run.retrieval_calls) == (5 + 4, 4)
    assert routes(run, "self-ask") == [{"stop": "max follow-ups", "follow_ups": 4}]
    assert prediction == "fact 4"  # the last intermediate answer


def test_self_ask_writes_the_next_cue_after_a_bare_yes_or_no() -> None:
    # Chat models answer "Are follow up questions needed here:" and stop there.
    rules = [
        ((SELF_ASK, "Intermediate answer: Ada Quill\nNo\nSo the final answer is:"), "Ada Quill."),
        ((SELF_ASK, "Intermediate answer: Ada Quill\n"), "No"),
        ((SELF_ASK, f"{QUESTION}\nAre follow up questions needed here: Yes\nFollow up:"),
         f" {SUB_WINNER}"),
        ((SELF_ASK,), "Yes, follow up questions are needed here."),
        ((READ, q(SUB_WINNER)), "Ada Quill"),
    ]
    prediction, run, llm = solve("self-ask", QUESTION, PromptRules(rules),
                                 retriever=MemoryRetriever(CORPUS))
    assert prediction == "Ada Quill"
    # yes, its follow-up, the read, no, the final answer
    assert (run.llm_calls, run.retrieval_calls) == (5, 1)
    assert routes(run, "self-ask") == [{"stop": "final answer", "follow_ups": 1}]


def test_self_ask_nudges_a_bare_answer_only_once() -> None:
    # After the "Follow up:" cue the model says nothing: no second cue, the run ends.
    cued = f"{QUESTION}\nAre follow up questions needed here: Yes\nFollow up:"
    rules = [((SELF_ASK, cued), ""), ((SELF_ASK,), "Yes")]
    prediction, run, _ = solve("self-ask", QUESTION, PromptRules(rules))
    assert (run.llm_calls, run.retrieval_calls) == (2, 0)
    assert routes(run, "self-ask") == [{"stop": "no follow-up question", "follow_ups": 0}]


def test_self_ask_answers_without_follow_ups() -> None:
    rules = [((SELF_ASK,), " No.\nSo the final answer is: Port Vela")]
    prediction, run, _ = solve("self-ask", SUB_WINNER, PromptRules(rules))
    assert prediction == "Port Vela"
    assert (run.llm_calls, run.retrieval_calls) == (1, 0)


# --- Self-DC --------------------------------------------------------------------------------


def confidence(percent: int) -> str:
    return f"Answer: something\nConfidence (0-100): {percent}%"


def self_dc_rules(confidences: dict[str, str]) -> PromptRules:
    """Verb confidences per question, and the reads, decompositions and combination of QUESTION."""
    return PromptRules([
        *[((CONFIDENCE, q(question)), answer) for question, answer in confidences.items()],
        ((DECOMPOSE, q(QUESTION)), f"#1: {SUB_WINNER}, #2: {SUB_TOWN}"),
        ((GENERATE, SUB_WINNER), "The 2031 Lunar Chess Open was won by Ada Quill."),
        ((GENERATE,), "A background document."),
        ((READ, q(SUB_WINNER)), "Ada Quill"),
        ((READ, q(SUB_TOWN)), "Brindle"),
        ((READ,), "Port Vela"),
        ((COMBINE, q(QUESTION), f"#1: {SUB_WINNER} Answer: Ada Quill\n#2: {SUB_TOWN} Answer: "
          "Brindle\nAccording"), "Brindle."),
    ])


@pytest.mark.parametrize(
    ("percent", "branch", "llm_calls", "retrieval_calls"),
    [(90, "generate", 3, 0), (50, "generate", 3, 0), (30, "retrieve", 2, 1),
     (0, "retrieve", 2, 1)],
)
def test_self_dc_known_and_unknown_routes(
    percent: int, branch: str, llm_calls: int, retrieval_calls: int
) -> None:
    rules = self_dc_rules({QUESTION: confidence(percent)})
    prediction, run, _ = solve("self-dc", QUESTION, rules, alpha=0.4, beta=0.1)
    assert prediction == "Port Vela"
    assert (run.llm_calls, run.retrieval_calls) == (llm_calls, retrieval_calls)
    [route] = routes(run, "self-dc")
    assert route["branch"] == branch and route["depth"] == 1
    assert route["confidence"] == pytest.approx(percent / 100)


def test_self_dc_unreadable_confidence_counts_as_unknown() -> None:
    rules = self_dc_rules({QUESTION: "Answer: I cannot say."})
    _, run, _ = solve("self-dc", QUESTION, rules)
    assert routes(run, "self-dc")[0]["confidence"] == 0.0
    assert (run.llm_calls, run.retrieval_calls) == (2, 1)


def test_self_dc_decomposes_recurses_and_combines() -> None:
    rules = self_dc_rules({QUESTION: confidence(40), SUB_WINNER: confidence(95),
                           SUB_TOWN: confidence(10)})
    retriever = MemoryRetriever(CORPUS)
    prediction, run, _ = solve("self-dc", QUESTION, rules, retriever=retriever,
                               alpha=0.4, beta=0.1)
    assert prediction == "Brindle"
    # confidence + decompose; sub 1 known: confidence + generate + read; sub 2 unknown:
    # confidence + read (one retrieval); combine.
    assert (run.llm_calls, run.retrieval_calls) == (2 + 3 + 2 + 1, 1)
    assert retriever.queries == [SUB_TOWN]
    assert [(r["depth"], r["branch"]) for r in routes(run, "self-dc")] == [
        (1, "decompose"), (2, "generate"), (2, "retrieve")]
    assert routes(run, "self-dc")[0]["sub_questions"] == [SUB_WINNER, SUB_TOWN]


DEPENDENT_TOWN = "Which town elected #1 as mayor?"


def dependent_rules(town_reading: str) -> PromptRules:
    """QUESTION decomposes into SUB_WINNER (known) and a sub-question naming its answer "#1"
    (unknown: retrieved); the read of the filled one answers `town_reading`."""
    return PromptRules([
        ((CONFIDENCE, q(QUESTION)), confidence(40)),
        ((CONFIDENCE, q(SUB_WINNER)), confidence(95)),
        ((CONFIDENCE,), confidence(10)),
        ((DECOMPOSE, q(QUESTION)), f"#1: {SUB_WINNER}, #2: {DEPENDENT_TOWN}"),
        ((GENERATE, SUB_WINNER), "The 2031 Lunar Chess Open was won by Ada Quill."),
        ((READ, q(SUB_WINNER)), "Ada Quill"),
        ((READ, q(SUB_TOWN)), town_reading),
        ((READ, q(DEPENDENT_TOWN)), "It cannot be determined which politician #1 is."),
        ((COMBINE,), "Brindle"),
    ])


def test_self_dc_fills_an_earlier_answer_into_a_dependent_sub_question() -> None:
    """Issue 32.12: "#1" is replaced by sub-question 1's answer before sub-question 2 is
    asked, retrieved for and combined; the trace records the filling."""
    retriever = MemoryRetriever(CORPUS)
    prediction, run, llm = solve("self-dc", QUESTION, dependent_rules("Brindle"),
                                 retriever=retriever)
    assert prediction == "Brindle"
    assert retriever.queries == [SUB_TOWN]  # "Which town elected Ada Quill as mayor?"
    [fill] = routes(run, "self-dc-fill")
    assert fill == {"depth": 2, "written": DEPENDENT_TOWN, "question": SUB_TOWN,
                    "filled": {"#1": "Ada Quill"}}
    [retrieval] = [step for step in run.trace if step.kind == "retrieval"]
    assert retrieval.input == SUB_TOWN
    combine = next(p for p in prompts_sent(llm) if COMBINE in p)
    assert (f"#1: {SUB_WINNER} Answer: Ada Quill\n#2: {SUB_TOWN} Answer: Brindle\n"
            "According") in combine
    assert not any("#1 as mayor" in p for p in prompts_sent(llm))


def test_self_dc_literal_asks_a_dependent_sub_question_as_written() -> None:
    """--self-dc-dependent literal: Figure 3 as the paper wrote it, "#1" and all."""
    retriever = MemoryRetriever(CORPUS)
    _, run, llm = solve("self-dc", QUESTION, dependent_rules("Brindle"), retriever=retriever,
                        self_dc_dependent="literal")
    assert retriever.queries == [DEPENDENT_TOWN]
    assert routes(run, "self-dc-fill") == []
    combine = next(p for p in prompts_sent(llm) if COMBINE in p)
    assert (f"#2: {DEPENDENT_TOWN} Answer: It cannot be determined which politician #1 is"
            "\nAccording") in combine


def test_a_sub_answer_ending_in_a_quoted_phrase_reaches_the_combine_prompt_whole() -> None:
    """Issue 32.14: the closing quote and the full stop inside it were cut off."""
    rules = dependent_rules('The town that elected her is called "Brindle."')
    _, _, llm = solve("self-dc", QUESTION, rules)
    combine = next(p for p in prompts_sent(llm) if COMBINE in p)
    assert f'#2: {SUB_TOWN} Answer: The town that elected her is called "Brindle."\n' in combine


def test_self_dc_one_sub_question_ends_in_retrieve_then_read() -> None:
    rules = PromptRules([
        ((CONFIDENCE,), confidence(40)),
        ((DECOMPOSE,), f"#1: {QUESTION}"),
        ((READ, q(QUESTION)), "Brindle"),
    ])
    prediction, run, _ = solve("self-dc", QUESTION, rules)
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (3, 1)
    [route] = routes(run, "self-dc")
    assert route["branch"] == "retrieve" and route["reason"] == "uncertain, one sub-question"


def always_uncertain(body: dict[str, Any]) -> Reply:
    """Every question is uncertain and splits in two, forever; reads answer "Port Vela"."""
    prompt = last_user_message(body)
    if CONFIDENCE in prompt:
        return Reply(text=confidence(40))
    if DECOMPOSE in prompt:
        question = prompt.split("Question: ")[-1].split("\n")[0].rstrip("?")
        return Reply(text=f"#1: {question} part a?, #2: {question} part b?")
    return Reply(text="Port Vela")


@pytest.mark.parametrize(
    ("depth", "llm_calls", "retrieval_calls", "retrieve_routes"),
    [
        (1, 2, 1, 1),  # confidence, read: no decomposition is asked for at depth t
        # depth 1: confidence + decompose + combine; two depth-2 questions at the depth
        # limit, each confidence + read.
        (2, 3 + 2 * 2, 2, 2),
        # plus one more level: two depth-2 decompositions, four depth-3 reads.
        (3, 3 + 2 * 3 + 4 * 2, 4, 4),
    ],
)
def test_self_dc_stops_decomposing_at_depth_t(
    depth: int, llm_calls: int, retrieval_calls: int, retrieve_routes: int
) -> None:
    prediction, run, _ = solve("self-dc", QUESTION, always_uncertain, depth=depth)
    assert (run.llm_calls, run.retrieval_calls) == (llm_calls, retrieval_calls)
    stops = [r for r in routes(run, "self-dc") if r["branch"] == "retrieve"]
    assert len(stops) == retrieve_routes
    assert all(r["depth"] == depth and r["reason"] == "uncertain, depth t reached" for r in stops)
    assert prediction == "Port Vela"


@pytest.mark.parametrize(
    ("logprob", "branch", "llm_calls", "retrieval_calls"),
    [(math.log(0.9), "generate", 3, 0), (math.log(0.2), "retrieve", 2, 1)],
)
def test_self_dc_prob_confidence_is_mean_token_probability(
    logprob: float, branch: str, llm_calls: int, retrieval_calls: int
) -> None:
    rules = PromptRules([
        ((DIRECT, q(SUB_TOWN)), Reply(text="Brindle town hall", token_logprob=logprob)),
        ((GENERATE,), "Ada Quill is mayor of Brindle."),
        ((READ,), "Brindle"),
    ])
    prediction, run, llm = solve("self-dc", SUB_TOWN, rules, confidence="prob",
                                 alpha=0.6, beta=0.1)
    assert prediction == "Brindle"
    assert (run.llm_calls, run.retrieval_calls) == (llm_calls, retrieval_calls)
    assert llm.requests[0]["logprobs"] is True
    [route] = routes(run, "self-dc")
    assert route["branch"] == branch
    assert route["confidence"] == pytest.approx(math.exp(logprob))


def test_self_dc_prob_confidence_needs_logprobs() -> None:
    def without_logprobs(body: dict[str, Any]) -> Reply:
        return Reply(raw_body=b'{"id": "x", "object": "chat.completion", "created": 0, '
                     b'"model": "scripted", "choices": [{"index": 0, "finish_reason": "stop", '
                     b'"message": {"role": "assistant", "content": "Brindle"}}]}')

    with pytest.raises(UnsupportedEndpoint, match="no token logprobs"):
        solve("self-dc", SUB_TOWN, without_logprobs, confidence="prob")


EQUIVALENCE_QUESTIONS = [QUESTION, SUB_WINNER, SUB_TOWN]


def equivalence_rules() -> PromptRules:
    # Confidence prompts would fail loudly (no rule): the special cases must not ask.
    return PromptRules([
        ((GENERATE, SUB_TOWN), "Ada Quill became mayor of Brindle in May."),
        ((GENERATE,), "The 2031 open was played in Port Vela."),
        ((READ, "mayor of Brindle"), "Brindle"),
        ((READ,), "Port Vela"),
    ])


@pytest.mark.parametrize("confidence_kind", ["verb", "prob"])
def test_genread_is_self_dc_zero_zero_call_for_call(confidence_kind: str) -> None:
    with ScriptedLLM(equivalence_rules()) as llm:
        for question in EQUIVALENCE_QUESTIONS:
            start = llm.calls
            expected, base_run = run_method(llm, "genread", question, MemoryRetriever(CORPUS))
            middle = llm.calls
            prediction, run = run_method(llm, "self-dc", question, MemoryRetriever(CORPUS),
                                         alpha=0.0, beta=0.0, confidence=confidence_kind)
            assert prediction == expected
            assert (run.llm_calls, run.retrieval_calls) == (base_run.llm_calls,
                                                             base_run.retrieval_calls)
            assert [b["messages"] for b in llm.requests[middle:]] == [
                b["messages"] for b in llm.requests[start:middle]]
            assert [s for s in run.trace if s.kind != "route"] == base_run.trace


@pytest.mark.parametrize(("percent", "same_as_rr"), [(0, True), (99, True), (100, False)])
def test_self_dc_one_zero_is_rr_plus_a_confidence_call_below_certainty(
    percent: int, same_as_rr: bool
) -> None:
    rules = PromptRules([((CONFIDENCE,), confidence(percent)), *equivalence_rules().rules])
    with ScriptedLLM(rules) as llm:
        expected, rr_run = run_method(llm, "rr", SUB_TOWN, MemoryRetriever(CORPUS))
        prediction, run = run_method(llm, "self-dc", SUB_TOWN, MemoryRetriever(CORPUS),
                                     alpha=1.0, beta=0.0)
    [route] = routes(run, "self-dc")
    assert run.trace[0].name == "solver_self_dc_confidence"
    if same_as_rr:
        assert (prediction, route["branch"]) == (expected, "retrieve")
        assert run.trace[2:] == rr_run.trace  # after the confidence and the route: RR's calls
        assert (run.llm_calls, run.retrieval_calls) == (rr_run.llm_calls + 1, 1)
    else:  # Figure 3: c >= alpha + beta is known, even when alpha - beta is 1
        assert route["branch"] == "generate" and run.retrieval_calls == 0


# --- RA-ISF ---------------------------------------------------------------------------------


def test_ra_isf_self_knowledge_answers_from_memory() -> None:
    rules = [((KNOW, SUB_WINNER), "Yes."), ((ANSWER, q(SUB_WINNER)), "Ada Quill won it.")]
    prediction, run, _ = solve("ra-isf", SUB_WINNER, PromptRules(rules))
    assert prediction == "Ada Quill won it"
    assert (run.llm_calls, run.retrieval_calls) == (2, 0)
    assert routes(run, "ra-isf")[0]["module"] == "self-knowledge"


def test_ra_isf_reads_only_the_relevant_passages() -> None:
    rules = [
        ((KNOW,), "No"),
        ((RELEVANCE, "elected mayor of Brindle"), "Relevant paragraphs: [1] Ada Quill is mayor."),
        ((RELEVANCE,), "No."),
        ((RA_READ, "Relevant paragraphs: [1] May 9 – Ada Quill is elected mayor of Brindle.\n"
          "Instruction"), "Final answer: Brindle."),
    ]
    prediction, run, llm = solve("ra-isf", SUB_TOWN, PromptRules(rules))
    assert prediction == "Brindle"
    # know + one relevance judgement per retrieved passage (top 3) + read.
    assert (run.llm_calls, run.retrieval_calls) == (1 + 3 + 1, 1)
    assert sum(RELEVANCE in p for p in prompts_sent(llm)) == 3
    assert routes(run, "ra-isf")[0]["relevant"] == ["e2"]


def test_ra_isf_decomposes_when_nothing_is_relevant() -> None:
    rules = [
        ((KNOW, SUB_WINNER), "Yes, I know."),
        ((KNOW,), "No, I need additional knowledge."),
        ((ANSWER, q(SUB_WINNER)), "Ada Quill"),
        ((RELEVANCE, q(SUB_TOWN), "elected mayor"), "Yes, it is relevant."),
        ((RELEVANCE,), "No."),
        ((RA_READ, q(SUB_TOWN)), "Brindle"),
        ((RA_DECOMPOSE, q(QUESTION)), f"1. {SUB_WINNER} 2. {SUB_TOWN}"),
        ((RA_COMBINE, f"Sub-answer: 1. {SUB_WINNER} Answer: Ada Quill\n2. {SUB_TOWN} Answer: "
          "Brindle\n"), "Brindle"),
    ]
    prediction, run, _ = solve("ra-isf", QUESTION, PromptRules(rules))
    assert prediction == "Brindle"
    # root: know + 3 relevance + decompose; sub 1: know + answer;
    # sub 2: know + 3 relevance + read; combine.
    assert (run.llm_calls, run.retrieval_calls) == (5 + 2 + 5 + 1, 2)
    assert [r["module"] for r in routes(run, "ra-isf")] == [
        "passage relevance", "decomposition", "self-knowledge", "passage relevance"]


@pytest.mark.parametrize(
    ("raisf_depth", "llm_calls", "retrieval_calls", "unknowns"),
    [
        (0, 5 + 1, 1, 2),  # root: know, 3 relevance, decompose, combine; both subs past it
        (1, 5 + 2 * 6 + 1, 3, 4),  # each sub repeats the root's work; grandchildren past it
    ],
)
def test_ra_isf_threshold_answers_unknown(
    raisf_depth: int, llm_calls: int, retrieval_calls: int, unknowns: int
) -> None:
    def knows_nothing(body: dict[str, Any]) -> Reply:
        prompt = last_user_message(body)
        if RA_DECOMPOSE in prompt:
            question = prompt.split("Question: ")[-1].split("\n")[0].rstrip("?")
            return Reply(text=f"1. {question} part a?\n2. {question} part b?")
        if RA_COMBINE in prompt:
            return Reply(text=f"Final answer: {prompt.count('unknown')} unknown")
        return Reply(text="No.")

    prediction, run, llm = solve("ra-isf", QUESTION, knows_nothing, raisf_depth=raisf_depth)
    assert (run.llm_calls, run.retrieval_calls) == (llm_calls, retrieval_calls)
    thresholds = [r for r in routes(run, "ra-isf") if r["module"] == "threshold"]
    assert len(thresholds) == unknowns
    assert all(r["iteration"] == raisf_depth + 1 for r in thresholds)
    assert prediction == "2 unknown"
