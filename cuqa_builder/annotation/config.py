"""The labeling config is the contract with annotators: parse it to know what a result may say.

Label Studio stores whatever result a client sends, even one that names no control of the config,
so every pulled result is checked here against `annotation/labeling_config.xml` before it counts.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from cuqa_builder.errors import CuqaError
from cuqa_builder.shipped import shipped_file

# Control names and choice values the code relies on (they must exist in the XML).
VERDICT = "verdict"
REASONS = "reasons"
REWRITE = "rewrite"
CORRECTION = "answer_fix"
ACCEPT = "accept"
REJECT = "reject"
UNSURE = "unsure"  # an explicit "I cannot judge this": counted, never a vote

_CONFIG_NAME = "labeling_config.xml"
_VARIABLE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_CONTROL_TYPES = {"Choices": "choices", "TextArea": "textarea"}


class LabelingConfigError(CuqaError, ValueError):
    pass


class ResultError(CuqaError, ValueError):
    """A result item that the labeling config does not allow."""


@dataclass(frozen=True)
class Control:
    name: str
    type: str  # the result `type`: "choices" or "textarea"
    to_name: str
    multiple: bool = False
    options: frozenset[str] = frozenset()


@dataclass(frozen=True)
class LabelingConfig:
    xml: str
    controls: dict[str, Control]
    data_fields: frozenset[str]

    @classmethod
    def parse(cls, xml: str) -> LabelingConfig:
        try:
            root = ET.fromstring(xml)
        except ET.ParseError as exc:
            raise LabelingConfigError(f"labeling config is not valid XML: {exc}") from exc
        controls = {c.name: c for c in map(_control, root.iter()) if c is not None}
        fields = {m for el in root.iter() for v in el.attrib.values() for m in _VARIABLE.findall(v)}
        config = cls(xml=xml, controls=controls, data_fields=frozenset(fields))
        config._require_contract()
        return config

    def _require_contract(self) -> None:
        expected = {VERDICT: "choices", REASONS: "choices", REWRITE: "textarea",
                    CORRECTION: "textarea"}
        for name, kind in expected.items():
            control = self.controls.get(name)
            if control is None or control.type != kind:
                raise LabelingConfigError(f"labeling config needs a {kind} control named {name!r}")
        if not {ACCEPT, REJECT, UNSURE} <= self.controls[VERDICT].options:
            raise LabelingConfigError(
                f"{VERDICT!r} must offer {ACCEPT!r}, {REJECT!r} and {UNSURE!r}"
            )

    @property
    def reasons(self) -> frozenset[str]:
        return self.controls[REASONS].options

    def read_result(self, item: Any) -> tuple[str, tuple[str, ...] | str]:
        """(control name, its value) of one result item; raises ResultError when not allowed.

        Choices give a tuple of choice values, a text area its text (several lines joined).
        """
        if not isinstance(item, dict):
            raise ResultError(f"result item is not an object: {item!r}")
        name = item.get("from_name")
        control = self.controls.get(name) if isinstance(name, str) else None
        if control is None:
            raise ResultError(f"unknown control {name!r}")
        if item.get("type") != control.type or item.get("to_name") != control.to_name:
            raise ResultError(
                f"{name}: expected type {control.type!r} on {control.to_name!r}, got "
                f"{item.get('type')!r} on {item.get('to_name')!r}"
            )
        value = item.get("value")
        if not isinstance(value, dict):
            raise ResultError(f"{name}: value is not an object")
        if control.type == "choices":
            return name, _read_choices(control, value.get("choices"))
        return name, _read_text(control, value.get("text"))


def _read_choices(control: Control, choices: Any) -> tuple[str, ...]:
    if not isinstance(choices, list) or not all(isinstance(c, str) for c in choices):
        raise ResultError(f"{control.name}: choices must be a list of strings")
    unknown = sorted(set(choices) - control.options)
    if unknown:
        raise ResultError(f"{control.name}: unknown choice {', '.join(map(repr, unknown))}")
    if not choices:
        raise ResultError(f"{control.name}: no choice selected")
    if len(choices) > 1 and not control.multiple:
        raise ResultError(f"{control.name}: expected one choice, got {len(choices)}")
    return tuple(dict.fromkeys(choices))


def _read_text(control: Control, text: Any) -> str:
    if isinstance(text, str):  # some clients send a bare string instead of a list
        text = [text]
    if not isinstance(text, list) or not all(isinstance(t, str) for t in text):
        raise ResultError(f"{control.name}: text must be a list of strings")
    return "\n".join(text).strip()


def _control(element: ET.Element) -> Control | None:
    kind = _CONTROL_TYPES.get(element.tag)
    if kind is None or "name" not in element.attrib:
        return None
    options = frozenset(
        c.get("alias") or c.get("value", "") for c in element.iter("Choice")
    )
    return Control(
        name=element.attrib["name"],
        type=kind,
        to_name=element.get("toName", ""),
        multiple=element.get("choice") == "multiple",
        options=options,
    )


def annotation_file(name: str) -> Traversable:
    """A file of the top-level `annotation/` folder (the labeling config, the guidelines)."""
    found = shipped_file(__package__, name)
    if not found.is_file():
        raise LabelingConfigError(f"{name} is missing from this installation")
    return found


def labeling_config_path() -> Traversable:
    return annotation_file(_CONFIG_NAME)


@cache
def load_labeling_config(path: Path | None = None) -> LabelingConfig:
    source = path or labeling_config_path()
    return LabelingConfig.parse(source.read_text(encoding="utf-8"))
