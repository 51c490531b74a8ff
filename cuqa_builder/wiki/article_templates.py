"""The templates of an entity article as MediaWiki shows them, for a passage: list templates
item by item, dates and conversions written out, names in other languages and pronunciations
marked so that a passage can leave them out. The rest render as on a news line
(`inline_templates.py`)."""

from __future__ import annotations

from mwparserfromhell.nodes import Template, Text

from cuqa_builder.wiki.inline_templates import (
    RANGE_WORDS,
    Handler,
    TemplateRenderer,
    last,
    literal,
    nth,
)
from cuqa_builder.wiki.rendered import FOREIGN_CLOSE, FOREIGN_OPEN, ITEM_BREAK
from cuqa_builder.wiki.titles import MONTHS
from cuqa_builder.wiki.wikitext import (
    plain_positional,
    positional,
    positional_count,
    template_param,
)


def _foreign(index: int | None) -> Handler:
    """A template showing a name in another language or script (its `index`-th positional;
    None: the last), marked so that a passage can leave it out."""

    def render_foreign(r: TemplateRenderer, node: Template) -> None:
        r.emit(FOREIGN_OPEN)
        r.code(positional(node, index if index is not None else positional_count(node)))
        r.emit(FOREIGN_CLOSE)

    return render_foreign


def _pronunciation(r: TemplateRenderer, node: Template) -> None:
    """IPA, respelling, audio: nothing a passage keeps, but marked so that its brackets go."""
    r.emit(FOREIGN_OPEN + FOREIGN_CLOSE)


def _list_items(r: TemplateRenderer, node: Template) -> None:
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


def _as_of(r: TemplateRenderer, node: Template) -> None:
    """`{{As of|2018}}` -> "As of 2018"; `{{As of|2010|4|lc=y}}` -> "as of April 2010"."""
    alt = template_param(node, "alt")
    if alt:
        r.emit(alt)
        return
    words = "Since" if template_param(node, "since") else "As of"
    if template_param(node, "lc"):
        words = words.lower()
    r.emit(f"{words} {_date_text(node, 1, american=_american(node))}".rstrip())


def _date(r: TemplateRenderer, node: Template) -> None:
    """`{{birth date|1969|7|18}}` -> "July 18, 1969" (`df=y`: "18 July 1969"); the first date
    of `{{death date and age|...}}`."""
    r.emit(_date_text(node, 1, american=not template_param(node, "df")))


def _american(node: Template) -> bool:
    return (template_param(node, "df") or "").lower() in ("us", "mdy")


def _date_text(node: Template, first: int, *, american: bool) -> str:
    year, month, day = (plain_positional(node, first + i) for i in range(3))
    # isdecimal, not isdigit: "²" is a digit that int() refuses
    name = MONTHS[int(month) - 1] if month.isdecimal() and 1 <= int(month) <= 12 else month
    day = day.lstrip("0")
    if name and day:
        return f"{name} {day}, {year}" if american else f"{day} {name} {year}"
    return " ".join(part for part in (name, year) if part)


def _convert_article(r: TemplateRenderer, node: Template) -> None:
    """`{{convert|24300|km2|sqmi}}` -> "24,300 square kilometres" (`abbr=on`: "24,300 km²"):
    the first value and its unit."""
    words = [plain_positional(node, i) for i in range(1, 5)]
    values, unit = ([words[0], words[2]], words[3]) if words[1] in RANGE_WORDS else (
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
    **dict.fromkeys(("emdash", "em dash", "mdashb", "--"), literal("—")),
    **dict.fromkeys(("endash", "en dash"), literal("–")),
    **dict.fromkeys(("sndash", "spaced en dash", "spaced dash"), literal(" – ")),
    **dict.fromkeys(("nobreak", "avoid wrap", "longitem", "url", "marriage", "married"), nth(1)),
    **dict.fromkeys(("birth-date", "death-date", "birth-date and age"), last),
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


def _template_family(name: str) -> Handler | None:
    """Families known by their prefix: `{{lang-uk|..}}` (a foreign name), `{{IPA-es|..}}`,
    `{{IPAc-en|..}}`, `{{audio-es|..}}` (pronunciations)."""
    if name.startswith("lang-"):
        return _foreign(1)
    if name.startswith(_PRONUNCIATION_PREFIXES):
        return _pronunciation
    return None



def article_template(name: str) -> Handler | None:
    """The handler of an article's template by its normalised name, or None (a news line's)."""
    return _ARTICLE_TEMPLATES.get(name) or _template_family(name)
