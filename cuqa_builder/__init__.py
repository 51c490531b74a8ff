"""cuqa-builder: build and evaluate CuQA, compositional unknown questions."""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"
__all__ = ["__version__", "load"]

if TYPE_CHECKING:
    from cuqa_builder.dataset import load


def __getattr__(name: str):
    # `cuqa_builder.load(path)` without importing the whole package at startup.
    if name == "load":
        from cuqa_builder.dataset import load

        return load
    raise AttributeError(name)
