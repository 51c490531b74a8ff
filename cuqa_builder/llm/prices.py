"""What a call costs: USD per million input/output tokens, per model.

The built-in figures are list prices as published when this table was written; they change, so
`--prices FILE` (JSON `{"model": {"input": x, "output": y}}`) overrides or extends them. A dated
model id (`gpt-4o-mini-2024-07-18`) takes the price of its longest listed prefix. Embedded models
cost nothing. An unknown model costs 0 with one warning per run (the gateway tells the table
when the run's cache shows an earlier command paid for the model, and so warned), so a run never
stops over a price. An offline engine answering `--batch-files` has no price: its calls cost 0.

Batch API calls (`--batch`) cost half the live price, OpenAI's rule for its Batch API; a price
file may give `batch_input`/`batch_output` for a provider with another rule.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field, TypeAdapter, ValidationError

from cuqa_builder.errors import CuqaError, describe_validation_error
from cuqa_builder.llm.local_registry import REGISTRY

log = logging.getLogger(__name__)


BATCH_DISCOUNT = 0.5
# A negative, NaN or infinite price would make every cost and estimate after it nonsense.
USD = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class PriceFileError(CuqaError, ValueError):
    """A --prices file that cannot be read or is no price table."""


class Price(BaseModel):
    input: USD  # per 1M prompt tokens
    output: USD  # per 1M completion tokens
    batch_input: USD | None = None  # through the Batch API (default: input x BATCH_DISCOUNT)
    batch_output: USD | None = None

    def per_million(self, batch: bool = False) -> tuple[float, float]:
        """(input, output) USD per 1M tokens, live or through the Batch API."""
        if not batch:
            return self.input, self.output
        return (
            self.input * BATCH_DISCOUNT if self.batch_input is None else self.batch_input,
            self.output * BATCH_DISCOUNT if self.batch_output is None else self.batch_output,
        )


BUILTIN_PRICES: dict[str, Price] = {
    name: Price(input=i, output=o)
    for name, (i, o) in {
        "gpt-4o": (2.50, 10.00),
        "gpt-4o-2024-05-13": (5.00, 15.00),
        "gpt-4o-mini": (0.15, 0.60),
        "gpt-4.1": (2.00, 8.00),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
        "gpt-4-turbo": (10.00, 30.00),
        "gpt-4": (30.00, 60.00),
        "gpt-3.5-turbo": (0.50, 1.50),
        "gpt-3.5-turbo-1106": (1.00, 2.00),
        "gpt-3.5-turbo-instruct": (1.50, 2.00),
        "o1": (15.00, 60.00),
        "o1-mini": (1.10, 4.40),
        "o3": (2.00, 8.00),
        "o3-mini": (1.10, 4.40),
        "o4-mini": (1.10, 4.40),
    }.items()
} | {name: Price(input=0.0, output=0.0) for name in REGISTRY}

_PRICE_FILE = TypeAdapter(dict[str, Price])


class PriceTable:
    def __init__(self, prices: dict[str, Price]) -> None:
        self._prices = prices
        self._resolved: dict[str, Price | None] = {}
        self._warned: set[str] = set()

    @classmethod
    def load(cls, override: Path | None = None) -> PriceTable:
        prices = dict(BUILTIN_PRICES)
        if override is not None:
            prices.update(read_price_file(override))
        return cls(prices)

    def price(self, model: str) -> Price | None:
        if model not in self._resolved:
            self._resolved[model] = self._lookup(model)
        return self._resolved[model]

    def said_before(self, model: str) -> None:
        """An earlier command of the run warned about `model` already: do not again."""
        self._warned.add(model)

    def cost(
        self, model: str, prompt_tokens: int, completion_tokens: int, batch: bool = False
    ) -> float:
        price = self.price(model)
        if price is None:
            if model not in self._warned:
                self._warned.add(model)
                log.warning("no price known for model %r: its cost is counted as 0 "
                            "(add it with --prices FILE)", model)
            return 0.0
        per_input, per_output = price.per_million(batch)
        return (prompt_tokens * per_input + completion_tokens * per_output) / 1_000_000

    def _lookup(self, model: str) -> Price | None:
        if model in self._prices:
            return self._prices[model]
        # Dated snapshots share their family's price; require a "-" boundary so that
        # "gpt-4.5" never borrows the price of "gpt-4".
        prefixes = [name for name in self._prices if model.startswith(name + "-")]
        return self._prices[max(prefixes, key=len)] if prefixes else None


def read_price_file(path: Path) -> dict[str, Price]:
    try:
        return _PRICE_FILE.validate_json(path.read_bytes())
    except OSError as exc:
        raise PriceFileError(f"cannot read the price table {path}: {exc.strerror}") from None
    except ValidationError as exc:
        raise PriceFileError(
            f"{path} is not a price table of {{model: {{input, output}}}} in USD per 1M tokens, "
            "each a finite number not below 0: "
            f"{describe_validation_error(exc, shown=1)}"
        ) from None
