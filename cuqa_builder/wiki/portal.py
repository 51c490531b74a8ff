"""Current events day pages (`Portal:Current events/2023 September 10`) -> events (SPEC 2.1).

A day's news sits inside `{{Current events|year=|month=|day=|content=...}}` (older pages) or
between a `{{Current events|...|top=yes}}` and a `{{Current events|...|bottom=yes}}` call (newer
pages), and there between the comments "All news items below/above this line" when present.
Bold lines (`'''Sports'''`, older `;Sports`) name the category; a section of holidays or
observances is not news and is dropped. A bullet is a *topic* when it is only links, or when it
has bullets under it and no citation of its own, whatever its wording; any other bullet is an
event, and the topics above it are its context, outermost first. Pages before about 2011 often
put the topic inline: `* [[Topic]]: What happened.`
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from itertools import chain

from mwparserfromhell.nodes import Comment, Heading, Node, Tag, Template
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.records.events import Event
from cuqa_builder.records.pages import Page
from cuqa_builder.wiki.render import NamedRefs, plain_text, render
from cuqa_builder.wiki.rendered import Rendered
from cuqa_builder.wiki.wikitext import (
    WIKIPEDIA_INDEX,
    Line,
    ParseError,
    Warn,
    build_event,
    is_blank,
    iter_lines,
    month_number,
    parse_page_text,
    parse_wikitext,
    significant,
    template_name,
    template_param,
)

log = logging.getLogger(__name__)

_TITLE = re.compile(r"^Portal:Current events/(\d{4}) ([A-Za-z]+) (\d{1,2})$")
_WRAPPER = "current events"
_START_MARKER = "below this line"
_END_MARKER = "above this line"
_RAW_NEWS = re.compile(
    r"<!--(?:(?!-->).)*?below\s+this\s+line(?:(?!-->).)*?-->(?P<news>.*?)"
    r"<!--(?:(?!-->).)*?above\s+this\s+line(?:(?!-->).)*?-->",
    re.DOTALL | re.IGNORECASE,
)
_RAW_BULLET = re.compile(r"^[*#]+\s*\S", re.MULTILINE)
# Sections of a day page that list holidays, not news ("Holidays not aligned to the Gregorian
# Calendar", "Holidays and observances").
_NOT_NEWS = (re.compile(r"\b(holidays?|observances?)\b", re.IGNORECASE), "holidays and observances")
# An inline topic is at most this many words, title-like: linked, capitalised or one of these.
_TOPIC_WORDS_MAX = 8
_TOPIC_CONNECTORS = frozenset({
    "of", "the", "and", "in", "on", "at", "for", "to", "a", "an", "de", "la", "le", "del", "du",
    "von", "van", "&", "-", "–", "/", "vs.", "v.",
})
# Words that make a linked prefix say where something happened...
_WHERE = frozenset({"in", "at", "near", "on", "from"})
# ...when what happened there is a sports round or stage (with its letter or number): "Quarter-
# final in [[Málaga]]:", "Group B, in [[Abidjan]]:" are part of the news; other words before
# the place name a topic the news is filed under ("Violence in [[Iraq]]:").
_ROUND = re.compile(
    r"\b(?:(?:(?:quarter|semi|eighth)-?)?finals?|group (?:stage|[a-z\d]{1,2})|play-?offs?|"
    r"qualif\w*|(?:round|stage|leg|match|matchday|game)(?: of \d+| [a-z\d]{1,3})?),?$",
    re.IGNORECASE,
)
# What may stand between the links of a topic line naming several topics.
_TOPIC_SEPARATORS = re.compile(r"^(?:[\s,;:/&.]|\band\b)*$")
_SENTENCE_PUNCTUATION = re.compile(r"[.!?;\"“”]")

SkipSection = Callable[[str, int], None]  # (reason, lines dropped)


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


def parse_portal(
    page: Page,
    index_url: str = WIKIPEDIA_INDEX,
    warn: Warn = log.warning,
    skip_section: SkipSection | None = None,
) -> list[Event]:
    """Every news item of the day, in page order; a page without any is a `ParseError`.

    `skip_section` is told of each section dropped as not news (reason, lines); `warn` of a
    page whose news could not all be read.
    """
    day = portal_day(page.meta.title)
    code = parse_page_text(page, warn)
    reader = _DayReader(page, day, NamedRefs(code), index_url)
    reader.read(iter_lines(news_nodes(code)))
    for reason, lines in reader.skipped.items():
        if skip_section is not None:
            skip_section(reason, lines)
    _check_bullets_read(page, reader, warn)
    if not reader.events:
        raise ParseError("no news items on the page (empty day)")
    return reader.events


@dataclass
class _Topic:
    depth: int
    titles: list[str]


@dataclass
class _DayReader:
    """Reads a day's lines in order, keeping the category and the topics above each line."""

    page: Page
    day: date
    refs: NamedRefs
    index_url: str
    events: list[Event] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)  # reason -> lines dropped
    bullets: int = 0  # bullet lines seen, whatever became of them
    category: str | None = None
    not_news: str | None = None  # why the current section is dropped
    topics: list[_Topic] = field(default_factory=list)

    def read(self, lines: list[Line]) -> None:
        lines = [line for line in lines if not is_blank(line.nodes)]
        for index, line in enumerate(lines):
            if line.depth == 0:
                self.heading(line)
                continue
            self.bullets += 1
            if self.not_news is not None:
                self.skipped[self.not_news] += 1
                continue
            has_children = index + 1 < len(lines) and lines[index + 1].depth > line.depth
            self.bullet(line, has_children)

    def heading(self, line: Line) -> None:
        name = category_of(line)
        if name is not None:
            self.category, self.topics = name, []
            pattern, reason = _NOT_NEWS
            self.not_news = reason if pattern.search(name) else None

    def bullet(self, line: Line, has_children: bool) -> None:
        self.topics = [topic for topic in self.topics if topic.depth < line.depth]
        rendered = render(line.nodes, self.refs)
        if not rendered.text:
            return
        if rendered.only_links() or (has_children and not rendered.citations):
            self.topics.append(_Topic(line.depth, topic_titles(rendered)))
            return
        inline = split_inline_topic(rendered)
        if inline is not None:
            titles, rendered = inline
            self.topics.append(_Topic(line.depth, titles))  # bullets under it share it
        context = list(dict.fromkeys(t for topic in self.topics for t in topic.titles))
        self.events.append(build_event(
            self.page, rendered, day=self.day, category=self.category, topics=context,
            index_url=self.index_url,
        ))


def topic_titles(rendered: Rendered) -> list[str]:
    """The topics a topic line names: each link's title when only links (joined by commas or
    "and") make it up, else its whole text with links shown by their titles."""
    if rendered.spans and _TOPIC_SEPARATORS.match(rendered.between_links()):
        return list(dict.fromkeys(link.title for link in rendered.links))
    text = rendered.with_titles().rstrip(":").strip()
    return [text] if text else []


def split_inline_topic(rendered: Rendered) -> tuple[list[str], Rendered] | None:
    """`[[Topic]]: What happened.` -> (["Topic"], "What happened."); None when the text before
    the first colon is not a short title-like phrase (a sentence that has a colon in it)."""
    colon = _first_colon_outside_links(rendered)
    if colon is None:
        return None
    prefix, rest = rendered.before(colon), rendered.after(colon + 1)
    rest_text = rest.text
    if not rest_text or not rest_text[0].isalnum() or not _title_like(prefix):
        return None
    if not prefix.spans and not rest_text[0].isupper() and not rest_text[0].isdigit():
        return None  # a plain-words prefix must be followed by a new sentence
    if prefix.spans and _places_a_round(prefix):
        return None
    return topic_titles(prefix), rest


def _places_a_round(prefix: Rendered) -> bool:
    """Whether a prefix says where a sports round was played (see `_ROUND`)."""
    words = prefix.text.split()
    where = next((i for i, word in enumerate(words) if word.lower() in _WHERE), None)
    return where is not None and bool(_ROUND.search(" ".join(words[:where])))


def _first_colon_outside_links(rendered: Rendered) -> int | None:
    """The first ": " (a colon then a space) that is not inside a link's label."""
    start = 0
    while (colon := rendered.raw.find(":", start)) >= 0:
        inside = any(span.start <= colon < span.end for span in rendered.spans)
        after = rendered.raw[colon + 1 : colon + 2]
        if not inside and (after == "" or after.isspace()):
            return colon
        start = colon + 1
    return None


def _title_like(prefix: Rendered) -> bool:
    """Links, or a few capitalised words (connectors allowed), with no sentence punctuation."""
    text = prefix.text
    outside = prefix.between_links()
    if not text or len(text.split()) > _TOPIC_WORDS_MAX or _SENTENCE_PUNCTUATION.search(outside):
        return False
    words = outside.replace(",", " ").split()
    return all(
        word[0].isupper() or word[0].isdigit() or word.lower() in _TOPIC_CONNECTORS
        for word in words
    )


def _check_bullets_read(page: Page, reader: _DayReader, warn: Warn) -> None:
    """Warn when the page has far more bullets than were read: its markup hid some news."""
    news = _RAW_NEWS.search(page.wikitext)
    written = len(_RAW_BULLET.findall(news["news"] if news else page.wikitext))
    unread = written - reader.bullets
    if unread >= 2 and reader.bullets < written / 2:
        events = len(reader.events)
        warn(f"{page.meta.title}: {events} event{'' if events == 1 else 's'} from {written} "
             f"bullets ({unread} bullets were not read as news, topics or skipped sections; "
             "malformed markup?)")


def news_nodes(code: Wikicode) -> list[Node]:
    """The nodes holding the day's news, in either era's wrapper, trimmed to the markers.

    When the wrapper ends before the "above this line" marker that the page text has after it
    (a stray `}}` closed it early), or there is no wrapper but the markers (pages made with
    `{{Current events header}}`), the text between the markers is parsed on its own.
    """
    # Cheap top-level looks first; the deep searches only for pages nested in a tag.
    for find in (_content_parameter, _between_top_and_bottom, _nested_content_parameter):
        nodes = find(code)
        if nodes is not None:
            news, closed = _between_markers(nodes)
            return news if closed else _raw_news(code) or news
    unclosed = _has_wrapper_text(code)  # an unclosed call is left as plain text by the parser
    news = None if unclosed else _raw_news(code)
    if news is not None:
        return news
    if unclosed:
        raise ParseError("a {{Current events}} template is not closed")
    raise ParseError("no {{Current events}} template (neither content= nor top=yes)")


def _raw_news(code: Wikicode) -> list[Node] | None:
    """The text between the two markers, parsed on its own; None without both markers."""
    raw = _RAW_NEWS.search(str(code))
    return list(parse_wikitext(raw["news"]).nodes) if raw is not None else None


def _has_wrapper_text(code: Wikicode) -> bool:
    return any("{{current events" in text.value.lower() for text in code.ifilter_text())


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


def _between_markers(nodes: list[Node]) -> tuple[list[Node], bool]:
    """What lies between "All news items below this line" and "... above this line", and
    whether the end marker was there (False: the nodes run to their end without it)."""
    start, end, closed = 0, len(nodes), False
    for index, node in enumerate(nodes):
        if isinstance(node, Comment):
            words = " ".join(str(node.contents).split()).lower()
            if _START_MARKER in words and start == 0:
                start = index + 1
            elif _END_MARKER in words:
                end, closed = index, True
                break
    return nodes[start:end], closed


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
