"""Wikitext read into lines: the parsing shared by the year-article, Current events and entity
article parsers, template names and parameters, and the titles, dates and event records a news
line becomes. Rendering a line as a reader sees it is `render.py`'s.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from urllib.parse import quote

import mwparserfromhell
from mwparserfromhell.nodes import Comment, Heading, Node, Tag, Template, Text
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.errors import CuqaError
from cuqa_builder.records.events import Event, EventSource, event_id
from cuqa_builder.records.pages import Page
from cuqa_builder.wiki.rendered import Rendered
from cuqa_builder.wiki.titles import MONTHS

WIKIPEDIA_INDEX = "https://en.wikipedia.org/w/index.php"

# A title's qualifier in brackets at its end: "Paris (band)".
PARENTHETICAL = re.compile(r"\s*\([^()]*\)$")
# mwparserfromhell gives up on templates nested ~34 deep (counting the page's own wrapper) and
# closes the outer ones early; no real page nests this deep.
MAX_TEMPLATE_DEPTH = 20
_BRACES = re.compile(r"\{\{|\}\}")

Warn = Callable[[str], None]


class ParseError(CuqaError, ValueError):
    """A page the parsers cannot read; the message is the reason, for the run's warnings."""


# --- lines ------------------------------------------------------------------------------


@dataclass
class Line:
    """One line of wikitext: its list markers and the nodes after them."""

    depth: int  # number of `*`/`#` markers; 0 for a line that is not a list item
    term: bool  # a `;term` line (old Current events pages write categories this way)
    nodes: list[Node]


def parse_wikitext(text: str) -> Wikicode:
    return mwparserfromhell.parse(text)


def parse_page_text(page: Page, warn: Warn) -> Wikicode:
    """The page's wikitext parsed, once templates nested beyond the parser's depth are dropped."""
    text, deepest = drop_deep_templates(page.wikitext)
    if deepest:
        warn(f"{page.meta.title}: dropped templates nested more than {MAX_TEMPLATE_DEPTH} deep "
             f"(down to {deepest} levels), which the wikitext parser cannot read")
    return parse_wikitext(text)


def drop_deep_templates(text: str, limit: int = MAX_TEMPLATE_DEPTH) -> tuple[str, int]:
    """`text` without the templates that open more than `limit` deep (the outer ones stay), and
    the deepest nesting seen when any were dropped (else 0)."""
    if text.count("{{") <= limit:
        return text, 0
    cuts: list[tuple[int, int]] = []
    starts: list[int] = []
    deepest = 0
    for brace in _BRACES.finditer(text):
        if brace.group() == "{{":
            starts.append(brace.start())
            deepest = max(deepest, len(starts))
        elif starts:
            start = starts.pop()
            if len(starts) == limit:  # the template just closed opened one level too deep
                cuts.append((start, brace.end()))
    if not cuts:
        return text, 0
    pieces, cursor = [], 0
    for start, end in cuts:
        pieces.append(text[cursor:start])
        cursor = end
    pieces.append(text[cursor:])
    return "".join(pieces), deepest


def iter_lines(nodes: Iterable[Node]) -> list[Line]:
    """Split top-level nodes at newlines; a template or tag spanning lines stays in its line."""
    lines: list[list[Node]] = [[]]
    for node in nodes:
        if isinstance(node, Text) and "\n" in node.value:
            first, *rest = node.value.split("\n")
            if first:
                lines[-1].append(Text(first))
            for piece in rest:
                lines.append([Text(piece)] if piece else [])
        else:
            lines[-1].append(node)
    return [_line(nodes) for nodes in lines]


def _line(nodes: list[Node]) -> Line:
    depth, term, index = 0, False, 0
    while index < len(nodes) and list_marker(nodes[index]):
        marker = list_marker(nodes[index])
        depth += marker in ("*", "#")
        term = term or marker == ";"
        index += 1
    return Line(depth=depth, term=term, nodes=nodes[index:])


def list_marker(node: Node) -> str | None:
    """`*`, `#`, `;` or `:` when the node is a wikitext list marker at the start of a line."""
    if isinstance(node, Tag) and node.wiki_markup in ("*", "#", ";", ":"):
        return str(node.wiki_markup)
    return None


def is_blank(nodes: Sequence[Node]) -> bool:
    return all(
        isinstance(node, Comment) or (isinstance(node, Text) and not node.value.strip())
        for node in nodes
    )


def is_heading(nodes: Sequence[Node]) -> bool:
    """Whether a line is a section heading (`== History ==`)."""
    return any(isinstance(node, Heading) for node in nodes)


def significant(nodes: Sequence[Node]) -> list[Node]:
    """The nodes of a line without comments and whitespace."""
    return [node for node in nodes if not is_blank([node])]


def template_name(template: Template) -> str:
    """Normalised name: `{{Template:Current_events }}` -> `current events`."""
    name = str(template.name)
    if "<!--" in name:
        name = template.name.strip_code()
    name = " ".join(name.replace("_", " ").split())
    return name.lower().removeprefix("template:")


def template_param(template: Template, name: str) -> str | None:
    return template.get(name).value.strip_code().strip() if template.has(name) else None




def positional(node: Template, index: int) -> Wikicode | None:
    """A template's `index`-th positional parameter (from 1), if it has one."""
    key = str(index)
    return node.get(key).value if node.has(key) else None


def positional_count(node: Template) -> int:
    return sum(1 for param in node.params if not param.showkey)


def plain_positional(node: Template, index: int) -> str:
    value = positional(node, index)
    return value.strip_code().strip() if value is not None else ""


# --- titles, dates and events -------------------------------------------------------------


def article_title(target: str) -> str | None:
    """`[[new_york#History|..]]` -> "New york": no section, spaces, first letter upper-case."""
    page = target.lstrip(":").split("#", 1)[0]
    page = " ".join(page.replace("_", " ").split())
    return page[:1].upper() + page[1:] if page else None


def month_number(name: str) -> int | None:
    return MONTHS.index(name.capitalize()) + 1 if name.capitalize() in MONTHS else None


def revision_url(title: str, revid: int | None, index_url: str = WIKIPEDIA_INDEX) -> str:
    url = f"{index_url}?title={quote(title.replace(' ', '_'), safe=':/')}"
    return f"{url}&oldid={revid}" if revid is not None else url


def build_event(
    page: Page,
    rendered: Rendered,
    *,
    day: date,
    end_date: date | None = None,
    category: str | None = None,
    topics: Sequence[str] = (),
    index_url: str = WIKIPEDIA_INDEX,
) -> Event:
    """The SPEC 2.2 record of one news line; entities are filled later by the entities stage."""
    text = rendered.text
    title = page.meta.title
    return Event(
        id=event_id(title, text),
        date=day,
        end_date=end_date,
        text=text,
        links=rendered.links,
        category=category,
        topics=list(topics),
        citations=rendered.citations,
        source=EventSource(
            title=title,
            revid=page.meta.revid,
            url=revision_url(title, page.meta.revid, index_url),
        ),
    )
