"""A much simplified stand-in for MediaWiki's parser, for the test api.php's `action=parse` of
revisions that have no HTML fixture of their own: the HTML has MediaWiki's shape (the
`mw-parser-output` wrapper, `div.mw-heading` headings, `<p>` paragraphs, `/wiki/` links, `<b>`,
reference marks, an `infobox` table with `infobox-label`/`infobox-data` rows), but only links,
bold, italics, references and the infobox's own parameters are rendered: other templates render
to nothing, and a template inside an infobox value to its positional parameters as list items.
Tests that need exactly what MediaWiki shows give an HTML fixture instead.
"""

from __future__ import annotations

import html
from urllib.parse import quote

from mwparserfromhell.nodes import Heading, Node, Tag, Template, Text, Wikilink
from mwparserfromhell.wikicode import Wikicode

from cuqa_builder.wiki.wikitext import article_title, parse_wikitext, template_name

WRAPPER = '<div class="mw-content-ltr mw-parser-output" lang="en" dir="ltr">{}</div>'
_HIDDEN_LINKS = ("file:", "image:", "category:")


def render_page(wikitext: str) -> str:
    """The wrapped HTML of a page: its infobox, then paragraphs and headings in order."""
    blocks: list[str] = []
    paragraph: list[str] = []

    def close_paragraph() -> None:
        text = "".join(paragraph).strip()
        if text:
            blocks.append(f"<p>{text}\n</p>")
        paragraph.clear()

    for node in parse_wikitext(wikitext).nodes:
        if isinstance(node, Heading):
            close_paragraph()
            title = _inline(node.title.nodes).strip()
            level = node.level
            blocks.append(f'<div class="mw-heading mw-heading{level}"><h{level} '
                          f'id="{quote(title.replace(" ", "_"))}">{title}</h{level}></div>')
        elif isinstance(node, Template) and template_name(node).startswith("infobox"):
            close_paragraph()
            blocks.append(_infobox(node))
        elif isinstance(node, Text) and "\n\n" in node.value:
            first, *rest = node.value.split("\n\n")
            paragraph.append(html.escape(first))
            for piece in rest:
                close_paragraph()
                paragraph.append(html.escape(piece))
        else:
            paragraph.append(_inline([node]))
    close_paragraph()
    return WRAPPER.format("\n".join(blocks))


def _inline(nodes: list[Node] | Wikicode) -> str:
    parts = []
    for node in nodes.nodes if isinstance(nodes, Wikicode) else nodes:
        if isinstance(node, Text):
            parts.append(html.escape(node.value))
        elif isinstance(node, Wikilink):
            parts.append(_link(node))
        elif isinstance(node, Tag):
            parts.append(_tag(node))
    return "".join(parts)


def _link(node: Wikilink) -> str:
    target = str(node.title).strip()
    if target.lower().startswith(_HIDDEN_LINKS):
        return ""
    title = article_title(target) or target
    label = _inline(node.text.nodes) if node.text is not None else html.escape(target)
    return (f'<a href="/wiki/{quote(title.replace(" ", "_"))}" '
            f'title="{html.escape(title)}">{label}</a>')


def _tag(node: Tag) -> str:
    name = str(node.tag).strip().lower()
    if name == "ref":
        return '<sup class="reference"><a href="#cite_note-1">[1]</a></sup>'
    if name == "br":
        return "<br />"
    inner = _inline(node.contents.nodes) if node.contents is not None else ""
    return f"<{name}>{inner}</{name}>" if name in ("b", "i", "small", "sup", "sub") else inner


def _infobox(template: Template) -> str:
    rows = []
    for param in template.params:
        value = _value(param.value)
        if param.showkey and value.strip():
            label = html.escape(str(param.name).strip().replace("_", " ").capitalize())
            rows.append(f'<tr><th scope="row" class="infobox-label">{label}</th>'
                        f'<td class="infobox-data">{value}</td></tr>')
    return f'<table class="infobox"><tbody>{"".join(rows)}</tbody></table>'


def _value(value: Wikicode) -> str:
    """A value's links and text; a template in it as its positional parameters, listed."""
    parts = []
    for node in value.nodes:
        if isinstance(node, Template):
            items = [f"<li>{_value(p.value)}</li>" for p in node.params if not p.showkey]
            parts.append(f'<div class="plainlist"><ul>{"".join(items)}</ul></div>' if items
                         else "")
        else:
            parts.append(_inline([node]))
    return "".join(parts).strip()
