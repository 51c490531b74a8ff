"""The solver core: every method the Self-DC paper evaluates, by its `--method` name."""

from __future__ import annotations

from cuqa_builder.errors import CuqaError
from cuqa_builder.solvers import ra_isf, self_dc
from cuqa_builder.solvers.base import Solver
from cuqa_builder.solvers.direct import cot, direct, fewshot_cot
from cuqa_builder.solvers.genread import generate_then_read
from cuqa_builder.solvers.ircot import ircot
from cuqa_builder.solvers.iter_retgen import iter_retgen
from cuqa_builder.solvers.refeed import refeed
from cuqa_builder.solvers.rr import retrieve_then_read
from cuqa_builder.solvers.self_ask import self_ask

METHODS: dict[str, Solver] = {
    "direct": direct,
    "cot": cot,
    "fewshot-cot": fewshot_cot,
    "genread": generate_then_read,
    "rr": retrieve_then_read,
    "refeed": refeed,
    "ircot": ircot,
    "self-ask": self_ask,
    "iter-retgen": iter_retgen,
    "self-dc": self_dc.solve,
    "ra-isf": ra_isf.solve,
}
# Methods that answer without a retriever (the others need --retriever and --corpus).
NO_RETRIEVAL = frozenset({"direct", "cot", "fewshot-cot", "genread"})


class UnknownMethodError(CuqaError, ValueError):
    pass


def get_solver(name: str) -> Solver:
    try:
        return METHODS[name]
    except KeyError:
        raise UnknownMethodError(
            f"unknown method {name!r}; choose one of: {', '.join(METHODS)}"
        ) from None
