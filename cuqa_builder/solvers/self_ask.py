"""Self-Ask with retrieval (Press et al., section 3; demonstrations of Table 18).

The model writes "Follow up:" questions; generation stops before it can write the
"Intermediate answer:" itself, the follow-up is answered by retrieve-then-read, and the answer is
fed back for the model to continue, until it writes "So the final answer is:".

Chat models often answer the scaffold's "Are follow up questions needed here:" with a plain "Yes"
or "No" (or a sentence starting so) and stop. The format's next line is then written for them
("Yes\nFollow up:" or "No\nSo the final answer is:") and they are asked to go on, once each time.
"""

from __future__ import annotations

import re

from cuqa_builder.answer_parsing import cut_at_stop, extract_answer, final_answer
from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.direct import NEXT_EXAMPLE
from cuqa_builder.solvers.prompting import demonstrations
from cuqa_builder.solvers.rr import retrieve_then_read

SELF_ASK = "solver_self_ask"
SELF_ASK_DEMOS = "solver_demos_self_ask"
INTERMEDIATE = "Intermediate answer:"
STOP = [INTERMEDIATE, *NEXT_EXAMPLE]
MAX_FOLLOW_UPS = 4  # the demonstrations need two; a looping model is cut off after four
FINAL_CUE = "So the final answer is:"
_FOLLOW_UP = re.compile(r"Follow up:[ \t]*(.*)")
_YES_NO_REPLY = re.compile(r"\s*(yes|no)\b", re.IGNORECASE)


def _next_cue(generated: str, at_start: bool) -> str:
    """After a reply that only says yes or no, that word and the line the format expects next."""
    reply = _YES_NO_REPLY.match(generated)
    if reply is None:
        return ""
    word = reply.group(1).capitalize()
    cue = "Follow up:" if word == "Yes" else FINAL_CUE
    return f"{' ' if at_start else ''}{word}\n{cue}"  # the prompt ends "needed here:"


def _with_follow_up(scratchpad: str, generated: str, answer: str) -> str:
    """The scratchpad continued by the model's text up to its follow-up line, then the answer."""
    if not scratchpad and not generated[:1].isspace():
        generated = " " + generated  # the prompt ends "needed here:"
    return f"{scratchpad}{generated.rstrip()}\n{INTERMEDIATE} {answer}\n"


async def self_ask(question: str, run: SolverRun) -> str:
    values = {"demonstrations": demonstrations(SELF_ASK_DEMOS), "question": question}
    scratchpad = ""
    cue = ""  # words written for the model after a bare yes/no, which it continues
    answers: list[str] = []
    generated = ""
    follow_up = None
    while True:
        prompt = {**values, "scratchpad": scratchpad + cue}
        result = await run.ask(SELF_ASK, prompt, stop=STOP)
        generated = cue + cut_at_stop(result.text, STOP)
        answer = final_answer(generated)
        if answer is not None:
            run.route("self-ask", stop="final answer", follow_ups=len(answers))
            return run.conclude(scratchpad + generated, answer)
        follow_up = _FOLLOW_UP.search(generated)
        if follow_up is None or not follow_up.group(1).strip():
            cue = "" if cue else _next_cue(generated, at_start=not scratchpad)
            if cue:
                continue
            run.route("self-ask", stop="no follow-up question", follow_ups=len(answers))
            break
        cue = ""
        if len(answers) == MAX_FOLLOW_UPS:
            run.route("self-ask", stop="max follow-ups", follow_ups=len(answers))
            break
        answers.append(await retrieve_then_read(follow_up.group(1).strip(), run))
        scratchpad = _with_follow_up(scratchpad, generated[: follow_up.end()], answers[-1])
    # No final answer line: the model's own last words, else the last intermediate answer.
    last_words = extract_answer(generated) if follow_up is None else ""
    return run.conclude(scratchpad + generated, last_words or (answers[-1] if answers else ""))
