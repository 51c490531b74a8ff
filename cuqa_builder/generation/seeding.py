"""Every random choice of an event, drawn up front from a generator seeded by the run's seed and
the event id: the same event makes the same choices whatever `--limit`, order or resumption, and
the same choices give the same prompts and sampling seed, so a re-run is served by the cache."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass


def _digest(*parts: object) -> bytes:
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).digest()


def event_seed(seed: int, event_id: str) -> int:
    return int.from_bytes(_digest(seed, event_id)[:8], "big")


def candidate_id(seed: int, event_id: str, *parts: object) -> str:
    """An easy item's id: of its event (the paper's recipe makes one per event), and of what
    else tells it apart (the connected recipe's bridge and known hop)."""
    return f"cq-{_digest(seed, event_id, *parts).hex()[:16]}"


@dataclass(frozen=True)
class Draws:
    """Every random number one event needs, drawn in a fixed order before any call."""

    cur_index: int
    aab: bool
    k_fraction: float  # picks k_ent once the passage's entities are known
    api_seed: int


def draw(seed: int, event_id: str, n_entities: int) -> Draws:
    """`n_entities`: how many entities cur_ent is drawn from."""
    rng = random.Random(event_seed(seed, event_id))
    cur_index = rng.randrange(n_entities)  # = rng.choice(entities)
    aab = rng.randint(1, 9) < 5  # Algorithm 1, line 7: AAB with probability 4/9
    return Draws(cur_index, aab, k_fraction=rng.random(), api_seed=rng.getrandbits(31))
