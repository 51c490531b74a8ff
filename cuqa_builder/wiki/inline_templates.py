"""The inline templates of a news line as a reader sees them (`{{convert|5|km}}` -> "5 km",
`{{USS|Laboon|DDG-58}}` -> "USS Laboon", a link): a handler each, by template name. Templates
not named here are dropped. An entity article's own templates are `article_templates.py`'s."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from mwparserfromhell.nodes import Node, Template
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.wiki.rendered import CITATION_MARK
from cuqa_builder.wiki.wikitext import (
    article_title,
    plain_positional,
    positional,
    positional_count,
    template_param,
)


class TemplateRenderer(Protocol):
    """What a template handler writes with (the renderer of `render.py`)."""

    def emit(self, text: str) -> None: ...

    def nodes(self, nodes: Iterable[Node]) -> None: ...

    def code(self, code: Wikicode | None) -> None: ...

    def positional(self, node: Template, index: int) -> None: ...

    def link(self, title: str | None, label_nodes: Iterable[Node] | str) -> None: ...

    def cite(self, url: str) -> None: ...


Handler = Callable[[TemplateRenderer, Template], None]


def nth(index: int) -> Handler:
    return lambda r, node: r.positional(node, index)


def last(r: TemplateRenderer, node: Template) -> None:
    r.positional(node, positional_count(node))


def literal(text: str) -> Handler:
    return lambda r, node: r.emit(text)


def _prefixed(prefix: str) -> Handler:
    """`{{US$|5 million}}` -> "US$5 million"; `{{HMS|Victory}}` -> "HMS Victory"."""

    def render_prefixed(r: TemplateRenderer, node: Template) -> None:
        r.emit(prefix)
        r.positional(node, 1)

    return render_prefixed


def _joined(count: int) -> Handler:
    """The first `count` positional parameters separated by spaces (`{{sortname|Ada|Lovelace}}`)."""

    def render_joined(r: TemplateRenderer, node: Template) -> None:
        for index in range(1, count + 1):
            if index > 1 and positional(node, index) is not None:
                r.emit(" ")
            r.positional(node, index)

    return render_joined


def _convert(r: TemplateRenderer, node: Template) -> None:
    """`{{convert|5|km}}` -> "5 km"; `{{convert|5|to|10|km}}` -> "5 to 10 km"."""
    plain = [plain_positional(node, i) for i in range(1, 5)]
    is_range = plain[1] in RANGE_WORDS
    r.emit(" ".join(p for p in (plain[:4] if is_range else plain[:2]) if p))


RANGE_WORDS = frozenset({"to", "-", "–", "and", "or", "by", "x", "×", "and(-)"})


def _linked(r: TemplateRenderer, node: Template) -> None:
    """`{{flag|France}}`, `{{ill|Titel|de}}`: a link to the first parameter."""
    target = positional(node, 1)
    if target is None:
        return
    title = target.strip_code().strip()
    label = node.get("lt").value.nodes if node.has("lt") else target.nodes
    r.link(article_title(title), label)


def _ship(prefix: str | None) -> Handler:
    """`{{USS|Laboon|DDG-58}}` -> "USS Laboon", a link to "USS Laboon (DDG-58)"; `{{ship|HMS|
    Victory}}` -> "HMS Victory" (the prefix its first parameter)."""

    def render_ship(r: TemplateRenderer, node: Template) -> None:
        first = 1 if prefix else 2
        parts = [prefix or plain_positional(node, 1), plain_positional(node, first)]
        name = " ".join(p for p in parts if p)
        if not name:
            return
        number = plain_positional(node, first + 1)
        r.link(article_title(f"{name} ({number})" if number else name), name)

    return render_ship


def _lang_template(r: TemplateRenderer, node: Template) -> None:
    r.positional(node, 1)


def _citation(r: TemplateRenderer, node: Template) -> None:
    url = template_param(node, "url")
    if url:
        r.cite(url)
    r.emit(CITATION_MARK)


_SHIP_PREFIXES = ("HMS", "USS", "HMAS", "HMCS", "HMNZS", "INS", "RFS", "SS", "MV", "RMS", "USNS")

_TEMPLATES: dict[str, Handler] = {
    **{name: nth(1) for name in (
        "nowrap", "nobr", "small", "smaller", "big", "larger", "nobold", "noitalic",
        "not a typo", "sic", "nts", "abbr", "tooltip", "nihongo", "keep together", "ublist",
        "resize", "em", "strong", "var", "mvar", "math", "lang-rtl", "wikt-lang", "linktext",
    )},
    "lang": nth(2),
    "transl": last,
    "transliteration": last,
    "'": literal("'"),
    "'s": literal("'s"),
    "snd": literal(" – "),
    "spaced ndash": literal(" – "),
    "spnd": literal(" – "),
    "ndash": literal("–"),
    "mdash": literal("—"),
    "nbsp": literal(" "),
    "okina": literal("ʻ"),
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



def inline_template(name: str) -> Handler | None:
    """The handler of a template by its normalised name (`template_name`), or None to drop it."""
    handler = _TEMPLATES.get(name)
    if handler is None:
        handler = _lang_template if name.startswith("lang-") else None
    if handler is None and (name.startswith("cite") or name == "citation"):
        handler = _citation
    return handler
