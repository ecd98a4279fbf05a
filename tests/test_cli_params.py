"""flows/cli_params.py: the plain reader of command-line values answers as typer's adapter does.

For every parameter of every command, values of its kind (valid, out of range, malformed, odd)
go through both readers: the same value of the same type, or the same error message. Values the
plain reader takes must not build typer's adapter (that is the start-up it saves, issue 22);
tests/test_startup.py holds the import side (no pydantic in a read command).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

import pytest
import typer.main
from hypothesis import given, settings
from hypothesis import strategies as st
from typer import _click
from typer._click.exceptions import BadParameter
from typer._coercion import build_runtime_param
from typer.core import _TyperParameter

from flows.cli import app
from flows.cli_params import UNREAD, _plain_first_class, plain_value, read_plainly

ROOT = typer.main.get_command(app)


def _parameters() -> list[tuple[str, Any, Any]]:
    """(command path, command, parameter) for every typer parameter of the app."""
    found = []

    def walk(command: Any, path: str) -> None:
        for param in command.params:
            if isinstance(param, _TyperParameter):
                found.append((f"{path} {param.name}", command, param))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}")

    walk(ROOT, "gpucost")
    return found


PARAMETERS = _parameters()


def _samples(param: Any, tmp_path: Path) -> list[Any]:
    """Values of the parameter's kind a user or a default can give it: good, bad and odd."""
    annotation = param.type_descriptor.annotation
    values: list[Any] = [param.default] if param.default is not None else []
    if annotation is bool:
        return [*values, True, False, "true", "no", ""]
    if annotation is str:
        return [*values, "H100", "", "us-*", "a b", "\udcff", "--gpu"]
    if annotation in (int, float):
        return [
            *values,
            *("0", "1", "4", "-3", "007", "65535", "65536", "4.0", "0.5", "1e3", "inf", "nan", "abc", ""),
            *(" 4", "4 ", "+4", "1_000", "9" * 30, 3, 0, 2.5),
        ]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        members = list(annotation)
        names = [str(m.value) for m in members]
        return [*values, *members, *names, names[0].upper(), "nope", ""]
    if annotation is Path:
        existing = tmp_path / "exists.txt"
        existing.write_text("x")
        return [*values, "some/dir", "", "-", str(existing), str(tmp_path), Path("p"), "\udcff"]
    return values


def _outcome(reader: Any, value: Any, param: Any, ctx: Any) -> tuple[str, Any, type | None]:
    try:
        result = reader.coerce(value, param=param, ctx=ctx)
    except BadParameter as exc:
        return ("error", exc.format_message(), None)
    if isinstance(result, float) and result != result:  # NaN: equal to nothing, itself included
        return ("value", "nan", float)
    return ("value", result, type(result))


@pytest.mark.parametrize(("path", "command", "param"), PARAMETERS, ids=[p for p, _, _ in PARAMETERS])
def test_every_parameter_reads_every_value_as_typer_does(path: str, command: Any, param: Any, tmp_path: Path):
    ctx = _click.Context(command, info_name=path.split()[-2])
    descriptor = param.type_descriptor
    theirs = build_runtime_param(descriptor)
    ours = _plain_first_class()(descriptor.parameter_info, descriptor.annotation, descriptor)
    for value in [None, *_samples(param, tmp_path)]:
        assert _outcome(ours, value, param, ctx) == _outcome(theirs, value, param, ctx), (path, value)


def test_the_values_people_type_build_no_adapter():
    """What the plain reader is for: these never reach typer's adapter (and pydantic)."""
    by_name = {path: (command, param) for path, command, param in PARAMETERS}
    cases = {
        "gpucost prices gpu": "H100",
        "gpucost prices min_vram": "40",
        "gpucost estimate top": "4",
        "gpucost estimate method": "qlora",
        "gpucost memory seq_len": "4096",
        "gpucost sql query": "select 1",
    }
    for path, text in cases.items():
        command, param = by_name[path]
        descriptor = param.type_descriptor
        reader = _plain_first_class()(descriptor.parameter_info, descriptor.annotation, descriptor)
        assert reader.coerce(text, param=param, ctx=_click.Context(command)) is not None
        assert reader.typers == [], f"{path} {text!r} built typer's adapter"
        assert isinstance(param._runtime_param, type(reader)), f"{path} has no plain reader"


def test_a_value_it_is_unsure_of_goes_to_typers_adapter_and_keeps_its_message():
    command, param = next((c, p) for path, c, p in PARAMETERS if path == "gpucost estimate top")
    descriptor = param.type_descriptor
    reader = _plain_first_class()(descriptor.parameter_info, descriptor.annotation, descriptor)
    assert plain_value(descriptor, "0") is UNREAD  # below --top's minimum of 1
    with pytest.raises(BadParameter, match="greater than or equal to 1"):
        reader.coerce("0", param=param, ctx=_click.Context(command))
    assert len(reader.typers) == 1  # built once, then kept
    assert reader.coerce(" 4", param=param, ctx=_click.Context(command)) == 4
    assert len(reader.typers) == 1


def test_every_single_value_parameter_of_a_known_kind_has_the_plain_reader():
    plain = _plain_first_class()
    without = [path for path, _, param in PARAMETERS if not isinstance(param._runtime_param, plain)]
    assert without == []  # the app has no list, file or custom-parser parameters (yet)
    assert read_plainly(ROOT) == len(PARAMETERS)  # giving them again changes nothing


NUMBER_TEXT = st.one_of(
    st.integers(-(10**9), 10**9).map(str),
    st.floats(-1e9, 1e9, allow_nan=False).map(lambda x: f"{x:.4f}"),
    st.text(alphabet="0123456789-+._e ", max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(NUMBER_TEXT)
def test_number_options_read_any_text_as_typer_does(text: str):
    for path in ("gpucost estimate top", "gpucost prices min_vram", "gpucost serve port"):
        command, param = next((c, p) for p_, c, p in PARAMETERS if p_ == path)
        ctx = _click.Context(command)
        descriptor = param.type_descriptor
        ours = _plain_first_class()(descriptor.parameter_info, descriptor.annotation, descriptor)
        assert _outcome(ours, text, param, ctx) == _outcome(build_runtime_param(descriptor), text, param, ctx)


def test_a_commands_help_option_gets_the_plain_reader_when_the_command_is_resolved():
    """--help is made on first use (its None, not given, would build an adapter): the group
    gives its own and the resolved command's the plain reader."""
    root = typer.main.get_command(app)
    ctx = _click.Context(root, info_name="gpucost")
    name, prices, _ = root.resolve_command(ctx, ["prices", "--gpu", "H100"])  # type: ignore[attr-defined]
    assert name == "prices" and isinstance(prices._help_option._runtime_param, _plain_first_class())
    assert isinstance(root.get_help_option(ctx)._runtime_param, _plain_first_class())
