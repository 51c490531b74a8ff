"""The validate stage's checks on hand-written good and bad candidates, each with its reason."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl, write_jsonl
from cuqa_builder.records.candidates import Candidate, CheckFailure
from cuqa_builder.records.events import Entity
from cuqa_builder.records.items import CuqaItem, Review, SubQuestion
from cuqa_builder.review_report import ReviewReport
from cuqa_builder.run import GenerationInfo, save_run_info
from cuqa_builder.validation.checks import (
    CHECK_NAMES,
    Limits,
    answer_in_question,
    bridge_in_question,
    check_all,
    check_edit,
    event_after_cutoff,
    markup,
    one_question,
    prompt_echo,
    question_length,
    short_answer,
    template_residue,
)
from cuqa_builder.verification.question_form import form_problem
from tests.validation_samples import aab, abc, hard, river

LIMITS = Limits()


def failures_of(candidate: Candidate, limits: Limits = LIMITS) -> list[CheckFailure]:
    return check_all([candidate], limits).validations[0].failures


def only_failure(candidate: Candidate) -> CheckFailure:
    failures = failures_of(candidate)
    assert len(failures) == 1, failures
    return failures[0]


@pytest.mark.parametrize("make", [aab, abc, river, hard], ids=["AAB", "ABC", "AAB2", "hard"])
def test_good_candidates_pass_every_check(make) -> None:
    report = check_all([make()], LIMITS)
    assert report.validations[0].passed and report.validations[0].failures == []


# --- format -----------------------------------------------------------------------------------


def test_a_statement_is_not_a_question() -> None:
    failure = only_failure(aab(question="The solar car from Pellham won the 2023 race."))
    assert failure.check == "one_question"
    assert failure.reason.startswith('does not end with "?"')


def test_two_questions_in_one_fail() -> None:
    failure = only_failure(aab(question="Which solar car won the race? Who built the car?"))
    assert failure == CheckFailure(
        check="one_question",
        reason='asks 2 questions in one: "Which solar car won the race? Who built the car?"',
    )


def test_a_question_over_several_lines_fails() -> None:
    failure = only_failure(aab(question="Which solar car won\nthe 2023 Trans-Karoo race?"))
    assert failure.reason == "the question spans 2 lines"


def test_a_question_mark_inside_a_title_is_not_a_second_question() -> None:
    question = 'Which car starred in the film "Why Not?" and won the 2023 Trans-Karoo Challenge?'
    assert one_question(aab(question=question), LIMITS) is None


def test_a_quotation_left_open_fails() -> None:
    """Issue 28: a composed question that dropped a title's closing quote."""
    failure = one_question(aab(question='Which car starred in the film "Why Not and won the '
                                         '2023 Trans-Karoo Challenge?'), LIMITS)
    assert failure is not None and failure.reason.startswith('a quotation mark " without its pair')
    assert one_question(aab(question="Which car starred in “Why Not” and won the race?"),
                        LIMITS) is None


def test_an_empty_question_fails_with_its_reason() -> None:
    failure = one_question(aab(question="  "), LIMITS)
    assert failure is not None and failure.reason == "the question is empty"


def test_length_bounds_are_configurable() -> None:
    short = aab(question="Which car won?")
    failure = question_length(short, LIMITS)
    assert failure == CheckFailure(
        check="question_length", reason="the question has 3 words (allowed 4-60)"
    )
    assert question_length(short, Limits(min_question_words=3)) is None
    long_question = aab()  # 13 words
    assert question_length(long_question, Limits(max_question_words=10)) is not None


def test_empty_length_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="bounds 10-5 are empty"):
        Limits(min_question_words=10, max_question_words=5)


@pytest.mark.parametrize(
    ("question", "residue"),
    [
        ("Question One: Which solar car won the 2023 Trans-Karoo Challenge?", "Question One"),
        ("Which solar car won the race and what is Question Two about?", "Question Two"),
        ("Merged question: Which solar car won the 2023 Trans-Karoo Challenge?",
         "Merged question:"),
        ("According to the unknown event, which solar car won the challenge?",
         "According to the unknown event"),
        ("Generate a question about which solar car won the Trans-Karoo Challenge?",
         "Generate a"),
        ("Which solar car did {unknown_entity} build for the 2023 challenge?",
         "{unknown_entity}"),
        ("Sure! Which solar car won the 2023 Trans-Karoo Challenge?", "Sure"),
    ],
)
def test_template_residue_and_prompt_echo_fail(question: str, residue: str) -> None:
    failure = template_residue(aab(question=question), LIMITS)
    assert failure is not None
    assert failure.reason == f'prompt text or a placeholder left in the question: "{residue}"'


def test_a_merge_that_echoes_one_sub_question_fails() -> None:
    unknown = aab().sub_questions[0].question
    failure = only_failure(aab(question=unknown.replace("Trans-Karoo", "Trans Karoo").upper()))
    assert failure == CheckFailure(
        check="prompt_echo",
        reason=f'the question only repeats the unknown sub-question "{unknown}" instead of '
        "merging",
    )


def test_a_hard_merge_that_echoes_an_easy_item_fails() -> None:
    failure = prompt_echo(hard(question=river().question), LIMITS)
    assert failure is not None
    assert failure.reason.startswith('the question only repeats the easy item cq-aab')


def test_ordinary_words_are_not_residue() -> None:
    question = "Which question did the Pellham University panel generate debate about in 2023?"
    assert template_residue(aab(question=question), LIMITS) is None


@pytest.mark.parametrize(("question", "found"), [
    ("Which lake does the <b>ferry</b> cross?", '"<b>"'),
    ("Which lake does the [[ferry]] cross in 2023?", '"[["'),
    ("Which lake does the ferry in {{convert}} cross?", '"{{"'),
    ("Which lake does the ferry at https://example.org cross?", '"https://"'),
    ("Which lake does the ferry &amp; its twin cross?", '"&amp;"'),
])
def test_markup_in_a_question_fails(question: str, found: str) -> None:
    failure = markup(aab(question=question), LIMITS)
    assert failure is not None and failure.reason == f"markup in the question: {found}"


def test_markup_in_an_answer_fails_and_plain_punctuation_passes() -> None:
    assert markup(aab(answer="<i>Pellham</i>"), LIMITS) is not None
    plain = "Which rock 'n' roll band from Dunmere, whose 3 < 4 rule is famous, won in 2023?"
    assert markup(aab(question=plain), LIMITS) is None


def test_a_question_of_few_giant_words_is_too_long() -> None:
    pasted = "Which lake does the " + "x" * 25_000 + " cross?"
    failure = question_length(aab(question=pasted), LIMITS)
    assert failure is not None and failure.reason == (
        "the question has 25027 characters (at most 900)")


def test_an_edit_is_checked_for_text_only() -> None:
    # check_edit leaves out the checks that do not read the question or answer text.
    edited = abc(question="x", cutoff="2024-01")
    assert {f.check for f in check_edit(edited, LIMITS)} == {"one_question", "question_length"}
    assert "event_after_cutoff" in {f.check for f in failures_of(edited)}


def test_answer_must_be_short_and_present() -> None:
    assert short_answer(aab(answer=" "), LIMITS) == CheckFailure(
        check="short_answer", reason="the answer is empty"
    )
    long_answer = "the solar car that students of Pellham University built over three years"
    failure = short_answer(aab(answer=long_answer), LIMITS)
    assert failure is not None
    assert failure.reason.startswith("the answer has 12 words (at most 10): ")


# --- leakage ----------------------------------------------------------------------------------


def test_the_answer_in_the_question_is_a_leak_after_normalisation() -> None:
    item = abc(question="Is THE city of dunmere where the 2023 Trans-Karoo winners study?")
    failure = answer_in_question(item, LIMITS)
    assert failure == CheckFailure(
        check="answer_in_question", reason='the answer "Dunmere" appears in the question'
    )


def test_an_alias_of_the_answer_is_a_leak_too() -> None:
    item = abc(answer="Dunmere city", answer_aliases=["Dunmere"])
    failure = answer_in_question(item.model_copy(update={
        "question": "Which university in Dunmere had students win the 2023 challenge?"}), LIMITS)
    assert failure is not None
    assert failure.reason == "the answer's alias \"Dunmere\" appears in the question"


def test_an_answer_inside_a_longer_word_is_not_a_leak() -> None:
    item = aab(answer="Aurelia", question="Which Aurelian solar car won the 2023 challenge?")
    assert answer_in_question(item, LIMITS) is None


def test_abc_bridge_in_the_merged_question_fails() -> None:
    question = "In which city is Pellham University, whose students won the 2023 challenge?"
    failure = only_failure(abc(question=question))
    assert failure.check == "bridge_in_question"
    assert failure.reason.startswith('the bridge entity "Pellham University" appears')


def test_the_bridge_is_found_by_its_wikipedia_title_too() -> None:
    question = "In which city is the University of Pellham, winner of the 2023 challenge?"
    failure = bridge_in_question(abc(question=question), LIMITS)
    assert failure is not None and '"University of Pellham"' in failure.reason


@pytest.mark.parametrize("question", [
    "In which city is the university whose team won the Pellham University–Karoo race?",
    "In which city is the university whose team won the Pellham University-Karoo race?",
    "In which city is the Pellham University/Karoo solar team based?",
    "In which city is the university whose Pellham University-built car won in 2023?",
])
def test_a_bridge_inside_a_longer_name_is_a_leak(question: str) -> None:
    """Issue 31, item 17: "the Israel–Hamas war" names Israel: a bridge joined to another name
    by a hyphen, a dash or a slash is in the question as much as one standing alone."""
    failure = bridge_in_question(abc(question=question), LIMITS)
    assert failure is not None and '"Pellham University"' in failure.reason


def test_an_answer_inside_a_longer_name_is_a_leak() -> None:
    question = "Which city's team won the Dunmere–Karoo solar race of 2023?"
    failure = answer_in_question(abc(question=question), LIMITS)
    assert failure == CheckFailure(
        check="answer_in_question", reason='the answer "Dunmere" appears in the question')


def test_a_word_made_from_a_name_is_not_the_name() -> None:
    """A demonym or an adjective made from a name, joined or not, is not the name
    ("Israeli-occupied" does not name Israel)."""
    for question in ("Which Dunmerian-built car won the 2023 Trans-Karoo Challenge?",
                     "Which car built by Dunmerians won the 2023 Trans-Karoo Challenge?"):
        assert answer_in_question(abc(question=question), LIMITS) is None


def _through(item: Candidate, bridge: Entity) -> Candidate:
    """An ABC item whose unknown part answers `bridge` and whose known question asks about it."""
    assert item.intermediates is not None
    known = f"In which city is {bridge.text} located?"
    unknown, _ = item.sub_questions
    return item.model_copy(update={
        "intermediates": item.intermediates.model_copy(
            update={"cur_ent": bridge, "known_question": known}),
        "sub_questions": [unknown.model_copy(update={"answer": bridge.text}),
                          SubQuestion(question=known, answer=item.answer, kind="known")]})


def test_validate_fails_a_bridge_or_answer_inside_a_longer_name(tmp_path: Path) -> None:
    """Issue 31, item 17, through the command: the item that names its bridge inside "the
    Pellham University–Karoo race" fails bridge_in_question, the one that names its answer in
    "the Dunmere–Karoo race" fails answer_in_question, and neither is released."""
    bridge = abc(id="cq-bridge", question="In which city is the university whose team won the "
                 "Pellham University–Karoo race?")
    # another event through another bridge: not the same story as cq-bridge (a near-duplicate)
    answer = _through(abc(id="cq-answer", question="Which city's university won the "
                          "Dunmere–Karoo solar race of 2023?", event=river().event),
                      Entity(text="Osk Polytechnic", label="ORG"))
    write_jsonl(tmp_path / "candidates.jsonl", [bridge, answer, aab()])
    done = subprocess.run(
        [sys.executable, "-m", "cuqa_builder.cli.build", "--out", str(tmp_path), "--cutoff",
         "2023-04", "--stage", "validate", "--check-model", "none"],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split()[1:] for line in done.stdout.splitlines()
            if line.startswith("  ")}
    assert rows["bridge_in_question"] == ["1", "1"] and rows["answer_in_question"] == ["2", "1"]
    verdicts = {c.id: c.validation for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)}
    assert [(f.check, f.reason) for f in verdicts["cq-bridge"].failures] == [(
        "bridge_in_question", 'the bridge entity "Pellham University" appears in the question; '
        "the unknown sub-question should stand in for it")]
    assert [f.check for f in verdicts["cq-answer"].failures] == ["answer_in_question"]
    assert [i.id for i in read_jsonl(tmp_path / "cuqa.jsonl", CuqaItem)] == [aab().id]


def test_aab_items_have_no_bridge_to_hide() -> None:
    report = check_all([aab()], LIMITS)
    assert report.applied["bridge_in_question"] == 0
    assert report.applied["known_question_mentions_bridge"] == 0


def test_abc_known_question_must_mention_the_bridge() -> None:
    item = abc()
    item.sub_questions[1] = SubQuestion(
        question="Which city hosts the Karoo Science Fair?", answer="Dunmere", kind="known"
    )
    failure = only_failure(item)
    assert failure == CheckFailure(
        check="known_question_mentions_bridge",
        reason='the known question "Which city hosts the Karoo Science Fair?" does not '
        'mention the bridge "Pellham University"',
    )


# --- structure --------------------------------------------------------------------------------


def test_an_event_on_the_cutoff_day_is_not_unknown() -> None:
    item = aab()
    item.event.date = date(2023, 4, 30)  # "2023-04" means the model knows all of April
    failure = only_failure(item)
    assert failure.check == "event_after_cutoff"
    assert failure.reason == (
        "the event ev-0000000000000001 is dated 2023-04-30, not after the cutoff 2023-04 "
        "(2023-04-30): the model may know it"
    )
    item.event.date = date(2023, 5, 1)
    assert event_after_cutoff(item, LIMITS) is None


def test_a_bad_cutoff_is_reported() -> None:
    failure = event_after_cutoff(aab(cutoff="April 2023"), LIMITS)
    assert failure is not None and "expected YYYY-MM or YYYY-MM-DD" in failure.reason


def test_duplicates_keep_the_first_clean_copy() -> None:
    first = aab(id="cq-1", question="Which car won the 2023 Trans-Karoo Challenge? Why?")
    second = aab(id="cq-2", question="which car won the 2023 Trans Karoo Challenge, why?")
    third = aab(id="cq-3", question="Which car won the 2023 Trans-Karoo Challenge...why?")
    other = abc()
    report = check_all([first, second, third, other], LIMITS)
    # The first copy asks two questions; the second is the clean one, so the others point to it.
    checks = [[f.check for f in v.failures] for v in report.validations]
    assert checks == [["one_question", "duplicate"], [], ["duplicate"], []]
    assert report.validations[2].failures[0].reason == "duplicate of cq-2"
    assert report.failed["duplicate"] == 2 and report.applied["duplicate"] == 4


# --- hard items -------------------------------------------------------------------------------


def test_hard_item_hides_the_bridge_between_its_items() -> None:
    question = "Which river flooded Dunmere, the city of the 2023 Trans-Karoo winners, in October?"
    failure = only_failure(hard(question=question))
    assert failure.check == "bridge_in_question" and '"Dunmere"' in failure.reason


def test_hard_item_hides_the_bridges_of_its_easy_items() -> None:
    question = "Which river flooded in October 2023 the city of Pellham University?"
    failure = only_failure(hard(question=question))
    assert failure.check == "bridge_in_question" and '"Pellham University"' in failure.reason


def test_hard_item_checks_its_sub_items_structure() -> None:
    item = hard()
    item.sub_items[0].event.date = date(2023, 3, 1)
    item.sub_items[0].sub_questions[1] = SubQuestion(
        question="Which city hosts the Karoo Science Fair?", answer="Dunmere", kind="known"
    )
    failures = {f.check: f.reason for f in failures_of(item)}
    assert set(failures) == {"event_after_cutoff", "known_question_mentions_bridge"}
    assert failures["known_question_mentions_bridge"].startswith(
        "sub-item cq-abc0000000000002: the known question"
    )
    assert "ev-0000000000000002 is dated 2023-03-01" in failures["event_after_cutoff"]


def test_hard_item_question_is_checked_for_format_and_answer() -> None:
    failures = failures_of(hard(question="Did the River Osk flood the winners' city."))
    assert {f.check for f in failures} == {"one_question", "answer_in_question"}


def test_every_failure_names_a_registered_check() -> None:
    bad = [
        aab(question="Merged question: {x}"),
        abc(question="Pellham University Dunmere?", answer=""),
        hard(question="Which river flooded Dunmere in October 2023? And why?"),
    ]
    found = {f.check for v in check_all(bad, LIMITS).validations for f in v.failures}
    assert found and found <= set(CHECK_NAMES)


# --- the stage --------------------------------------------------------------------------------


def test_validate_stage_writes_verdicts_and_the_passed_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leak = abc(id="cq-leak", question="Is Dunmere the city where Pellham University is located?")
    candidates = [aab(), abc(), leak, hard(), river(id="cq-dupe")]
    candidates.append(river())
    write_jsonl(tmp_path / "candidates.jsonl", candidates)

    code = main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate", "-q"])

    assert code == 0
    validated = read_jsonl(tmp_path / "candidates.jsonl", Candidate)
    assert [c.id for c in validated] == [c.id for c in candidates]
    verdicts = {c.id: c.validation for c in validated}
    assert all(v is not None for v in verdicts.values())
    assert not verdicts["cq-leak"].passed
    assert [f.check for f in verdicts["cq-leak"].failures] == [
        "answer_in_question", "bridge_in_question", "near_duplicate"
    ]  # the leak rewords cq-abc...2: same event, same answer
    assert verdicts["cq-leak"].failures[2].reason == (
        "near_duplicate of cq-abc0000000000002 (same event and answer)")
    assert verdicts["cq-aab0000000000003"].failures[0].reason == "duplicate of cq-dupe"

    items = read_jsonl(tmp_path / "cuqa.jsonl", CuqaItem)
    assert [i.id for i in items] == [
        "cq-aab0000000000001", "cq-abc0000000000002", "cqh-0000000000000004", "cq-dupe"
    ]
    assert all(i.review.status == "unreviewed" for i in items)
    assert "intermediates" not in (tmp_path / "cuqa.jsonl").read_text()

    out = capsys.readouterr().out
    assert "validate: 4 of 6 candidates passed, 2 failed" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:]}
    assert rows["answer_in_question"] == ["5", "1"]
    assert rows["bridge_in_question"] == ["2", "1"]  # the two ABC items and the hard one
    assert rows["duplicate"] == ["5", "1"]
    info = json.loads((tmp_path / "run.json").read_text())
    counts = info["validation"].pop("counts")  # the summary's table, for the release's card
    assert info["validation"] == {"limits": {
        "min_question_words": 4, "max_question_words": 60, "max_answer_words": 10}}
    assert {name: [str(c["passed"]), str(c["failed"])] for name, c in counts.items()} == {
        name: rows[name] for name in counts}
    assert list(counts)[:3] == ["one_question", "question_length", "template_residue"]


def test_validate_stage_limits_come_from_the_command_line(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [aab(), abc()])
    args = ["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate", "-q"]
    assert main([*args, "--max-question-words", "13"]) == 0
    verdicts = [c.validation for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)]
    assert [v.passed for v in verdicts] == [True, False]
    assert verdicts[1].failures[0].reason == "the question has 14 words (allowed 4-13)"


def test_validate_stage_never_overwrites_reviewed_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [aab(), abc()])
    accepted = abc().to_item().model_copy(update={"review": Review(status="accepted")})
    write_jsonl(tmp_path / "cuqa.jsonl", [accepted])
    before = (tmp_path / "cuqa.jsonl").read_text()

    assert main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate"]) == 0

    assert (tmp_path / "cuqa.jsonl").read_text() == before
    assert all(c.validation for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate))
    assert "2 of 2 candidates passed, 0 failed (kept " in capsys.readouterr().out


def test_validate_stage_keeps_a_review_that_accepted_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(tmp_path / "candidates.jsonl", [aab(), abc()])
    (tmp_path / "cuqa.jsonl").write_text("")  # the pull step found no accepted item
    (tmp_path / "review-report.json").write_text("{}")

    assert main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate"]) == 0

    assert (tmp_path / "cuqa.jsonl").read_text() == ""
    assert "holds the 0 items accepted by review" in capsys.readouterr().out


def test_validate_stage_replaces_a_review_that_judged_nothing(tmp_path: Path) -> None:
    """An empty export once left an empty cuqa.jsonl behind: it protects no one's work."""
    write_jsonl(tmp_path / "candidates.jsonl", [aab(), abc()])
    (tmp_path / "cuqa.jsonl").write_text("")
    nothing = ReviewReport(
        tasks=0, reviewed=0, pending=0, accepted=0, rejected=0, ties=0, accept_rate=None,
        rewritten=0, answers_corrected=0, reject_reasons={}, annotations=0, cancelled=0,
        votes=0, annotators=0, multi_annotated=0, mean_agreement=None, seconds_per_task=None,
    )
    (tmp_path / "review-report.json").write_text(nothing.model_dump_json())

    assert main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate"]) == 0

    assert len(read_jsonl(tmp_path / "cuqa.jsonl", CuqaItem)) == 2
    assert not (tmp_path / "review-report.json").exists()


def test_validate_stage_needs_candidates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate"])
    assert code == 1
    assert "run the generate stage first" in capsys.readouterr().err


# --- issue 10: two questions joined by "and", reworded echoes, possessives -------------------


def test_two_questions_joined_by_and_are_not_one_question() -> None:
    joined = aab(question="Which solar car won the 2023 Trans-Karoo Challenge, and who is its "
                 "designer?")
    failure = one_question(joined, LIMITS)
    assert failure is not None and "joined by \", and who\"" in failure.reason
    relative = aab(question="Which solar car, built in Dunmere and which won a fair, won the "
                   "2023 Trans-Karoo Challenge?")
    assert one_question(relative, LIMITS) is None
    second = aab(question="Which car won the 2023 Trans-Karoo Challenge, and which university "
                 "built it?")
    assert one_question(second, LIMITS) is not None


def test_a_merge_that_only_rewords_one_sub_question_is_an_echo() -> None:
    reworded = aab(question="Which solar car won the Trans-Karoo Challenge in 2023?")
    failure = prompt_echo(reworded, LIMITS)
    assert failure is not None and "only rewords the unknown sub-question" in failure.reason
    assert prompt_echo(aab(), LIMITS) is None  # the real merge adds the known part


def test_a_possessive_names_the_answer() -> None:
    leak = aab(question="Which solar car's builders study at Pellham and won the Aurelia 7's "
               "race?")
    failure = answer_in_question(leak, LIMITS)
    assert failure is not None and '"Aurelia 7"' in failure.reason


def test_a_question_pointing_at_the_prompts_event_is_residue() -> None:
    for question in ("What assembly was Turkey choosing a president for in the event described?",
                     "Which country hosted the given event in 2023?"):
        failure = template_residue(aab(question=question), LIMITS)
        assert failure is not None and failure.check == "template_residue", question


# --- issue 20: a second question glued on with a bare "and which" ------------------------------

GLUED = ("Which political party won the largest number of seats in the Thai general election "
         "and which Chinese political party was founded in 1948?")


@pytest.mark.parametrize("question", [
    GLUED,
    GLUED.replace(" and which", ", and which"),
    "Which party won the Thai general election or which party was founded in 1948?",
    "When did the summit open in Kelvale and who signed the accord?",
])
def test_a_second_question_glued_on_by_a_wh_word_fails(question: str) -> None:
    failure = one_question(aab(question=question), LIMITS)
    assert failure is not None and "asks two questions joined by" in failure.reason, question
    assert form_problem(question) is not None  # generation's step check refuses it too


@pytest.mark.parametrize("question", [
    "Which G7 member country signed the 2023 Kelvale accord on river shipping?",
    "Which G7 member country signed an accord with the party which won the 2023 election?",
    "Which solar car, built in Dunmere and which won a fair, won the 2023 Trans-Karoo Challenge?",
    "What is the capital of the country which hosted the summit and which joined NATO in 2023?",
    "Which party and which leader won the 2023 Thai general election?",
])
def test_one_question_with_a_relative_clause_or_two_wh_words_passes(question: str) -> None:
    assert one_question(aab(question=question), LIMITS) is None, question
    assert form_problem(question) is None


def test_when_nothing_passes_the_summary_says_why_and_what_to_try(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leaks = [aab(id=f"cq-leak{i}", question=f"Which solar car {verb} like the Aurelia 7 in 2023?")
             for i, verb in enumerate(("raced", "won"))]
    write_jsonl(tmp_path / "candidates.jsonl", [*leaks, aab(id="cq-short", question="Which car?")])
    argv = ["--out", str(tmp_path), "--cutoff", "2023-04", "--stage", "validate", "-q",
            "--check-model", "none"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("validate: 0 of 3 candidates passed")
    assert lines[1].startswith(
        '  nothing passed, most commonly answer_in_question (2 of 3; the answer "Aurelia 7" ')
    assert lines[1].endswith("): try a stronger --model, --known-source wiki, a larger --limit")
    save_run_info(tmp_path, generation=GenerationInfo(
        model="m", seed=0, sampling={}, prompts={}, known_source="wiki"))
    assert main(argv) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith(
        "): try a stronger --model, a larger --limit")  # its known passages were the articles
