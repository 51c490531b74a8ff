"""Algorithm 1's calls, planned without making any (for `--estimate`, see `llm/estimate.py`).

Each event's draws (seeded, as in a real run) pick its entity and branch, so the first two
prompts are exactly those the run will send; the later ones hold stand-in text as long as the
expected passage and questions. A reply with no usable question is asked once more in a real run;
the plan counts no such repeat.
"""

from __future__ import annotations

from collections.abc import Iterable

from cuqa_builder.generation.algorithm import (
    KNOWN_EVENTS_GEN,
    KNOWN_QUESTION_GEN,
    KNOWN_QUESTION_GEN2,
    MERGE_QUESTIONS,
    UNKNOWN_QUESTION_GEN,
    Generator,
    Sampling,
    Step,
    draw,
)
from cuqa_builder.generation.connected import (
    CATEGORY,
    CHOOSE_BRIDGE,
    KNOWN_PASSAGE,
    PROPERTY_QUESTION,
    ConnectedGenerator,
)
from cuqa_builder.llm.estimate import CallPlan
from cuqa_builder.prompts import PromptTemplate, load_prompt
from cuqa_builder.records import Event, KnownSource
from cuqa_builder.verification.checker import (
    GUESS_SAMPLING,
    GUESS_TEMPLATE,
    OPEN_BOOK_SAMPLING,
    OPEN_BOOK_TEMPLATE,
)

# Output lengths before the cache knows the model: a question with a short lead-in, and most of
# a "detailed passage" (its max_tokens is 384).
QUESTION_TOKENS = 30
PASSAGE_TOKENS = 300
# Dependent steps: (unknown question + passage), known question, merge; the checker's three
# calls, one after another.
EASY_ROUNDS = 3
CHECK_ROUNDS = 3
GUESS_TOKENS, OPEN_BOOK_TOKENS = 25, 20  # five short guesses; three short lines


def _call(plan: CallPlan, templates: dict[str, PromptTemplate], step: Step, max_tokens: int,
          expected: int, label: str | None = None, **values: str) -> str:
    """Plan one step's call; returns stand-in text as long as its expected output."""
    prompt = templates[step.template].render(**values)
    out = plan.add(label or step.function, len(prompt), max_tokens, expected,
                   template=step.template)
    return "x" * plan.calibration.chars(out)


def plan_easy(plan: CallPlan, events: Iterable[Event], seed: int,
              templates: dict[str, PromptTemplate], sampling: Sampling,
              recipe: type[Generator] = Generator, known_source: KnownSource = "model",
              checked: bool = False) -> int:
    """Plan the recipe for each event (each must have entities); returns how many. `checked`:
    the connected recipe asks the checker while composing."""
    if recipe is ConnectedGenerator:
        return _plan_connected(plan, events, seed, templates, sampling, known_source, checked)
    short, long = sampling.question_max_tokens, sampling.passage_max_tokens
    count = 0
    for event in events:
        draws = draw(seed, event.id, len(event.entities))
        cur = event.entities[draws.cur_index].text
        unknown = _call(plan, templates, UNKNOWN_QUESTION_GEN, short, QUESTION_TOKENS,
                        unknown_event=event.text, unknown_entity=cur)
        passage = _call(plan, templates, KNOWN_EVENTS_GEN, long, PASSAGE_TOKENS, entity=cur)
        if draws.aab:
            known = _call(plan, templates, KNOWN_QUESTION_GEN, short, QUESTION_TOKENS,
                          known_event=passage, entity=cur)
        else:  # k_ent comes from the passage: stood in by a name as long as cur_ent
            known = _call(plan, templates, KNOWN_QUESTION_GEN2, short, QUESTION_TOKENS,
                          known_passage=passage, unknown_entity=cur, known_entity=cur)
        _call(plan, templates, MERGE_QUESTIONS, short, QUESTION_TOKENS,
              unknown_question=unknown, known_question=known)
        count += 1
    plan.rounds = max(plan.rounds, EASY_ROUNDS if count else 0)
    return count


def _plan_connected(plan: CallPlan, events: Iterable[Event], seed: int,
                    templates: dict[str, PromptTemplate], sampling: Sampling,
                    known_source: KnownSource, checked: bool) -> int:
    """The connected recipe: a description of the bridge, the passage when the model writes it,
    then the known question (ABC) or the category (AAB); the merge is no call. `checked`: the
    checker's three calls follow (two guesses, one answer with the event), for the first
    bridge; a bridge the checker fails costs the next one's calls too (not planned)."""
    short, long = sampling.question_max_tokens, sampling.passage_max_tokens
    guess, open_book = load_prompt(GUESS_TEMPLATE), load_prompt(OPEN_BOOK_TEMPLATE)
    count = 0
    for event in events:
        pool = ConnectedGenerator.bridge_candidates(event)
        if not pool:
            continue
        draws = draw(seed, event.id, len(pool))
        cur = pool[draws.cur_index].text
        description = _call(plan, templates, CHOOSE_BRIDGE, short, QUESTION_TOKENS,
                            event=event.text, date=str(event.date), cutoff="",
                            bridges="\n".join(f"- {e.text}" for e in pool))
        passage = "x" * plan.calibration.chars(PASSAGE_TOKENS)
        if known_source == "model":
            passage = _call(plan, templates, KNOWN_PASSAGE, long, PASSAGE_TOKENS, entity=cur,
                            event=event.text, cutoff="")
        step = CATEGORY if draws.aab else PROPERTY_QUESTION
        values = {"bridge": cur, "passage": passage, "cutoff": ""}
        values |= {} if draws.aab else {"answers": passage[:200], "event": event.text}
        known = _call(plan, templates, step, short, QUESTION_TOKENS, **values)
        if checked:
            question = known + description
            for asked in (known, question):
                _call_template(plan, guess, "checker: guesses", GUESS_SAMPLING, GUESS_TOKENS,
                               question=asked, cutoff="")
            _call_template(plan, open_book, "checker: with the event", OPEN_BOOK_SAMPLING,
                           OPEN_BOOK_TOKENS, question=question, event=event.text,
                           passage=passage, date="", cutoff="")
        count += 1
    plan.rounds = max(plan.rounds, (EASY_ROUNDS + CHECK_ROUNDS * checked) if count else 0)
    if count and checked:
        plan.notes.append("generate: the checker's calls for the first bridge tried; a bridge "
                          "it fails costs the next one's calls too (up to 3 bridges)")
    return count


def _call_template(plan: CallPlan, template: PromptTemplate, label: str,
                   sampling: dict[str, object], expected: int, **values: str) -> None:
    prompt = template.render(**values)
    plan.add(label, len(prompt), int(str(sampling["max_tokens"])), expected,
             template=template.name)


def plan_hard(plan: CallPlan, pairs: int, templates: dict[str, PromptTemplate],
              sampling: Sampling) -> None:
    """`pairs` merges of two easy merged questions (one more round)."""
    question = "x" * plan.calibration.chars(
        plan.calibration.tokens_out(MERGE_QUESTIONS.template, QUESTION_TOKENS))
    for _ in range(pairs):
        _call(plan, templates, MERGE_QUESTIONS, sampling.question_max_tokens, QUESTION_TOKENS,
              label="MergeQuestions (hard)", unknown_question=question, known_question=question)
    if pairs:
        plan.rounds += 1
