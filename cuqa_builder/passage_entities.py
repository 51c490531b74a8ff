"""spaCy NER on the known passages of a run, off the event loop and remembered per passage (the
paper recipe's known entity is drawn among them)."""

from __future__ import annotations

import asyncio
import importlib
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from cuqa_builder.ner import EntityExtractor, Token, parse_tokens
from cuqa_builder.ner_memo import NerMemo
from cuqa_builder.records.events import Entity


class PassageEntities:
    """spaCy NER on known passages, off the event loop, one passage at a time; each passage's
    entities are kept (`NER_MEMO`), so a resumed run does not find them again."""

    def __init__(self, model_name: str, memo_path: Path) -> None:
        self.model_name = model_name
        self._memo_path = memo_path
        self._memo: NerMemo | None = None  # opened by the first passage (none in AAB-only runs)
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spacy")
        self._pipeline: Future[EntityExtractor] | None = None

    def start(self) -> None:
        """Import spaCy and load the pipeline in the background while the first calls run.

        spaCy imports the legacy `httpx` package, which the openai client looks up in
        `sys.modules` while building every request: imported from another thread, it could be
        seen half-initialised and the request would fail. So `httpx` alone is imported here,
        on the event loop's thread (~50 ms), and the rest of spaCy (~1 s) off it.
        """
        if self._pipeline is None:
            importlib.import_module("httpx")
            self._pipeline = self._thread.submit(EntityExtractor, self.model_name)

    def _find(self, text: str) -> list[Entity]:
        assert self._pipeline is not None
        assert self._memo is not None
        found = self._pipeline.result().for_texts([text])[0]
        self._memo.put(text, found)
        return found

    async def parse(self, text: str) -> list[Token]:
        """An event sentence's dependency parse (the connected recipe's fallback description),
        on the same thread as NER."""
        return await asyncio.get_running_loop().run_in_executor(
            self._thread, parse_tokens, text, self.model_name)

    async def __call__(self, text: str) -> list[Entity]:
        if self._memo is None:
            self._memo = NerMemo(self._memo_path, pipeline=self.model_name)
        found = self._memo.get(text)
        if found is not None:
            return found
        self.start()
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._find, text)

    def close(self) -> None:
        self._thread.shutdown(wait=False, cancel_futures=True)
        if self._memo is not None:
            self._memo.close()
