"""Prompt templates are data: one file each in the repository's top-level `prompts/` folder,
worded as the papers' tables; the wheel carries them inside this package (see `shipped`).

A file may open with a front matter block (between two `---` lines) naming its source; the body
after it is the template that is sent, and its sha256 is recorded with every call. A template
whose reply has a fixed shape may have that shape beside it as a JSON schema, `NAME.reply.json`:
the embedded model is held to it (llama.cpp's constrained output), other models are not.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass
from functools import cache, cached_property
from importlib.resources.abc import Traversable

from cuqa_builder.errors import CuqaError
from cuqa_builder.shipped import shipped_file


class PromptError(CuqaError, ValueError):
    pass


def prompt_file(name: str) -> Traversable:
    """The template file `prompts/NAME.txt`, wherever the package lives."""
    return shipped_file(__package__, f"{name}.txt")


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    text: str
    source: str
    reply_schema: str | None = None  # JSON text of `NAME.reply.json`, when there is one

    # Worked out once per template: every call records the hash and renders the placeholders.
    @cached_property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    @cached_property
    def placeholders(self) -> frozenset[str]:
        return frozenset(f for _, f, _, _ in string.Formatter().parse(self.text) if f)

    def render(self, **values: str) -> str:
        missing = self.placeholders - values.keys()
        if missing:
            raise PromptError(f"prompt {self.name!r} needs {sorted(missing)}")
        return self.text.format(**{k: values[k] for k in self.placeholders})


def _split_front_matter(raw: str) -> tuple[str, str]:
    if raw.startswith("---\n"):
        header, sep, body = raw[4:].partition("\n---\n")
        if sep:
            return header.strip(), body
    return "", raw


def _reply_schema(name: str) -> str | None:
    path = shipped_file(__package__, f"{name}.reply.json")
    if not path.is_file():
        return None
    text = path.read_text(encoding="utf-8")
    try:
        schema = json.loads(text)
    except ValueError as exc:
        raise PromptError(f"the reply format of prompt {name!r} is not JSON: {exc}") from None
    if not isinstance(schema, dict):
        raise PromptError(f"the reply format of prompt {name!r} is not a JSON schema object")
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@cache
def load_prompt(name: str, expects: frozenset[str] | None = None) -> PromptTemplate:
    """Load the template `NAME.txt`; with `expects`, its placeholders must be exactly those."""
    path = prompt_file(name)
    if not path.is_file():
        raise PromptError(f"no prompt template {name!r} (looked for {path})")
    header, body = _split_front_matter(path.read_text(encoding="utf-8"))
    template = PromptTemplate(name=name, text=body.strip("\n"), source=header,
                              reply_schema=_reply_schema(name))
    try:
        found = template.placeholders
    except ValueError as exc:
        raise PromptError(f"prompt {name!r} is not a valid template: {exc}") from None
    if expects is not None and found != expects:
        raise PromptError(
            f"prompt {name!r} has placeholders {sorted(found)}, expected {sorted(expects)}"
        )
    return template
