"""`gpucost pull [URL] [--all]`: read a published catalog instead of scraping (warehouse/pull.py).

    gpucost pull s3://bucket/prefix | https://host/feeds | ./folder    (default: $GPUCOST_PULL_URL)

Fetches the feeds the reader warehouse is built from (every file with `--all`) whose sha256 changed
since the last pull, verifies each against the manifest, and builds the reader warehouse
`$GPUCOST_HOME/pulled/warehouse.duckdb`; with `GPUCOST_PULL_URL` set, `prices`, `estimate`,
`history`, `report` and `sql` answer from it. A publication whose manifest and files disagree
(still on its way) is refused, the previous pull kept, exit 1. Registered in flows/cli.py:
`app.command()(cli_pull.pull)`.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Annotated

import typer

from flows.output import console, err


def pull(
    url: Annotated[
        str | None,
        typer.Argument(
            help="s3://bucket/prefix, an http(s) base URL or a folder holding manifest.json "
            "(default: $GPUCOST_PULL_URL)."
        ),
    ] = None,
    every_file: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Fetch every file of the publication (a mirror), not only the feeds the reader "
            "warehouse is built from.",
        ),
    ] = False,
) -> None:
    """Pull the published feeds (only what changed, each file verified) into a reader warehouse."""
    from warehouse.db import Settings
    from warehouse.freshness import format_age
    from warehouse.publish import PublishSettings
    from warehouse.pull import PullError
    from warehouse.pull import pull as pull_publication

    settings = Settings()
    url = url or settings.pull_url
    if not url:
        err.print(
            "[bold red]error:[/] give a URL (`gpucost pull s3://bucket/prefix`) or set GPUCOST_PULL_URL"
        )
        raise typer.Exit(2)
    started = time.monotonic()
    try:
        result = pull_publication(
            url, settings.home, endpoint_url=PublishSettings().s3_endpoint_url, every_file=every_file
        )
    except PullError as exc:
        err.print(f"[bold red]error:[/] {exc}", soft_wrap=True, highlight=False)
        raise typer.Exit(1) from None
    seconds = time.monotonic() - started
    manifest = result.manifest
    sample = " (recorded sample data: replay)" if manifest.get("data_mode") == "replay" else ""
    console.print(
        f"pulled {len(result.fetched)} files ({result.fetched_bytes:,} bytes), {len(result.reused)} "
        f"unchanged, in {seconds:.1f} s: publication {manifest.get('run_id')} generated "
        f"{manifest['generated_at']} ({format_age(result.age_hours(datetime.now(UTC)))} old){sample}",
        highlight=False,
        soft_wrap=True,
    )
    hint = "" if settings.pull_url else "; set GPUCOST_PULL_URL so the read commands use it"
    console.print(f"reader warehouse: {result.warehouse}{hint}", highlight=False, soft_wrap=True)
