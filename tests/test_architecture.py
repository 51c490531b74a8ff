"""docs/architecture.md's diagram is the package as it is: every top-level module and package of
`cuqa_builder/` is drawn once, with its kind, in the layers of pyproject.toml's layers contract,
which `lint-imports` checks against the imports (scripts/test.sh)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "cuqa_builder"
DIAGRAM = re.compile(r"```mermaid\n(.*?)```", re.S)
LAYER = re.compile(r'^\s*subgraph (L\d+)\["[^"]*"\]\n(.*?)^\s*end$', re.S | re.M)
NODE = re.compile(r'^\s*(\w+)\["([\w.]+/?)"\]$', re.M)


def drawn_layers() -> list[dict[str, str]]:
    """The diagram's layers from the top: each node's name -> its label (`x/` or `x.py`)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    blocks = DIAGRAM.findall(text)
    assert len(blocks) == 1, "docs/architecture.md should hold one mermaid diagram"
    layers = LAYER.findall(blocks[0])
    assert [name for name, _ in layers] == [f"L{i}" for i in range(1, len(layers) + 1)]
    chain = " --> ".join(name for name, _ in layers)
    assert chain in blocks[0], "the layers are drawn one below the other"
    return [dict(NODE.findall(body)) for _, body in layers]


def contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (layers,) = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [{name.strip() for name in layer.split("|")} for layer in layers]


def package_parts() -> dict[str, str]:
    """Each top-level module and package of cuqa_builder/, by name -> `x.py` or `x/`."""
    parts = {path.stem: path.name for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    parts |= {path.name: f"{path.name}/" for path in PACKAGE.iterdir()
              if (path / "__init__.py").is_file()}
    return parts


def test_the_diagram_draws_every_module_and_package_once() -> None:
    drawn = drawn_layers()
    names = [name for layer in drawn for name in layer]
    assert len(names) == len(set(names)), "a module drawn twice"
    assert {name: label for layer in drawn for name, label in layer.items()} == package_parts()


def test_the_diagram_layers_are_the_contract_layers() -> None:
    assert [set(layer) for layer in drawn_layers()] == contract_layers()
