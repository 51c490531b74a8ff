"""One api.php request, politely (SPEC 2.1), as Wikimedia asks of API users: a descriptive
User-Agent with a contact, `maxlag=5`, gzip, one request at a time with a minimum interval,
`Retry-After` honoured (else exponential back-off) on 429, 5xx and maxlag errors, timeouts, and a
bounded number of retries ending in a `WikiError` that names the pages (a `WikiUnreachable`
after a few quick ones while no request has been answered yet). The queries are `client.py`'s.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any

import requests

from cuqa_builder import __version__
from cuqa_builder.errors import CuqaError

log = logging.getLogger(__name__)

PROJECT_URL = "https://github.com/cuqa-builder/cuqa-builder"
MAXLAG_S = 5
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Retries of a request no answer ever came back to (a closed port, no network, a wrong host):
# a blip gets these; the full back-off (31 s at the defaults) is for a wiki that was reached.
FIRST_CONTACT_RETRIES = 2
_NAMED_IN_ERRORS = 3  # an error lists this many page titles, then "and N more"


class WikiError(CuqaError, RuntimeError):
    """A request that failed for good (after the bounded retries, or at once if not retryable);
    `code` is the API's error code when the wiki refused it (`moduledisabled`, `nosuchrevid`)."""

    def __init__(self, reason: str, titles: Sequence[str] = (), code: str | None = None) -> None:
        self.reason = reason
        self.titles = list(titles)
        self.code = code
        super().__init__(f"{reason} (pages: {describe_titles(titles)})" if titles else reason)


class WikiUnreachable(WikiError):
    """No request of this client has been answered, and this one could not connect either:
    the wiki cannot be reached (offline, a wrong --wiki-api), so every other request would fail
    alike. Those who would go on page by page stop instead."""



@dataclass(frozen=True)
class _Failure:
    reason: str
    retryable: bool
    retry_after_s: float | None = None
    code: str | None = None  # the API's error code, when it answered with one
    unanswered: bool = False  # no HTTP answer came back: no connection, or a timeout


def describe_titles(titles: Sequence[str]) -> str:
    named = ", ".join(titles[:_NAMED_IN_ERRORS])
    rest = len(titles) - _NAMED_IN_ERRORS
    return f"{named} and {rest} more" if rest > 0 else named


def resolve_contact(contact: str | None) -> str:
    """`--contact`, else $CUQA_CONTACT, else the project's URL."""
    for candidate in (contact, os.environ.get("CUQA_CONTACT")):
        if candidate and candidate.strip():
            return candidate.strip()
    return PROJECT_URL


def user_agent(contact: str | None = None) -> str:
    """`tool/version (contact) library/version`, the form Wikimedia's User-Agent policy asks for."""
    library = f"python-requests/{requests.__version__}"
    return f"cuqa-builder/{__version__} ({resolve_contact(contact)}) {library}"


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())



class ApiSession:
    """Synchronous and serial on purpose: a lock makes even threaded callers take turns."""

    def __init__(
        self,
        api_url: str,
        *,
        contact: str | None = None,
        min_interval_s: float = 1.0,
        timeout_s: float = 30.0,
        max_retries: int = 5,
        backoff_s: float = 1.0,
        max_wait_s: float = 120.0,
    ) -> None:
        self.api_url = api_url
        self.min_interval_s = min_interval_s
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self.requests_made = 0
        self.answered = 0  # requests the server answered (with any HTTP status)
        self.session = requests.Session()
        self.session.headers.update({"User-Agent": user_agent(contact), "Accept-Encoding": "gzip"})
        self._lock = threading.Lock()
        self._not_before = 0.0  # monotonic time before which no request may start

    def close(self) -> None:
        self.session.close()


    # --- generic calls ------------------------------------------------------------------

    def query(self, params: Mapping[str, str]) -> dict[str, Any]:
        """One `action=query` request with the client's politeness, retries and errors."""
        return self._call({**params, "action": "query"})

    def iter_query(self, params: Mapping[str, str]) -> Iterator[dict[str, Any]]:
        """`query`, then every continuation of it until the API says it is complete."""
        continuation: dict[str, str] = {}
        while True:
            data = self.query({**params, **continuation})
            yield data
            if "continue" not in data:
                return
            continuation = {key: str(value) for key, value in data["continue"].items()}

    # --- one request, politely ------------------------------------------------------------

    def _call(self, params: dict[str, str], pages: Sequence[str] = ()) -> dict[str, Any]:
        """One request; a WikiError names `pages`, else the titles asked for."""
        full = {**params, "format": "json", "formatversion": "2", "maxlag": str(MAXLAG_S)}
        titles = list(pages) or (params["titles"].split("|") if params.get("titles") else [])
        retries = 0
        while True:
            outcome = self._attempt(full)
            if not isinstance(outcome, _Failure):
                return outcome
            if not outcome.retryable:
                raise WikiError(outcome.reason, titles, outcome.code)
            if outcome.unanswered and not self.answered and retries == min(
                    self.max_retries, FIRST_CONTACT_RETRIES):
                raise WikiUnreachable(f"the wiki cannot be reached at {self.api_url}: gave up "
                                      f"after {retries + 1} attempts: {outcome.reason}", titles)
            if retries == self.max_retries:
                raise WikiError(f"gave up after {retries + 1} attempts: {outcome.reason}", titles)
            wait = self._retry_wait(retries, outcome.retry_after_s)
            # Before any answer, the quick retries end in the one error that counts them.
            log.log(logging.INFO if self.answered else logging.DEBUG,
                    "MediaWiki API: %s; retrying in %.1f s", outcome.reason, wait)
            self._defer(wait)
            retries += 1

    def _retry_wait(self, attempt: int, retry_after_s: float | None) -> float:
        wait = retry_after_s if retry_after_s is not None else self.backoff_s * 2**attempt
        return min(wait, self.max_wait_s)

    def _defer(self, wait_s: float) -> None:
        with self._lock:
            self._not_before = max(self._not_before, time.monotonic() + wait_s)

    def _attempt(self, params: dict[str, str]) -> dict[str, Any] | _Failure:
        with self._lock:
            delay = self._not_before - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                response = self.session.get(self.api_url, params=params, timeout=self.timeout_s)
            except requests.Timeout:
                return _Failure(f"no answer within {self.timeout_s:g} s", retryable=True,
                                unanswered=True)
            except requests.ConnectionError as exc:
                return _Failure(f"connection failed ({_os_reason(exc)})", retryable=True,
                                unanswered=True)
            finally:
                self.requests_made += 1
                self._not_before = time.monotonic() + self.min_interval_s
            self.answered += 1
        return _interpret(response)


def _interpret(response: requests.Response) -> dict[str, Any] | _Failure:
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    if response.status_code in RETRY_STATUSES:
        return _Failure(f"HTTP {response.status_code}", retryable=True, retry_after_s=retry_after)
    if response.status_code != 200:
        return _Failure(f"HTTP {response.status_code} from the API", retryable=False)
    try:
        data = response.json()
    except ValueError:
        return _Failure("the answer is not JSON", retryable=True, retry_after_s=retry_after)
    if not isinstance(data, dict):
        return _Failure("the answer is not a JSON object", retryable=True)
    error = data.get("error")
    if isinstance(error, dict):
        code, info = error.get("code", "?"), error.get("info", "")
        # maxlag comes as HTTP 200 with Retry-After: the servers are lagging, wait and retry.
        return _Failure(f"API error {code}: {info}", retryable=code == "maxlag",
                        retry_after_s=retry_after, code=str(code))
    return data


def _os_reason(exc: BaseException) -> str:
    """The operating system's words ("Connection refused") from requests' wrapped errors."""
    cause: object = exc
    for _ in range(8):  # requests -> urllib3 -> socket: a few levels at most
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        if not isinstance(cause, BaseException):
            break
        wrapped = cause.args[0] if cause.args else None
        cause = cause.__cause__ or cause.__context__ or getattr(cause, "reason", None) or wrapped
    return type(exc).__name__



def log_warnings(data: dict[str, Any]) -> None:
    for module, warning in data.get("warnings", {}).items():
        text = warning.get("warnings", warning) if isinstance(warning, dict) else warning
        log.warning("MediaWiki API warning (%s): %s", module, text)
