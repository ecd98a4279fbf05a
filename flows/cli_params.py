"""Command-line values read without pydantic where pydantic would change nothing (issue 22).

typer (0.29) reads every option and argument through a pydantic TypeAdapter, built on the
parameter's first use, even for a value that is None: the first command parsed imports pydantic
and builds one adapter for each of its parameters, about a fifth of a second of `gpucost prices`
before it does anything. Almost every value needs no adapter: None (an option not given), a
default that already has its type (`10`, `MethodChoice.lora`), a `str`, plain decimal digits for an
`int` or a `float` inside the option's range, an Enum choice's name, a path. `read_plainly` gives
each such parameter a reader that takes those and hands every other value to typer's own adapter,
built then: what it accepts, how it converts and every error message stay typer's
(tests/test_cli_params.py holds the two readers to the same answers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typer import _click
    from typer._coercion import TypeDescriptor

# what pydantic reads the same as int() or float() does; anything else goes to typer's adapter
# (lengths bounded: int() refuses more than 4300 digits, and no option needs 16)
_DIGITS = re.compile(r"-?[0-9]{1,15}")
_DECIMAL = re.compile(r"-?[0-9]{1,15}(?:\.[0-9]{1,15})?")


class _Unread:
    """A value the plain reader leaves to typer's adapter."""


UNREAD = _Unread()


def plain_value(descriptor: TypeDescriptor, value: Any, ctx: _click.Context | None = None) -> Any:
    """`value` as typer's adapter for `descriptor` would return it, or UNREAD when not sure."""
    from typer._param_types import coerce_cli_choice

    annotation, info = descriptor.annotation, descriptor.parameter_info
    if annotation is str:
        return value if type(value) is str else UNREAD
    if annotation is bool:
        return value if type(value) is bool else UNREAD
    if annotation is int or annotation is float:
        digits = _DIGITS if annotation is int else _DECIMAL
        if not ((type(value) is str and digits.fullmatch(value)) or type(value) in (annotation, int)):
            return UNREAD
        number = annotation(value)
        # out of range: typer's adapter words the error ("greater than or equal to 1")
        if (info.min is not None and number < info.min) or (info.max is not None and number > info.max):
            return UNREAD
        return number
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        if isinstance(value, annotation):
            return value
        try:
            return coerce_cli_choice(
                value, choices=tuple(annotation), case_sensitive=info.case_sensitive, ctx=ctx
            )
        except ValueError:  # not a choice: typer's adapter lists them
            return UNREAD
    return UNREAD


def _path_value(descriptor: TypeDescriptor, value: Any, param: Any, ctx: _click.Context) -> Any:
    """A Path parameter's value: typer's own checks (exists, file, dir) on Path(value)."""
    from typer._param_types import coerce_cli_path

    if isinstance(value, Path):
        path = value
    elif type(value) is str and value:  # "" and other types: typer's adapter says what it does
        path = Path(value)
    else:
        return UNREAD
    return coerce_cli_path(path, descriptor.parameter_info, path_type=Path, param=param, ctx=ctx)


def _reads_plainly(descriptor: TypeDescriptor) -> bool:
    """Whether a parameter takes one value of a type `plain_value` or `_path_value` knows."""
    info = descriptor.parameter_info
    if descriptor.is_file or descriptor.is_list or descriptor.is_tuple or info.parser is not None:
        return False
    if descriptor.is_path:
        return descriptor.annotation is Path and info.path_type in (None, Path)
    if descriptor.is_ranged and info.clamp:
        return False
    annotation = descriptor.annotation
    return annotation in (str, bool, int, float) or (
        isinstance(annotation, type) and issubclass(annotation, Enum)
    )


def read_plainly(command: Any) -> int:
    """Give every declared parameter of `command` and its subcommands the plain reader where it
    applies; the number given one. A typer without adapters (before 0.29) keeps its own."""
    given = sum(give_plain_reader(param) for param in getattr(command, "params", ()))
    return given + sum(read_plainly(sub) for sub in getattr(command, "commands", {}).values())


def read_help_plainly(command: Any, name: str | None, parent: _click.Context) -> None:
    """Make `command`'s --help now, in a context like the one the command will parse in (click's
    make_context), and give it the plain reader: otherwise it is made as the command parses its
    arguments, and its None (--help not given) builds an adapter, importing pydantic."""
    context = command.context_class(command, info_name=name, parent=parent, **command.context_settings)
    option = command.get_help_option(context)  # kept by the command, which parses with it
    if option is not None:
        give_plain_reader(option)


def give_plain_reader(param: Any) -> bool:
    """Give one parameter the plain reader when it takes a value `plain_value` knows."""
    try:
        from typer.core import _TyperParameter
    except ImportError:
        return False
    if not isinstance(param, _TyperParameter) or not _reads_plainly(param.type_descriptor):
        return False
    descriptor = param.type_descriptor
    param._runtime_param = _plain_first_class()(descriptor.parameter_info, descriptor.annotation, descriptor)
    return True


@cache
def _plain_first_class() -> type:
    """typer's RuntimeParam with the plain reader first: made once, on first use, since its base
    class is typer's (private, and absent before 0.29: read_plainly then changes nothing)."""
    from typer._coercion import RuntimeParam, build_runtime_param

    @dataclass(frozen=True)
    class PlainFirst(RuntimeParam):
        descriptor: Any
        # typer's own reader, built on the first value this one leaves to it
        typers: list[RuntimeParam] = field(default_factory=list, compare=False)

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            if self.descriptor.is_path:
                plain = _path_value(self.descriptor, value, param, ctx)
            else:
                plain = plain_value(self.descriptor, value, ctx)
            if plain is not UNREAD:
                return plain
            if not self.typers:
                self.typers.append(build_runtime_param(self.descriptor))
            return self.typers[0]._coerce_value(value, param=param, ctx=ctx)

    return PlainFirst
