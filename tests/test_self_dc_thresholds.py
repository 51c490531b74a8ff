"""Self-DC's routing at the edges of Figure 3's bands, for every cell of the paper's alpha/beta
grids (section 6.1: alpha 0.1-0.9 with beta 0.1; beta 0.1-0.5 with alpha 0.4, 0.6 and 0.8),
through the real gateway and the scripted OpenAI-compatible server.

Verbal confidences are whole percents, so each cell is checked at alpha-beta and alpha+beta and
one percent either side, against the bands computed in whole percents (exact integers)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest

from cuqa_builder.llm.gateway import open_gateway
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.solvers import get_solver
from cuqa_builder.solvers.base import SolverOptions, SolverRun
from cuqa_builder.testing.openai_server import Reply, ScriptedLLM, last_user_message

ALPHA_GRID = [(a / 10, 0.1) for a in range(1, 10)]
BETA_GRIDS = [(alpha, b / 10) for alpha in (0.4, 0.6, 0.8) for b in range(1, 6)]
CELLS = sorted(set(ALPHA_GRID + BETA_GRIDS))


class NoPassages:
    name = "none"

    def search(self, query: str, k: int) -> list:
        return []


def respond(body: dict[str, Any]) -> Reply:
    """Question "Case N?" has a verbal confidence of N%; a decomposition has one sub-question."""
    prompt = last_user_message(body)
    percent = re.search(r"Case (\d+)\?", prompt).group(1)
    if "indicate your level of confidence" in prompt:
        return Reply(f"Answer: Lima\nConfidence (0-100): {percent}%")
    if "divide the question into smaller" in prompt:
        return Reply(f"#1: Case {percent}?")
    return Reply("Lima")


def expected_band(percent: int, alpha: float, beta: float) -> str:
    low, high = round(100 * alpha) - round(100 * beta), round(100 * alpha) + round(100 * beta)
    if low < percent < high:
        return "uncertain"
    return "known" if percent >= high else "unknown"


def band_of(run: SolverRun) -> str:
    """The band of the first route: its reason is "known", "unknown" or "uncertain, ..."."""
    reason = next(s.data["reason"] for s in run.trace if s.kind == "route")
    return reason.split(",")[0]


def boundary_percents(alpha: float, beta: float) -> list[int]:
    edges = (round(100 * alpha) - round(100 * beta), round(100 * alpha) + round(100 * beta))
    return sorted({p for edge in edges for p in (edge - 1, edge, edge + 1) if 0 <= p <= 100})


def route_all(cases: list[tuple[float, float, int]]) -> list[str]:
    async def go(llm: ScriptedLLM) -> list[str]:
        settings = LLMSettings(model="scripted", base_url=llm.base_url, max_retries=0,
                               concurrency=16)
        async with open_gateway(settings) as gateway:
            async def one(alpha: float, beta: float, percent: int) -> str:
                run = SolverRun(gateway, NoPassages(), SolverOptions(alpha=alpha, beta=beta))
                await get_solver("self-dc")(f"Case {percent}?", run)
                return band_of(run)

            return await asyncio.gather(*(one(*case) for case in cases))

    with ScriptedLLM(respond) as llm:
        return asyncio.run(go(llm))


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-dummy-key")


def test_every_grid_cell_routes_its_boundaries_as_figure_3() -> None:
    assert len(CELLS) == 21
    cases = [(a, b, p) for a, b in CELLS for p in boundary_percents(a, b)]
    got = route_all(cases)
    wrong = [f"alpha={a} beta={b} confidence={p}%: {band} (Figure 3: {expected_band(p, a, b)})"
             for (a, b, p), band in zip(cases, got, strict=True)
             if band != expected_band(p, a, b)]
    assert not wrong, "\n".join(wrong)


def test_a_confidence_of_one_is_known_even_with_alpha_one() -> None:
    # alpha - beta >= 1 leaves only c >= 1 known: a verbal 100% generates, 99% retrieves.
    assert route_all([(1.0, 0.0, 100), (1.0, 0.0, 99)]) == ["known", "unknown"]
