"""cuqa-builder: build and evaluate CuQA, compositional unknown questions."""

# Nothing is imported here, not even `typing`: every console script loads this package before
# its entry point can answer Ctrl-C (`cli/entry.py`), and on a busy machine `typing` alone is
# a window of tens of milliseconds in which Ctrl-C printed a traceback.
TYPE_CHECKING = False  # as `typing.TYPE_CHECKING`, which type checkers also read from here

__version__ = "0.1.0"
__all__ = ["__version__", "load"]

if TYPE_CHECKING:
    from cuqa_builder.dataset import load


def __getattr__(name: str) -> object:
    # `cuqa_builder.load(path)` without importing the whole package at startup.
    if name == "load":
        from cuqa_builder.dataset import load

        return load
    raise AttributeError(name)
