"""Live Wikipedia search as a retriever: `list=search` for the titles, then their intro extracts.

Goes through `MediaWikiClient`, so searches share its politeness (one request at a time, maxlag,
back-off). Each search costs two API requests; results keep the search engine's order.
"""

from __future__ import annotations

from typing import Any

from cuqa_builder.retrieval.types import Passage, RetrievalError
from cuqa_builder.wiki.api import WikiError
from cuqa_builder.wiki.client import MediaWikiClient


class WikiSearchRetriever:
    name = "wiki"

    def __init__(self, client: MediaWikiClient) -> None:
        self.client = client

    def search(self, query: str, k: int) -> list[Passage]:
        if not query.strip() or k <= 0:
            return []
        try:
            return self._search(query, k)
        except WikiError as exc:  # the client already retried: this search is lost
            raise RetrievalError(f"Wikipedia search failed: {exc}") from None

    def _search(self, query: str, k: int) -> list[Passage]:
        found = self.client.query(
            {"list": "search", "srsearch": query, "srlimit": str(k), "srnamespace": "0",
             "srprop": ""}
        )
        titles = [hit["title"] for hit in found.get("query", {}).get("search", [])][:k]
        if not titles:
            return []
        extracts = self._intro_extracts(titles)
        return [
            Passage(id=f"wiki:{title}", title=title, text=extracts[title])
            for title in titles
            if extracts.get(title)
        ]

    def _intro_extracts(self, titles: list[str]) -> dict[str, str]:
        """Search hits are canonical page titles, so the extracts come back under the same."""
        data = self.client.query(
            {"prop": "extracts", "exintro": "1", "explaintext": "1", "titles": "|".join(titles),
             "exlimit": str(len(titles))}
        )
        pages: list[dict[str, Any]] = data.get("query", {}).get("pages", [])
        return {page["title"]: (page.get("extract") or "").strip() for page in pages}
