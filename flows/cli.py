"""The `gpucost` command.

gpucost refresh [--providers azure,runpod] [--replay DIR | --record DIR]
gpucost sql "select ..."            read-only SQL against the warehouse
gpucost export --format parquet --out feeds/
gpucost status                      last run per provider
gpucost gpus / unmapped             the GPU catalog; offers whose GPU we cannot name
gpucost memory / estimate           fine-tuning memory and cost (flows/cli_finetune.py)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import duckdb
import typer
from rich.table import Table

from flows import cli_finetune
from flows.output import console, err
from warehouse.db import Settings, WarehouseError, connect
from warehouse.export import FORMATS, write_feeds

app = typer.Typer(
    help="Live GPU rental prices joined with what a fine-tuning run needs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int = 1) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}")
    return typer.Exit(code)


def _print_frame(columns: list[str], rows: list[tuple], title: str | None = None, limit: int = 200) -> None:
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows[:limit]:
        table.add_row(*("" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)
    if len(rows) > limit:
        console.print(f"... {len(rows) - limit} more rows (use `gpucost sql` with LIMIT, or `export`)")


def _read_only() -> duckdb.DuckDBPyConnection:
    try:
        return connect(Settings().warehouse_path, read_only=True)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None


@app.command()
def refresh(
    providers: Annotated[
        str | None, typer.Option(help="Comma-separated provider slugs (default: all registered).")
    ] = None,
    replay: Annotated[
        Path | None, typer.Option(help="Serve every HTTP exchange from this recorded cassette (offline).")
    ] = None,
    record: Annotated[
        Path | None, typer.Option(help="Record every HTTP exchange into this directory.")
    ] = None,
    accept_shrink: Annotated[
        bool, typer.Option(help="Load a provider batch even if it shrank by more than half.")
    ] = False,
) -> None:
    """Scrape providers into the warehouse, rebuild the marts and write the feeds."""
    started = time.perf_counter()
    from flows.refresh import refresh as refresh_flow

    if replay is not None and record is not None:
        raise _fail("--replay and --record are exclusive")
    names = [p.strip() for p in providers.split(",") if p.strip()] if providers else None
    if replay is not None:
        console.print(
            f"[bold yellow]Replay mode:[/] using recorded sample data from {replay}, not live prices."
        )
    try:
        summary = refresh_flow(
            providers=names,
            replay=str(replay) if replay else None,
            record=str(record) if record else None,
            accept_shrink=accept_shrink,
        )
    except (ValueError, WarehouseError) as exc:
        raise _fail(str(exc)) from None
    total = time.perf_counter() - started
    _print_frame(
        [
            "provider",
            "status",
            "parsed",
            "loaded",
            "quarantined",
            "excluded",
            "history +",
            "history -",
            "fetch s",
        ],
        [
            (
                o.provider,
                o.status,
                o.offers_parsed,
                o.offers_loaded,
                o.offers_quarantined,
                o.offers_excluded,
                o.rows_inserted,
                o.rows_closed,
                round(o.fetch_seconds, 1),
            )
            for o in summary.outcomes
        ],
        title=f"refresh {summary.run_id} ({summary.mode}): {summary.status}",
    )
    marts = ", ".join(f"{k} {v}" for k, v in summary.mart_rows.items() if k.startswith("marts."))
    console.print(f"marts: {marts}")
    console.print(f"feeds: {', '.join(summary.feeds) or 'none'}")
    console.print(
        f"wall {total:.1f}s = Prefect start-up and teardown {total - summary.pipeline_seconds:.1f}s"
        f" + pipeline {summary.pipeline_seconds:.1f}s"
    )
    if summary.mode == "replay":
        console.print("[yellow]These prices are recorded sample data (replay), not live prices.[/]")
    for o in summary.outcomes:
        if o.status != "ok":
            err.print(f"[bold]{o.provider} {o.status}:[/] {o.error}", soft_wrap=True)
            if o.hint:
                err.print(f"  what to do: {o.hint}", soft_wrap=True)
    if summary.failed:
        names = ", ".join(o.provider for o in summary.failed)
        raise _fail(
            f"{len(summary.failed)} provider(s) failed or were rejected: {names} (see the table above)"
        )


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL to run read-only against the warehouse.")],
    csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead of a table.")] = False,
) -> None:
    """Run read-only SQL against the warehouse (schemas: raw, ops, core, staging, marts)."""
    con = _read_only()
    try:
        relation = con.sql(query)
        if relation is None:
            raise _fail("the statement returned no rows (only queries are useful read-only)")
        columns, rows = relation.columns, relation.fetchall()
    except duckdb.Error as exc:
        raise _fail(f"{type(exc).__name__}: {exc}") from None
    finally:
        con.close()
    if csv:
        import csv as csv_module

        writer = csv_module.writer(sys.stdout)
        writer.writerow(columns)
        writer.writerows(rows)
    else:
        _print_frame(columns, rows)


@app.command()
def export(
    format: Annotated[str, typer.Option("--format", help="csv, parquet or both.")] = "both",
    out: Annotated[
        Path | None, typer.Option(help="Folder for the feeds (default: GPUCOST_FEEDS_DIR or feeds/).")
    ] = None,
) -> None:
    """Write the feeds (explicit, versioned column lists) from the current marts."""
    formats = FORMATS if format == "both" else (format,)
    if any(f not in FORMATS for f in formats):
        raise _fail(f"--format must be one of csv, parquet, both; got {format!r}")
    con = _read_only()
    try:
        written = write_feeds(con, out or Settings().feeds_dir, formats)  # type: ignore[arg-type]
    finally:
        con.close()
    if not written:
        raise _fail("no marts to export yet; run `gpucost refresh` first")
    for path, rows in written:
        console.print(f"{path}  ({rows} rows)")


@app.command()
def status() -> None:
    """The last run of each provider: when, status, rows, error."""
    con = _read_only()
    try:
        rel = con.sql(
            """
            select
                provider,
                status,
                strftime(finished_at, '%Y-%m-%d %H:%M') as finished_utc,
                offers_loaded as loaded,
                offers_quarantined as quarantined,
                coalesce(excluded::varchar, '{}') as excluded_by_rule,
                rows_inserted as history_added,
                rows_closed as history_closed,
                coalesce(error, '') as error
            from ops.provider_runs
            qualify row_number() over (partition by provider order by started_at desc) = 1
            order by provider
            """
        )
        columns, rows = rel.columns, rel.fetchall()
        good = con.execute(
            "select provider, max(finished_at) from ops.provider_runs where status = 'ok' group by provider"
        ).fetchall()
    finally:
        con.close()
    if not rows:
        raise _fail("no runs recorded yet; run `gpucost refresh`")
    _print_frame(columns, rows, title="last run per provider")
    for provider, at in sorted(good):
        console.print(f"{provider}: last good prices from {at:%Y-%m-%d %H:%M} UTC")


@app.command()
def gpus() -> None:
    """The canonical GPU catalog with its specs (warehouse/seeds/gpus.csv)."""
    con = connect(":memory:")
    from warehouse.db import load_seeds, migrate

    migrate(con)
    load_seeds(con)
    rel = con.sql(
        "select gpu_name, vendor, architecture, vram_gb, memory_type, memory_bandwidth_gbps, "
        "bf16_tflops, fp8_tflops, nvlink_gbps, form_factor from core.gpus order by vendor, gpu_name"
    )
    _print_frame(rel.columns, rel.fetchall(), title="canonical GPUs", limit=1000)


@app.command()
def unmapped() -> None:
    """Current offers whose GPU the seeds cannot name (fix: add an alias or instance type row)."""
    con = _read_only()
    try:
        rel = con.sql("select * from marts.unmapped_gpus")
        columns, rows = rel.columns, rel.fetchall()
    except duckdb.CatalogException:
        raise _fail("no marts yet; run `gpucost refresh` first") from None
    finally:
        con.close()
    if not rows:
        console.print("every current offer maps to a canonical GPU")
        return
    _print_frame(columns, rows, title="unmapped GPU names")


app.command()(cli_finetune.memory)
app.command()(cli_finetune.estimate)


if __name__ == "__main__":
    app()
