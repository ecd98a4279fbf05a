"""A command's options as data: what `gpucost serve` validates a request with and draws its form from.

`command_fields(command)` reads a typer command's signature (the one typer builds the command
line from, `with_job_options` included): per option its name, flag, kind, choices, default,
bounds and help. `request_model` turns those fields into a pydantic model that refuses an
unknown field, a value of the wrong kind, a choice not offered and a number out of the option's
range, one error per field, in the flag's words. A new option on `gpucost estimate` is a new
field of `/api/estimate` and a new control of the page's form, with nothing to add here.
"""

from __future__ import annotations

import inspect
import math
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = ["OptionField", "command_fields", "field_errors", "finite", "request_model"]

# the longest text a request may give an option; a model id is at most 96 + 1 + 96 characters
MAX_TEXT = 256


@dataclass(frozen=True)
class OptionField:
    """One option of a command: `name` (the parameter, the API's field), `flag` (the CLI's)."""

    name: str
    flag: str
    kind: str  # "text", "int", "float", "bool", "choice"
    default: Any
    required: bool
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    help: str = ""
    panel: str = ""
    nullable: bool = False


def _flag(name: str, info: Any) -> str:
    # typer.Option("--offer-gpu", ...) keeps its first positional, the flag, as `default`
    declared = info.default if isinstance(info.default, str) and info.default.startswith("-") else None
    declared = declared or next((d for d in info.param_decls if d.startswith("--")), None)
    return (declared or "--" + name.replace("_", "-")).split("/")[0]


def _base(annotation: Any) -> tuple[Any, bool]:
    """The type inside `X | None`, and whether None was allowed."""
    if get_origin(annotation) in (Union, types.UnionType):
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return inner[0], len(inner) < len(get_args(annotation))
    return annotation, False


def command_fields(command: Any, skip: frozenset[str] = frozenset()) -> list[OptionField]:
    """The options of typer command `command` (its signature), except the parameters in `skip`."""
    found = []
    for name, parameter in inspect.signature(command, eval_str=True).parameters.items():
        if name in skip:
            continue
        annotation, info = get_args(parameter.annotation)[:2]
        base, nullable = _base(annotation)
        default = parameter.default
        required = default is inspect.Parameter.empty
        if isinstance(default, Enum):
            default = default.value
        if isinstance(base, type) and issubclass(base, Enum):
            kind, choices = "choice", tuple(str(member.value) for member in base)
        elif base is bool:
            kind, choices = "bool", ()
        elif base is int:
            kind, choices = "int", ()
        elif base is float:
            kind, choices = "float", ()
        elif base is str:
            kind, choices = "text", ()
        else:  # a Path: the server reads no file a request names
            raise TypeError(f"{name}: option of type {base!r} has no request field; skip it")
        found.append(
            OptionField(
                name=name,
                flag=_flag(name, info),
                kind=kind,
                default=None if required else default,
                required=required,
                choices=choices,
                minimum=getattr(info, "min", None),
                maximum=getattr(info, "max", None),
                help=(getattr(info, "help", None) or "").strip(),
                panel=getattr(info, "rich_help_panel", None) or "",
                nullable=nullable,
            )
        )
    return found


def _annotation(field: OptionField) -> Any:
    python: Any = {"text": str, "int": int, "float": float, "bool": bool}.get(field.kind)
    if field.kind == "choice":
        python = Literal[field.choices]
    constraints: dict[str, Any] = {"description": f"{field.flag}: {field.help}".rstrip(": ")}
    if field.kind in ("int", "float"):
        if field.minimum is not None:
            constraints["ge"] = field.minimum
        if field.maximum is not None:
            constraints["le"] = field.maximum
    if field.kind == "float":
        constraints["allow_inf_nan"] = False  # "inf", "nan" and 1e400 are no option values
    if field.kind == "text":
        constraints["max_length"] = MAX_TEXT
    if field.nullable:
        return Annotated[python | None, Field(**constraints)]
    return Annotated[python, Field(**constraints)]


def request_model(name: str, fields: list[OptionField], **extra: Any) -> type[BaseModel]:
    """A pydantic model of `fields` (plus `extra`, pydantic field definitions): unknown fields
    are refused, so a misspelt option is an error, never silently ignored."""
    definitions: dict[str, Any] = {f.name: (_annotation(f), ... if f.required else f.default) for f in fields}
    definitions.update(extra)
    return create_model(name, __config__=ConfigDict(extra="forbid"), **definitions)


def field_errors(errors: Sequence[Mapping[str, Any]], fields: list[OptionField]) -> list[dict[str, str]]:
    """One `{"field", "flag", "message"}` per bad field (pydantic's `errors()`, `loc` starting
    with the field), in the words of the CLI's flags."""
    flags = {f.name: f.flag for f in fields}
    seen: dict[str, dict[str, str]] = {}
    for error in errors:
        name = str(error["loc"][0]) if error["loc"] else "request"
        if name in seen:  # a `X | None` field reports once per branch: the first one says it
            continue
        flag = flags.get(name, name)
        given = error.get("input")
        shown = "" if isinstance(given, dict) or given is None else f" {str(given)[:60]!r}"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "no such option (see /docs for the options this endpoint takes)"
        elif error["type"] == "missing":
            message = "required"
        seen[name] = {"field": name, "flag": flag, "message": f"{flag}{shown}: {message}"}
    return list(seen.values())


def finite(value: Any) -> Any:
    """`value` with NaN and infinities as None: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value
