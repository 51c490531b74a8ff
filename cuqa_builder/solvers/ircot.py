"""IRCoT (Trivedi et al., 2023): interleave retrieval with chain-of-thought sentences.

Retrieve with the question, then repeat: write the next CoT sentence from everything retrieved so
far, stop if it gives the answer ("So the answer is"), else retrieve with that sentence. The
Self-DC paper names no table for IRCoT; the prompt uses its Table 20 demonstrations.
"""

from __future__ import annotations

import re

from cuqa_builder.answer_parsing import cut_at_stop, extract_answer, first_sentence
from cuqa_builder.solvers.base import SolverRun
from cuqa_builder.solvers.direct import NEXT_EXAMPLE
from cuqa_builder.solvers.iter_retgen import ITER_RETGEN_DEMOS
from cuqa_builder.solvers.prompting import demonstrations, join_passages, merge_passages

IRCOT = "solver_ircot"
MAX_STEPS = 4  # retrievals guided by a CoT sentence, after the first one with the question
_STOP_RULE = re.compile(r"answer is", re.IGNORECASE)  # IRCoT's own termination test


async def ircot(question: str, run: SolverRun) -> str:
    demos = demonstrations(ITER_RETGEN_DEMOS)
    passages = await run.retrieve(question)
    sentences: list[str] = []
    for step in range(MAX_STEPS + 1):
        values = {"demonstrations": demos, "passage": join_passages(passages),
                  "question": question, "reasoning": " ".join(sentences)}
        result = await run.ask(IRCOT, values, stop=NEXT_EXAMPLE)
        sentence = first_sentence(cut_at_stop(result.text, NEXT_EXAMPLE))
        if not sentence:
            stop = "no new sentence"
            break
        sentences.append(sentence)
        if _STOP_RULE.search(sentence):
            run.route("ircot", stop="answer sentence", steps=step + 1)
            return run.conclude(" ".join(sentences), extract_answer(sentence))
        if step == MAX_STEPS:
            stop = "max steps"
            break
        passages = merge_passages(passages, await run.retrieve(sentence))
    run.route("ircot", stop=stop, steps=step + 1)
    return run.conclude(" ".join(sentences), extract_answer(sentences[-1]) if sentences else "")
