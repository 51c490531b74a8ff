"""A batch line's answer read as a live call's: the result the waiting call gets and the row
the call cache keeps, priced at batch prices, counted, and with our key taken out."""

from __future__ import annotations

import json
from typing import Any

from cuqa_builder.llm.bodies import check_shape
from cuqa_builder.llm.cache import CallRow
from cuqa_builder.llm.cache_batches import SubmittedRequest
from cuqa_builder.llm.prices import PriceTable
from cuqa_builder.llm.secrets import Scrubber
from cuqa_builder.llm.settings import LLMSettings
from cuqa_builder.llm.types import ChatResult, GatewayStats


class BatchAnswers:
    """The `AnswerSink` of one model's rounds (`batch.ledger`)."""

    def __init__(self, model: str, settings: LLMSettings, prices: PriceTable, scrubber: Scrubber,
                 stats: GatewayStats) -> None:
        self.model = model
        self._settings = settings
        self._prices = prices
        self._scrubber = scrubber
        self._stats = stats

    def batch_answer(
        self, submitted: SubmittedRequest, body: dict[str, Any]
    ) -> tuple[ChatResult, CallRow]:
        """A batch line's answer as a live call's result (at batch prices) and its cache row;
        raises like `check_shape` when the body is no chat completion."""
        check_shape(body)
        raw = json.dumps(body, ensure_ascii=False)
        stored = self._scrubber.without_key(raw)
        if stored != raw:
            body = json.loads(stored)  # the caller gets what the cache keeps (as a live call's)
        result = ChatResult.from_body(body, self.model, latency_s=0.0, cached=False)
        if self._settings.batch_mode == "api":
            result.cost = self._prices.cost(
                self.model, result.prompt_tokens, result.completion_tokens, batch=True)
        # else an offline engine answered the files: it has no price, and its calls cost 0
        self._stats.count(result)
        row = CallRow(
            key=submitted.key, model=self.model, canonical_request=submitted.request,
            response_json=stored,
            prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens,
            latency_s=0.0, cost=result.cost, template=submitted.template,
            template_hash=submitted.template_hash,
        )
        return result, row

