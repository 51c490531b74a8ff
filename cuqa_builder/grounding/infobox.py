"""An article's infobox: what the subject is (its kind) and its relations.

A relation is one value of the infobox as a reader sees it: the parameter it comes from
(`capital`, `birth_place`: what a relation means, and whether it changes, is read from the
parameter's name), the row's label, its text, the things it names (every link of a list value;
of a place chain `[[Ulm]], [[Württemberg]], [[German Empire]]` the first, the others being its
containers) and nothing from a qualifier in brackets (`[[Argentine peso|Peso]] ([[Dollar
sign|$]])` names the peso). Parameters that label another one (`leader_title1`,
`established_event2`, `blank1_name`, `ethnic_groups_year`) and display settings (images,
maps, sizes) are not relations; a label becomes the label of the value it names.

From MediaWiki's HTML the rows come rendered (label -> value); each is matched to the infobox
parameter whose links (else text) it shows, so that its parameter is known too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence, Set
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cuqa_builder.records.events import Link
from cuqa_builder.wiki.render import render
from cuqa_builder.wiki.rendered import Rendered, tidy_separators
from cuqa_builder.wiki.wikitext import article_title, template_name

if TYPE_CHECKING:  # named only in type hints
    from mwparserfromhell.nodes import Template
    from mwparserfromhell.wikicode import Wikicode

_INFOBOX = re.compile(r"^infobox\b[\s_]*")
# Infoboxes of people, whatever their trade ("officeholder", "tennis biography", "writer").
_PERSON_INFOBOX = re.compile(
    r"officeholder|royalty|person|people|biography|player|cyclist|golfer|writer|poet|"
    r"scientist|philosopher|artist|actor|politician|president|minister|monarch|noble|pope|"
    r"cardinal|bishop|saint|clergy|journalist|economist|astronaut|architect|athlete|boxer|"
    r"wrestler|model|comedian|chef|criminal|engineer|academic|judge|presenter|dancer|driver|"
    r"skier|swimmer|cricketer|sportsperson|skater|gymnast|jockey|military person|coach|"
    r"football manager|youtuber|chess|militant|leader"
)
_BRACKETED = re.compile(r"\s*\([^()]*\)")
# Parameters that label or caption another one, or only set how the infobox looks.
_NOT_A_VALUE = re.compile(
    r"(?:_label|_event|_year|_ref|_notes?|_footnotes?|_caption|_alt|_size|_width|"
    r"_upright|_link|_rank|_change|_display|_region|_magnitude|_pref|_format|_class|_style)"
    r"_?\d*$|^blank\d*_name|^footnote|^(?:image|img|logo|signature|map|pushpin|coordinates|"
    r"coord|static_image|alt|caption|mapframe|pattern_|leftarm|rightarm|body\d|shorts|socks|"
    r"shield|coa_)|^(?:embed|module|child|bodyclass|italic_title|flag|flaglink|seal|seallink|"
    r"latd|latm|lats|latns|longd|longm|longs|longew|landscape|pixels|mapsize|imagewidth|"
    r"settlement_type|sovereignty_type|unit_pref|date_format|body|onlysourced|nocat|noicon|"
    r"suppressfields)$",
    re.IGNORECASE,
)
# `leader_title1`, `languages_type`, `leader1_type`: the label of another parameter, when the
# infobox has it (`government_type` and `title` are values).
_MAYBE_LABEL = re.compile(r"^(.+?)_(?:type|title)(\d*)$", re.IGNORECASE)
# Values that name a place with the places holding it: "[[Ulm]], [[Württemberg]]".
_PLACE = re.compile(
    r"place|location|headquarter|\bhq\b|residence|garrison|ground|venue|seat|resting|origin|"
    r"\bborn\b|\bdied\b", re.IGNORECASE
)
_CAPITAL = frozenset({"capital", "capital city"})
# A value that is a file name or a size ("Senate of Pakistan, 2015.svg", "300px"): a setting.
_SETTING = re.compile(
    r"^(?:.*\.(?:svg|png|jpe?g|gif|tiff?|webp|ogg|oga|ogv|mp3|wav|webm|mid)|\d+\s*px)$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Relation:
    """One value of the infobox (see the module's docstring)."""

    parameter: str | None  # `capital`, `birth_place`; None for a rendered row no parameter shows
    label: str | None  # what the reader sees it called ("Capital", "Born", "President")
    text: str  # the value as plain text, its lines or items joined by ", "
    values: tuple[Link, ...] = ()  # what it names: every link of a list, a chain's first place
    containers: tuple[Link, ...] = ()  # the rest of a place chain, largest last


def infobox_template(code: Wikicode) -> Template | None:
    """The page's first infobox (a top-level `{{Infobox ...}}`, not one in a comment)."""
    return next((t for t in code.filter_templates(recursive=False)
                 if _INFOBOX.match(template_name(t))), None)


def infobox_kind(template: Template | None) -> str | None:
    """What the infobox says the subject is, in plain lower-case words: its settlement type
    ("city", not "city (single-tier)"), else its kind ("country", "political party"), "person"
    for any biography, "band" for a musical group."""
    if template is None:
        return None
    if template.has("settlement_type"):
        items = render(template.get("settlement_type").value.nodes, article=True).items()
        if items and (kind := _plain_kind(items[0].text)):
            return kind
    kind = _INFOBOX.sub("", template_name(template)).removesuffix(" begin")  # "ship begin"
    if kind == "musical artist":
        background = _parameter_text(template, "background")
        return "band" if "group" in background or "band" in background else "person"
    if _PERSON_INFOBOX.search(kind):
        return "person"
    return _kind_by_shape(kind, template) or _plain_kind(kind)


def _kind_by_shape(kind: str, template: Template) -> str | None:
    """Two infoboxes name one kind and serve another: `{{Infobox islands}}` serves a single
    island unless it counts its islands, `{{Infobox mountain}}` a range when it names the
    range's highest peak."""
    if kind == "islands" and not template.has("number_islands"):
        return "island"
    if kind == "mountain" and template.has("highest"):
        return "mountain range"
    return None


def _plain_kind(text: str) -> str | None:
    return " ".join(_BRACKETED.sub("", text).split()).lower() or None


def _parameter_text(template: Template, name: str) -> str:
    if not template.has(name):
        return ""
    return render(template.get(name).value.nodes, article=True).text.lower()


def wikitext_relations(template: Template | None) -> list[Relation]:
    """The relations of an infobox's wikitext, one per value parameter, in its order."""
    if template is None:
        return []
    found = []
    for name, value in value_parameters(template):
        relation = _relation(name, _label(template, name), render(value.nodes, article=True))
        if relation is not None:
            found.append(relation)
    return _with_capital(found)


def html_relations(rows: Sequence[tuple[str, Rendered]], template: Template | None
                   ) -> list[Relation]:
    """The relations of MediaWiki's rendered infobox rows, each with the parameter of
    `template` (the same revision's wikitext) that it shows."""
    keys = _ParameterKeys(template)
    found = []
    for label, value in rows:
        relation = _relation(keys.matching(value), label, value)
        if relation is not None:
            found.append(relation)
    return _with_capital(found)


def value_parameters(template: Template) -> list[tuple[str, Wikicode]]:
    """The parameters holding a value (not a label, a caption, a file or a display setting),
    each once with its value: a repeated one's last, the one MediaWiki reads."""
    values = {str(param.name).strip(): param.value for param in template.params
              if param.showkey}
    return [(name, value) for name, value in values.items()
            if value.strip() and not _NOT_A_VALUE.search(name)
            and not _labels_another(values.keys(), name)
            and not _SETTING.match(value.strip_code().strip())]


def _labels_another(names: Set[str], name: str) -> bool:
    found = _MAYBE_LABEL.match(name)
    if found is None:
        return False
    base, number = found.groups()
    labelled = [f"{base}{number}", f"{base}_name{number}", f"{base}_date{number}",
                f"{base}_info{number}"]
    return any(candidate in names for candidate in labelled)


def _label(template: Template, name: str) -> str | None:
    """The text of the parameter that labels `name`: `leader_title1` for `leader_name1`,
    `blank1_name` for `blank1_info`, `established_event2` for `established_date2`,
    `leader1_type` for `leader1`."""
    base, number = re.match(r"^(.*?)(\d*)$", name).groups()  # type: ignore[union-attr]
    candidates = [f"{base}{number}_type", f"{base}_type{number}", f"{base}{number}_title"]
    for suffix, labels in (("_name", ("_title", "_type")), ("_info", ("_name",)),
                           ("_date", ("_event", "_title"))):
        if base.endswith(suffix):
            candidates += [f"{base.removesuffix(suffix)}{label}{number}" for label in labels]
    for candidate in candidates:
        if template.has(candidate):
            items = render(template.get(candidate).value.nodes, article=True).items()
            text = ", ".join(item.text for item in items).rstrip(":").strip()
            if text:
                return text
    return None


def _relation(parameter: str | None, label: str | None, value: Rendered) -> Relation | None:
    items = value.items()
    if not items:
        return None
    place = bool(_PLACE.search((parameter or label or "").replace("_", " ")))
    values: list[Link] = []
    containers: list[Link] = []
    for item in items:
        named, holding = _item_links(item, place)
        values += named
        containers += holding
    return Relation(parameter, label, tidy_separators(", ".join(item.text for item in items)),
                    tuple(_unique(values)), tuple(_unique(containers)))


def _item_links(item: Rendered, place: bool) -> tuple[list[Link], list[Link]]:
    """The links an item names (not those in brackets: qualifiers), and for a place the links
    after its first comma (the places that hold it)."""
    depth_at = _bracket_depths(item.raw)
    # a symbol ([[₴]]1.76 billion, [[Telephone numbers in X|+54]]) is a unit, not a thing named
    outside = [span for span in item.spans
               if depth_at[span.start] == 0 and any(ch.isalpha() for ch in span.link.text)]
    if not place:
        return [span.link for span in outside], []
    comma = next((i for i, ch in enumerate(item.raw) if ch == "," and depth_at[i] == 0),
                 len(item.raw))
    return ([span.link for span in outside if span.start < comma],
            [span.link for span in outside if span.start > comma])


def _bracket_depths(raw: str) -> list[int]:
    depths, depth = [], 0
    for char in raw:
        depth = max(0, depth - (char == ")"))
        depths.append(depth)
        depth += char == "("
    return [*depths, depth]


def _unique(links: Iterable[Link]) -> list[Link]:
    kept: dict[str, Link] = {}
    for link in links:
        kept.setdefault(link.title.casefold(), link)
    return list(kept.values())


def _with_capital(relations: list[Relation]) -> list[Relation]:
    """`largest_city = capital`: the capital's values, as the infobox shows them."""
    capital = next((r for r in relations if (r.parameter or "").lower() == "capital"
                    or (r.label or "").lower() == "capital"), None)
    if capital is None:
        return relations
    return [Relation(r.parameter, r.label, capital.text, capital.values, capital.containers)
            if r.text.lower() in _CAPITAL and r is not capital else r for r in relations]


class _ParameterKeys:
    """What each value parameter of the wikitext shows: its links' titles and its text."""

    def __init__(self, template: Template | None) -> None:
        self.links: dict[str, set[str]] = {}
        self.texts: dict[str, str] = {}
        for name, value in value_parameters(template) if template is not None else ():
            self.links[name] = {title.casefold() for link in value.filter_wikilinks()
                                if (title := article_title(str(link.title)))}
            self.texts[name] = _normal(render(value.nodes, article=True).text)

    def matching(self, value: Rendered) -> str | None:
        """The parameter a rendered value shows: the one sharing most of its links, else the
        one whose text it is."""
        shown = {span.link.title.casefold() for span in value.spans}
        best = max(self.links, key=lambda name: (len(self.links[name] & shown),
                                                 -len(self.links[name] ^ shown)), default=None)
        if best is not None and self.links[best] & shown:
            return best
        text = _normal(value.text)
        return next((name for name, known in self.texts.items() if known and known == text),
                    None)


def _normal(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.casefold()).split())
