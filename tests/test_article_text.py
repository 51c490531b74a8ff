"""Entity articles as a reader sees them (issue 25): the lead, relations, kind and names of
articles in the shape of real ones (our own fictional country, person and city), from the
wikitext and from MediaWiki's rendering of the revision served by the local api.php."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.grounding.article_text import ArticleText, article_text, split_sentences
from cuqa_builder.grounding.articles import ArticleStore
from cuqa_builder.grounding.infobox import Relation
from cuqa_builder.records.events import Entity, Link
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.snapshot import page_path, read_page, sha256_text, write_page
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from cuqa_builder.wiki.api import WikiError
from cuqa_builder.wiki.client import MediaWikiClient
from cuqa_builder.wiki.render import render
from cuqa_builder.wiki.wikitext import parse_wikitext

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "articles"
COUNTRY_LEAD = [
    "The Kestrian Isles, officially the Federation of the Kestrian Isles, is an island country "
    "in the North Atlantic Ocean—a chain of forty islands between Shetland and Norway.",
    "Its capital and largest city is Port Aldren.",
]


def _page(name: str, *, html: bool = False) -> Page:
    meta = PageMeta(title=name.replace("_", " "), revid=1, timestamp="2023-01-01T00:00:00Z")
    return Page(meta=meta, wikitext=(FIXTURES / f"{name}.wiki").read_text(encoding="utf-8"),
                html=(FIXTURES / f"{name}.html").read_text(encoding="utf-8") if html else None)


def _text(wikitext: str, title: str = "Varno") -> ArticleText:
    return article_text(Page(meta=PageMeta(title=title, revid=1, timestamp="x"),
                             wikitext=wikitext))


def _relations(text: ArticleText) -> dict[str | None, Relation]:
    return {relation.parameter: relation for relation in text.relations}


def _titles(links: tuple[Link, ...] | list[Link]) -> list[str]:
    return [link.title for link in links]


# --- the lead -----------------------------------------------------------------------------------


def test_a_country_lead_reads_as_english_prose() -> None:
    text = article_text(_page("Kestrian_Isles"))
    assert text.lead == [
        *COUNTRY_LEAD,
        "As of 2022, about 1.2 million people lived on its 24,300 square kilometres.",
        "The isles joined the Nordic Council in 1962 – the first members from outside "
        "Scandinavia.",
    ]
    assert _titles(text.lead_links) == ["North Atlantic Ocean", "Shetland", "Norway",
                                        "Port Aldren", "Nordic Council", "Scandinavia"]
    # an external link shows its title; "See also" and "References" are not about the subject
    assert text.sentences[len(text.lead):] == [
        "The isles were settled from Norway in the ninth century.",
        "The Treaty of Vell was signed under the Act of Union of the isles in 1821."]
    assert not any("__" in s or "TOC" in s for s in text.sentences)


def test_mediawikis_rendering_reads_as_the_wikitext_does() -> None:
    wikitext, rendered = article_text(_page("Kestrian_Isles")), article_text(
        _page("Kestrian_Isles", html=True))
    assert rendered.lead[:2] == COUNTRY_LEAD == wikitext.lead[:2]
    assert rendered.lead[2] == ("As of 2022, about 1.2 million people lived on its 24,300 square "
                                "kilometres (9,400 sq mi).")  # MediaWiki's convert says more
    assert rendered.sentences[len(rendered.lead):] == wikitext.sentences[len(wikitext.lead):]
    assert rendered.lead_links == wikitext.lead_links
    assert (rendered.names, rendered.definite, rendered.kind) == (
        wikitext.names, wikitext.definite, wikitext.kind)


@pytest.mark.parametrize(("wikitext", "lead"), [
    # pronunciation and a foreign name with its transliteration: the whole bracket goes
    ("'''Varno''' ({{IPAc-en|v|ɑːr|n|oʊ}}; {{lang-uk|Варно}}, {{transl|uk|Varno}}) is a town "
     "on the [[Osk]].", "Varno is a town on the Osk."),
    # two pronunciations, one of them "locally"
    ("'''Varno''' ({{IPAc-en|v|ɑːr|n|oʊ}}, {{IPAc-en|local|v|ɑː|n|oʊ}}) is a town.",
     "Varno is a town."),
    # what else the bracket says stays
    ("'''Varno''' ({{IPA-fr|vaʁno|}}; {{lang-bg|Варно}}; born 3 May 1950) is a writer.",
     "Varno (born 3 May 1950) is a writer."),
    # a language label and a name in another script, written without a template
    ("'''Varno''' ({{lang-uk|Варно}}, {{IPA-uk|ˈvɑrno|pron}}, Russian: Варнъ, Varn) is a city.",
     "Varno (Varn) is a city."),
    # a transliteration marked "tr.": no sentence ends there
    ("'''Varno''' ({{IPAc-en|v|ɑː|n|oʊ}}; {{lang-uk|Варно}}, <small>[[Romanization of Ukrainian"
     "|tr.]]</small> {{lang|uk-Latn|''Varno''}} {{IPA-uk|ˈvɑrno|}}), sometimes called "
     "'''the Varno''', is a state.", "Varno, sometimes called the Varno, is a state."),
    # a template nobody knows leaves no husk behind
    ("'''Varno''' ({{Varno pronunciation box|x}}) is a town.", "Varno is a town."),
    ("'''Varno''' is a town.{{sfn|Hale|2001|p=3}} It has {{convert|3|km|mi|abbr=on}} of "
     "walls<sup>a</sup> and {{As of|2010|4|lc=y}} a mayor.",
     "Varno is a town. It has 3 km of walls and as of April 2010 a mayor."),
    # "²" is a digit to str.isdigit but not to int(): shown as written, not a crash
    ("'''Varno''' was born on {{birth date|1969|²|1}}.", "Varno was born on ² 1, 1969."),
    ("'''Varno''' has {{convert|12345²|km}} of walls.", "Varno has 12345² kilometres of walls."),
])
def test_pronunciations_and_foreign_names_go_with_their_brackets(wikitext: str, lead: str) -> None:
    assert " ".join(_text(wikitext).lead) == lead


def test_sentences_do_not_end_at_abbreviations() -> None:
    assert split_sentences("He was born c. 965 in Basra. He died in Cairo.") == [
        "He was born c. 965 in Basra.", "He died in Cairo."]


def test_the_news_renderer_is_unchanged() -> None:
    """Event ids are hashes of the event's text: only articles get the new rendering."""
    line = parse_wikitext("{{convert|2780400|km2}} near {{lang|uk|Київ}}, {{ublist|A|B}}").nodes
    assert render(line).text == "2780400 km2 near Київ, A"
    assert render(line, article=True).text == "2,780,400 square kilometres near Київ, A B"


# --- the infobox --------------------------------------------------------------------------------


def test_relations_are_the_value_parameters_with_every_link() -> None:
    relations = _relations(article_text(_page("Kestrian_Isles")))
    # labels, captions, years and files are not relations; a label names its value
    for label in ("leader_title1", "languages_type", "sovereignty_type", "established_event2",
                  "blank1_name", "ethnic_groups_year", "image_flag", "alt_flag", "coordinates"):
        assert label not in relations
    assert (relations["leader_name1"].label, _titles(relations["leader_name1"].values)) == (
        "President", ["Maren Holt"])
    assert (relations["blank1_info"].label, relations["blank1_info"].text) == (
        "Sister states", "Faroe Islands")
    assert relations["established_date2"].label == "Independence"
    assert relations["established_date2"].text == "7 June 1905"
    # the note after the capital goes; "largest_city = capital" is the capital
    assert _titles(relations["capital"].values) == _titles(relations["largest_city"].values) == [
        "Port Aldren"]
    assert _titles(relations["official_languages"].values) == ["English language",
                                                               "Dutch language"]
    assert _titles(relations["languages"].values) == ["Kestrian Norn", "Isles Gaelic"]
    assert relations["ethnic_groups"].text == "81% Kestrians, 12% Dutch, 7% other"
    assert _titles(relations["currency"].values) == ["Kestrian krone"]  # not the sign
    assert relations["demonym"] == Relation("demonym", None, "Kestrian")  # plain text kept
    assert _titles(relations["government_type"].values) == ["Federation",
                                                            "Parliamentary republic"]


def test_rendered_rows_keep_their_infobox_parameter() -> None:
    relations = article_text(_page("Kestrian_Isles", html=True)).relations
    by_label = {relation.label: relation for relation in relations}
    assert by_label["Capital and largest city"].parameter == "capital"
    assert _titles(by_label["Capital and largest city"].values) == ["Port Aldren"]
    assert by_label["President"].parameter == "leader_name1"
    assert by_label["Official languages"].parameter == "official_languages"
    assert _titles(by_label["Regional languages"].values) == ["Kestrian Norn", "Isles Gaelic"]
    assert by_label["Demonym"].parameter == "demonym"  # matched by its text
    assert by_label["Total"].text == "24,300 km² (9,400 sq mi)"


def test_a_place_chain_names_the_place_and_the_places_holding_it() -> None:
    text = article_text(_page("Tomas_Relling"))
    relations = _relations(text)
    born = relations["birth_place"]
    assert _titles(born.values) == ["Hallbrook"]
    assert _titles(born.containers) == ["Marwen (province)", "Kestrian Isles"]
    assert _titles(relations["alma_mater"].values) == ["University of Port Aldren",
                                                       "Leiden University"]
    assert relations["spouse"].text == "Inga Relling"
    assert relations["birth_date"].text == "14 March 1962"
    assert text.kind == "person" and text.names == ["Tomas Aldo Relling"]


@pytest.mark.parametrize(("infobox", "kind"), [
    ("{{Infobox settlement\n| name = X\n| settlement_type = [[List of cities|City]] "
     "(single-tier)\n}}", "city"),
    ("{{Infobox writer <!-- for more information see [[:Template:Infobox writer/doc]] -->\n"
     "| name = X\n}}", "person"),
    ("{{Infobox tennis biography\n| name = X\n}}", "person"),
    ("{{Infobox musical artist\n| name = X\n| background = group_or_band\n}}", "band"),
    ("{{Infobox political party\n| name = X\n}}", "political party"),
    # Infoboxes that serve another kind than they name, told apart by their parameters.
    ("{{Infobox islands\n| name = X\n| archipelago = [[Y Islands]]\n}}", "island"),
    ("{{Infobox islands\n| name = X\n| number_islands = 137\n}}", "islands"),
    ("{{Infobox mountain\n| name = X\n| highest = [[Y]]\n}}", "mountain range"),
    ("{{Infobox mountain\n| name = X\n| prominence_m = 900\n}}", "mountain"),
])
def test_the_kind_is_a_plain_word(infobox: str, kind: str) -> None:
    assert _text(f"{infobox}\n'''X''' is a thing.", "X").kind == kind


def test_a_repeated_parameter_is_one_relation_with_its_last_value() -> None:
    """As MediaWiki reads it: the last `name=` counts."""
    text = _text("{{Infobox person|name=[[A]]|birth_place=[[C]]|name=[[B]]}}\n'''X''' is a man.")
    assert [(r.parameter, _titles(r.values)) for r in text.relations] == [
        ("name", ["B"]), ("birth_place", ["C"])]


@pytest.mark.parametrize("html", [None, "<div><p><b>X</b> is a city.</p></div>"])
def test_an_infobox_in_a_comment_is_no_infobox(html: str | None) -> None:
    """The wikitext and the rendering are read with one rule: a commented-out infobox is not
    the page's."""
    wikitext = ("<!-- {{Infobox person}} -->\n{{Infobox settlement|settlement_type=City}}\n"
                "'''X''' is a city.")
    page = Page(meta=PageMeta(title="X", revid=1, timestamp="x"), wikitext=wikitext, html=html)
    assert article_text(page).kind == "city"


def test_a_city_names_its_country_and_province() -> None:
    text = article_text(_page("Port_Aldren"))
    relations = _relations(text)
    assert text.kind == "city"
    assert (relations["subdivision_name"].label, _titles(relations["subdivision_name"].values)) \
        == ("Country", ["Kestrian Isles"])
    assert relations["subdivision_name1"].label == "Province"
    assert "settlement_type" not in relations and "subdivision_type" not in relations


# --- names --------------------------------------------------------------------------------------


def test_names_take_the_as_the_lead_writes_them() -> None:
    isles = article_text(_page("Kestrian_Isles"))
    assert isles.as_written("Kestrian Isles") == "the Kestrian Isles"
    assert isles.names == ["Kestrian Isles", "Federation of the Kestrian Isles"]
    assert article_text(_page("Port_Aldren")).as_written("Port Aldren") == "Port Aldren"
    provinces = _text("The '''United Provinces of Osmark''', commonly known as the '''United "
                      "Provinces''' ('''UPO''') or '''Osmark''', is a country.",
                      "United Provinces of Osmark")
    assert [provinces.as_written(n) for n in ("United Provinces", "UPO", "Osmark")] == [
        "the United Provinces", "the UPO", "Osmark"]
    # "sometimes called the Varno" does not make the name take "the"
    called = _text("'''Varno''', sometimes called '''the Varno''', is a state.")
    assert called.as_written("Varno") == "Varno" and called.names == ["Varno", "the Varno"]


# --- fetched with its rendering, read offline the same ------------------------------------------


def test_an_article_is_fetched_with_its_rendering_and_read_offline_the_same(
    tmp_path: Path,
) -> None:
    pages = {"Kestrian Isles": (401, "2023-02-01T00:00:00Z", _page("Kestrian_Isles").wikitext)}
    html = {401: (FIXTURES / "Kestrian_Isles.html").read_text(encoding="utf-8")}
    isles = Entity(text="Kestrian Isles", label="GPE", wiki_title="Kestrian Isles")
    with MediaWikiServer(pages, html=html) as wiki:
        store = ArticleStore(tmp_path / "articles.jsonl", tmp_path / "pages", date(2023, 4, 30),
                             client=lambda: MediaWikiClient(wiki.api_url, min_interval_s=0))
        assert store.ensure([isles]).requests == 2  # the revision, then its rendering
        (parse,) = wiki.requests_for_html()
    assert (parse.params["oldid"], parse.params["prop"]) == ("401", "text")
    fetched = store.page(store.lookup(isles))
    assert fetched is not None and fetched.html == html[401]
    offline = ArticleStore(tmp_path / "again.jsonl", tmp_path / "other", date(2023, 4, 30),
                           source=tmp_path / "pages")
    offline.ensure([isles])
    again = offline.page(offline.lookup(isles))
    # the same text read back (article_text's cache would make equal reads of it equal anyway)
    assert again is not None and (again.wikitext, again.html) == (fetched.wikitext, fetched.html)
    assert article_text(again).relations[0].label == "Capital and largest city"


def test_rendering_an_unknown_revision_is_a_wiki_error() -> None:
    with MediaWikiServer({"Varno": "'''Varno''' is a town."}) as wiki, \
            MediaWikiClient(wiki.api_url, min_interval_s=0) as client:
        assert "Varno" in client.rendered_html("Varno", 1000)
        with pytest.raises(WikiError, match=r"nosuchrevid.*\(pages: Varno\)"):
            client.rendered_html("Varno", 999)


# --- the snapshot -------------------------------------------------------------------------------


def test_the_rendering_is_stored_beside_the_wikitext_and_checked(tmp_path: Path) -> None:
    page = _page("Kestrian_Isles", html=True)
    write_page(tmp_path, page)
    stored = page.model_copy(update={
        "meta": page.meta.model_copy(update={"sha256": sha256_text(page.wikitext),
                                             "html_sha256": sha256_text(page.html or "")})})
    assert read_page(page_path(tmp_path, page.meta.title)) == stored


@pytest.mark.parametrize(("damage", "why"), [
    (lambda path: path.write_text("<p>edited</p>", encoding="utf-8"),
     "Kestrian_Isles.html: sha256 does not match its sidecar"),
    (lambda path: path.unlink(), "Kestrian_Isles.html is missing (its sidecar gives its sha256)"),
    (lambda path: path.write_bytes(b"<p>\xff\xfe</p>"),
     "Kestrian_Isles.html: not UTF-8 text (byte 3)"),
])
def test_a_damaged_rendering_leaves_the_page_its_wikitext(tmp_path: Path, damage, why) -> None:
    """The rendering is never a condition for having the page: the page says why it is not
    read, and reads as one stored without it."""
    page = _page("Kestrian_Isles", html=True)
    write_page(tmp_path, page)
    damage(page_path(tmp_path, page.meta.title).with_suffix(".html"))
    read = read_page(page_path(tmp_path, page.meta.title))
    assert (read.wikitext, read.html, read.html_unread) == (page.wikitext, None, why)


def test_a_page_without_a_rendering_leaves_no_older_one_behind(tmp_path: Path) -> None:
    page = _page("Kestrian_Isles", html=True)
    write_page(tmp_path, page)
    write_page(tmp_path, page.model_copy(update={"html": None}))
    assert not page_path(tmp_path, page.meta.title).with_suffix(".html").exists()
    assert read_page(page_path(tmp_path, page.meta.title)).html is None


def test_a_rendering_its_sidecar_does_not_name_is_not_read(tmp_path: Path) -> None:
    page = _page("Kestrian_Isles")
    write_page(tmp_path, page)
    page_path(tmp_path, page.meta.title).with_suffix(".html").write_text("<p>stray</p>",
                                                                         encoding="utf-8")
    assert read_page(page_path(tmp_path, page.meta.title)).html is None


def test_a_revision_id_is_one_or_more() -> None:
    assert PageMeta(title="Varno", revid=1, timestamp="x").revid == 1
    with pytest.raises(ValueError, match="a revision id is 1 or more, not 0"):
        PageMeta(title="Varno", revid=0, timestamp="x")

