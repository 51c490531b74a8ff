"""The MediaWiki client against a local api.php stand-in: politeness, batching, failures."""

from __future__ import annotations

import threading
import time

import pytest

from cuqa_builder import __version__
from cuqa_builder.testing.mediawiki_server import Fault, MediaWikiServer
from cuqa_builder.wiki.api import (
    PROJECT_URL,
    WikiError,
    WikiUnreachable,
    parse_retry_after,
    user_agent,
)
from cuqa_builder.wiki.client import MediaWikiClient

PORTAL = "Portal:Current events/2023 May {}"


def many_pages(count: int) -> dict[str, str]:
    return {PORTAL.format(day): f"news of day {day}" for day in range(1, count + 1)}


def make_client(server: MediaWikiServer, **overrides: float) -> MediaWikiClient:
    settings = {"min_interval_s": 0.0, "backoff_s": 0.05, "timeout_s": 5.0, **overrides}
    return MediaWikiClient(server.api_url, contact="tests@example.org", **settings)


def fetch_all(client: MediaWikiClient, titles: list[str]):
    pages, missing, failed = {}, {}, {}
    for batch in client.fetch_titles(titles):
        pages.update({page.meta.title: page for page in batch.pages})
        missing.update({p.title: p.reason for p in batch.missing})
        failed.update({p.title: p.reason for p in batch.failed})
    return pages, missing, failed


def gaps(server: MediaWikiServer) -> list[float]:
    arrivals = [request.arrived for request in server.requests]
    return [later - earlier for earlier, later in zip(arrivals, arrivals[1:], strict=False)]


# --- politeness -----------------------------------------------------------------------------


def test_user_agent_names_tool_version_contact_and_library(monkeypatch):
    monkeypatch.delenv("CUQA_CONTACT", raising=False)
    assert user_agent("me@example.org").startswith(
        f"cuqa-builder/{__version__} (me@example.org) python-requests/"
    )
    assert f"({PROJECT_URL})" in user_agent()
    monkeypatch.setenv("CUQA_CONTACT", "env@example.org")
    assert "(env@example.org)" in user_agent()
    assert "(flag@example.org)" in user_agent("flag@example.org")


def test_every_request_is_polite_and_batched_by_50():
    pages = many_pages(31) | {f"Page {n}": f"text {n}" for n in range(89)}
    with MediaWikiServer(pages) as wiki, make_client(wiki) as client:
        found, missing, failed = fetch_all(client, list(pages))

    assert len(found) == 120 and not missing and not failed
    assert [len(request.titles) for request in wiki.requests] == [50, 50, 20]
    assert client.requests_made == 3
    for request in wiki.requests:
        assert request.params["format"] == "json"
        assert request.params["formatversion"] == "2"
        assert request.params["maxlag"] == "5"
        assert request.params["rvprop"] == "ids|timestamp|content"
        assert request.params["rvslots"] == "main"
        assert "gzip" in request.headers["Accept-Encoding"]
        assert request.headers["User-Agent"].startswith(
            f"cuqa-builder/{__version__} (tests@example.org) python-requests/"
        )
    # the fake answered gzip-compressed; the content came through intact
    assert found[PORTAL.format(7)].wikitext == "news of day 7"


def test_never_two_requests_in_flight_even_from_several_threads():
    pages = many_pages(6)
    with MediaWikiServer(pages) as wiki, make_client(wiki) as client:
        wiki.fail_next(*[Fault.slow(0.1)] * 6)
        results: list[dict] = []
        threads = [
            threading.Thread(target=lambda t=t: results.append(fetch_all(client, [t])[0]))
            for t in pages
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    assert len(wiki.requests) == 6 and sum(len(found) for found in results) == 6
    assert wiki.max_in_flight == 1


def test_minimum_interval_between_requests():
    with MediaWikiServer(many_pages(3)) as wiki, make_client(wiki, min_interval_s=0.2) as client:
        for day in (1, 2, 3):
            client.query({"prop": "revisions", "titles": PORTAL.format(day)})

    assert len(wiki.requests) == 3
    assert all(gap >= 0.19 for gap in gaps(wiki))


# --- answers ----------------------------------------------------------------------------------


def test_pages_carry_revid_and_timestamp_and_missing_pages_are_reported():
    pages = {"2023": (555, "2024-02-03T04:05:06Z", "== Events ==")}
    with MediaWikiServer(pages) as wiki, make_client(wiki) as client:
        found, missing, failed = fetch_all(client, ["2023", "Portal:Current events/2099 May 1"])

    meta = found["2023"].meta
    assert (meta.revid, meta.timestamp, found["2023"].wikitext) == (
        555, "2024-02-03T04:05:06Z", "== Events =="
    )
    assert missing == {"Portal:Current events/2099 May 1": "page does not exist"}
    assert not failed


def test_a_revision_with_hidden_text_is_a_failure_not_a_crash():
    pages = {"2023": (9, "2024-01-01T00:00:00Z", None), "2024": "year"}
    with MediaWikiServer(pages) as wiki, make_client(wiki) as client:
        found, missing, failed = fetch_all(client, ["2023", "2024"])

    assert list(found) == ["2024"] and not missing
    assert failed == {"2023": "content hidden"}


def test_continuation_is_followed_until_the_batch_is_complete():
    pages = many_pages(5)
    with MediaWikiServer(pages, max_revisions_per_reply=2) as wiki, make_client(wiki) as client:
        found, missing, failed = fetch_all(client, list(pages))

    assert {title: page.wikitext for title, page in found.items()} == pages
    assert not missing and not failed
    assert len(wiki.requests) == 3
    assert "rvcontinue" not in wiki.requests[0].params
    assert all(r.params["continue"] == "||" and r.params["rvcontinue"] for r in wiki.requests[1:])
    assert all(r.titles == list(pages) for r in wiki.requests)


def test_normalised_and_redirected_titles_keep_the_title_asked_for():
    pages = {"Portal:Current events/2023 May 1": "may day", "2023": "year"}
    redirects = {"Year 2023": "2023"}
    with MediaWikiServer(pages, redirects=redirects) as wiki, make_client(wiki) as client:
        asked = ["portal:Current_events/2023 May 1", "Year 2023", "2023"]
        found, missing, failed = fetch_all(client, asked)

    assert {title: page.wikitext for title, page in found.items()} == {
        "portal:Current_events/2023 May 1": "may day", "Year 2023": "year", "2023": "year",
    }
    assert not missing and not failed
    assert wiki.requests[0].params["redirects"] == "1"


def test_revisions_are_fetched_by_revid_even_after_an_edit():
    with MediaWikiServer({"2023": (100, "2023-06-01T00:00:00Z", "old text")}) as wiki:
        new = wiki.edit("2023", "new text")
        with make_client(wiki) as client:
            batches = list(client.fetch_revisions({"2023": 100, "Page that never was": 99999}))

    (batch,) = batches
    (page,) = batch.pages
    assert (page.meta.title, page.meta.revid, page.wikitext) == ("2023", 100, "old text")
    assert new != 100
    assert [(p.title, p.reason) for p in batch.missing] == [
        ("Page that never was", "revision 99999 does not exist")
    ]
    assert wiki.requests[0].params["revids"] == "100|99999"


# --- failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "min_wait_s"),
    [
        (Fault.maxlag(retry_after=1), 0.95),  # Retry-After honoured
        (Fault.too_many_requests(retry_after=1), 0.95),
        (Fault.server_error(500), 0.05),  # no Retry-After: exponential back-off from 0.05 s
        (Fault.server_error(503), 0.05),
        (Fault.not_json(), 0.05),
        (Fault.slow(1.0), 0.2),  # the client gives up after its 0.2 s timeout, then retries
    ],
    ids=["maxlag", "429", "500", "503", "not-json", "timeout"],
)
def test_an_injected_failure_is_retried_and_recovered(fault, min_wait_s):
    with MediaWikiServer(many_pages(1)) as wiki, make_client(wiki, timeout_s=0.2) as client:
        wiki.fail_next(fault)
        found, missing, failed = fetch_all(client, [PORTAL.format(1)])

    assert list(found) == [PORTAL.format(1)] and not missing and not failed
    assert len(wiki.requests) == 2
    assert gaps(wiki)[0] >= min_wait_s


def test_back_off_doubles_between_retries():
    with MediaWikiServer(many_pages(1)) as wiki, make_client(wiki, backoff_s=0.1) as client:
        wiki.fail_next(Fault.server_error(), Fault.server_error(), Fault.server_error())
        client.query({"prop": "revisions", "titles": PORTAL.format(1)})

    first, second, third = gaps(wiki)
    assert first >= 0.1 and second >= 0.2 and third >= 0.4


def test_retry_after_is_capped_by_max_wait():
    with MediaWikiServer(many_pages(1)) as wiki, make_client(wiki, max_wait_s=0.1) as client:
        wiki.fail_next(Fault.maxlag(retry_after=30))
        started = time.monotonic()
        client.query({"prop": "revisions", "titles": PORTAL.format(1)})

    assert time.monotonic() - started < 5


def test_bounded_retries_end_in_an_error_naming_the_pages_and_reason():
    titles = [PORTAL.format(day) for day in (1, 2)]
    with MediaWikiServer(many_pages(2)) as wiki, make_client(wiki, max_retries=2) as client:
        wiki.fail_next(*[Fault.server_error()] * 3)
        with pytest.raises(WikiError) as caught:
            client.query({"prop": "revisions", "titles": "|".join(titles)})

    assert len(wiki.requests) == 3
    assert caught.value.titles == titles
    message = str(caught.value)
    assert "gave up after 3 attempts: HTTP 500" in message
    assert PORTAL.format(1) in message and PORTAL.format(2) in message


def test_a_failed_batch_is_reported_and_the_next_batch_still_fetched():
    pages = many_pages(31) | {f"Page {n}": "x" for n in range(29)}
    with MediaWikiServer(pages) as wiki, make_client(wiki, max_retries=1) as client:
        wiki.fail_next(Fault.too_many_requests(retry_after=0), Fault.server_error(502))
        found, missing, failed = fetch_all(client, list(pages))

    assert len(failed) == 50 and len(found) == 10 and not missing
    assert set(failed.values()) == {"gave up after 2 attempts: HTTP 502"}
    assert len(wiki.requests) == 3


def test_api_errors_other_than_maxlag_are_not_retried():
    titles = "|".join(f"Page {n}" for n in range(51))
    with (
        MediaWikiServer({}) as wiki,
        make_client(wiki) as client,
        pytest.raises(WikiError, match="API error toomanyvalues: Too many values"),
    ):
        client.query({"prop": "revisions", "titles": titles})

    assert len(wiki.requests) == 1


def test_an_unreachable_server_is_a_clear_error():
    with MediaWikiServer({}) as wiki:
        url = wiki.api_url
    client = MediaWikiClient(url, min_interval_s=0, backoff_s=0.01, max_retries=1)
    refused = r"gave up after 2 attempts: connection failed \(Connection refused\)"
    with pytest.raises(WikiError, match=refused):
        client.query({"prop": "revisions", "titles": "2023"})
    assert client.requests_made == 2


def test_a_wiki_never_reached_stops_the_fetch_after_three_quick_attempts():
    """Issue 32: offline, each of a window's batches failed after 6 attempts and 31 s of
    back-off, 14 minutes in all. A client no request of which was answered gives up at once."""
    with MediaWikiServer({}) as wiki:
        url = wiki.api_url
    client = MediaWikiClient(url, min_interval_s=0, backoff_s=0.01)  # 5 retries once reached
    with pytest.raises(WikiUnreachable, match=f"the wiki cannot be reached at {url}: gave up "
                       r"after 3 attempts: connection failed \(Connection refused\)"):
        list(client.fetch_titles(list(many_pages(120))))
    assert client.requests_made == 3


def test_a_wiki_that_answered_before_goes_on_batch_by_batch():
    with MediaWikiServer(many_pages(60)) as wiki, make_client(wiki, max_retries=1) as client:
        batches = client.fetch_titles(list(many_pages(60)))
        assert len(next(batches).pages) == 50
    second = next(batches)  # the server is gone: this batch fails, the fetch goes on
    assert {problem.reason for problem in second.failed} == {
        "gave up after 2 attempts: connection failed (Connection refused)"}


def test_retry_after_accepts_seconds_and_http_dates():
    assert parse_retry_after("5") == 5.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: go now
