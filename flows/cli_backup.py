"""`gpucost backup` and `gpucost restore`: the raw archive and the warehouse, to a folder or S3.

Registered by `flows.cli` with `register(app)`; the work is warehouse/backup.py, imported when a
command runs, so `--help` and the other commands start without DuckDB or boto3 (tests/test_startup.py).
"""

from __future__ import annotations

from typing import Annotated

import typer

from flows.output import console, err
from warehouse.errors import WarehouseError

_TARGET = "s3://bucket/prefix (GPUCOST_S3_ENDPOINT_URL for an S3-compatible service) or a folder"


def _fail(message: str) -> typer.Exit:
    from rich.markup import escape

    err.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    return typer.Exit(1)


def backup(
    destination: Annotated[str, typer.Argument(help=f"Where to: {_TARGET}.")],
) -> None:
    """Back up the raw archive and the warehouse (refused while a refresh writes); manifest last."""
    from warehouse.backup import backup as run_backup
    from warehouse.backup import open_store
    from warehouse.db import Settings

    settings = Settings()
    try:
        report = run_backup(settings.warehouse_path, settings.raw_dir, open_store(destination))
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    mb = 1024 * 1024
    console.print(
        f"backed up {report.files} files ({report.total_bytes / mb:.1f} MB) to {report.url}; "
        f"sent {report.uploaded} new or changed ({report.uploaded_bytes / mb:.1f} MB)",
        soft_wrap=True,
    )


def restore(
    source: Annotated[str, typer.Argument(help=f"Where from: {_TARGET}.")],
    replace: Annotated[
        bool,
        typer.Option("--replace", help="Replace the warehouse and raw archive GPUCOST_HOME holds."),
    ] = False,
) -> None:
    """Restore a backup into GPUCOST_HOME: every file verified first, then swapped in whole."""
    from warehouse.backup import open_store
    from warehouse.backup import restore as run_restore
    from warehouse.db import Settings

    settings = Settings()
    try:
        report = run_restore(settings.warehouse_path, settings.raw_dir, open_store(source), replace=replace)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    console.print(
        f"restored {report.files} files ({report.total_bytes / (1024 * 1024):.1f} MB) from {report.url}, "
        f"backed up {report.created_at}, into {settings.home}",
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    app.command()(backup)
    app.command()(restore)
