"""The recipes `--prompts` chooses between: one unknown event -> one candidate each.

A recipe is a `Generator`: it declares its steps (templates), the known source it uses by
default and the entities it takes as bridges, and makes an easy item with `easy(event)`. A new
recipe is a new entry here; the generate stage does not change.
"""

from __future__ import annotations

from cuqa_builder.generation.algorithm import Generator
from cuqa_builder.generation.connected import ConnectedGenerator

RECIPES: dict[str, type[Generator]] = {
    recipe.recipe: recipe for recipe in (Generator, ConnectedGenerator)
}
