"""Year articles ("2023") -> events of their `== Events ==` section (SPEC 2.1).

Each month is a `=== January ===` subsection of dated bullets: `* [[March 3]] – text`, a bare
`* [[March 10]]` whose `**` sub-bullets are that day's events, ranges `* [[September 8]] –
[[October 28]] – text` (dated by their start), hyphens or dashes, and day-first `[[1 January]]`.
A bullet without a date (a holiday, a see-also line) is not an event.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import date

from mwparserfromhell.nodes import Heading, Node
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page
from cuqa_builder.wiki.render import NamedRefs, plain_text, render
from cuqa_builder.wiki.rendered import Rendered
from cuqa_builder.wiki.titles import MONTHS
from cuqa_builder.wiki.wikitext import (
    WIKIPEDIA_INDEX,
    ParseError,
    Warn,
    build_event,
    iter_lines,
    month_number,
    parse_page_text,
)

log = logging.getLogger(__name__)

EVENTS_HEADING = "events"
_MONTH = "|".join(MONTHS)
_DAY_OF_MONTH = rf"(?:(?:{_MONTH})\s+\d{{1,2}}|\d{{1,2}}\s+(?:{_MONTH}))"
_DASH = "[-–—]"  # entities (&ndash;) are already characters in the rendered text
# "March 3[, 2023] [– March 5|5[, 2023]] –": the end only counts when a dash or the end of the
# line follows it, so "March 3 – 5 people are killed" is one day, not a range.
_DATE_PREFIX = re.compile(
    rf"""^\s*(?P<start>{_DAY_OF_MONTH})(?:,?\s*(?P<start_year>\d{{4}})(?!\d))?
    (?:\s*{_DASH}\s*(?P<end>{_DAY_OF_MONTH}|\d{{1,2}})(?:,?\s*(?P<end_year>\d{{4}}))?
       (?=\s*(?:{_DASH}|:|$)))?
    \s*(?:{_DASH}|:)?\s*""",
    re.IGNORECASE | re.VERBOSE,
)

_WHOLE_DAY = re.compile(rf"^{_DAY_OF_MONTH}$", re.IGNORECASE)

@dataclass(frozen=True)
class Dates:
    start: date
    end: date | None = None


def parse_year_article(
    page: Page, index_url: str = WIKIPEDIA_INDEX, warn: Warn = log.warning
) -> list[Event]:
    """Dated events of the Events section, in page order; a month without any is warned about."""
    title = page.meta.title
    if not title.isdigit():
        raise ParseError(f"not a year article title: {title!r}")
    year = int(title)
    code = parse_page_text(page, warn)
    refs = NamedRefs(code)
    events: list[Event] = []
    for name, nodes in _subsections(_events_section(code)):
        found = _section_events(page, year, nodes, refs, index_url, warn)
        if not found and month_number(name) is not None:
            warn(f"{title}: section {name!r} has no dated events")
        events += found
    if not events:
        raise ParseError("the Events section has no dated events")
    return events


def _events_section(code: Wikicode) -> Wikicode:
    for section in code.get_sections(levels=[2]):
        heading = section.filter_headings(recursive=False)[0]
        if plain_text(heading.title).lower() == EVENTS_HEADING:
            return section
    raise ParseError("no '== Events ==' section")


def _subsections(section: Wikicode) -> list[tuple[str, list[Node]]]:
    """(heading, nodes) per subsection; the nodes before the first subheading come first."""
    parts: list[tuple[str, list[Node]]] = []
    name, nodes = "Events", []
    for node in section.nodes:
        if isinstance(node, Heading):
            if node.level > 2:
                parts.append((name, nodes))
                name, nodes = plain_text(node.title), []
            continue
        nodes.append(node)
    parts.append((name, nodes))
    return parts


def _section_events(
    page: Page, year: int, nodes: list[Node], refs: NamedRefs, index_url: str, warn: Warn
) -> list[Event]:
    events: list[Event] = []
    context: list[tuple[int, Dates]] = []  # dates of the enclosing bullets, outermost first
    for line in iter_lines(nodes):
        if line.depth == 0:
            if plain_text(line.nodes):
                context = []  # a paragraph ends the list the dates belonged to
            continue
        context = [(depth, dates) for depth, dates in context if depth < line.depth]
        rendered = render(line.nodes, refs)
        try:
            dated = split_date_prefix(rendered, year)
        except ValueError as exc:
            warn(f"{page.meta.title}: skipping a line with an invalid date ({exc})")
            continue
        if dated is not None:
            dates, rendered = dated
        elif context:
            dates = context[-1][1]
        else:
            continue  # no date anywhere above: a holiday, a note, not an event
        context.append((line.depth, dates))
        if rendered.text:
            events.append(build_event(
                page, rendered, day=dates.start, end_date=dates.end, index_url=index_url
            ))
    return events


def split_date_prefix(rendered: Rendered, year: int) -> tuple[Dates, Rendered] | None:
    """`March 3 – text` -> (the dates, the rest); None when the line does not start with a date.

    Raises ValueError for an impossible date ("February 30").
    """
    match = _DATE_PREFIX.match(rendered.raw)
    if match is None:
        return None
    start = _day(match["start"], int(match["start_year"] or year))
    end = None
    if match["end"]:
        end_year = int(match["end_year"] or start.year)
        # `[[March 8]]–[[April 2|2]]`: a bare day number links to its full date.
        end_day = _linked_day(rendered, match.start("end")) or match["end"]
        if end_day.isdigit():
            end = date(end_year, start.month, int(end_day))
        else:
            end = _day(end_day, end_year)
        if end < start and not match["end_year"]:
            end = end.replace(year=end.year + 1)  # "December 28 – January 3" runs into next year
    return Dates(start, end), rendered.after(match.end())


def _linked_day(rendered: Rendered, offset: int) -> str | None:
    """The day a link at `offset` points to ("April 2"), when its title is a day of a month."""
    for span in rendered.spans:
        if span.start <= offset < span.end and _WHOLE_DAY.match(span.link.title):
            return span.link.title
    return None


def _day(text: str, year: int) -> date:
    """"March 3" or "3 March" (the two shapes the prefix pattern captures) in `year`."""
    first, second = text.split()
    day, month = (second, first) if first.isalpha() else (first, second)
    return date(year, MONTHS.index(month.capitalize()) + 1, int(day))
