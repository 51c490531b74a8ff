"""Data files people read and edit at the repository's top level, and the code reads at run time.

`prompts/` (the templates) and `annotation/` (labeling config, guidelines) sit beside the package,
where the design card puts them. The wheel carries each folder inside the package of the same name
(`cuqa_builder/prompts/`, `cuqa_builder/annotation/`: the force-include of pyproject.toml), so an
installed copy finds them through importlib.resources. A source checkout (an editable install, or
PYTHONPATH pointing at it, as the tests run) has no such copy and reads the top-level folder itself.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]


def shipped_file(package: str, name: str) -> Traversable:
    """`name` from the folder that `package` ships (`cuqa_builder.prompts` ships `prompts/`)."""
    installed = resources.files(package).joinpath(name)
    if installed.is_file():
        return installed
    return CHECKOUT / package.rpartition(".")[2] / name
