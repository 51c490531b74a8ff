"""Year articles: the Events section by month, every date shape, non-news lines left out."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.records.events import Link, event_id
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.snapshot import read_page
from cuqa_builder.wiki.render import render
from cuqa_builder.wiki.wikitext import ParseError, iter_lines, parse_wikitext
from cuqa_builder.wiki.year_article import Dates, parse_year_article, split_date_prefix

FIXTURES = Path(__file__).parent / "fixtures" / "wiki"


@pytest.fixture(scope="module")
def year_2023():
    warnings: list[str] = []
    events = parse_year_article(read_page(FIXTURES / "2023.wiki"), warn=warnings.append)
    return events, warnings


def year_page(wikitext: str, year: str = "2024") -> Page:
    return Page(meta=PageMeta(title=year, revid=7, timestamp="2025-01-01T00:00:00Z"),
                wikitext=wikitext)


def test_every_dated_event_of_the_events_section(year_2023):
    events, _ = year_2023
    assert [(e.date, e.end_date, e.text) for e in events] == [
        (date(2023, 1, 1), None, "Croatia adopts the euro as its official currency."),
        (date(2023, 1, 1), None, "Croatia joins the Schengen Area."),
        (date(2023, 1, 8), None,
         "Supporters of a defeated candidate storm government buildings in Brasília."),
        (date(2023, 1, 15), None, "A passenger plane crashes on approach to Pokhara, Nepal."),
        (date(2023, 1, 26), None,
         "An invented committee in Geneva publishes its first report, written day-first."),
        (date(2023, 2, 6), None,
         "Two powerful earthquakes strike southern Turkey and northern Syria."),
        (date(2023, 4, 20), None,
         "SpaceX's Starship rocket makes its first integrated test flight from Texas."),
        (date(2023, 9, 8), date(2023, 10, 28), "The 2023 Rugby World Cup is held in France."),
        (date(2023, 9, 20), date(2023, 9, 22),
         "An invented summit of river authorities meets in Vienna."),
        (date(2023, 9, 20), date(2023, 9, 22),
         "Delegates agree on shared flood warnings for the Danube."),
        (date(2023, 12, 28), date(2024, 1, 3),
         "An invented winter festival runs across the new year in Tromsø."),
        (date(2023, 12, 31), None,
         "5 lighthouses in Norway switch to solar power, in an invented story."),
    ]
    assert all(e.category is None and e.topics == [] for e in events)


def starting(events, words: str):
    (event,) = [e for e in events if e.text.startswith(words)]
    return event


def test_links_exclude_the_date_prefix(year_2023):
    events, _ = year_2023
    assert starting(events, "Croatia adopts").links == [
        Link(title="Croatia", text="Croatia"), Link(title="Euro", text="euro"),
    ]
    assert starting(events, "The 2023 Rugby").links == [
        Link(title="2023 Rugby World Cup", text="2023 Rugby World Cup"),
        Link(title="France", text="France"),
    ]
    assert starting(events, "Two powerful").links[0] == Link(
        title="2023 Turkey–Syria earthquakes", text="powerful earthquakes"
    )
    months = ("January", "September", "October", "December")
    assert not any(link.title.startswith(months) for e in events for link in e.links)


def test_citations_from_refs_including_reused_named_refs(year_2023):
    events, _ = year_2023
    assert starting(events, "Croatia adopts").citations == ["https://ref.example.com/croatia-euro"]
    assert starting(events, "Croatia joins").citations == ["https://ref.example.com/schengen"]
    assert starting(events, "Supporters").citations == [
        "https://ref.example.com/schengen", "https://ref.example.com/brasilia",
    ]
    assert starting(events, "A passenger").citations == ["https://ref.example.com/pokhara"]
    assert starting(events, "An invented summit").citations == []


def test_non_news_lines_are_not_events(year_2023):
    events, _ = year_2023
    texts = " ".join(e.text for e in events)
    for absent in ("International Day of Peace", "born", "dies", "List of years", "caption",
                   "impossible date", "MMXXIII"):
        assert absent not in texts


def test_invalid_dates_and_empty_months_are_warned_about(year_2023):
    _, warnings = year_2023
    assert len(warnings) == 2
    assert "invalid date" in warnings[0] and warnings[0].startswith("2023:")
    assert warnings[1] == "2023: section 'March' has no dated events"


def test_source_of_a_year_event(year_2023):
    event = year_2023[0][0]
    assert event.id == event_id("2023", event.text)
    assert event.source.model_dump() == {
        "title": "2023",
        "revid": 1190000000,
        "url": "https://en.wikipedia.org/w/index.php?title=2023&oldid=1190000000",
    }


def test_no_events_section_is_a_parse_error():
    with pytest.raises(ParseError, match="no '== Events ==' section"):
        parse_year_article(read_page(FIXTURES / "2022.wiki"))


def test_events_section_without_dated_events_is_a_parse_error():
    page = year_page("== Events ==\n=== January ===\n* An undated line.\n== Births ==\n")
    with pytest.raises(ParseError, match="no dated events"):
        parse_year_article(page, warn=lambda message: None)


def test_a_paragraph_ends_the_date_of_the_bullets_above():
    page = year_page(
        "== Events ==\n* [[May 1]]\n** First news.\nA paragraph between lists.\n"
        "** An orphan sub-bullet.\n"
    )
    assert [e.text for e in parse_year_article(page)] == ["First news."]


def test_a_sub_bullet_under_a_dated_event_shares_its_date():
    page = year_page("== Events ==\n* [[May 1]] – Main news.\n** A detail of it.\n")
    assert [(e.date, e.text) for e in parse_year_article(page)] == [
        (date(2024, 5, 1), "Main news."), (date(2024, 5, 1), "A detail of it."),
    ]


def prefix(wikitext: str, year: int = 2024):
    (line,) = iter_lines(parse_wikitext(wikitext).nodes)
    result = split_date_prefix(render(line.nodes), year)
    return None if result is None else (result[0], result[1].text)


@pytest.mark.parametrize(("wikitext", "dates", "text"), [
    ("* [[March 3]] – News.", Dates(date(2024, 3, 3)), "News."),
    ("* [[March 3]] - News.", Dates(date(2024, 3, 3)), "News."),
    ("* [[March 3]] — News.", Dates(date(2024, 3, 3)), "News."),
    ("* [[March 3]] &ndash; News.", Dates(date(2024, 3, 3)), "News."),
    ("* [[March 3]]: News.", Dates(date(2024, 3, 3)), "News."),
    ("* [[3 March]] – News.", Dates(date(2024, 3, 3)), "News."),
    ("* [[March 3]]", Dates(date(2024, 3, 3)), ""),
    ("* [[March 3]] – [[March 5]] – News.", Dates(date(2024, 3, 3), date(2024, 3, 5)), "News."),
    ("* [[March 3]]–[[March 5|5]] – News.", Dates(date(2024, 3, 3), date(2024, 3, 5)), "News."),
    # The label is a bare day, the link names its month.
    ("* [[March 8]]–[[April 2|2]] – News.", Dates(date(2024, 3, 8), date(2024, 4, 2)), "News."),
    ("* [[March 3]]<ref>[https://a.example.com A]</ref> – News.", Dates(date(2024, 3, 3)),
     "News."),
    ("* [[January 1]] –", Dates(date(2024, 1, 1)), ""),
    ("* [[3 March]] – [[5 April]] – News.", Dates(date(2024, 3, 3), date(2024, 4, 5)), "News."),
    ("* [[December 30]] – [[January 2]] – News.",
     Dates(date(2024, 12, 30), date(2025, 1, 2)), "News."),
    ("* [[December 30]], [[2023]] – [[January 2]] – News.",
     Dates(date(2023, 12, 30), date(2024, 1, 2)), "News."),
    ("* [[March 3]] – 5 people die.", Dates(date(2024, 3, 3)), "5 people die."),
    ("* [[March 3]] – 2024 talks open.", Dates(date(2024, 3, 3)), "2024 talks open."),
])
def test_date_prefixes(wikitext, dates, text):
    assert prefix(wikitext) == (dates, text)


@pytest.mark.parametrize("wikitext", [
    "* [[International Day of Peace]] is observed.",
    "* Date unknown – something.",
    "* [[March]] – a month, not a day.",
])
def test_lines_without_a_day_have_no_prefix(wikitext):
    assert prefix(wikitext) is None


def test_an_impossible_date_raises_value_error():
    with pytest.raises(ValueError):
        prefix("* [[February 30]] – News.")


def test_a_real_shaped_year_article_gives_only_its_dated_events():
    """`eras/2024.wiki`: {{main}} and {{Further}} lines, images, a gallery and a multiple-image
    template with dated captions, `* [[January 1]] –` bullets whose `**` (and `***`) children
    are the events, a range ending in `[[April 2|2]]`, an undated section, births and deaths."""
    warnings: list[str] = []
    events = parse_year_article(read_page(FIXTURES / "eras" / "2024.wiki"), warn=warnings.append)
    fields = [(e.date, e.end_date, e.category, e.topics, e.text,
               [(link.title, link.text) for link in e.links], e.citations) for e in events]
    day = date
    assert fields == [
        (day(2024, 1, 1), None, None, [],
         "An invented ferry line between Tallinn and Helsinki starts its winter timetable.",
         [("Tallinn", "Tallinn"), ("Helsinki", "Helsinki")], ["https://ref.example.com/ferry"]),
        (day(2024, 1, 1), None, None, [],
         "A new coin series enters circulation in an invented island republic.",
         [], ["https://ref.example.com/coins"]),
        (day(2024, 1, 1), None, None, [], "Banks report long queues on the first morning.",
         [], ["https://ref.example.com/coins"]),
        (day(2024, 1, 9), None, None, [],
         "An invented research vessel returns to Bergen after a year in the Southern Ocean.",
         [("Bergen", "Bergen"), ("Southern Ocean", "Southern Ocean")],
         ["https://ref.example.com/vessel"]),
        (day(2024, 2, 4), None, None, [],
         "An invented bridge across the Danube opens to traffic.",
         [("Danube", "Danube")], ["https://ref.example.com/bridge"]),
        (day(2024, 2, 29), None, None, [],
         "A leap-day festival is held in an invented village in Wales.",
         [("Wales", "Wales")], []),
        (day(2024, 3, 8), day(2024, 4, 2), None, [],
         "An invented chess tournament is played in Toronto.", [("Toronto", "Toronto")], []),
        (day(2024, 3, 31), day(2024, 4, 2), None, [],
         "Invented talks on river shipping take place in Vienna.", [("Vienna", "Vienna")], []),
        (day(2024, 3, 15), None, None, [], "Polls open in an invented regional election.",
         [], []),
        (day(2024, 3, 15), None, None, [], "An invented observatory reports a bright comet.",
         [], []),
    ]
    assert warnings == []


def test_a_template_nested_too_deep_is_dropped_with_a_warning():
    warnings: list[str] = []
    deep = "{{nowrap|" * 40 + "x" + "}}" * 40
    page = year_page(
        f"== Events ==\n* [[May 1]] – First {deep} news.\n* [[May 2]] – Second news.\n"
    )
    assert [e.text for e in parse_year_article(page, warn=warnings.append)] == [
        "First news.", "Second news.",
    ]
    assert warnings == ["2024: dropped templates nested more than 20 deep (down to 40 levels), "
                        "which the wikitext parser cannot read"]
