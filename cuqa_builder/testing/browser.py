"""Headless Chromium for tests that look at Label Studio's pages as an annotator would.

The only module that imports Playwright. It drives Debian's `chromium` (installed by
`scripts/install-chromium.sh`) over the DevTools protocol; Playwright's own browser downloads are
never used. `$CUQA_CHROMIUM` points at another Chromium build.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cuqa_builder.testing.labelstudio_server import LabelStudioServer

CHROMIUM_ENV = "CUQA_CHROMIUM"
LAPTOP = {"width": 1366, "height": 768}
# Running as root (CI containers) needs --no-sandbox; a small /dev/shm needs the other flag.
_FLAGS = ["--no-sandbox", "--disable-dev-shm-usage"]
TIMEOUT_MS = 60_000  # the labeling page's first load compiles a lot of JavaScript on 2 cores


class BrowserUnavailable(RuntimeError):
    """No Chromium, or no Playwright, on this machine."""


def chromium_executable() -> Path:
    found = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium")
    if not found or not Path(found).is_file():
        raise BrowserUnavailable(
            "chromium is not installed (as root: scripts/install-chromium.sh, or apt-get install "
            "chromium fonts-dejavu-core; or set $CUQA_CHROMIUM to a Chromium)"
        )
    return Path(found)


@dataclass(frozen=True)
class Box:
    """Where an element is drawn, in CSS pixels of the viewport."""

    x: float
    y: float
    width: float
    height: float

    @property
    def bottom(self) -> float:
        return self.y + self.height

    @property
    def right(self) -> float:
        return self.x + self.width


@contextmanager
def laptop_page(viewport: dict[str, int] | None = None) -> Iterator[object]:
    """A Playwright page in headless Chromium at a laptop's screen size."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        message = f"playwright is not installed ({exc}): pip install -e .[test]"
        raise BrowserUnavailable(message) from None
    executable = chromium_executable()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=_FLAGS)
        try:
            page = browser.new_page(viewport=viewport or LAPTOP)
            page.set_default_timeout(TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def log_in(page, server: LabelStudioServer) -> None:  # noqa: ANN001 (a Playwright Page)
    """Log in through Label Studio's own form, as the admin user the launcher created."""
    page.goto(f"{server.url}/user/login/")
    page.fill("input[name=email]", server.username)
    page.fill("input[name=password]", server.password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/user/login" not in url)


def box_of(locator) -> Box:  # noqa: ANN001 (a Playwright Locator)
    found = locator.bounding_box()
    if found is None:
        raise AssertionError(f"{locator} is not drawn")
    return Box(**found)
