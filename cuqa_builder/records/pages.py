"""The fetch stage's records: a page's wikitext with its metadata (`pages/`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from cuqa_builder.records.base import Record


class PageMeta(Record):
    """Sidecar `NAME.json` of a snapshot page."""

    title: str = Field(min_length=1)
    revid: int = Field(description="MediaWiki revision id; hand-written pages use placeholders "
                       "from 1")
    timestamp: str
    sha256: str | None = None
    fetched: str | None = Field(
        None, description="when the fetch stage got this revision or last saw it was still the "
        "latest (ISO, UTC): a refresh re-checks pages fetched soon after their date"
    )
    kind: Literal["article"] | None = Field(
        default=None, description="`article`: an entity's article as of the cutoff (absent: an "
        "event page, a year article or a Current events day)",
    )
    redirect: str | None = Field(
        default=None, description="the title asked for, when a redirect led to this article"
    )
    api: str | None = Field(
        default=None, description="api.php the revision came from; absent for hand-written pages, "
        "whose revids are placeholders",
    )
    html_sha256: str | None = Field(
        default=None, description="sha256 of `NAME.html`, MediaWiki's rendering of the revision "
        "(`action=parse`), stored beside the wikitext of an article the ground stage fetched",
    )

    @field_validator("revid")
    @classmethod
    def _a_revision_id(cls, revid: int) -> int:
        if revid < 1:
            raise ValueError(f"a revision id is 1 or more, not {revid} (hand-written pages "
                             "number theirs from 1)")
        return revid


class Page(Record):
    meta: PageMeta
    wikitext: str
    html: str | None = None  # MediaWiki's rendering of the revision, when it was fetched
    # why the rendering its sidecar names was not read (missing, changed, not UTF-8): the page
    # is then read from its wikitext, as one stored without a rendering
    html_unread: str | None = None
