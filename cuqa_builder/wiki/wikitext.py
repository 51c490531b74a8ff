"""Wikitext helpers shared by the year-article and Current events parsers.

A line of wikitext is rendered to plain text the way a reader sees it: links by their label (plus
the link trail), inline templates rendered or dropped, citations and comments gone. The rendering
keeps where each link sits in the text, so a parser can cut a date prefix off a line and keep only
the links after it, or tell a bullet made only of links (a topic) from one with prose (an event).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from urllib.parse import quote

import mwparserfromhell
from mwparserfromhell.nodes import (
    Comment,
    ExternalLink,
    Heading,
    HTMLEntity,
    Node,
    Tag,
    Template,
    Text,
    Wikilink,
)
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.errors import CuqaError
from cuqa_builder.records import Event, EventSource, Link, Page, event_id
from cuqa_builder.wiki.rendered import (
    CITATION_MARK,
    FOREIGN_CLOSE,
    FOREIGN_OPEN,
    ITEM_BREAK,
    LinkSpan,
    Rendered,
    TextBuilder,
    superscript,
)
from cuqa_builder.wiki.titles import MONTHS

WIKIPEDIA_INDEX = "https://en.wikipedia.org/w/index.php"

# MediaWiki (English) glues lowercase letters that follow a link onto its label: [[bus]]es.
_LINK_TRAIL = re.compile(r"^[a-z]+")
_HIDDEN_NAMESPACES = frozenset({"file", "image", "media", "category"})
# Links to other wikis (`[[wikt:..]]`, inline `[[:fr:..]]`) show their label but name no English
# Wikipedia article; language codes are lower-case, so "Ys: The Vanished Omens" is not one.
_OTHER_PROJECTS = frozenset({
    "wikt", "wiktionary", "commons", "d", "wikidata", "s", "wikisource", "q", "wikiquote", "n",
    "wikinews", "b", "wikibooks", "v", "wikiversity", "voy", "wikivoyage", "species", "meta", "mw",
})
_LANGUAGE = re.compile(r"^[a-z]{2,3}(?:-[a-z]+)?$")
# A title's qualifier in brackets at its end: "Paris (band)".
PARENTHETICAL = re.compile(r"\s*\([^()]*\)$")
_DROPPED_TAGS = frozenset({"references", "gallery", "templatestyles", "imagemap", "timeline"})
_BREAK_TAGS = frozenset({"br", "hr"})
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
    while index < len(nodes) and _list_marker(nodes[index]):
        marker = _list_marker(nodes[index])
        depth += marker in ("*", "#")
        term = term or marker == ";"
        index += 1
    return Line(depth=depth, term=term, nodes=nodes[index:])


def _list_marker(node: Node) -> str | None:
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


# --- rendering --------------------------------------------------------------------------


class NamedRefs:
    """Citation URLs of a page's `<ref name=..>..</ref>`, for its reuses `<ref name=../>`.

    Built on first use: walking every tag of a page is slow, and most pages never reuse a ref.
    """

    def __init__(self, code: Wikicode | None = None) -> None:
        self._code = code
        self._urls: dict[str, list[str]] | None = None

    def urls(self, name: str) -> list[str]:
        if self._urls is None:
            self._urls = self._collect()
        return self._urls.get(name, [])

    def _collect(self) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        if self._code is None:
            return found
        for tag in self._code.ifilter_tags(matches=_is_ref):
            name = _ref_name(tag)
            if name and tag.contents is not None and str(tag.contents).strip():
                found.setdefault(name, render(tag.contents).citations)
        return found


def _is_ref(node: Tag) -> bool:
    return str(node.tag).strip().lower() == "ref"


def _ref_name(tag: Tag) -> str | None:
    return str(tag.get("name").value).strip() if tag.has("name") else None


def render(
    nodes: Iterable[Node] | Wikicode, refs: NamedRefs | None = None, *, article: bool = False
) -> Rendered:
    """Plain text, links and citations; `refs` resolves reused named references. `article`
    renders an entity article's prose and infobox values as a reader sees them (see
    `_ArticleRenderer`); news lines keep the rendering their event ids were made from."""
    renderer = (_ArticleRenderer if article else _Renderer)(refs or NamedRefs())
    renderer.nodes(nodes.nodes if isinstance(nodes, Wikicode) else nodes)
    return Rendered(renderer.raw(), renderer.spans, renderer.citations)


def plain_text(nodes: Iterable[Node] | Wikicode) -> str:
    return render(nodes).text


class _Renderer(TextBuilder):
    def __init__(self, refs: NamedRefs) -> None:
        super().__init__()
        self.refs = refs
        self.citations: list[str] = []

    def nodes(self, nodes: Iterable[Node]) -> None:
        last_was_link = False
        for node in nodes:
            if last_was_link and isinstance(node, Text):
                self._text_after_link(node.value)
            else:
                self.node(node)
            last_was_link = isinstance(node, Wikilink) and bool(self.spans) and (
                self.spans[-1].end == self.length
            )

    def code(self, code: Wikicode | None) -> None:
        if code is not None:
            self.nodes(code.nodes)

    def node(self, node: Node) -> None:
        if isinstance(node, Text):
            self.emit(node.value)
        elif isinstance(node, Wikilink):
            self.wikilink(node)
        elif isinstance(node, Template):
            self.template(node)
        elif isinstance(node, Tag):
            self.tag(node)
        elif isinstance(node, HTMLEntity):
            self.emit(node.normalize())
        elif isinstance(node, ExternalLink):
            self.cite(str(node.url))
            self.emit(CITATION_MARK)
        elif isinstance(node, Heading):
            self.code(node.title)
        # Comments, template arguments ({{{1}}}) and anything else render to nothing.

    def _text_after_link(self, text: str) -> None:
        trail = _LINK_TRAIL.match(text)
        if trail:
            last = self.spans[-1]
            word = trail.group()
            linked = Link(title=last.link.title, text=last.link.text + word)
            self.spans[-1] = LinkSpan(last.start, last.end + len(word), linked)
        self.emit(text)

    def cite(self, url: str) -> None:
        url = url.strip()
        if url and url not in self.citations:
            self.citations.append(url)

    def link(self, title: str | None, label_nodes: Iterable[Node] | str) -> None:
        """Emit a label; when `title` names an article, record the link over it."""
        start, first_part = self.length, len(self.parts)
        if isinstance(label_nodes, str):
            self.emit(label_nodes)
        else:
            self.nodes(label_nodes)
        self.record_link(title, start, first_part)

    def wikilink(self, node: Wikilink) -> None:
        target = str(node.title)
        if "<!--" in target:
            target = node.title.strip_code()
        if "&" in target:
            target = html.unescape(target)
        inline = target.lstrip().startswith(":")
        target = target.strip().lstrip(":")
        title: str | None = None
        page = target
        if ":" in target:
            namespace, _, page = (part.strip() for part in target.partition(":"))
            language = bool(_LANGUAGE.match(namespace))
            if not inline and (namespace.lower() in _HIDDEN_NAMESPACES or language):
                return  # an image, a category tag or an interlanguage link: not in the sentence
            if not (namespace.lower() in _OTHER_PROJECTS or language):
                title, page = article_title(target), target
        else:
            title = article_title(target)
        label = node.text
        if label is None:
            self.link(title, target)
        elif not label.nodes:  # pipe trick: [[Paris (band)|]] shows "Paris"
            self.link(title, PARENTHETICAL.sub("", page))
        else:
            self.link(title, label.nodes)

    def tag(self, node: Tag) -> None:
        name = str(node.tag).strip().lower()
        if name == "ref":
            self._ref(node)
        elif name in _BREAK_TAGS:
            self.emit(" ")
        elif name not in _DROPPED_TAGS and node.contents is not None:
            self.code(node.contents)

    def _ref(self, node: Tag) -> None:
        """A reference adds its URLs to the citations; its text is not part of the sentence."""
        if node.contents is not None and str(node.contents).strip():
            inner = _Renderer(self.refs)
            inner.code(node.contents)
            urls = inner.citations
        else:
            urls = self.refs.urls(_ref_name(node) or "")
        for url in urls:
            self.cite(url)
        self.emit(CITATION_MARK)

    def template(self, node: Template) -> None:
        name = template_name(node)
        handler = _TEMPLATES.get(name)
        if handler is None:
            handler = _lang_template if name.startswith("lang-") else None
        if handler is None and (name.startswith("cite") or name == "citation"):
            handler = _citation
        if handler is not None:
            handler(self, node)
        # Other templates (maintenance tags, flag icons, navigation) are dropped.

    def positional(self, node: Template, index: int) -> None:
        value = _positional(node, index)
        if value is not None:
            self.code(value)


def _positional(node: Template, index: int) -> Wikicode | None:
    key = str(index)
    return node.get(key).value if node.has(key) else None


def _positional_count(node: Template) -> int:
    return sum(1 for param in node.params if not param.showkey)


# --- inline templates -------------------------------------------------------------------

Handler = Callable[[_Renderer, Template], None]


def _nth(index: int) -> Handler:
    return lambda r, node: r.positional(node, index)


def _last(r: _Renderer, node: Template) -> None:
    r.positional(node, _positional_count(node))


def _literal(text: str) -> Handler:
    return lambda r, node: r.emit(text)


def _prefixed(prefix: str) -> Handler:
    """`{{US$|5 million}}` -> "US$5 million"; `{{HMS|Victory}}` -> "HMS Victory"."""

    def render_prefixed(r: _Renderer, node: Template) -> None:
        r.emit(prefix)
        r.positional(node, 1)

    return render_prefixed


def _joined(count: int) -> Handler:
    """The first `count` positional parameters separated by spaces (`{{sortname|Ada|Lovelace}}`)."""

    def render_joined(r: _Renderer, node: Template) -> None:
        for index in range(1, count + 1):
            if index > 1 and _positional(node, index) is not None:
                r.emit(" ")
            r.positional(node, index)

    return render_joined


def _convert(r: _Renderer, node: Template) -> None:
    """`{{convert|5|km}}` -> "5 km"; `{{convert|5|to|10|km}}` -> "5 to 10 km"."""
    plain = [_plain_positional(node, i) for i in range(1, 5)]
    is_range = plain[1] in _RANGE_WORDS
    r.emit(" ".join(p for p in (plain[:4] if is_range else plain[:2]) if p))


_RANGE_WORDS = frozenset({"to", "-", "–", "and", "or", "by", "x", "×", "and(-)"})


def _plain_positional(node: Template, index: int) -> str:
    value = _positional(node, index)
    return value.strip_code().strip() if value is not None else ""


def _linked(r: _Renderer, node: Template) -> None:
    """`{{flag|France}}`, `{{ill|Titel|de}}`: a link to the first parameter."""
    target = _positional(node, 1)
    if target is None:
        return
    title = target.strip_code().strip()
    label = node.get("lt").value.nodes if node.has("lt") else target.nodes
    r.link(article_title(title), label)


def _ship(prefix: str | None) -> Handler:
    """`{{USS|Laboon|DDG-58}}` -> "USS Laboon", a link to "USS Laboon (DDG-58)"; `{{ship|HMS|
    Victory}}` -> "HMS Victory" (the prefix its first parameter)."""

    def render_ship(r: _Renderer, node: Template) -> None:
        first = 1 if prefix else 2
        parts = [prefix or _plain_positional(node, 1), _plain_positional(node, first)]
        name = " ".join(p for p in parts if p)
        if not name:
            return
        number = _plain_positional(node, first + 1)
        r.link(article_title(f"{name} ({number})" if number else name), name)

    return render_ship


def _lang_template(r: _Renderer, node: Template) -> None:
    r.positional(node, 1)


def _citation(r: _Renderer, node: Template) -> None:
    url = template_param(node, "url")
    if url:
        r.cite(url)
    r.emit(CITATION_MARK)


_SHIP_PREFIXES = ("HMS", "USS", "HMAS", "HMCS", "HMNZS", "INS", "RFS", "SS", "MV", "RMS", "USNS")

_TEMPLATES: dict[str, Handler] = {
    **{name: _nth(1) for name in (
        "nowrap", "nobr", "small", "smaller", "big", "larger", "nobold", "noitalic",
        "not a typo", "sic", "nts", "abbr", "tooltip", "nihongo", "keep together", "ublist",
        "resize", "em", "strong", "var", "mvar", "math", "lang-rtl", "wikt-lang", "linktext",
    )},
    "lang": _nth(2),
    "transl": _last,
    "transliteration": _last,
    "'": _literal("'"),
    "'s": _literal("'s"),
    "snd": _literal(" – "),
    "spaced ndash": _literal(" – "),
    "spnd": _literal(" – "),
    "ndash": _literal("–"),
    "mdash": _literal("—"),
    "nbsp": _literal(" "),
    "okina": _literal("ʻ"),
    "circa": _prefixed("c. "),
    "c.": _prefixed("c. "),
    "us$": _prefixed("US$"),
    "usd": _prefixed("US$"),
    "gbp": _prefixed("£"),
    "£": _prefixed("£"),
    "eur": _prefixed("€"),
    "€": _prefixed("€"),
    "sortname": _joined(2),
    "ship": _ship(None),
    "convert": _convert,
    "cvt": _convert,
    "flag": _linked,
    "flagcountry": _linked,
    "ill": _linked,
    "interlanguage link": _linked,
    **{prefix.lower(): _ship(prefix) for prefix in _SHIP_PREFIXES},
}


# --- entity articles ---------------------------------------------------------------------


class _ArticleRenderer(_Renderer):
    """An entity article's prose and infobox values as MediaWiki shows them, for a passage: the
    items of list templates and `<br>` lines apart (`ITEM_BREAK`), names in other languages and
    pronunciations marked (`FOREIGN_OPEN`...; a passage drops them with their brackets), dates,
    conversions and "as of" written out, superscript notes (`Santiago<sup>a</sup>`), tables and
    magic words (`__TOC__`) left out, an external link shown by its title."""

    def node(self, node: Node) -> None:
        if isinstance(node, Text) and "__" in node.value:
            self.emit(_MAGIC_WORD.sub("", node.value))
        elif isinstance(node, ExternalLink) and node.title is not None and not (
            _BRACKETED.match(str(node.title).strip())
        ):
            self.code(node.title)  # [https://... the Act]: its title is part of the sentence
        else:
            super().node(node)

    def tag(self, node: Tag) -> None:
        name = str(node.tag).strip().lower()
        if _list_marker(node) or name in _BREAK_TAGS:
            self.emit(ITEM_BREAK)
        elif name == "sup":
            self.emit(superscript(node.contents.strip_code() if node.contents else ""))
        elif name not in _ARTICLE_DROPPED_TAGS:
            super().tag(node)

    def template(self, node: Template) -> None:
        name = template_name(node)
        handler = _ARTICLE_TEMPLATES.get(name) or _article_template_family(name)
        if handler is not None:
            handler(self, node)
        else:
            super().template(node)


_MAGIC_WORD = re.compile(r"__[A-Z]{2,}__")
_BRACKETED = re.compile(r"^\(.*\)$", re.DOTALL)  # `[URL (Reuters)]`: a citation, not text
_ARTICLE_DROPPED_TAGS = frozenset({"table", "mapframe", "maplink", "graph", "score", "math"})


def _foreign(index: int | None) -> Handler:
    """A template showing a name in another language or script (its `index`-th positional;
    None: the last), marked so that a passage can leave it out."""

    def render_foreign(r: _Renderer, node: Template) -> None:
        r.emit(FOREIGN_OPEN)
        r.code(_positional(node, index if index is not None else _positional_count(node)))
        r.emit(FOREIGN_CLOSE)

    return render_foreign


def _pronunciation(r: _Renderer, node: Template) -> None:
    """IPA, respelling, audio: nothing a passage keeps, but marked so that its brackets go."""
    r.emit(FOREIGN_OPEN + FOREIGN_CLOSE)


def _list_items(r: _Renderer, node: Template) -> None:
    """`{{ubl|A|B}}`, `{{hlist|A|B}}`, `{{plainlist|* A\n* B}}`: every item, each on its own."""
    for param in node.params:
        if param.showkey:
            continue  # title=, class=, style=
        r.emit(ITEM_BREAK)
        nodes = list(param.value.nodes)
        if nodes and isinstance(nodes[0], Text) and nodes[0].value.lstrip()[:1] in ("*", "#"):
            r.emit(nodes[0].value.lstrip().lstrip("*#"))  # the parser misses a first marker
            nodes = nodes[1:]
        r.nodes(nodes)
    r.emit(ITEM_BREAK)


def _as_of(r: _Renderer, node: Template) -> None:
    """`{{As of|2018}}` -> "As of 2018"; `{{As of|2010|4|lc=y}}` -> "as of April 2010"."""
    alt = template_param(node, "alt")
    if alt:
        r.emit(alt)
        return
    words = "Since" if template_param(node, "since") else "As of"
    if template_param(node, "lc"):
        words = words.lower()
    r.emit(f"{words} {_date_text(node, 1, american=_american(node))}".rstrip())


def _date(r: _Renderer, node: Template) -> None:
    """`{{birth date|1969|7|18}}` -> "July 18, 1969" (`df=y`: "18 July 1969"); the first date
    of `{{death date and age|...}}`."""
    r.emit(_date_text(node, 1, american=not template_param(node, "df")))


def _american(node: Template) -> bool:
    return (template_param(node, "df") or "").lower() in ("us", "mdy")


def _date_text(node: Template, first: int, *, american: bool) -> str:
    year, month, day = (_plain_positional(node, first + i) for i in range(3))
    # isdecimal, not isdigit: "²" is a digit that int() refuses
    name = MONTHS[int(month) - 1] if month.isdecimal() and 1 <= int(month) <= 12 else month
    day = day.lstrip("0")
    if name and day:
        return f"{name} {day}, {year}" if american else f"{day} {name} {year}"
    return " ".join(part for part in (name, year) if part)


def _convert_article(r: _Renderer, node: Template) -> None:
    """`{{convert|24300|km2|sqmi}}` -> "24,300 square kilometres" (`abbr=on`: "24,300 km²"):
    the first value and its unit."""
    words = [_plain_positional(node, i) for i in range(1, 5)]
    values, unit = ([words[0], words[2]], words[3]) if words[1] in _RANGE_WORDS else (
        [words[0]], words[1])
    shown = f" {words[1]} ".join(_thousands(v) for v in values if v)
    name, symbol = _UNITS.get(unit, (unit, unit))
    abbreviated = (template_param(node, "abbr") or "").lower() in ("on", "yes", "values")
    r.emit(f"{shown} {symbol if abbreviated else name}".strip())


def _thousands(number: str) -> str:
    whole, dot, decimals = number.partition(".")
    return f"{int(whole):,}{dot}{decimals}" if whole.isdecimal() and len(whole) > 4 else number


_UNITS = {  # unit code -> (name, symbol)
    "km2": ("square kilometres", "km²"), "sqkm": ("square kilometres", "km²"),
    "mi2": ("square miles", "sq mi"), "sqmi": ("square miles", "sq mi"),
    "m2": ("square metres", "m²"), "ha": ("hectares", "ha"), "acre": ("acres", "acres"),
    "km": ("kilometres", "km"), "mi": ("miles", "mi"), "m": ("metres", "m"),
    "ft": ("feet", "ft"), "cm": ("centimetres", "cm"), "mm": ("millimetres", "mm"),
    "in": ("inches", "in"), "kg": ("kilograms", "kg"), "lb": ("pounds", "lb"),
    "t": ("tonnes", "t"), "C": ("°C", "°C"), "F": ("°F", "°F"),
    "km/h": ("kilometres per hour", "km/h"), "mph": ("miles per hour", "mph"),
    "e6km2": ("million square kilometres", "million km²"),
    "e6mi2": ("million square miles", "million sq mi"),
}
_LIST_TEMPLATES = (
    "ubl", "ublist", "unbulleted list", "unbulleted", "plainlist", "plain list", "flatlist",
    "flat list", "hlist", "bulleted list", "bulletedlist", "blist", "bullet list",
    "ordered list", "collapsible list", "br separated entries", "vunblist", "unordered list",
    "comma separated entries", "enum", "nowrap list",
)
_FOREIGN_NAME_TEMPLATES = ("native name", "native phrase", "nq", "nastaliq", "script")
_DATE_TEMPLATES = (
    "birth date", "death date", "birth date and age", "death date and age", "start date",
    "end date", "start date and age", "end date and age", "dob", "film date",
)
_ARTICLE_TEMPLATES: dict[str, Handler] = {
    **dict.fromkeys(_LIST_TEMPLATES, _list_items),
    **dict.fromkeys(_DATE_TEMPLATES, _date),
    **dict.fromkeys(("emdash", "em dash", "mdashb", "--"), _literal("—")),
    **dict.fromkeys(("endash", "en dash"), _literal("–")),
    **dict.fromkeys(("sndash", "spaced en dash", "spaced dash"), _literal(" – ")),
    **dict.fromkeys(("nobreak", "avoid wrap", "longitem", "url", "marriage", "married"), _nth(1)),
    **dict.fromkeys(("birth-date", "death-date", "birth-date and age"), _last),
    **dict.fromkeys(_FOREIGN_NAME_TEMPLATES, _foreign(2)),
    **dict.fromkeys(("transl", "transliteration", "translit"), _foreign(None)),
    "lang-rtl": _foreign(1),
    "lang": _foreign(2),
    "langx": _foreign(2),
    "as of": _as_of,
    "convert": _convert_article,
    "cvt": _convert_article,
}
_PRONUNCIATION_PREFIXES = ("ipa", "audio", "respell", "pronunciation", "pron-")


def _article_template_family(name: str) -> Handler | None:
    """Families known by their prefix: `{{lang-uk|..}}` (a foreign name), `{{IPA-es|..}}`,
    `{{IPAc-en|..}}`, `{{audio-es|..}}` (pronunciations)."""
    if name.startswith("lang-"):
        return _foreign(1)
    if name.startswith(_PRONUNCIATION_PREFIXES):
        return _pronunciation
    return None


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
