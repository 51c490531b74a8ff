"""Which Wikipedia pages a window needs: year articles and Current events day pages (SPEC 2.1)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from cuqa_builder.window import Window

SOURCE_KINDS = ("year", "portal")
PORTAL_PREFIX = "Portal:Current events/"
# Fixed English names: `calendar.month_name` follows the locale, page titles do not.
MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)


def parse_sources(text: str) -> tuple[str, ...]:
    """`--sources year,portal` -> ("year", "portal"); an unknown kind is a clear error."""
    kinds = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    unknown = [kind for kind in kinds if kind not in SOURCE_KINDS]
    if unknown or not kinds:
        raise ValueError(
            f"unknown page kinds in {text!r}: choose one or more of {', '.join(SOURCE_KINDS)}"
        )
    return kinds


def portal_title(day: date) -> str:
    """`Portal:Current events/2023 May 1`: English month name, day without a leading zero."""
    return f"{PORTAL_PREFIX}{day.year} {MONTHS[day.month - 1]} {day.day}"


def window_days(window: Window) -> Iterator[date]:
    """Every day after the cutoff up to `until`, inclusive."""
    day = window.cutoff + timedelta(days=1)
    while day <= window.until:
        yield day
        day += timedelta(days=1)


def window_titles(window: Window, sources: str = "year,portal") -> list[str]:
    """Year articles first (the largest pages), then one portal page per day, in date order."""
    kinds = parse_sources(sources)
    days = list(window_days(window))
    titles: list[str] = []
    if "year" in kinds:
        titles += [str(year) for year in sorted({day.year for day in days})]
    if "portal" in kinds:
        titles += [portal_title(day) for day in days]
    return titles
