"""The unknown-event window: what "after the cutoff" means (SPEC 1)."""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

from cuqa_builder.errors import UsageError

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_DAY = re.compile(r"^(\d{4})-(\d{2})-(\d{2})$")


class WindowError(UsageError):
    """An invalid cutoff or window; the CLI prints it on one line and exits with 2."""


def parse_cutoff(text: str) -> date:
    """`2023-04` means the model knows all of April 2023; `2023-04-15` is day-precise."""
    text = text.strip()
    if m := _MONTH.match(text):
        year, month = int(m[1]), int(m[2])
        if not 1 <= month <= 12:
            raise WindowError(f"invalid cutoff {text!r}: month must be 01-12")
        if year < 1:
            raise WindowError(f"invalid cutoff {text!r}: there is no year 0")
        return date(year, month, calendar.monthrange(year, month)[1])
    if _DAY.match(text):
        try:
            return date.fromisoformat(text)
        except ValueError as exc:
            raise WindowError(f"invalid cutoff {text!r}: {exc}") from None
    raise WindowError(f"invalid cutoff {text!r}: expected YYYY-MM or YYYY-MM-DD")


TODAY = "today"  # `--until today`: a crontab line cannot hold `$(date +%F)` unescaped


def parse_until(text: str | None) -> date:
    """`--until 2024-06` is the end of June 2024; a day is taken as given; none (or `today`)
    is today."""
    if text is None or text.strip() == TODAY:
        return date.today()
    try:
        return parse_cutoff(text)
    except WindowError as exc:
        raise WindowError(str(exc).replace("cutoff", "--until", 1)) from None


@dataclass(frozen=True)
class Window:
    """Events strictly after `cutoff` and up to `until` (inclusive) are unknown."""

    cutoff: date
    until: date
    label: str  # the cutoff as the user wrote it, recorded in every item

    @classmethod
    def parse(cls, cutoff: str, until: str | None = None) -> Window:
        start, end = parse_cutoff(cutoff), parse_until(until)
        if end <= start:
            raise WindowError(f"empty window: --until {end} is not after the cutoff {start}")
        return cls(cutoff=start, until=end, label=cutoff.strip())

    def contains(self, day: date) -> bool:
        """An event range counts by its start date."""
        return self.cutoff < day <= self.until
