"""Current events day pages (`Portal:Current events/2023 September 10`) -> events (SPEC 2.1).

A day's news sits inside `{{Current events|year=|month=|day=|content=...}}` (older pages) or
between a `{{Current events|...|top=yes}}` and a `{{Current events|...|bottom=yes}}` call (newer
pages), and there between the comments "All news items below/above this line" when present.
Bold lines (`'''Sports'''`, older `;Sports`) name the category; a bullet made only of links is a
topic, a bullet with prose is an event, and the topics above an event are its context.
"""

from __future__ import annotations

import re
from datetime import date
from itertools import chain

from mwparserfromhell.nodes import Comment, Heading, Node, Tag, Template
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.records import Event, Page
from cuqa_builder.wiki.wikitext import (
    WIKIPEDIA_INDEX,
    Line,
    NamedRefs,
    ParseError,
    build_event,
    iter_lines,
    month_number,
    parse_wikitext,
    plain_text,
    render,
    significant,
    template_name,
    template_param,
)

_TITLE = re.compile(r"^Portal:Current events/(\d{4}) ([A-Za-z]+) (\d{1,2})$")
_WRAPPER = "current events"
_START_MARKER = "below this line"
_END_MARKER = "above this line"


def portal_day(title: str) -> date:
    """The day a Current events page is about, from its title."""
    match = _TITLE.match(title)
    month = month_number(match[2]) if match else None
    if match is None or month is None:
        raise ParseError(f"not a Current events day title: {title!r}")
    try:
        return date(int(match[1]), month, int(match[3]))
    except ValueError as exc:
        raise ParseError(f"invalid date in title {title!r}: {exc}") from None


def parse_portal(page: Page, index_url: str = WIKIPEDIA_INDEX) -> list[Event]:
    """Every news item of the day, in page order; a page without any is a `ParseError`."""
    day = portal_day(page.meta.title)
    events: list[Event] = []
    category: str | None = None
    topics: list[tuple[int, list[str]]] = []  # (bullet depth, titles) from outermost in
    code = parse_wikitext(page.wikitext)
    refs = NamedRefs(code)
    for line in iter_lines(news_nodes(code)):
        if line.depth == 0:
            heading = category_of(line)
            if heading is not None:
                category, topics = heading, []
            continue
        topics = [(depth, titles) for depth, titles in topics if depth < line.depth]
        rendered = render(line.nodes, refs)
        if not rendered.text:
            continue
        if rendered.only_links():
            topics.append((line.depth, [link.title for link in rendered.links]))
            continue
        context = [title for _, titles in topics for title in titles]
        events.append(build_event(
            page, rendered, day=day, category=category, topics=context, index_url=index_url
        ))
    if not events:
        raise ParseError("no news items on the page (empty day)")
    return events


def news_nodes(code: Wikicode) -> list[Node]:
    """The nodes holding the day's news, in either era's wrapper, trimmed to the markers."""
    # Cheap top-level looks first; the deep searches only for pages nested in a tag.
    for find in (_content_parameter, _between_top_and_bottom, _nested_content_parameter):
        nodes = find(code)
        if nodes is not None:
            return _between_markers(nodes)
    # An unclosed call is left as plain text by the parser.
    if any("{{current events" in text.value.lower() for text in code.ifilter_text()):
        raise ParseError("a {{Current events}} template is not closed")
    raise ParseError("no {{Current events}} template (neither content= nor top=yes)")


def _content_parameter(code: Wikicode, recursive: bool = False) -> list[Node] | None:
    for template in code.ifilter_templates(recursive=recursive):
        if template_name(template) == _WRAPPER and template.has("content"):
            return list(template.get("content").value.nodes)
    return None


def _nested_content_parameter(code: Wikicode) -> list[Node] | None:
    return _content_parameter(code, recursive=True)


def _between_top_and_bottom(code: Wikicode) -> list[Node] | None:
    # The two calls are siblings: on the page itself or inside one wrapping tag (a <div>).
    containers = chain(
        [code], (tag.contents for tag in code.ifilter_tags() if tag.contents is not None)
    )
    for container in containers:
        nodes = list(container.nodes)
        top = _index_of_wrapper(nodes, "top")
        if top is None:
            continue
        bottom = _index_of_wrapper(nodes, "bottom", start=top + 1)
        if bottom is None:
            raise ParseError("a {{Current events|top=yes}} call has no bottom=yes call after it")
        return nodes[top + 1 : bottom]
    return None


def _index_of_wrapper(nodes: list[Node], flag: str, start: int = 0) -> int | None:
    for index in range(start, len(nodes)):
        node = nodes[index]
        if (
            isinstance(node, Template)
            and template_name(node) == _WRAPPER
            and (template_param(node, flag) or "").lower() == "yes"
        ):
            return index
    return None


def _between_markers(nodes: list[Node]) -> list[Node]:
    """Keep what lies between "All news items below this line" and "... above this line"."""
    start, end = 0, len(nodes)
    for index, node in enumerate(nodes):
        if isinstance(node, Comment):
            words = " ".join(str(node.contents).split()).lower()
            if _START_MARKER in words and start == 0:
                start = index + 1
            elif _END_MARKER in words:
                end = index
                break
    return nodes[start:end]


def category_of(line: Line) -> str | None:
    """`'''Armed conflicts and attacks'''`, `;Sports` or a heading line -> the category name."""
    if line.term:
        return plain_text(line.nodes) or None
    nodes = significant(line.nodes)
    if len(nodes) != 1:
        return None
    node = nodes[0]
    if isinstance(node, Tag) and node.wiki_markup == "'''" and node.contents is not None:
        return plain_text(node.contents) or None
    if isinstance(node, Heading):
        return plain_text(node.title) or None
    return None
