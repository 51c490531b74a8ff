"""Refreshing a run: pages change on the wiki between two runs (a new revision, a new day, a
removed event). Only the changed and new pages are fetched again, event ids stay stable, and the
candidates built on a changed event are found stale, held back and made again, with no other
LLM call repeated."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path

import pytest

from cuqa_builder.cli.build import main
from cuqa_builder.jsonio import read_jsonl
from cuqa_builder.records.candidates import Candidate
from cuqa_builder.records.events import Event, EventSource, event_id
from cuqa_builder.records.items import CuqaItem
from cuqa_builder.refresh import STALE, RefreshReport, carry_ids
from cuqa_builder.run import load_run_info
from cuqa_builder.stages.fetch import _settled, page_date
from cuqa_builder.testing.algorithm_llm import AlgorithmResponder
from cuqa_builder.testing.mediawiki_server import MediaWikiServer
from cuqa_builder.testing.openai_server import ScriptedLLM
from cuqa_builder.wiki.client import MediaWikiClient

YEAR = "2024"
MARCH = "Portal:Current events/2024 March {}"


def portal(day: int, *news: str) -> str:
    bullets = "\n".join(f"* {line} [https://news.example.com/{day} (Example News)]"
                        for line in news)
    return (f"{{{{Current events|year=2024|month=03|day={day}|content=\n"
            "<!-- All news items below this line -->\n'''Science and technology'''\n"
            f"{bullets}\n<!-- All news items above this line -->\n}}}}")


YEAR_ARTICLE = ("== Events ==\n=== March ===\n* [[March 1]] – The [[Orvale Accord]] on river "
                "fishing quotas comes into force across [[Tessaly]].")
A = "The [[Lumen Institute]] opens a tidal research station in [[Dunmere]]."
B = "The [[Harbor League]] elects [[Mara Quill]] as its first chair."
C = "The [[Kestrel Bank]] announces a merger with [[Northwind Credit]] worth two billion."
C_REWORDED = ("The [[Kestrel Bank]] announces a merger with [[Northwind Credit]] worth "
              "three billion.")
D = "The [[Solace Party]] wins a by-election in [[Port Emry]]."
E = "The [[Tidewater Court]] rules that the [[Aurora Station]] lease is void."
F = "The [[Bellmoor Orchestra]] cancels its tour of [[Velland]] after a fire."
G = "The [[Aurora Station]] crew completes a repair of the [[Lumen Array]]."
H = "The [[Harbor League]] signs a trade pact with [[Port Emry]]."

BEFORE = {
    YEAR: YEAR_ARTICLE,
    MARCH.format(1): portal(1, A, B),
    MARCH.format(2): portal(2, C, D),
    MARCH.format(3): portal(3, E, F),
}


def plain(wikitext: str) -> str:
    """An event's text as the parser gives it: links shown by their label."""
    return wikitext.replace("[[", "").replace("]]", "")


def ids_by_text(out: Path) -> dict[str, str]:
    return {event.text: event.id for event in read_jsonl(out / "events.jsonl", Event)}


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-refresh")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with ScriptedLLM(AlgorithmResponder()) as server:
        yield server


def build(out: Path, wiki: MediaWikiServer, llm: ScriptedLLM, *extra: str) -> int:
    return main(["--out", str(out), "--wiki-api", wiki.api_url, "--wiki-interval", "0",
                 "--base-url", llm.base_url, "--model", "scripted", "--quiet", *extra])


def test_a_refresh_fetches_the_changes_keeps_ids_and_regenerates_stale_candidates(
    tmp_path: Path, llm: ScriptedLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    # --settle 100000: pages of 2024 fetched today count as recent, so they are re-checked.
    first = ["--cutoff", "2024-02-29", "--prompts", "paper", "--until", "2024-03-03", "--settle",
    "100000"]
    with MediaWikiServer(BEFORE) as wiki:
        assert build(out, wiki, llm, *first) == 0
        first_bodies = [json.dumps(body, sort_keys=True) for body in llm.requests]
        before_ids = ids_by_text(out)
        before = {c.event.text: c for c in read_jsonl(out / "candidates.jsonl", Candidate)}
        assert len(before_ids) == 7 and len(before) == 7
        # four pages, one request (the ground stage's article lookups come on top)
        assert len([r for r in wiki.requests_for("revisions") if "rvstart" not in r.params]) == 1

        wiki.edit(MARCH.format(2), portal(2, C_REWORDED, D))  # a new revision: one reworded
        wiki.edit(MARCH.format(3), portal(3, E))  # a removed event
        wiki.edit(MARCH.format(5), portal(5, G, H))  # a new day
        wiki.requests.clear()
        capsys.readouterr()
        assert build(out, wiki, llm, "--until", "2024-03-06", "--settle", "100000",
                     "--stage", "events") == 0

        rechecks, fetches = wiki.requests_for("info"), wiki.requests_for("revisions")
        assert len(wiki.requests) == 2 and len(rechecks) == 1 and len(fetches) == 1
        assert rechecks[0].titles == [YEAR, *(MARCH.format(d) for d in (1, 2, 3))]
        assert fetches[0].titles == [*(MARCH.format(d) for d in (4, 5, 6, 2, 3))]
        summary = capsys.readouterr().out

    assert "7 pages: 3 fetched, 2 already present, 2 missing, 0 failed; 4 recent pages " \
        "re-checked: 2 changed (fetched again); 2 API requests" in summary
    after_ids = ids_by_text(out)
    # Stable ids: unchanged events keep theirs, the reworded one keeps its first id.
    for text in (A, B, D, E, YEAR_ARTICLE.split(" – ")[1]):
        assert after_ids[plain(text)] == before_ids[plain(text)]
    assert after_ids[plain(C_REWORDED)] == before_ids[plain(C)]
    assert after_ids[plain(C_REWORDED)] != event_id(MARCH.format(2), plain(C_REWORDED))
    assert plain(F) not in after_ids

    report = RefreshReport.model_validate_json((out / "refresh.json").read_text())
    assert sorted(report.added) == sorted([after_ids[plain(G)], after_ids[plain(H)]])
    assert [(c.id, c.previous_text, c.text) for c in report.changed] == [
        (before_ids[plain(C)], plain(C), plain(C_REWORDED))]
    assert report.removed == [before_ids[plain(F)]]
    assert report.by_month["2024-03"].model_dump() == {"added": 2, "changed": 1, "removed": 1}
    assert report.previous_until == "2024-03-03" and report.until == "2024-03-06"
    assert set(report.pages_revised) == {MARCH.format(2), MARCH.format(3), MARCH.format(5)}
    assert report.stale_candidates == [before[plain(C)].id]
    assert report.orphaned_candidates == [before[plain(F)].id]
    assert "refresh: 2 events added, 1 changed, 1 removed since the previous events.jsonl " \
        "(window extended from 2024-03-03 to 2024-03-06)" in summary
    assert [e.model_dump() for e in load_run_info(out).extensions][0]["until"] == "2024-03-06"

    # Stale candidates are marked and held back before they are made again.
    with MediaWikiServer({}) as wiki:
        assert build(out, wiki, llm, "--stage", "validate") == 0
    failed = {c.id: [f.check for f in c.validation.failures]
              for c in read_jsonl(out / "candidates.jsonl", Candidate) if c.validation}
    assert STALE in failed[before[plain(C)].id] and STALE in failed[before[plain(F)].id]
    released = {item.id for item in read_jsonl(out / "cuqa.jsonl", CuqaItem)}
    assert before[plain(C)].id not in released and before[plain(F)].id not in released

    # A re-run of generate makes just those again (and the new events): no call is repeated.
    llm.requests.clear()
    with MediaWikiServer({}) as wiki:
        assert build(out, wiki, llm, "--stage", "generate") == 0
    second_bodies = [json.dumps(body, sort_keys=True) for body in llm.requests]
    assert not set(first_bodies) & set(second_bodies)
    # Two new events need four calls each; the reworded one only the two that read its text
    # (the unknown question, the merge): its passage and known question come from the cache.
    assert len(second_bodies) == len(set(second_bodies)) == 2 * 4 + 2
    after = {c.event.text: c for c in read_jsonl(out / "candidates.jsonl", Candidate)}
    assert set(after) == {*(plain(t) for t in (A, B, C_REWORDED, D, E, F, G, H)),
                          plain(YEAR_ARTICLE.split(" – ")[1])}
    regenerated = after[plain(C_REWORDED)]
    assert regenerated.id == before[plain(C)].id  # same event id, same seed: same candidate id
    assert regenerated.question != before[plain(C)].question
    for text in (A, B, D, E):  # untouched candidates are the very same records
        assert after[plain(text)].model_dump(exclude={"validation"}) == \
            before[plain(text)].model_dump(exclude={"validation"})
    prompts = [body["messages"][-1]["content"] for body in llm.requests]
    assert sum("According to the unknown event" in p for p in prompts) == 3
    generated = capsys.readouterr().out
    assert "3 new candidates" in generated and "1 of them stale" in generated
    assert "10 calls, 2 cache hits" in generated

    with MediaWikiServer({}) as wiki:
        assert build(out, wiki, llm, "--stage", "validate") == 0
    final = {c.id: c for c in read_jsonl(out / "candidates.jsonl", Candidate)}
    assert STALE not in [f.check for f in final[regenerated.id].validation.failures]
    assert STALE in [f.check for f in final[before[plain(F)].id].validation.failures]


def test_a_rerun_without_changes_keeps_the_last_refresh_record(tmp_path: Path, llm) -> None:
    out = tmp_path / "run"
    window = ["--cutoff", "2024-02-29", "--prompts", "paper", "--until", "2024-03-03", "--stage",
    "events"]
    with MediaWikiServer(BEFORE) as wiki:
        assert build(out, wiki, llm, *window) == 0
        wiki.edit(MARCH.format(3), portal(3, E))
        assert build(out, wiki, llm, *window, "--settle", "100000") == 0
        recorded = (out / "refresh.json").read_text()
        assert build(out, wiki, llm, *window, "--settle", "100000") == 0
    assert (out / "refresh.json").read_text() == recorded
    assert RefreshReport.model_validate_json(recorded).removed == [
        event_id(MARCH.format(3), plain(F))]


def test_settled_pages_are_not_rechecked(tmp_path: Path, llm) -> None:
    """With the default --settle, pages fetched long after their date are never asked about
    again: a re-run asks only for the pages that were missing."""
    out = tmp_path / "run"
    window = ["--cutoff", "2024-02-29", "--prompts", "paper", "--until", "2024-03-04", "--stage",
    "fetch"]
    with MediaWikiServer(BEFORE) as wiki:
        assert build(out, wiki, llm, *window) == 0
        wiki.requests.clear()
        assert build(out, wiki, llm, *window) == 0
        assert [r.titles for r in wiki.requests] == [[MARCH.format(4)]]


def test_a_page_is_settled_some_days_after_its_date() -> None:
    assert page_date(MARCH.format(5)) == date(2024, 3, 5)
    assert page_date(YEAR) == date(2024, 12, 31)  # a year article changes all year
    assert page_date("Main Page") is None
    assert not _settled(MARCH.format(5), "2024-03-18T23:00:00+00:00", 14)
    assert _settled(MARCH.format(5), "2024-03-19T00:00:00+00:00", 14)
    assert not _settled(YEAR, "2024-12-31T00:00:00+00:00", 14)
    assert not _settled(MARCH.format(5), None, 14)  # unknown fetch time: check again
    today = datetime.now(timezone.utc)
    recent = f"Portal:Current events/{today:%Y} {today:%B} {today.day}"
    assert not _settled(recent, today.isoformat(), 14)
    assert _settled(recent, today.isoformat(), 0)


def test_an_earlier_until_is_refused_and_a_later_one_is_recorded(tmp_path: Path, llm,
                                                                  capsys) -> None:
    out = tmp_path / "run"
    window = ["--cutoff", "2024-02-29", "--prompts", "paper", "--stage", "fetch"]
    with MediaWikiServer(BEFORE) as wiki:
        assert build(out, wiki, llm, *window, "--until", "2024-03-03") == 0
        capsys.readouterr()
        assert build(out, wiki, llm, *window, "--until", "2024-03-02") == 2
        err = capsys.readouterr().err
        assert err == ("cuqa-build: error: --until 2024-03-02 is before this run's last day "
                       "2024-03-03: a run's window only grows (a refresh extends it); use "
                       "another --out for a shorter window\n")
        assert build(out, wiki, llm, "--stage", "fetch") == 0  # the recorded window is reused
        assert load_run_info(out).until == "2024-03-03" and not load_run_info(out).extensions
        assert build(out, wiki, llm, "--stage", "fetch", "--until", "today") == 0
    info = load_run_info(out)
    assert info.until == date.today().isoformat()
    assert [(e.previous_until, e.until) for e in info.extensions] == [
        ("2024-03-03", date.today().isoformat())]


def _event(title: str, day: int, text: str) -> Event:
    return Event(id=event_id(title, text), date=date(2024, 3, day), text=text,
                 source=EventSource(title=title, revid=1, url="about:blank"))


def test_ids_follow_rewordings_but_not_different_news() -> None:
    page = MARCH.format(2)
    old = [_event(page, 2, "The bank announces a merger worth two billion."),
           _event(page, 2, "A ferry strike halts crossings to the islands."),
           _event(page, 2, "The orchestra cancels its tour.")]
    new = [_event(page, 2, "A ferry strike halts crossings to the islands."),
           _event(page, 2, "The bank announces a merger worth three billion euros."),
           _event(page, 2, "A new museum of glass opens in the old harbour.")]
    carried = carry_ids(old, new)
    assert [e.id for e in carried] == [old[1].id, old[0].id, new[2].id]
    # The same news on another day is not the same event.
    moved = carry_ids(old, [_event(page, 3, "The orchestra cancels its tour today.")])
    assert moved[0].id != old[2].id
    # An edit reverted: the first wording is the same event again.
    reverted = carry_ids(carried, [_event(page, 2, old[0].text)])
    assert reverted[0].id == old[0].id


def test_a_new_event_whose_hash_a_reworded_event_kept_gets_its_own_id() -> None:
    page = MARCH.format(2)
    first = _event(page, 2, "The bank announces a merger worth two billion.")
    reworded = carry_ids([first], [_event(page, 2, "The bank announces a merger worth "
                                                   "three billion.")])
    both = carry_ids(reworded, [_event(page, 2, "The bank announces a merger worth three "
                                                "billion."), _event(page, 2, first.text)])
    assert both[0].id == first.id
    assert both[1].id != first.id and len({e.id for e in both}) == 2


def test_latest_revids_asks_50_titles_a_request_without_content() -> None:
    titles = [MARCH.format(day) for day in range(1, 4)] + [f"Page {n}" for n in range(60)]
    pages = {title: f"text of {title}" for title in titles if title != "Page 7"}
    with MediaWikiServer(pages) as wiki, MediaWikiClient(wiki.api_url, min_interval_s=0) as client:
        edited = wiki.edit("Page 3", "a new revision")
        wiki.delete("Page 5")
        latest = client.latest_revids([*titles, "portal:Current_events/2024_March_2"])
        assert [len(r.titles) for r in wiki.requests] == [50, 14]
        assert all(r.params["prop"] == "info" and "rvprop" not in r.params
                   for r in wiki.requests)
    assert latest["Page 3"] == edited
    assert latest["Page 5"] is None and latest["Page 7"] is None  # deleted, never existed
    assert latest["Page 0"] == wiki.current["Page 0"]
    # A title asked in another spelling is answered under the spelling asked.
    assert latest["portal:Current_events/2024_March_2"] == latest[MARCH.format(2)]
