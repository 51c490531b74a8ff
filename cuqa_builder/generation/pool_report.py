"""What the events' pools held, counted for the generate summary (from `pool.jsonl` records):
bridges described or set aside and why, questions composed and screened, how many each check
failed, and the properties of the survivors."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from cuqa_builder.records.pool import PoolRecord

SURVIVED, KEPT, NOT_SCREENED = "survived", "kept", "not screened"
NOT_KEPT = "not kept"  # no checker while composing: another bridge or property ranked higher
_NOT_CHECKED = (KEPT, NOT_KEPT, NOT_SCREENED)
# A reason's words up to what it quotes or explains ("the description names the bridge 'X'").
_FIRST_WORD = re.compile(r"^([^:('\"]*)")


def _head(text: str) -> str:
    """An outcome or a reason by its first words, what it quotes of its own case left out:
    "connected", "skipped: foreseeable", "refused: the description names the bridge"."""
    first, _, rest = text.partition(": ")
    if first in ("skipped", "refused"):
        return f"{first}: {_FIRST_WORD.match(rest)[1].strip()}"
    return first.split(" (")[0]


@dataclass
class PoolTally:
    events: int = 0
    bridges: int = 0
    described: int = 0
    set_aside: Counter[str] = field(default_factory=Counter)
    members: int = 0
    hops_refused: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    survivors: Counter[str] = field(default_factory=Counter)  # by property
    events_with_survivors: int = 0

    @classmethod
    def of_run(cls, records: Iterable[PoolRecord]) -> PoolTally:
        """The whole run's pools: each event's latest record of `pool.jsonl` (a resumed command
        makes only some of them)."""
        latest = {record.event_id: record for record in records}
        tally = cls()
        for record in latest.values():
            tally.add(record)
        return tally

    def add(self, record: PoolRecord) -> None:
        self.events += 1
        self.bridges += len(record.bridges)
        self.described += sum(t.description is not None for t in record.bridges)
        self.set_aside.update(_head(t.set_aside) for t in record.bridges if t.set_aside)
        self.members += len(record.members)
        self.hops_refused += len(record.refused)
        outcomes = [_head(m.outcome) for m in record.members]
        self.outcomes.update(outcomes)
        alive = [m for m, o in zip(record.members, outcomes, strict=True)
                 if o in (SURVIVED, KEPT)]
        self.survivors.update(m.property for m in alive)
        self.events_with_survivors += bool(alive)

    def lines(self) -> list[str]:
        if not self.events:
            return []
        screened = self.members - sum(self.outcomes[why] for why in _NOT_CHECKED)
        failed = "; ".join(f"{n} {why}" for why, n in self.outcomes.most_common()
                           if why not in (SURVIVED, *_NOT_CHECKED))
        ranked = [f"{n} {what}" for n, what in (
            (screened, "screened by the checker" + (f" (failed: {failed})" if failed else "")),
            (self.outcomes[KEPT], "kept unchecked (validate checks them)"),
            (self.outcomes[NOT_KEPT], "not kept (another bridge or property ranked higher)"),
            (self.outcomes[NOT_SCREENED], "ranked below --pool-size"),
        ) if n]
        aside = "; ".join(f"{n} {why}" for why, n in self.set_aside.most_common())
        alive = sum(self.survivors.values())
        mix = ", ".join(f"{p} {n}" for p, n in self.survivors.most_common())
        return [
            f"  pool (the whole run): {self.events} events, {self.described} of {self.bridges} "
            f"named things "
            f"described" + (f" ({aside})" if aside else ""),
            f"    {self.members} questions composed ({self.members / self.events:.1f} per "
            f"event; {self.hops_refused} known hops refused)"
            + (f": {', '.join(ranked)}" if ranked else ""),
            f"    {alive} left in {self.events_with_survivors} events"
            + (f"; by property: {mix}" if mix else ""),
        ]
