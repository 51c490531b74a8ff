"""Current events day pages (both eras) and the shared wikitext rendering."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.records.events import Link, event_id
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.snapshot import page_filename, read_page
from cuqa_builder.wiki.portal import parse_portal, portal_day
from cuqa_builder.wiki.render import render
from cuqa_builder.wiki.wikitext import ParseError, iter_lines, parse_wikitext

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


# --- every era of real day pages (fixtures in eras/: our own sentences, real shapes) ---------

ERAS = FIXTURES / "eras"


def era(title: str, **kwargs) -> list:
    page = read_page(ERAS / f"{page_filename(title)}.wiki")
    return parse_portal(page, **kwargs)


def fields(event) -> tuple:
    """Every field a parser fills, links and citations included."""
    return (event.date, event.end_date, event.category, event.topics, event.text,
            [(link.title, link.text) for link in event.links], event.citations)


def test_2004_inline_topics_and_bare_bracket_citations():
    day = date(2004, 12, 27)
    assert [fields(e) for e in era("Portal:Current events/2004 December 27")] == [
        (day, None, None, ["2004 Indian Ocean earthquake"],
         "Relief flights from several countries begin landing at Banda Aceh.",
         [("Banda Aceh", "Banda Aceh")], ["http://old.example.com/aceh-flights"]),
        # Entities become characters; a citation in italic parentheses leaves nothing behind.
        (day, None, None, ["Ukrainian presidential election, 2004"],
         "Election officials begin counting the ballots of the repeated run-off — turnout is "
         "put at 77 percent.",
         [], ["http://old.example.com/kyiv-count"]),
        # A bold link as the topic; ", " between two citations goes with them.
        (day, None, None, ["Cricket"],
         "New Zealand beat Sri Lanka by six wickets in Napier.",
         [("New Zealand national cricket team", "New Zealand"),
          ("Sri Lanka national cricket team", "Sri Lanka"),
          ("Napier, New Zealand", "Napier")],
         ["http://sport.example.com/napier", "http://wire.example.net/napier"]),
        # A short title-like phrase without a link is a topic too.
        (day, None, None, ["Winter Sports"],
         "A regional ski race in the Alps is postponed after heavy snow.",
         [("Alps", "Alps")], ["http://sport.example.com/ski"]),
        # A sentence that has a colon in it is not split.
        (day, None, None, [],
         'The mayor of an invented town says: "We will rebuild the bridge by spring."',
         [], ["http://old.example.com/bridge"]),
        (day, None, None, [],
         "Officials in Geneva confirm that talks resume on January 10: delegates from both "
         "sides have agreed.",
         [("Geneva", "Geneva"), ("January 10", "January 10")],
         ["http://old.example.com/geneva"]),
    ]


def test_2006_placeholders_citation_separators_and_a_topic_with_words_after_its_link():
    day = date(2006, 7, 13)
    lebanon = ["2006 Lebanon War"]
    assert [fields(e) for e in era("Portal:Current events/2006 July 13")] == [
        (day, None, None, lebanon, "Aircraft strike the runways of Beirut's airport.",
         [("Beirut–Rafic Hariri International Airport", "Beirut's airport")],
         ["http://old.example.com/beirut", "http://wire.example.net/beirut"]),
        (day, None, None, lebanon,
         "Rockets land in the northern town of Nahariya, injuring several residents.",
         [("Nahariya", "Nahariya")], []),
        (day, None, None, ["2006 Mumbai train bombings"],
         "Investigators in Mumbai question dozens of people about the blasts.",
         [("Mumbai", "Mumbai")], []),
        # `*[[Tour de France]] 2006:` with bullets under it and no citation is a topic line.
        (day, None, None, ["Tour de France 2006"],
         "A rider from Spain wins the eleventh stage in the Pyrenees.",
         [("Spain", "Spain"), ("Pyrenees", "Pyrenees")],
         ["http://sport.example.com/stage11", "http://sport.example.org/stage11"]),
        (day, None, None, [],
         "The Bank of Japan raises its key interest rate for the first time in six years.",
         [("Bank of Japan", "Bank of Japan")], ["http://biz.example.com/boj"]),
    ]


def test_2009_term_categories_plain_topic_lines_and_language_notes():
    day = date(2009, 5, 18)
    assert [fields(e) for e in era("Portal:Current events/2009 May 18")] == [
        (day, None, "Armed conflicts and attacks", ["Sri Lankan Civil War"],
         "The government of Sri Lanka declares that the fighting in the north has ended.",
         [("Sri Lanka", "Sri Lanka")], ["http://news.example.com/lanka"]),
        # A linked category name; "(in Spanish)" after the citations goes with them.
        (day, None, "Business and economy", ["Financial crisis of 2007–2008"],
         "An invented carmaker in Detroit announces the closure of two plants.",
         [("Detroit", "Detroit")],
         ["http://biz.example.com/plants", "http://biz.example.es/plantas"]),
        (day, None, "Sports", ["English football"],
         "A club from Lancashire is relegated on the last day of the season.",
         [("Lancashire", "Lancashire")], ["http://sport.example.com/releg"]),
    ]


def test_2017_header_template_pages_are_read_between_the_markers():
    day = date(2017, 5, 5)
    syria = ["Syrian Civil War"]
    assert [fields(e) for e in era("Portal:Current events/2017 May 5")] == [
        (day, None, "Armed conflicts and attacks", syria,
         "Three governments agree on four zones where military aircraft may not fly.",
         [], ["http://news.example.com/zones", "http://wire.example.net/zones"]),
        (day, None, "Armed conflicts and attacks", syria,
         "The United Nations welcomes the zones, which the government in Damascus rejects.",
         [("Damascus", "Damascus")], ["http://news.example.com/un-zones"]),
        (day, None, "Disasters and accidents", [],
         "Floods in an invented province of Colombia leave 12 people missing.",
         [("Colombia", "Colombia")], ["http://latam.example.com/floods"]),
    ]


def test_2024_topic_lines_of_any_wording_and_a_holiday_section_dropped():
    day = date(2024, 3, 11)
    skipped: list[tuple[str, int]] = []
    events = era("Portal:Current events/2024 March 11",
                 skip_section=lambda reason, lines: skipped.append((reason, lines)))
    assert [fields(e) for e in events] == [
        # Two links joined by "and", then a colon: two topics.
        (day, None, "Armed conflicts and attacks",
         ["Invented border crisis", "Invented harbour riots"],
         "Talks between the two governments collapse after a night of clashes near the harbour.",
         [], ["https://news.example.com/harbour"]),
        # A trailing space after the colon.
        (day, None, "Armed conflicts and attacks", ["Northern Invented conflict"],
         "Rebels claim control of a mountain pass.", [], ["https://news.example.com/pass"]),
        # A link and plain words: the link shown by its title.
        (day, None, "Business and economy", ["Invented Gas Pipeline expansion"],
         "Regulators approve a second line of the pipeline under the sea.",
         [], ["https://biz.example.com/pipeline"]),
        # Plain words, no link.
        (day, None, "Sports", ["English football"],
         "A club from Yorkshire wins a replay on penalties.",
         [("Yorkshire", "Yorkshire")], ["https://sport.example.com/replay"]),
        (day, None, "Sports", ["2024 Invented Cup"],
         "Invented Nation beat the hosts 2–1 in the final.",
         [("Invented Nation national football team", "Invented Nation")],
         ["https://sport.example.com/final"]),
    ]
    assert skipped == [("holidays and observances", 3)]


def test_2025_top_and_bottom_page_with_an_event_under_an_event_and_an_observance():
    day = date(2025, 10, 20)
    skipped: list[tuple[str, int]] = []
    events = era("Portal:Current events/2025 October 20",
                 skip_section=lambda reason, lines: skipped.append((reason, lines)))
    trial = ["Invented fraud trial"]
    assert [fields(e) for e in events] == [
        (day, None, "Arts and culture", [],
         "An invented museum in Lisbon reopens after a two-year renovation.",
         [("Lisbon", "Lisbon")], ["https://arts.example.com/museum"]),
        (day, None, "Law and crime", trial,
         "A court in Milan sentences two former bank managers to prison terms.",
         [("Milan", "Milan")], ["https://law.example.com/milan"]),
        # A cited line with a bullet under it stays an event; the bullet under it is one too.
        (day, None, "Law and crime", trial, "The defence says it will appeal the verdict.",
         [], ["https://law.example.com/appeal"]),
        (day, None, "Politics and elections", ["2025 Invented general election"],
         "The ruling party loses its majority, according to official results.",
         [], ["https://ref.example.com/results", "https://news.example.com/results"]),
    ]
    assert skipped == [("holidays and observances", 1)]


RESIDUE = ("[[", "]]", "{{", "}}", "<<", ">>", "''", "<", "&", "http", "()", "\x1f", " ,",
           ".,", ". and")


ALL_DAY_PAGES = sorted([*ERAS.glob("Portal*.wiki"), *FIXTURES.glob("Portal*.wiki")])


@pytest.mark.parametrize("path", ALL_DAY_PAGES, ids=lambda path: path.stem)
def test_no_markup_or_placeholder_left_in_any_text_or_topic(path):
    try:
        events = parse_portal(read_page(path))
    except ParseError:
        return  # the deliberately broken fixtures
    for event in events:
        for text in (event.text, *event.topics):
            assert not [piece for piece in RESIDUE if piece in text], text
            assert text == text.strip() and not text.endswith(":")


# --- shapes one line at a time ----------------------------------------------------------------


def one_event(body: str):
    (event,) = parse_portal(inline_page(wrapped(body)))
    return event


@pytest.mark.parametrize(("topic_line", "topics"), [
    ("*[[A crisis]] and [[B riots]]:", ["A crisis", "B riots"]),
    ("*[[A crisis]], [[B riots]] & [[C talks]]", ["A crisis", "B riots", "C talks"]),
    ("*English football:", ["English football"]),
    ("*[[X|X pipeline]] expansion", ["X expansion"]),
    ("*[[Topic]]: ", ["Topic"]),
    ("*[[Topic]]:<!-- a note -->", ["Topic"]),
    ("*'''[[Topic]]'''", ["Topic"]),
])
def test_topic_lines_of_any_wording(topic_line, topics):
    event = one_event(f"{topic_line}\n**Something happens. [https://a.example.com (A)]")
    assert (event.topics, event.text) == (topics, "Something happens.")


def test_a_bullet_with_children_but_its_own_citation_is_an_event():
    events = parse_portal(inline_page(wrapped(
        "*A dam bursts upstream of the town. [https://a.example.com (A)]\n"
        "**Rescuers reach the first villages. [https://b.example.com (B)]"
    )))
    assert [(e.text, e.topics) for e in events] == [
        ("A dam bursts upstream of the town.", []),
        ("Rescuers reach the first villages.", []),
    ]


@pytest.mark.parametrize(("line", "topics", "text"), [
    ("* [[Topic]]: What happened.", ["Topic"], "What happened."),
    ("* [[A]] and [[B]]: What happened.", ["A", "B"], "What happened."),
    ("* [[Iraq]] War: What happened.", ["Iraq War"], "What happened."),
    ("* Football: What happened.", ["Football"], "What happened."),
    ("* Football: what happened.", [], "Football: what happened."),
    ("* The minister says: we go on.", [], "The minister says: we go on."),
    ("* [[Topic]]: \"We go on,\" a minister says.", [], "Topic: \"We go on,\" a minister says."),
    ("* [[Star Wars: The Saga]] opens in cinemas.", [], "Star Wars: The Saga opens in cinemas."),
    ("* Trains stop at 10:30 in [[Oslo]].", [], "Trains stop at 10:30 in Oslo."),
    # a linked prefix that says where is part of the news, its link kept
    ("* Quarter-final in [[Málaga]]: Italy beat Spain 2–1.", [],
     "Quarter-final in Málaga: Italy beat Spain 2–1."),
    ("* Group B, in [[Abidjan]]: Mali draw 1–1.", [], "Group B, in Abidjan: Mali draw 1–1."),
    ("* Semi-final at [[Wembley Stadium|Wembley]]: England beat Denmark 2–1.", [],
     "Semi-final at Wembley: England beat Denmark 2–1."),
    ("* Stage 5 from [[Nice]] to [[Lyon]]: Pogačar wins.", [],
     "Stage 5 from Nice to Lyon: Pogačar wins."),
    # a topic placed somewhere is still the topic the news is filed under
    ("* Violence in [[Iraq]]: A bomb kills 12.", ["Violence in Iraq"], "A bomb kills 12."),
    ("* Elections in [[Peru]]: Voters go to the polls.", ["Elections in Peru"],
     "Voters go to the polls."),
])
def test_old_era_inline_topics(line, topics, text):
    event = one_event(line + " [http://a.example.com Source]")
    assert (event.topics, event.text) == (topics, text)


def test_an_inline_topic_is_the_context_of_the_bullets_under_it():
    events = parse_portal(inline_page(wrapped(
        "*[[Outer]]\n**[[Inner]]: A first thing happens. [http://a.example.com A]\n"
        "***A detail of it. [http://b.example.com B]\n"
        "**A second thing happens. [http://c.example.com C]"
    )))
    assert [(e.topics, e.text) for e in events] == [
        (["Outer", "Inner"], "A first thing happens."),
        (["Outer", "Inner"], "A detail of it."),
        (["Outer"], "A second thing happens."),
    ]


@pytest.mark.parametrize(("wikitext", "text"), [
    ("Storm hits the coast. [http://a.example.com (A)], [http://b.example.com (B)]",
     "Storm hits the coast."),
    ("Storm hits the coast. [http://a.example.com (A)] and [http://b.example.com (B)]",
     "Storm hits the coast."),
    ("Storm hits the coast ([http://a.example.com A]; [http://b.example.com B]).",
     "Storm hits the coast."),
    ("Storm hits the coast. <small>''<<NEWSLINK MISSING>>''</small>", "Storm hits the coast."),
    ("Storm hits the coast. ''<<NEWSLINK MISSING>>''", "Storm hits the coast."),
    ("Storm hits the coast. (<<NEWSLINK MISSING>>)", "Storm hits the coast."),
    ("Storm hits the&nbsp;coast &ndash; again.", "Storm hits the coast – again."),
    ("Storm hits the&amp;nbsp;coast &amp;mdash; again.", "Storm hits the coast — again."),
    ("Prices rise 5&#37; at AT&amp;T.", "Prices rise 5% at AT&T."),
    ("Storm hits the coast. [http://a.example.com (El País)] (in Spanish)",
     "Storm hits the coast."),
])
def test_residue_around_citations_placeholders_and_entities(wikitext, text):
    assert rendered("* " + wikitext).text == text


# --- pages whose markup hides news (issue 15, item 3) ------------------------------------------


def deeply_nested(depth: int) -> str:
    return "{{nowrap|" * depth + "x" + "}}" * depth


@pytest.mark.parametrize("depth", [34, 45])
def test_templates_nested_deep_do_not_end_the_content_wrapper_early(depth):
    warnings: list[str] = []
    page = inline_page(
        "{{Current events|year=2024|month=02|day=29|content=\n"
        "<!-- All news items below this line -->\n'''Politics'''\n"
        "* A first thing happens. [http://a.example.com (A)]\n"
        f"* A second thing {deeply_nested(depth)} happens. [http://b.example.com (B)]\n"
        "* A third thing happens. [http://c.example.com (C)]\n"
        "'''Sports'''\n* A fourth thing happens. [http://d.example.com (D)]\n"
        "<!-- All news items above this line -->}}\n"
    )
    events = parse_portal(page, warn=warnings.append)
    assert [(e.category, e.text) for e in events] == [
        ("Politics", "A first thing happens."), ("Politics", "A second thing happens."),
        ("Politics", "A third thing happens."), ("Sports", "A fourth thing happens."),
    ]
    assert warnings == [
        f"Portal:Current events/2024 February 29: dropped templates nested more than 20 deep "
        f"(down to {depth + 1} levels), which the wikitext parser cannot read"  # + the wrapper
    ]


def test_a_stray_closing_brace_pair_does_not_end_the_content_wrapper_early():
    page = inline_page(
        "{{Current events|year=2024|month=02|day=29|content=\n"
        "<!-- All news items below this line -->\n"
        "* A first thing happens in [[Oslo]]}}. [http://a.example.com (A)]\n"
        "* A second thing happens. [http://b.example.com (B)]\n"
        "<!-- All news items above this line -->}}\n"
    )
    assert [e.text for e in parse_portal(page)] == [
        "A first thing happens in Oslo}}.", "A second thing happens.",
    ]


def test_a_page_that_yields_far_fewer_events_than_bullets_is_warned_about():
    warnings: list[str] = []
    page = inline_page(wrapped(
        "* A first thing happens. [http://a.example.com (A)]\n"
        "{{Hidden|More news|\n* A second thing happens.\n* A third thing happens.\n"
        "* A fourth thing happens.\n}}"
    ))
    assert [e.text for e in parse_portal(page, warn=warnings.append)] == [
        "A first thing happens."
    ]
    assert warnings == [
        "Portal:Current events/2024 February 29: 1 event from 4 bullets (3 bullets were not "
        "read as news, topics or skipped sections; malformed markup?)"
    ]


def test_bullets_that_start_two_deep_under_a_term_category():
    events = parse_portal(inline_page(wrapped(
        ";Armed conflicts and attacks\n**[[Invented war]]\n"
        "***[[Invented battle#Aftermath|Aftermath of the invented battle]]\n"
        "****Soldiers are killed in an airstrike. [https://a.example.com (A)]\n"
        "**Dozens are killed in clashes near the border. [https://b.example.com (B)]\n"
        "*{{flagicon|UKR}} [[Ukraine]]\n**A bridge reopens. [https://c.example.com (C)]"
    )))
    assert [(e.category, e.topics, e.text) for e in events] == [
        ("Armed conflicts and attacks", ["Invented war", "Invented battle"],
         "Soldiers are killed in an airstrike."),
        ("Armed conflicts and attacks", [], "Dozens are killed in clashes near the border."),
        ("Armed conflicts and attacks", ["Ukraine"], "A bridge reopens."),
    ]


def test_ship_templates_link_their_ship():
    """`{{USS|Laboon|DDG-58}}` shows "USS Laboon" and links the ship's article, as the portal's
    own rendering does."""
    event = one_event("* The destroyer {{USS|Laboon|DDG-58|6}} and {{ship|HMS|Diamond|D34}} "
                      "shoot down drones. [http://a.example.com Source]")
    assert event.text == "The destroyer USS Laboon and HMS Diamond shoot down drones."
    assert [(link.title, link.text) for link in event.links] == [
        ("USS Laboon (DDG-58)", "USS Laboon"), ("HMS Diamond (D34)", "HMS Diamond")]
