"""Grounding (issue 10): entity articles as of the cutoff through a local api.php, and the two
verdicts, each passing and failing for the right reason with its evidence."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from cuqa_builder.grounding.article_text import article_text, split_sentences
from cuqa_builder.grounding.articles import ArticleStore
from cuqa_builder.grounding.evidence import grounding_lines
from cuqa_builder.grounding.lookups import cutoff_moment
from cuqa_builder.grounding.verdicts import BRIDGE, KNOWN_HOP, Grounder, spacy_analyser
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Entity
from cuqa_builder.records.pages import Page, PageMeta
from cuqa_builder.snapshot import read_page, sha256_text, write_page
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from cuqa_builder.wiki.client import MediaWikiClient
from tests.validation_samples import _intermediates, aab, abc

CUTOFF = date(2023, 4, 30)
# Fictional pages in our own words; revisions before and after the cutoff of 2023-04.
CAR_BEFORE = (
    "{{Infobox vehicle|name=Aurelia 7}}\n'''Aurelia 7''' is a solar car built by students of the "
    "[[University of Pellham]] in [[Dunmere]]. It was first shown at a science fair in 2022.\n\n"
    "== Design ==\nThe car carries four square metres of panels.\n\n== References ==\n{{reflist}}"
)
CAR_AFTER = CAR_BEFORE.replace("science fair in 2022.", "science fair in 2022. It won the "
                               "[[Trans-Karoo Challenge]] in September 2023.")
PAGES = {
    "Aurelia 7 (solar car)": [(301, "2023-02-01T09:00:00Z", CAR_BEFORE),
                              (305, "2023-09-12T09:00:00Z", CAR_AFTER)],
    "University of Pellham": (302, "2021-05-05T00:00:00Z",
                              "The '''University of Pellham''' is a public university in "
                              "[[Dunmere]], founded in 1911. Its engineering faculty builds solar "
                              "cars."),
    "Dunmere": (303, "2020-01-01T00:00:00Z",
                "'''Dunmere''' is a coastal city on the [[Karoo]] plateau. It has a port and a "
                "cathedral."),
    "River Osk": (304, "2019-03-03T00:00:00Z",
                  "The '''River Osk''' rises in the hills and reaches the sea at [[Dunmere]]."),
    "Trans-Karoo Challenge": (306, "2023-05-20T00:00:00Z",
                              "The '''Trans-Karoo Challenge''' is a race for solar cars."),
}
REDIRECTS = {"Pellham University": "University of Pellham"}

CAR = Entity(text="Aurelia 7", label="PRODUCT", wiki_title="Aurelia 7 (solar car)")
UNIVERSITY = Entity(text="Pellham University", label="ORG", wiki_title="Pellham University")
CITY = Entity(text="Dunmere", label="GPE", wiki_title="Dunmere")
RIVER = Entity(text="River Osk", label="LOC")  # no wikilink: found by search
LAKE = Entity(text="Lake Vostrel", label="LOC", wiki_title="Lake Vostrel")  # no such page
RACE = Entity(text="Trans-Karoo Challenge", label="EVENT", wiki_title="Trans-Karoo Challenge")


@pytest.fixture
def wiki():
    with MediaWikiServer(PAGES, redirects=REDIRECTS) as server:
        yield server


def _store(tmp_path: Path, wiki: MediaWikiServer) -> ArticleStore:
    return ArticleStore(tmp_path / "articles.jsonl", tmp_path / "pages", CUTOFF,
                        client=lambda: MediaWikiClient(wiki.api_url, min_interval_s=0))


# --- the client and the store ------------------------------------------------------------------


def test_the_revision_in_force_at_the_cutoff_is_served_with_its_redirect(wiki) -> None:
    with MediaWikiClient(wiki.api_url, min_interval_s=0) as client:
        car = client.revision_at("Aurelia 7 (solar car)", cutoff_moment(CUTOFF))
        redirected = client.revision_at("Pellham University", cutoff_moment(CUTOFF))
        later = client.revision_at("Trans-Karoo Challenge", cutoff_moment(CUTOFF))
        missing = client.revision_at("Lake Vostrel", cutoff_moment(CUTOFF))
        assert client.search_title("River Osk") == "River Osk"
    assert car.page is not None and car.page.meta.revid == 301  # not 305, written after
    assert "Trans-Karoo" not in car.page.wikitext
    assert car.page.meta.kind == "article" and car.page.meta.api == wiki.api_url
    assert redirected.page is not None and redirected.page.meta.title == "University of Pellham"
    assert redirected.page.meta.redirect == "Pellham University"
    assert later.page is None and "created later" in (later.absent or "")
    assert missing.page is None and missing.absent == "page does not exist"
    sent = [r.params for r in wiki.requests if r.params.get("prop") == "revisions"]
    assert all(p["rvstart"] == "2023-04-30T23:59:59Z" and p["rvdir"] == "older"
               and p["rvlimit"] == "1" and p["redirects"] == "1" for p in sent)


def test_the_api_refuses_rvstart_on_several_pages(wiki) -> None:
    answer = wiki.answer({"format": "json", "formatversion": "2", "action": "query",
                          "prop": "revisions", "titles": "Dunmere|River Osk",
                          "rvstart": "2023-04-30T23:59:59Z"})
    assert answer["error"]["code"] == "multpages"


def test_lookups_are_stored_as_a_snapshot_and_reused(tmp_path: Path, wiki) -> None:
    store = _store(tmp_path, wiki)
    counts = store.ensure([CAR, UNIVERSITY, RIVER, LAKE, RACE, CAR])
    assert counts.looked_up == {"found": 3, "missing": 1, "created_later": 1}
    # one per title, one more for the search, and MediaWiki's rendering of each article found
    assert counts.requests == 6 + 3
    assert sorted(int(r.params["oldid"]) for r in wiki.requests_for_html()) == [301, 302, 304]
    sidecar = json.loads((tmp_path / "pages/articles/University_of_Pellham.json").read_text())
    assert sidecar["kind"] == "article" and sidecar["redirect"] == "Pellham University"
    assert sidecar["revid"] == 302 and sidecar["api"] == wiki.api_url
    html = (tmp_path / "pages/articles/University_of_Pellham.html").read_text()
    assert sidecar["html_sha256"] == sha256_text(html) and "mw-parser-output" in html
    river = store.lookup(RIVER)
    assert river is not None and river.by == "search" and river.title == "River Osk"
    lake = store.lookup(LAKE)
    assert lake is not None and not lake.found and "page does not exist" in lake.reason

    again = _store(tmp_path, wiki).ensure([CAR, UNIVERSITY, RIVER, LAKE, RACE])
    assert again.reused == 5 and again.requests == 0


def test_an_offline_snapshot_article_after_the_cutoff_is_not_evidence(tmp_path: Path) -> None:
    snapshot = tmp_path / "snapshot"
    write_page(snapshot / "articles", Page(
        meta=PageMeta(title="Dunmere", revid=9, timestamp="2023-07-01T00:00:00Z", kind="article"),
        wikitext="'''Dunmere''' is a city."))
    store = ArticleStore(tmp_path / "articles.jsonl", tmp_path / "pages", CUTOFF,
                         source=snapshot)
    counts = store.ensure([CITY, LAKE])
    assert counts.looked_up == {"not_evidence": 1, "missing": 1} and counts.requests == 0
    lookup = store.lookup(CITY)
    assert lookup is not None and lookup.status == "not_evidence"
    assert "after the cutoff 2023-04-30: not evidence" in lookup.reason


def test_article_text_has_the_lead_sentences_and_links(tmp_path: Path) -> None:
    page = Page(meta=PageMeta(title="Aurelia 7 (solar car)", revid=301, timestamp="x"),
                wikitext=CAR_BEFORE)
    text = article_text(page)
    assert text.lead == ["Aurelia 7 is a solar car built by students of the University of "
                         "Pellham in Dunmere.", "It was first shown at a science fair in 2022."]
    assert [link.title for link in text.lead_links] == ["University of Pellham", "Dunmere"]
    assert "The car carries four square metres of panels." in text.sentences
    assert split_sentences("The U.S. Navy sailed. Then it rained.") == [
        "The U.S. Navy sailed.", "Then it rained."]


# --- the verdicts ---------------------------------------------------------------------------------


def _abc_item(cur_ent: Entity, k_ent: Entity, known_q: str) -> Candidate:
    steps = _intermediates("ABC", cur_ent, k_ent, "Which university won the race?", known_q,
                           k_ent.text, "Where is the university that won the race?")
    return abc(intermediates=steps)


def _aab_item(known_q: str) -> Candidate:
    steps = _intermediates("AAB", CAR, None, "Which solar car won the race?", known_q,
                           "Aurelia 7", "Which solar car won the race?")
    return aab(intermediates=steps)


@pytest.fixture
def grounder(tmp_path: Path, wiki) -> Grounder:
    store = _store(tmp_path, wiki)
    store.ensure([CAR, UNIVERSITY, CITY, RIVER, LAKE, RACE])
    return Grounder(store, CUTOFF, spacy_analyser("en_core_web_sm"))


def _verdict(grounder: Grounder, item: Candidate, check: str):
    return next(v for v in grounder.verdicts(item) if v.check == check)


def test_bridge_with_an_article_at_the_cutoff_passes_with_its_lead(grounder) -> None:
    verdict = _verdict(grounder, _abc_item(UNIVERSITY, CITY, "In which city is Pellham "
                                           "University?"), BRIDGE)
    assert verdict.passed
    (evidence,) = verdict.evidence
    assert (evidence.title, evidence.revid, evidence.timestamp) == (
        "University of Pellham", 302, "2021-05-05T00:00:00Z")
    assert evidence.via == "redirect from Pellham University"
    assert evidence.sentences == ["The University of Pellham is a public university in Dunmere, "
                                  "founded in 1911."]
    assert evidence.url is not None and evidence.url.endswith("oldid=302")


def test_bridge_created_after_the_cutoff_fails(grounder) -> None:
    verdict = _verdict(grounder, _abc_item(RACE, CITY, "Where does the Trans-Karoo Challenge "
                                           "start?"), BRIDGE)
    assert not verdict.passed and not verdict.evidence
    assert verdict.reason.startswith("'Trans-Karoo Challenge' had no article on 2023-04-30")
    assert "created later" in verdict.reason and "cannot be known" in verdict.reason


def test_abc_known_hop_found_in_the_bridges_article(grounder) -> None:
    verdict = _verdict(grounder, _abc_item(UNIVERSITY, CITY, "In which city is Pellham "
                                           "University?"), KNOWN_HOP)
    assert verdict.passed
    assert verdict.reason == "'Dunmere' is named in University of Pellham as of 2023-04-30 " \
                             "(revid 302)"
    assert "Dunmere" in verdict.evidence[0].sentences[0]


def test_abc_known_hop_found_in_the_known_answers_article(grounder) -> None:
    verdict = _verdict(grounder, _abc_item(CITY, RIVER, "Which river reaches the sea at "
                                           "Dunmere?"), KNOWN_HOP)
    assert verdict.passed and verdict.evidence[0].title == "River Osk"
    assert verdict.evidence[0].via == "search: River Osk"
    assert verdict.evidence[0].sentences == [
        "The River Osk rises in the hills and reaches the sea at Dunmere."]


def test_abc_known_hop_not_found_says_where_it_looked(grounder) -> None:
    verdict = _verdict(grounder, _abc_item(CITY, LAKE, "Which lake is near Dunmere?"), KNOWN_HOP)
    assert not verdict.passed
    assert verdict.reason.startswith(
        "'Lake Vostrel' not in Dunmere as of 2023-04-30 (revid 303); 'Lake Vostrel' had no "
        "article")


def test_aab_known_hop_grounded_by_the_answers_article(grounder) -> None:
    item = _aab_item("Which solar car was built by students of Pellham University?")
    verdict = _verdict(grounder, item, KNOWN_HOP)
    assert verdict.passed, verdict.reason
    (evidence,) = verdict.evidence
    assert evidence.revid == 301 and evidence.sentences[0].startswith("Aurelia 7 is a solar car")


def test_aab_known_hop_with_a_name_the_article_lacks_fails(grounder) -> None:
    item = _aab_item("Which solar car appeared in the cartoon Sunny Wheels?")
    verdict = _verdict(grounder, item, KNOWN_HOP)
    assert not verdict.passed and not verdict.evidence
    assert verdict.reason == "'Sunny Wheels' not in Aurelia 7 (solar car) as of 2023-04-30 " \
                             "(revid 301)"


def test_evidence_lines_quote_the_sentence_and_link_the_revision(grounder) -> None:
    item = _abc_item(UNIVERSITY, CITY, "In which city is Pellham University?")
    item = item.model_copy(update={"grounding": grounder.verdicts(item)})
    lines = grounding_lines(item)
    assert lines[0].startswith("✓ bridge_known_before_cutoff: 'Pellham University' had an")
    assert any(line.startswith("  “The University of Pellham is a public university") for line
               in lines)
    assert any("University of Pellham, revision 302 of 2021-05-05T00:00:00Z (redirect from "
               "Pellham University): http://127.0.0.1" in line for line in lines)
    placeholder = item.model_copy(update={"grounding": [
        v.model_copy(update={"evidence": [e.model_copy(update={"url": None})
                                          for e in v.evidence]}) for v in item.grounding]})
    assert not any("http" in line for line in grounding_lines(placeholder))
    assert grounding_lines(abc()) == []  # not grounded: nothing to show


def test_hard_items_carry_the_verdicts_of_their_easy_items(grounder) -> None:
    from tests.validation_samples import hard

    first = _abc_item(UNIVERSITY, CITY, "In which city is Pellham University?")
    item = hard(sub_items=[first, _aab_item("Which solar car was built by students of "
                                            "Pellham University?")])
    verdicts = grounder.verdicts(item)
    assert [(v.item, v.check) for v in verdicts] == [
        (first.id, BRIDGE), (first.id, KNOWN_HOP),
        ("cq-aab0000000000001", BRIDGE), ("cq-aab0000000000001", KNOWN_HOP)]
    assert all(v.passed for v in verdicts)


def test_the_stored_article_reads_back(tmp_path: Path, wiki) -> None:
    store = _store(tmp_path, wiki)
    store.ensure([CAR])
    page = read_page(tmp_path / "pages/articles/Aurelia_7_(solar_car).wiki")
    assert page.meta.revid == 301 and page.wikitext == CAR_BEFORE


# --- the stages ---------------------------------------------------------------------------------


def test_ground_fetches_the_known_answer_only_when_the_bridge_does_not_name_it(
    tmp_path: Path, wiki, capsys
) -> None:
    from cuqa_builder.cli.build import main
    from cuqa_builder.jsonio import read_jsonl, write_jsonl

    named = _abc_item(UNIVERSITY, CITY, "In which city is Pellham University?")
    unnamed = _abc_item(CAR, LAKE, "Which lake is Aurelia 7 named after?").model_copy(
        update={"id": "cq-lake"})
    write_jsonl(tmp_path / "candidates.jsonl", [named, unnamed])
    args = ["--out", str(tmp_path), "--cutoff", "2023-04", "-q", "--wiki-api", wiki.api_url,
            "--wiki-interval", "0"]
    assert main([*args, "--stage", "ground"]) == 0
    asked = [r.params.get("titles") or r.params["oldid"] for r in wiki.requests]
    # each article found is followed by the request for its rendering
    assert asked == ["Pellham University", "302", "Aurelia 7 (solar car)", "301", "Lake Vostrel"]
    assert "known answers not named by the bridge's article: 1 looked up (1 missing)" in \
        capsys.readouterr().out
    assert main([*args, "--stage", "ground"]) == 0
    assert len(wiki.requests) == 5  # nothing asked twice

    assert main([*args, "--stage", "validate"]) == 0
    out = capsys.readouterr().out
    assert "grounding: against the articles at the end of 2023-04-30" in out
    judged = {c.id: c for c in read_jsonl(tmp_path / "candidates.jsonl", Candidate)}
    assert all(v.passed for v in judged[named.id].grounding)
    lake = judged["cq-lake"]
    assert lake.validation is not None and not lake.validation.passed
    failure = next(f for f in lake.validation.failures if f.check == KNOWN_HOP)
    assert failure.reason.startswith("'Lake Vostrel' not in Aurelia 7 (solar car) as of "
                                     "2023-04-30 (revid 301)")
    released = (tmp_path / "cuqa.jsonl").read_text()
    assert '"grounding"' in released and '"sentences"' in released


# --- redirects the API leaves unresolved (issue 26, fault 5) ----------------------------------

# Two gates whose articles were merged and unmerged until each redirects to the other, and a
# station renamed twice (a double redirect, one hop of which the API resolves).
LOOPING = {
    "North Gate of Dunmere": (307, "2022-01-01T00:00:00Z", "#REDIRECT [[South Gate of Dunmere]]"),
    "South Gate of Dunmere": (308, "2022-01-01T00:00:00Z",
                              "#redirect: [[North Gate of Dunmere]] {{R from merge}}"),
    "Dunmere Halt": (309, "2022-01-01T00:00:00Z", "#REDIRECT [[Dunmere Central]]"),
    "Dunmere Central": (310, "2022-02-02T00:00:00Z",
                        "'''Dunmere Central''' is the main railway station of [[Dunmere]]."),
}
GATE = Entity(text="North Gate", label="FAC", wiki_title="North Gate of Dunmere")
STATION = Entity(text="Dunmere Station", label="FAC", wiki_title="Dunmere Station")


def test_a_redirect_loop_is_no_article_and_a_double_redirect_is_followed(tmp_path: Path) -> None:
    redirects = {"North Gate of Dunmere": "South Gate of Dunmere",
                 "South Gate of Dunmere": "North Gate of Dunmere",
                 "Dunmere Station": "Dunmere Halt"}
    with MediaWikiServer(LOOPING, redirects=redirects) as server:
        store = _store(tmp_path, server)
        counts = store.ensure([GATE, STATION])
        grounder = Grounder(store, CUTOFF, spacy_analyser("en_core_web_sm"))
        verdict = _verdict(grounder, _abc_item(GATE, CITY, "Which city is North Gate in?"),
                           BRIDGE)
    # one request finds the loop (the API took the first hop), two the station, and one more
    # its rendering (issue 25)
    assert counts.looked_up == {"missing": 1, "found": 1} and counts.requests == 4
    gate = store.lookup(GATE)
    assert gate is not None and gate.status == "missing"
    assert gate.reason == ("'North Gate of Dunmere': no article, its redirects go round (North "
                           "Gate of Dunmere -> South Gate of Dunmere -> North Gate of Dunmere)")
    assert not verdict.passed and not verdict.evidence  # the stub is no evidence
    assert "its redirects go round" in verdict.reason
    station = store.lookup(STATION)
    assert station is not None and station.found and station.title == "Dunmere Central"
    assert station.redirect == "Dunmere Station" and station.revid == 310
    assert not (tmp_path / "pages/articles/South_Gate_of_Dunmere.wiki").exists()
