"""Command-line flags derived from the typed options models, so each default and help text is
written once: in the model's field (`Field(default, description=...)`).

A field `max_retries: int = Field(4, ge=0, description="tries after the first")` becomes
`--max-retries N` with `(default: 4)` in its help; the parsed namespace is turned back into the
model, whose constraints then check the values (a failure is argparse's usage error, exit 2).
Extra argparse settings of one flag (metavar, a short alias, choices) ride in the field's
`json_schema_extra={"flag": {...}}`.
"""

from __future__ import annotations

import argparse
import types
import typing
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from cuqa_builder.run_lock import WAIT_FOR_LOCK

M = TypeVar("M", bound=BaseModel)
_SCALARS = (int, float, str, Path)


def _without_none(annotation: Any) -> Any:
    """`int | None` -> int; other annotations unchanged."""
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [arg for arg in get_args(annotation) if arg is not type(None)]
        if len(kept) == 1:
            return kept[0]
    return annotation


def _whole_number(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def positive_int(text: str) -> int:
    """An argparse type for flags outside the options models: a whole number of at least 1
    (`--limit -1` once dropped the last item)."""
    value = _whole_number(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {value}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


_PARSERS: dict[type, typing.Callable[[str], Any]] = {int: _whole_number, float: _number}


def _flag_settings(name: str, field: FieldInfo) -> dict[str, Any]:
    """argparse keyword arguments for one field."""
    annotation = _without_none(field.annotation)
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    settings: dict[str, Any] = {"dest": name, "help": field.description or ""}
    if annotation is bool:
        settings["action"] = "store_true"
    elif get_origin(annotation) is Literal:
        settings["choices"] = get_args(annotation)
    elif annotation in _SCALARS:
        settings["type"] = _PARSERS.get(annotation, annotation)
    else:
        raise TypeError(f"no flag for option {name!r} of type {annotation!r}")
    if annotation is not bool:
        settings["default"] = field.get_default(call_default_factory=True)
    settings.update({k: v for k, v in dict(extra.get("flag", {})).items() if k != "aliases"})
    if settings.get("default") is not None and "(default" not in settings["help"]:
        settings["help"] += " (default: %(default)s)"
    return settings


def add_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    model: type[BaseModel],
    only: typing.Iterable[str] | None = None,
    exclude: typing.Iterable[str] = (),
) -> None:
    """One `--flag` per field of `model` (all, or `only` these), in field order."""
    names = list(only) if only is not None else list(model.model_fields)
    for name in names:
        if name in set(exclude):
            continue
        field = model.model_fields[name]
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        aliases = dict(extra.get("flag", {})).get("aliases", ())
        parser.add_argument(*aliases, "--" + name.replace("_", "-"), **_flag_settings(name, field))


def options_from(
    parser: argparse.ArgumentParser, model: type[M], args: argparse.Namespace, **values: Any
) -> M:
    """The model from the parsed flags (plus `values` resolved elsewhere); a value the model
    refuses is a usage error naming the flag, exit 2, like any bad flag."""
    data = {name: getattr(args, name) for name in model.model_fields if hasattr(args, name)}
    data.update(values)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        parser.error("; ".join(_flag_problem(error) for error in exc.errors()))


def _flag_problem(error: ErrorDetails) -> str:
    """One refused value in argparse's words: `argument --max-retries: -1 is below the minimum
    of 0`; a check across flags (no field) is its message alone."""
    context = error.get("ctx", {})
    if error["type"] == "greater_than_equal":
        problem = f"{error['input']} is below the minimum of {context['ge']}"
    elif error["type"] == "greater_than" and context.get("gt") == 0:
        problem = f"{error['input']} is not a positive number"
    elif error["type"] == "value_error":
        problem = str(context.get("error", error["msg"]))
    else:
        problem = error["msg"]
    if not error["loc"]:
        return problem
    return f"argument --{str(error['loc'][0]).replace('_', '-')}: {problem}"


def add_wait_for_lock_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument(
        WAIT_FOR_LOCK, action="store_true",
        help="when another command is writing the same run directory, wait for it to finish "
        "(default: refuse at once, exit status 1)",
    )
