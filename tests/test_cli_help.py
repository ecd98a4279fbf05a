"""Every command's --help shows every option name whole, whatever the terminal's width.

typer's boxed table cut option names short on narrow terminals (`--full-state-dic…` in `estimate
--help` at 80 columns); flows/cli_help.py falls back to click's plain layout there."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from flows.cli import app
from flows.cli_help import ELLIPSIS

runner = CliRunner()
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def help_at(width: int, *command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": str(width), "TERMINAL_WIDTH": None})
    assert result.exit_code == 0, result.output
    return result.output


def long_names(*command: str) -> list[str]:
    """Every --name and --no-name the command declares (click's own record of them)."""
    group = typer.main.get_command(app)
    found = group.commands[command[0]]  # type: ignore[attr-defined]
    return [
        name
        for param in found.params
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--") and name != "--help"
    ]


@pytest.mark.parametrize("width", [60, 80, 100, 111, 112, 140, 200])
@pytest.mark.parametrize("command", ["estimate", "memory"])
def test_the_job_commands_show_every_option_whole_at_any_width(command: str, width: int):
    text = help_at(width, command)
    assert ELLIPSIS not in text
    words = set(text.replace(",", " ").split())
    missing = [name for name in long_names(command) if name not in words]
    assert not missing, f"{command} --help at {width} columns lacks {missing}"


def test_the_table_is_kept_where_it_fits_and_the_plain_list_used_where_it_does_not():
    # 200 columns hold estimate's table whole; 80 do not, and the plain list says "Options:"
    wide, narrow = help_at(200, "estimate"), help_at(80, "estimate")
    assert "╭─ Options" in wide and "\nOptions:\n" not in wide
    assert "╭─" not in narrow and "\nOptions:\n" in narrow
    # each line of the plain list fits the 80 columns it was asked for
    assert max(map(len, narrow.splitlines())) <= 80


def test_a_command_whose_table_fits_keeps_it_at_80_columns():
    text = help_at(80, "prices")
    assert "╭─ Options" in text and ELLIPSIS not in text


@pytest.mark.parametrize("command", COMMANDS)
def test_no_help_text_uses_the_ellipsis_that_marks_a_cut_word(command: str):
    # the fallback reads "…" in the drawn table as a word rich cut: no text of ours may hold one
    group = typer.main.get_command(app)
    found = group.commands[command]  # type: ignore[attr-defined]
    texts = [found.help or "", *(getattr(param, "help", None) or "" for param in found.params)]
    assert not [text for text in texts if ELLIPSIS in text]
    assert ELLIPSIS not in help_at(200, command)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_shows_its_option_names_whole_at_80_columns(command: str):
    text = help_at(80, command)
    assert ELLIPSIS not in text
    words = set(text.replace(",", " ").split())
    assert [name for name in long_names(command) if name not in words] == []
