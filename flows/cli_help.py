"""A command's --help that shows every word whole, at any terminal width.

typer draws a command's options as a boxed rich table. Rich narrows a table's columns to their
longest words and, when even those do not fit, cuts words short with "…" (rich.table's
`_collapse_widths`). `estimate` and `memory` take about sixty options, so on an 80-column terminal
their names came out cut (`--full-state-dic…`, `--lora-in-fsdp-u…`) and could not be read or
copied. Where that would happen, the command's help is click's plain list instead, which wraps
its text and never cuts a word.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

ELLIPSIS = "…"  # what rich puts where it cut a word; no help text uses it (tests/test_cli_help.py)


def fit_help_to_width(command: Any) -> None:
    """Give `command` a --help that is typer's table where the terminal holds it whole, and click's
    plain list where it does not.

    typer's table is printed straight to stdout, on a console as wide as the terminal, so it is
    drawn once into a buffer first (the same width: rich measures the terminal on the standard
    streams' descriptors, not on the buffer). An ellipsis there means a word was cut; then the
    help is drawn with the command's markup mode None for that once, which makes typer fall back
    to click's layout. Otherwise the table is drawn again, to the terminal, in colour.
    """
    if getattr(command, "rich_markup_mode", None) is None:
        return
    boxed = command.format_help

    def format_help(ctx: Any, formatter: Any) -> None:
        trial = io.StringIO()
        with contextlib.redirect_stdout(trial):
            boxed(ctx, formatter)
        if ELLIPSIS not in trial.getvalue():
            boxed(ctx, formatter)
            return
        mode, command.rich_markup_mode = command.rich_markup_mode, None
        try:
            boxed(ctx, formatter)  # typer's format_help, without a markup mode, writes click's layout
        finally:
            command.rich_markup_mode = mode

    command.format_help = format_help
