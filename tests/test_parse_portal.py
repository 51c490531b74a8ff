"""Current events day pages (both eras) and the shared wikitext rendering."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.records import Link, Page, PageMeta, event_id
from cuqa_builder.snapshot import page_filename, read_page
from cuqa_builder.wiki.portal import parse_portal, portal_day
from cuqa_builder.wiki.wikitext import ParseError, iter_lines, parse_wikitext, render

FIXTURES = Path(__file__).parent / "fixtures" / "wiki"


def fixture(title: str) -> Page:
    return read_page(FIXTURES / f"{page_filename(title)}.wiki")


def inline_page(wikitext: str, title: str = "Portal:Current events/2024 February 29") -> Page:
    return Page(meta=PageMeta(title=title, revid=42, timestamp="2024-03-01T00:00:00Z"),
                wikitext=wikitext)


def wrapped(body: str) -> str:
    """A page in the newer top=yes / bottom=yes shape around `body`."""
    return (
        "{{Current events|year=2024|month=02|day=29|top=yes}}\n"
        "<!-- All news items below this line -->\n"
        f"{body}\n"
        "<!-- All news items above this line -->\n"
        "{{Current events|year=2024|month=02|day=29|bottom=yes}}\n"
    )


# --- older era: {{Current events|...|content=...}} ------------------------------------------


def test_content_parameter_page_yields_every_news_item_field_by_field():
    page = fixture("Portal:Current events/2023 May 14")
    events = parse_portal(page)

    assert [e.text for e in events] == [
        "Ukrainian commanders report small gains on both flanks of Bakhmut.",
        "Aid groups warn that fuel shortages threaten hospitals in Khartoum's eastern districts.",
        "Two buses collide on a mountain road in Peru, injuring 30 people.",
        "Voters in Turkey choose a president; no candidate passes half the vote, so a run-off "
        "is called for May 28.",
        "The governing alliance, Cumhur İttifakı, keeps its majority in the parliament.",
        "The opposition Move Forward Party wins the most seats in the Thai general election, "
        "ahead of Pheu Thai.",
        "Finland beat Latvia in overtime in Tampere.",
    ]
    assert {e.date for e in events} == {date(2023, 5, 14)}
    assert all(e.end_date is None for e in events)
    assert [e.category for e in events] == [
        "Armed conflicts and attacks",
        "Armed conflicts and attacks",
        "Disasters and accidents",
        "Politics and elections",
        "Politics and elections",
        "Politics and elections",
        "Sports",
    ]

    bakhmut, sudan, buses, turkey, alliance, thai, hockey = events
    assert bakhmut.topics == ["Russian invasion of Ukraine", "Eastern Ukraine campaign"]
    assert bakhmut.links == [Link(title="Bakhmut", text="Bakhmut")]
    assert bakhmut.citations == ["https://news.example.com/bakhmut-flanks"]

    # A topic bullet with two links gives two topics; two citations both kept, in order.
    assert sudan.topics == ["War in Sudan (2023)", "Humanitarian crisis in Sudan"]
    assert sudan.citations == ["https://news.example.org/sudan-fuel", "https://wire.example.net/a1"]
    assert sudan.links == [Link(title="Khartoum", text="Khartoum")]

    # An event at depth 1 has no topics; link trail "[[bus]]es" belongs to the link.
    assert buses.topics == []
    assert buses.links == [Link(title="Bus", text="buses"), Link(title="Peru", text="Peru")]

    # [[X#Section|label]]: the title drops the section; <ref> cite URL and the bracketed one.
    assert turkey.links == [
        Link(title="Turkey", text="Turkey"),
        Link(title="2023 Turkish presidential election", text="run-off"),
    ]
    assert turkey.citations == ["https://ref.example.com/turkey-vote",
                                "https://news.example.com/turkey"]
    assert turkey.topics == ["2023 Turkish presidential election"]

    assert alliance.links == [Link(title="Grand National Assembly of Turkey", text="parliament")]
    assert thai.topics == []
    assert thai.links[-1] == Link(title="Pheu Thai Party", text="Pheu Thai")
    assert hockey.links[0] == Link(title="Finland men's national ice hockey team", text="Finland")
    assert hockey.topics == ["2023 IIHF World Championship"]


def test_source_and_id_point_at_the_revision():
    page = fixture("Portal:Current events/2023 May 14")
    event = parse_portal(page)[0]
    assert event.id == event_id(page.meta.title, event.text)
    assert event.source.title == "Portal:Current events/2023 May 14"
    assert event.source.revid == 1155001001
    assert event.source.url == (
        "https://en.wikipedia.org/w/index.php?title=Portal:Current_events/2023_May_14"
        "&oldid=1155001001"
    )
    assert event.entities == []


def test_comments_and_markup_never_reach_the_text():
    for event in parse_portal(fixture("Portal:Current events/2023 May 14")):
        for residue in ("hidden note", "<!--", "[[", "]]", "{{", "'''", "http", "Example News",
                        "&nbsp;", "<br"):
            assert residue not in event.text


def test_semicolon_categories_and_a_topic_ending_in_a_colon():
    events = parse_portal(fixture("Portal:Current events/2008 March 2"))
    assert [(e.category, e.topics) for e in events] == [
        ("Armed conflicts and attacks", []),
        ("Politics and elections", ["Russian presidential election, 2008"]),
        ("Sports", []),
    ]
    assert events[0].text == "Colombian troops strike a rebel camp across the border in Ecuador."
    assert events[0].links[0] == Link(title="Colombia", text="Colombian")


# --- newer era: top=yes ... bottom=yes ---------------------------------------------------------


def test_top_and_bottom_page_with_topics_five_deep():
    events = parse_portal(fixture("Portal:Current events/2023 September 10"))
    deep = ["Russian invasion of Ukraine", "Russo-Ukrainian War",
            "2023 Ukrainian counteroffensive", "Southern Ukraine campaign"]
    assert [(e.text, e.topics) for e in events[:3]] == [
        ("Ukrainian officials say their troops have widened the breach near Robotyne.", deep),
        ("A second brigade is moved to the same sector.", deep),
        # Back at depth 3: the depth-3 and depth-4 topics above no longer apply.
        ("Drones strike a fuel depot in Odesa Oblast.", deep[:2]),
    ]
    assert events[1].links == []
    assert [e.category for e in events] == [
        "Armed conflicts and attacks", "Armed conflicts and attacks",
        "Armed conflicts and attacks", "Disasters and accidents", "Disasters and accidents",
        "International relations", "Sports",
    ]
    assert events[-1].topics == ["2023 US Open (tennis)"]
    assert events[-1].links[-1] == Link(title="Grand Slam (tennis)", text="major")
    assert events[3].id == events[4].id  # the repeated line: the stage drops the copy


def test_only_text_between_the_markers_is_news():
    page = inline_page(
        "{{Current events|year=2024|month=02|day=29|top=yes}}\n"
        "* A stray line above the start marker is ignored.\n"
        "<!-- All news items below this line -->\n"
        "'''Science and technology'''\n"
        "* A lander touches down near the lunar south pole. [https://sci.example.com/moon (Sci)]\n"
        "<!-- All news items above this line -->\n"
        "* A stray line below the end marker is ignored.\n"
        "{{Current events|year=2024|month=02|day=29|bottom=yes}}\n"
    )
    events = parse_portal(page)
    assert [(e.text, e.category, e.date) for e in events] == [
        ("A lander touches down near the lunar south pole.", "Science and technology",
         date(2024, 2, 29)),
    ]


def test_top_and_bottom_inside_a_wrapping_div():
    page = inline_page("<div class=\"day\">\n" + wrapped("* Something happens in [[Oslo]].")
                       + "</div>")
    assert [e.text for e in parse_portal(page)] == ["Something happens in Oslo."]


def test_a_category_change_resets_the_topics():
    page = inline_page(wrapped(
        "'''Politics'''\n* [[Topic A]]\n** News under topic A.\n'''Sports'''\n* News without one."
    ))
    assert [(e.category, e.topics) for e in parse_portal(page)] == [
        ("Politics", ["Topic A"]), ("Sports", []),
    ]


# --- bad pages -------------------------------------------------------------------------------


def test_unclosed_template_is_a_parse_error():
    with pytest.raises(ParseError, match="not closed"):
        parse_portal(fixture("Portal:Current events/2023 June 2"))


def test_empty_day_is_a_parse_error():
    with pytest.raises(ParseError, match="no news items"):
        parse_portal(fixture("Portal:Current events/2023 June 3"))


def test_top_without_bottom_is_a_parse_error():
    page = inline_page("{{Current events|year=2024|month=02|day=29|top=yes}}\n* News.\n")
    with pytest.raises(ParseError, match="bottom=yes"):
        parse_portal(page)


@pytest.mark.parametrize("wikitext", [
    "Just a paragraph about nothing.",
    "{{Current events header|2004|12|26}}\n* A page from before either wrapper.",
])
def test_page_without_any_wrapper_is_a_parse_error(wikitext):
    with pytest.raises(ParseError, match="no \\{\\{Current events\\}\\} template"):
        parse_portal(inline_page(wikitext))


@pytest.mark.parametrize("title", [
    "Portal:Current events/2023 February 30",
    "Portal:Current events/2023 Smarch 3",
    "Portal:Current events",
])
def test_bad_titles_are_parse_errors(title):
    with pytest.raises(ParseError):
        portal_day(title)


def test_day_comes_from_the_title():
    assert portal_day("Portal:Current events/2024 February 29") == date(2024, 2, 29)


# --- rendering shared with the year articles ------------------------------------------------


def rendered(wikitext: str):
    (line,) = iter_lines(parse_wikitext(wikitext).nodes)
    return render(line.nodes)


@pytest.mark.parametrize(("wikitext", "text"), [
    ("{{nowrap|a b}} {{lang|fr|bonjour}} {{lang-de|Hallo}}", "a b bonjour Hallo"),
    ("{{sortname|Ada|Lovelace}} {{HMS|Victory}} {{ship|USS|Enterprise|CVN-65}}",
     "Ada Lovelace HMS Victory USS Enterprise"),
    ("{{convert|5|km}} and {{convert|5|to|10|km}}", "5 km and 5 to 10 km"),
    ("{{US$|5 million}} raised{{citation needed|date=May 2024}}.", "US$5 million raised."),
    ("Paris{{snd}}Lyon &amp; Nice&nbsp;all", "Paris – Lyon & Nice all"),
    ("{{flagicon|FRA}} [[France]] wins<ref>{{cite web|url=https://r.example.com}}</ref>.",
     "France wins."),
    ("A <small>quiet</small> ''word''<br/>and '''bold''' text", "A quiet word and bold text"),
    ("{{Webarchive|url=https://archive.example.org/x}}Kept{{dead link}}", "Kept"),
    # Zero-width characters copied into real pages; a joiner between letters is kept.
    ("killed \u200cand \u200bin\u200b a {{lang|fa|می\u200cخواهم}}",
     "killed and in a می\u200cخواهم"),
])
def test_inline_templates_and_tags_render_sensibly(wikitext, text):
    assert rendered(wikitext).text == text


def test_special_links():
    result = rendered(
        "[[File:X.jpg|thumb|A caption with [[Y]]]]Text [[Category:Z]][[fr:Paris]] "
        "[[:fr:Paris|Paris FR]] [[wikt:word|word]] [[Paris (band)|]] [[new_york#History|NY]] "
        "[[France]]'s {{ill|Foo Bar|de|Fu}}"
    )
    assert result.text == "Text Paris FR word Paris NY France's Foo Bar"
    assert result.links == [
        Link(title="Paris (band)", text="Paris"),
        Link(title="New york", text="NY"),
        Link(title="France", text="France"),
        Link(title="Foo Bar", text="Foo Bar"),
    ]


def test_links_and_citations_are_deduplicated_in_order():
    result = rendered("[[Oslo]] and [[Oslo]] [https://a.example.com (A)] [https://a.example.com]")
    assert result.links == [Link(title="Oslo", text="Oslo")]
    assert result.citations == ["https://a.example.com"]


def test_only_links_tells_topics_from_events():
    assert rendered("[[A]], [[B (c)|B]]:").only_links()
    assert not rendered("[[A]] wins").only_links()
    assert not rendered("no links at all").only_links()
