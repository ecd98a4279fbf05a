"""The `gpucost` command.

gpucost refresh [--providers azure,runpod] [--replay DIR | --record DIR]
gpucost sql "select ..."            read-only SQL against the warehouse
gpucost export --format parquet --out feeds/
gpucost status                      last run per provider; stale and retired providers
gpucost check [--providers a,b]     fetch + parse each source once, load nothing, compare
gpucost deploy                      register the scheduled deployments (deployments/prefect.yaml)

Bad input (an unknown provider, a missing cassette, a busy warehouse, an unwritable folder) is
one line on stderr and exit code 2 (usage) or 1, checked before any Prefect server starts.
gpucost gpus / unmapped             the GPU catalog; offers whose GPU we cannot name
gpucost memory / estimate           fine-tuning memory and cost (flows/cli_finetune.py)
gpucost backup / restore TARGET      raw archive and warehouse to s3://... or a folder (flows/cli_backup.py)
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from answers import AnswerError
from flows import STARTED, cli_backup, cli_finetune, cli_prices, cli_providers, cli_pull
from flows.cli_help import fit_help_to_width
from flows.cli_params import give_plain_reader, read_help_plainly, read_plainly
from flows.output import console, err
from warehouse.errors import WarehouseError

# Each command imports what it uses (DuckDB with warehouse.db, polars with answers,
# Prefect and the HTTP stack only in refresh, check, deploy and server): `gpucost --help` and the
# read commands start in a fraction of the time (issue 22; tests/test_startup.py holds it).
if TYPE_CHECKING:
    import duckdb

    from flows.orchestration import RefreshSummary
    from warehouse.db import Settings

REPO_DIR = Path(__file__).resolve().parents[1]


class _Commands(typer.core.TyperGroup):
    """The app's command group. A usage error (a value out of an option's range, an unknown
    option, a missing argument) is one `error:` line naming the flag, exit 2, instead of typer's
    boxed panel; a read command's pending no-live-refresh notice is printed when it ends.
    Its parameters read their values without pydantic where that changes nothing (cli_params)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        read_plainly(self)

    def get_help_option(
        self, ctx: Any
    ) -> Any:  # typer vendors click: its Context is typer._click.core.Context
        option = super().get_help_option(ctx)  # made on first use: given its plain reader then
        if option is not None:
            give_plain_reader(option)
        return option

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None:
            read_help_plainly(command, name, ctx)
            fit_help_to_width(command)
        return name, command, rest

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            code = super().main(
                args, prog_name, complete_var, False, windows_expand_args=windows_expand_args, **extra
            )
        except typer.TyperException as exc:  # click's ClickException family (UsageError, BadParameter)
            if not standalone_mode:
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # `gpucost` alone: the help, as before
                exc.show()  # type: ignore[attr-defined]
                sys.exit(0)
            from rich.markup import escape

            context = getattr(exc, "ctx", None)
            where = f" (`{context.command_path} --help` lists the options)" if context is not None else ""
            message = exc.format_message()
            err.print(f"[bold red]error:[/] {escape(message)}{where}", soft_wrap=True, highlight=False)
            sys.exit(getattr(exc, "exit_code", 2))
        finally:
            _print_pending_notice()
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


app = typer.Typer(
    cls=_Commands,
    help="Live GPU rental prices joined with what a fine-tuning run needs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _fail(message: str, code: int = 1) -> typer.Exit:
    global _pending_notice
    if _pending_notice:  # the reason the warehouse had nothing to answer with, in the same line
        message, _pending_notice = f"{message} ({_pending_notice})", None
    err.print(f"[bold red]error:[/] {message}", soft_wrap=True)
    return typer.Exit(code)


# NO_LIVE_REFRESH of the warehouse a command read: folded into its error line when it fails,
# printed on stderr when it ends otherwise (an empty table says why it is empty)
_pending_notice: str | None = None


def _print_pending_notice() -> None:
    global _pending_notice
    if _pending_notice:
        err.print(f"[yellow]{_pending_notice}[/]", soft_wrap=True)
    _pending_notice = None


@app.callback()
def _settings_are_valid() -> None:
    # Before any command: every one reads Settings somewhere, and a malformed GPUCOST_* value in
    # the environment or .env would otherwise surface as a traceback mid-way.
    from warehouse.settings import Settings, SettingsError

    global _pending_notice
    _pending_notice = None  # one per command, also when several run in one process (tests)
    try:
        Settings()
    except SettingsError as exc:
        raise _fail(f"{exc} (fix it in the environment or .env)", code=2) from None


def _print_frame(columns: list[str], rows: list[tuple], title: str | None = None, limit: int = 200) -> None:
    # at least as wide as its title, which would otherwise wrap over a narrow result ("statement\n1")
    table = Table(title=title, show_lines=False, min_width=len(title) if title else None)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows[:limit]:
        table.add_row(*("" if v is None else f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    console.print(table)
    if len(rows) > limit:
        console.print(f"... {len(rows) - limit} more rows (use `gpucost sql` with LIMIT, or `export`)")


def _read_only(*, sandbox: bool = True) -> duckdb.DuckDBPyConnection:
    """The warehouse, read-only (and sandboxed: no files, network or extensions); says so on stderr
    when it holds sample data."""
    from warehouse.db import NO_LIVE_REFRESH, open_reader

    global _pending_notice
    try:
        con, banner = open_reader(sandbox=sandbox)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    if banner == NO_LIVE_REFRESH:
        _pending_notice = banner  # printed when the command ends (_Commands.main), unless it fails
    elif banner:
        err.print(f"[yellow]{banner}[/]")
    return con


def _run_refresh(names: list[str] | None, *, settings: Settings, **options: object):
    """The refresh through Prefect when an API is configured, else in-process; its summary."""
    from flows import server

    api = server.api_url(settings.home)
    if api:
        os.environ["PREFECT_API_URL"] = api
        from flows.refresh import refresh as refresh_flow

        try:
            state = refresh_flow(providers=names, return_state=True, **options)
            summary = state.result(raise_on_failure=False)
        except (ValueError, WarehouseError) as exc:
            raise _fail(str(exc)) from None
        if isinstance(summary, BaseException):
            if isinstance(summary, ValueError | WarehouseError):
                raise _fail(str(summary)) from None
            raise summary  # RefreshInterrupted included: `refresh` says what was kept
        return summary
    from flows.orchestration import LocalRunner, RefreshPlan, run_refresh

    _log_progress()
    try:
        # options are the CLI's own keyword arguments, passed through untyped (`**options: object`)
        return run_refresh(RefreshPlan(providers=names, **options), LocalRunner())  # type: ignore[arg-type]
    except (ValueError, WarehouseError) as exc:
        raise _fail(str(exc)) from None


INTERRUPTED = 130  # 128 + SIGINT, what shells report for a command stopped by Ctrl-C


@contextmanager
def _interruptible() -> Iterator[None]:
    """SIGTERM stops a refresh as Ctrl-C does (recorded `interrupted`, not killed mid-write); on
    either, one line of what was kept and exit 130."""
    import signal

    from flows.orchestration import RefreshInterrupted

    def terminate(signum: int, frame: object) -> None:
        raise KeyboardInterrupt("SIGTERM")

    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, terminate) if in_main else None
    try:
        yield
    except RefreshInterrupted as exc:
        err.print(f"[bold red]interrupted:[/] {exc.kept()}", soft_wrap=True, highlight=False)
        raise typer.Exit(INTERRUPTED) from None
    except KeyboardInterrupt:
        # before the run was recorded (checks, Prefect start-up) or after it finished
        err.print("[bold red]interrupted:[/] before the run started or after it ended; nothing half-done")
        raise typer.Exit(INTERRUPTED) from None
    finally:
        if in_main:
            signal.signal(signal.SIGTERM, previous)


def _log_progress() -> None:
    """Progress of an in-process refresh (each provider, each large download) on stderr."""
    import logging

    from rich.logging import RichHandler

    handler = RichHandler(console=err, show_path=False, show_time=True, markup=False)
    for name in ("gpucost.refresh", "connectors"):
        logger = logging.getLogger(name)
        if not any(isinstance(h, RichHandler) for h in logger.handlers):
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def _writable_dir(path: Path, what: str) -> None:
    """Fail with one line unless `path` is (or can be made) a writable folder."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".gpucost-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise _fail(f"{what} {path} is not writable ({exc.strerror or exc}); choose another folder") from None


CASSETTE = (
    "a cassette is a folder of <host>/<name>.json files, each with a request (method, url) and a "
    "response (status, headers, body_file); the sample one is tests/replay, `gpucost refresh --record "
    "DIR` records one"
)


def _check_replay_dir(replay: Path) -> None:
    """Exit 2 in one line unless `replay` is a cassette the replay transport can serve."""
    from connectors.http import ReplayTransport

    if not replay.is_dir():
        raise _fail(f"--replay {replay} does not exist; {CASSETTE}", code=2)
    try:
        ReplayTransport(replay, frozenset())  # reads every entry, as the refresh's client will
    except (FileNotFoundError, OSError, ValueError) as exc:
        found = "holds no recorded exchanges" if not any(replay.rglob("*.json")) else "is not a cassette"
        raise _fail(f"--replay {replay} {found} ({type(exc).__name__}); {CASSETTE}", code=2) from None


def _check_warehouse(path: Path, mode: str) -> None:
    """Before Prefect starts: the warehouse is free to write, and holds the same kind of data."""
    from warehouse.db import check_mode, connect

    if not path.exists():
        _writable_dir(path.parent, "warehouse folder")
        return
    try:
        con = connect(path, read_only=True)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    try:
        check_mode(con, mode, path)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()


@app.command()
def refresh(
    providers: Annotated[
        str | None, typer.Option(help="Comma-separated provider slugs (default: all registered).")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(
            help="Serve every HTTP exchange from this recorded cassette (offline); writes to its own "
            "warehouse under $GPUCOST_HOME/replay/."
        ),
    ] = None,
    record: Annotated[
        Path | None, typer.Option(help="Record every HTTP exchange into this directory.")
    ] = None,
    accept_shrink: Annotated[
        bool, typer.Option(help="Load scopes that came back empty or much smaller than their last good load.")
    ] = False,
    accept_changes: Annotated[
        bool,
        typer.Option(help="Publish prices that moved more than the anomaly guard's factor (default 3x)."),
    ] = False,
) -> None:
    """Scrape providers into the warehouse, rebuild the marts and write the feeds.

    With a Prefect API (PREFECT_API_URL, or `gpucost server start`) the refresh is a flow run there;
    without one it runs the same steps in this process, without Prefect. Feeds and the page go to
    GPUCOST_FEEDS_DIR (default $GPUCOST_HOME/feeds); a run in which no provider loaded leaves them
    as they were. Ctrl-C or SIGTERM stops it: the run is recorded `interrupted`, exit 130.
    """
    from warehouse.db import Settings
    from warehouse.pipeline import select_connectors

    if replay is not None and record is not None:
        raise _fail("--replay and --record are exclusive", code=2)
    names = [p.strip() for p in providers.split(",") if p.strip()] if providers else None
    try:
        select_connectors(names)
    except ValueError as exc:
        raise _fail(str(exc), code=2) from None
    settings = Settings()
    if settings.pull_url and replay is None:
        # a team's reader machines read the publication; one scraper writes it (warehouse/pull.py)
        raise _fail(
            f"this machine reads the published feeds (GPUCOST_PULL_URL={settings.pull_url}): run "
            "`gpucost pull`; unset GPUCOST_PULL_URL on the machine that scrapes",
            code=2,
        )
    from warehouse.publish import PublishError, check_settings

    try:
        check_settings()  # a malformed GPUCOST_FEEDS_URL fails now, not after the downloads
    except PublishError as exc:
        raise _fail(str(exc), code=2) from None
    if replay is not None:
        _check_replay_dir(replay)
        _check_warehouse(settings.replay_home / settings.warehouse_path.name, "replay")
        _writable_dir(settings.replay_home / "feeds", "feeds folder")
        console.print(
            f"[bold yellow]Replay mode:[/] using recorded sample data from {replay}, not live prices; "
            f"writing to {settings.replay_home}."
        )
    else:
        _check_warehouse(settings.warehouse_path, "record" if record else "live")
        _writable_dir(settings.feeds_dir, "feeds folder")
    if record is not None:
        _writable_dir(record, "record folder")

    with _interruptible():
        summary = _run_refresh(
            names,
            replay=str(replay) if replay else None,
            record=str(record) if record else None,
            accept_shrink=accept_shrink,
            accept_changes=accept_changes,
            settings=settings,
        )
    if summary.offline:
        from warehouse.pipeline import CAUSE_HINTS

        ran = [o for o in summary.outcomes if o.status != "skipped"]
        raise _fail(f"offline: none of the {len(ran)} providers' hosts resolved; {CAUSE_HINTS['dns']}")
    total = time.perf_counter() - STARTED
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
    if summary.loaded:
        console.print(f"feeds: {', '.join(summary.feeds) or 'none'}")
    else:
        console.print(
            f"feeds: unchanged (no provider loaded; {summary.feeds_dir} stays as it was)", soft_wrap=True
        )
    if summary.report:
        console.print(f"comparison page: {summary.report}", soft_wrap=True)
    overhead = "Prefect start-up and teardown" if summary.runner == "prefect" else "imports and start-up"
    console.print(
        f"wall {total:.1f}s (the whole command) = pipeline {summary.pipeline_seconds:.1f}s"
        f" + {overhead} {total - summary.pipeline_seconds:.1f}s; runner: {summary.runner}"
    )
    if summary.runner == "local":
        console.print(
            "[dim]ran in-process without Prefect; for run tracking and schedules start a server with "
            "`gpucost server start` (or set PREFECT_API_URL)[/]"
        )
    if summary.mode == "replay":
        where = (
            "with the commands as they are (GPUCOST_HOME is this replay's home)"
            if settings.replay_home == settings.home
            else "with the commands as they are while no live refresh has loaded prices, or with "
            f"GPUCOST_HOME={settings.replay_home} beside a live warehouse"
        )
        console.print(
            f"[yellow]These prices are recorded sample data (replay), not live prices; query them {where}[/]",
            soft_wrap=True,
        )
    _print_problems(summary)
    if summary.published:
        console.print(summary.published)
    unclean = summary.unclean
    if summary.publish_error:
        raise _fail(f"the refresh loaded, but publishing the feeds failed: {summary.publish_error}")
    if unclean:
        names_text = ", ".join(f"{o.provider} ({o.status})" for o in unclean)
        raise _fail(
            f"{len(unclean)} provider(s) did not load cleanly: {names_text}; their last good prices "
            "stay current (see the table above)"
        )


def _print_problems(summary: RefreshSummary) -> None:
    """What did not go well, on stderr: failures sharing a cause with a hint of its own
    (`CAUSE_HINTS`) in one line per cause, every other one per provider with its hint, providers
    still failing since they went stale in one line, retired providers' closed offers."""
    from warehouse.pipeline import CAUSE_HINTS

    outcomes = [o for o in summary.outcomes if o.status != "ok"]
    stale = summary.stale
    grouped: dict[str, list[str]] = {}
    for o in outcomes:
        if o.cause in CAUSE_HINTS and o.provider not in stale:
            grouped.setdefault(o.cause, []).append(o.provider)
    for o in outcomes:
        if o.provider in stale or o.provider in grouped.get(o.cause or "", ()):
            continue
        err.print(f"[bold]{o.provider} {o.status}:[/] {o.error}", soft_wrap=True)
        if o.hint:
            err.print(f"  what to do: {o.hint}", soft_wrap=True)
    for cause, providers in grouped.items():
        err.print(f"[bold]{', '.join(providers)} failed ({cause}):[/] {CAUSE_HINTS[cause]}", soft_wrap=True)
    still = summary.still_failing
    if still:
        names = ", ".join(f"{o.provider} (since {stale[o.provider]:%Y-%m-%d %H:%M} UTC)" for o in still)
        err.print(
            f"[yellow]still failing, stale and left out of the answers: {names}; this does not fail "
            "the refresh (`gpucost status` says why)[/]",
            soft_wrap=True,
        )
    for provider, count in summary.retired_closed.items():
        console.print(f"{provider} is retired: closed its {count} open offers (see `gpucost status`)")


@app.command()
def check(
    providers: Annotated[
        str | None, typer.Option(help="Comma-separated provider slugs (default: all but retired ones).")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(help="Answer every request from this recorded cassette (offline), e.g. tests/replay."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON rows instead of a table.")] = False,
) -> None:
    """Fetch and parse each source once, load nothing, and compare with the warehouse's current offers.

    Exit code 1 when a source is unreachable, fails or parses to nothing (skipped for missing
    credentials is not a failure); 2 for bad input.
    """
    import json
    import tempfile

    import httpx

    from connectors.http import make_client
    from warehouse.check import baselines
    from warehouse.check import check as run_check
    from warehouse.db import Settings, open_reader
    from warehouse.load import previous_validators
    from warehouse.pipeline import CAUSE_HINTS, credentials_for, environment, select_connectors

    names = [p.strip() for p in providers.split(",") if p.strip()] if providers else None
    try:
        connectors = select_connectors(names)
    except ValueError as exc:
        raise _fail(str(exc), code=2) from None
    if replay is not None:
        _check_replay_dir(replay)
    settings = Settings()
    env = environment()
    creds = {c.name: credentials_for(c, env, replay=replay is not None) for c in connectors}
    before, previous = {}, {}
    try:
        con, _ = open_reader(settings)
    except WarehouseError:
        con = None  # no warehouse yet: nothing to compare with
    if con is not None:
        try:
            slugs = [c.name for c in connectors]
            before = baselines(con, slugs)
            if replay is None:  # a cassette answers the requests it recorded, not conditional ones
                previous = {slug: previous_validators(con, slug) for slug in slugs}
        finally:
            con.close()
    with tempfile.TemporaryDirectory(prefix="gpucost-check-") as spool:
        client = make_client(
            secrets=[v for _, values in creds.values() for v in values],
            timeout=httpx.Timeout(settings.http_timeout_seconds, connect=10.0),
            retries=settings.http_retries,
            backoff=settings.http_backoff_seconds,
            per_host=settings.http_per_host,
            replay=replay,
            spool_dir=Path(spool),
            request_deadline=settings.http_request_deadline_seconds,
        )
        with client:
            results = run_check(
                connectors,
                client,
                {name: pair[0] for name, pair in creds.items()},
                before,
                previous=previous,
                deadline_seconds=settings.provider_deadline_seconds,
            )
    if as_json:
        console.out(
            json.dumps([r.__dict__ | {"passed": r.passed} for r in results], indent=2), highlight=False
        )
    else:
        _print_frame(
            ["provider", "status", "reachable", "parsed", "offers", "change", "what to do"],
            [
                (
                    r.provider,
                    r.status,
                    _yes_no(r.reachable),
                    _yes_no(r.parsed),
                    r.offers,
                    _change(r.offers_before, r.offers, r.appeared, r.gone) if r.parsed else "",
                    # a cause with a hint of its own (no DNS) is said once, below the table
                    f"see below ({r.cause})" if r.cause in CAUSE_HINTS else r.hint or (r.error or ""),
                )
                for r in results
            ],
            title=f"check ({'replay ' + str(replay) if replay else 'live'}): nothing loaded",
        )
        for cause in sorted({r.cause for r in results if r.cause is not None and r.cause in CAUSE_HINTS}):
            err.print(f"{cause}: {CAUSE_HINTS[cause]}", soft_wrap=True)
    failed = [r for r in results if not r.passed]
    if failed:
        raise _fail(
            f"{len(failed)} source(s) did not pass: "
            + ", ".join(f"{r.provider} ({r.status})" for r in failed)
        )


def _yes_no(value: bool | None) -> str:
    return "" if value is None else "yes" if value else "NO"


def _change(before: int | None, after: int, appeared: tuple[str, ...], gone: tuple[str, ...]) -> str:
    """ "120→118, +1 type (a), -3 types (b, c, d)": the offer count against the warehouse's."""

    def names(items: tuple[str, ...]) -> str:
        shown = ", ".join(items[:3])
        return f"{shown}, +{len(items) - 3} more" if len(items) > 3 else shown

    if before is None:
        return "new (nothing in the warehouse)"
    parts = [f"{before}→{after}"]
    parts += [f"+{len(appeared)} type(s) ({names(appeared)})"] if appeared else []
    parts += [f"-{len(gone)} type(s) ({names(gone)})"] if gone else []
    return ", ".join(parts)


@app.command()
def sql(
    query: Annotated[str, typer.Argument(help="SQL to run read-only against the warehouse.")],
    csv: Annotated[bool, typer.Option("--csv", help="Print CSV instead of a table.")] = False,
) -> None:
    """Run read-only SQL against the warehouse (schemas: raw, ops, core, staging, marts).

    Several statements separated by `;` run in turn, each result printed under its own title. The
    connection cannot write the warehouse, touch files or the network, or load extensions.
    """
    from answers.query import EmptyQuery, run_read_only

    con = _read_only()
    try:
        results = run_read_only(con, query)
    except EmptyQuery as exc:
        raise _fail(str(exc), code=2) from None
    except AnswerError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    for result in results:
        if csv:
            import csv as csv_module

            if len(results) > 1:
                sys.stdout.write(f"# {result.title}\n")
            writer = csv_module.writer(sys.stdout)
            writer.writerow(result.columns)
            writer.writerows(result.rows)
        else:
            _print_frame(result.columns, result.rows, title=result.title if len(results) > 1 else None)


@app.command()
def export(
    format: Annotated[str, typer.Option("--format", help="csv, parquet or both.")] = "both",
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for the feeds (default: GPUCOST_FEEDS_DIR, else $GPUCOST_HOME/feeds)."),
    ] = None,
    include_stale: Annotated[
        bool,
        typer.Option(
            "--include-stale",
            help="Keep offers of providers failing for longer than GPUCOST_STALE_AFTER_HOURS in the offer "
            "feeds (their last_seen_at shows the age).",
        ),
    ] = False,
) -> None:
    """Write the feeds (explicit, versioned column lists) from the current marts, and the manifest.

    With GPUCOST_FEEDS_URL=s3://bucket/prefix set, they are also uploaded there, manifest last.
    """
    from warehouse.db import Settings
    from warehouse.export import FORMATS, write_feeds
    from warehouse.publish import PublishError, check_settings, publish_if_configured

    formats = FORMATS if format == "both" else (format,)
    if any(f not in FORMATS for f in formats):
        raise _fail(f"--format must be one of csv, parquet, both; got {format!r}", code=2)
    try:
        check_settings()
    except PublishError as exc:
        raise _fail(str(exc), code=2) from None
    _writable_dir(out or Settings().feeds_dir, "--out folder")
    con = _read_only(sandbox=False)  # it writes the feed files; the SQL is ours, not a user's
    try:
        # each of formats was checked against FORMATS above; mypy still sees tuple[str]
        written = write_feeds(con, out or Settings().feeds_dir, formats, include_stale=include_stale)  # type: ignore[arg-type]
    finally:
        con.close()
    if not written:
        raise _fail("no marts to export yet; run `gpucost refresh` first")
    for path, rows in written:
        console.print(f"{path}  ({rows} rows)")
    try:
        published = publish_if_configured(out or Settings().feeds_dir)
    except PublishError as exc:
        raise _fail(str(exc)) from None
    if published:
        console.print(published)


@app.command()
def report(
    out: Annotated[
        Path | None,
        typer.Option(help="Folder for index.html (default: site/ beside the feeds of the warehouse read)."),
    ] = None,
    include_stale: Annotated[
        bool,
        typer.Option(
            "--include-stale",
            help="Show offers of providers failing for longer than GPUCOST_STALE_AFTER_HOURS in the "
            "comparison.",
        ),
    ] = False,
    include_unavailable: Annotated[
        bool,
        typer.Option("--include-unavailable", help="Also rank offers the provider marks unavailable (✗)."),
    ] = False,
) -> None:
    """Write the comparison page: one self-contained index.html (opens from file://, no network)."""
    from answers.report import ReportUnavailable, default_site_dir, write_report

    folder = out or default_site_dir()
    _writable_dir(folder, "--out folder")
    con = _read_only()
    try:
        page = write_report(con, folder, include_stale=include_stale, include_unavailable=include_unavailable)
    except ReportUnavailable as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    size_mb = page.stat().st_size / 1e6
    console.print(f"{page}  ({size_mb:.2f} MB): open {page.resolve().as_uri()}", soft_wrap=True)


@app.command()
def status() -> None:
    """The last run of each provider: when, status, rows, error; which providers are failing or
    stale (failing for longer than GPUCOST_STALE_AFTER_HOURS), since when and why; retired ones;
    stale exchange rates and offers the marts leave out (an absurd converted price)."""
    from datetime import UTC, datetime

    from answers import status as answers_status
    from warehouse.db import Settings

    settings = Settings()
    con = _read_only()
    try:
        answer = answers_status.status(
            con, datetime.now(UTC), settings.stale_after_hours, settings.fx_stale_after_days
        )
    except AnswerError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    _print_frame(answer.columns, answer.rows, title="last run per provider")
    for provider, at in sorted(answer.last_good.items()):
        console.print(f"{provider}: last good prices from {at:%Y-%m-%d %H:%M} UTC")
    for run in answer.open_runs:
        console.print(
            f"run {run.run_id} {run.status} (started {run.started_at:%Y-%m-%d %H:%M} UTC)"
            f"{': ' + run.error if run.error else ''}"
        )
    for row in answer.health.iter_rows(named=True):
        state = row["provider_state"]
        kind = (
            "[bold red]stale[/] (left out of the answers; --include-stale shows them)"
            if state == "stale"
            else "failing"
        )
        console.print(
            f"{row['provider']}: {kind} since {row['provider_failing_since']:%Y-%m-%d %H:%M} UTC, "
            f"{row['failed_runs']} failed run(s); last error: {row['last_error'] or 'none recorded'}",
            soft_wrap=True,
            highlight=False,
        )
    for provider, retirement in sorted(answer.retired.items()):
        console.print(
            f"{provider}: retired since {retirement.since:%Y-%m-%d} ({retirement.reason}; "
            f"{retirement.source}); {answer.closed_as_retired.get(provider, 0)} offers closed as retired",
            soft_wrap=True,
            highlight=False,
        )
    for currency, rate_date, offers in answer.stale_fx_rates:
        console.print(
            f"warning: the {currency} exchange rate is from {rate_date:%Y-%m-%d}, older than "
            f"GPUCOST_FX_STALE_AFTER_DAYS; {offers} offer(s) priced in {currency} are converted with it "
            "(marts.gpu_offers.fx_rate_stale). Check the ecb provider's last run above and refresh it",
            soft_wrap=True,
        )
    for provider, reason, offers in answer.dropped_offers:
        why = (
            f"converted price over GPUCOST_MAX_USD_PER_GPU_HOUR (${settings.max_usd_per_gpu_hour:,g}"
            "/GPU-hour): a misread price or rate"
            if reason == "absurd_price"
            else reason
        )
        console.print(
            f"warning: {provider}: {offers} current offer(s) left out of the answers, {why}; "
            "the table marts.dropped_offers lists them (`gpucost sql`)",
            soft_wrap=True,
            highlight=False,
        )


@app.command()
def gpus() -> None:
    """The canonical GPU catalog with its specs (warehouse/seeds/gpus.csv)."""
    from answers import catalog

    columns, rows = catalog.gpu_catalog()
    _print_frame(columns, rows, title="canonical GPUs", limit=1000)


@app.command()
def unmapped() -> None:
    """Current offers whose GPU the seeds cannot name (fix: add an alias or instance type row),
    and spec conflicts: offers whose stated VRAM disagrees with the seed's (check the source)."""
    from answers import catalog

    con = _read_only()
    try:
        columns, rows = catalog.unmapped(con)
        conflict_columns, conflict_rows = catalog.spec_conflicts(con)
    except AnswerError as exc:
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if rows:
        _print_frame(columns, rows, title="unmapped GPU names")
    else:
        console.print("every current offer maps to a canonical GPU")
    count = sum(row[conflict_columns.index("offers")] for row in conflict_rows)
    console.print(f"spec_conflicts: {count} offers state a VRAM the seeds disagree with")
    if conflict_rows:
        _print_frame(conflict_columns, conflict_rows, title="spec conflicts (stated vs seed VRAM)")


@app.command()
def gc(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Report what would be freed; remove nothing.")
    ] = False,
) -> None:
    """Remove raw bodies the retention policy lets go (GPUCOST_RAW_RETENTION_DAYS) and say what it frees."""
    from datetime import UTC, datetime

    from warehouse.archive import collect_garbage
    from warehouse.db import Settings, connect, migrate, reader_path

    settings = Settings()
    path = reader_path(settings)  # the live warehouse, or the replay one while no live one exists
    if not path.exists():
        raise _fail(f"no warehouse at {settings.warehouse_path}; nothing to collect")
    try:
        con = connect(path)
        migrate(con)
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    try:
        days = settings.raw_retention_days
        report = collect_garbage(
            con, path.parent / "raw", retention_days=days, now=datetime.now(UTC), dry_run=dry_run
        )
    except ValueError as exc:
        raise _fail(f"{exc} (GPUCOST_RAW_RETENTION_DAYS)") from None
    finally:
        con.close()
    mb = 1024 * 1024
    removed = "would remove" if dry_run else "removed"
    rows = [
        (
            f"kept: bodies of {report.changed_runs} provider runs that changed prices",
            report.kept_changed_files,
            f"{report.kept_changed_bytes / mb:.1f}",
        ),
        (
            f"kept: the rest of the last {days} days",
            report.kept_recent_files,
            f"{report.kept_recent_bytes / mb:.1f}",
        ),
        (f"{removed}: older, changed no price", report.removed_files, f"{report.removed_bytes / mb:.1f}"),
        (f"{removed}: files no exchange references", report.orphan_files, f"{report.orphan_bytes / mb:.1f}"),
    ]
    _print_frame(["raw archive " + str(path.parent / "raw"), "files", "MB"], rows)
    verb = "would free" if dry_run else "freed"
    console.print(f"{verb} {report.freed_bytes / mb:.1f} MB ({report.removed_responses} exchanges' bodies)")
    if report.missing_files:
        missing = report.missing_files
        err.print(f"[yellow]{missing} archived bodies are missing from disk (moved or deleted by hand)[/]")


@app.command()
def deploy(
    work_pool: Annotated[str, typer.Option(help="The process work pool the deployments use.")] = "gpucost",
    prefect_file: Annotated[
        str, typer.Option(help="The deployments to register (relative to GPUCOST_PROJECT_DIR, or absolute).")
    ] = "deployments/prefect.yaml",
) -> None:
    """Register the scheduled deployments of deployments/prefect.yaml with the Prefect server.

    Needs GPUCOST_PROJECT_DIR (the checkout workers run the flow from) and PREFECT_API_URL (a
    running `prefect server start`). The work queue gets a concurrency limit of 1, so an
    overlapping scheduled run waits instead of meeting a busy warehouse, and an automation sets a
    refresh whose worker died `Crashed` once its heartbeats stop (flows/automations.py), so the
    next one is not queued behind it for ever.
    """
    project = os.environ.get("GPUCOST_PROJECT_DIR")
    if not project:
        raise _fail(
            'GPUCOST_PROJECT_DIR is not set: export GPUCOST_PROJECT_DIR="$PWD" from the repository root, '
            "so workers run the flow from this checkout",
            code=2,
        )
    if not all((Path(project) / name).is_file() for name in ("flows/refresh.py", prefect_file)):
        raise _fail(
            f"GPUCOST_PROJECT_DIR={project} is not a gpucost checkout "
            f"(no flows/refresh.py or {prefect_file})",
            code=2,
        )
    if not os.environ.get("PREFECT_API_URL"):
        raise _fail(
            "PREFECT_API_URL is not set: start `prefect server start` and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api",
            code=2,
        )
    import yaml  # Prefect's own dependency; only this command reads prefect.yaml

    names = [d["name"] for d in yaml.safe_load((Path(project) / prefect_file).read_text())["deployments"]]
    deploy_on_pool = ["prefect", "--no-prompt", "deploy", "--pool", work_pool, "--prefect-file", prefect_file]
    steps = [
        ["prefect", "work-pool", "create", work_pool, "--type", "process", "--overwrite"],
        ["prefect", "work-queue", "create", "default", "--pool", work_pool, "--limit", "1"],
        # one deployment at a time: `prefect deploy --all` ignores --pool and keeps prefect.yaml's pool
        *([*deploy_on_pool, "--name", name] for name in names),
    ]
    for step in steps:
        code = _run_step(step, project)
        if code != 0 and step[1] == "work-queue":
            # the pool made its own `default` queue (Prefect does on create): give that one the limit
            step = ["prefect", "work-queue", "set-concurrency-limit", "default", "1", "--pool", work_pool]
            code = _run_step(step, project)
        if code != 0:
            raise _fail(f"`{' '.join(step)}` failed (exit {code}); see its output above")
    _ensure_crash_automation()


def _ensure_crash_automation() -> None:
    """The automation that frees the slots of a refresh whose worker died (flows/automations.py)."""
    from flows import automations

    heartbeat = automations.heartbeat_seconds()
    if heartbeat is None:
        err.print(
            "[yellow]PREFECT_FLOWS_HEARTBEAT_FREQUENCY is off: a refresh whose worker dies stays "
            "Running and holds the queue until you set it Crashed by hand; unset it (default 180 s) "
            "and deploy again[/]"
        )
        return
    done = automations.ensure(heartbeat)
    console.print(
        f"automation {automations.NAME!r} {done}: a refresh silent for "
        f"{automations.MISSED_HEARTBEATS * heartbeat} s is set Crashed "
        f"(workers must send heartbeats every {heartbeat} s: the same PREFECT_FLOWS_HEARTBEAT_FREQUENCY)"
    )


def _run_step(step: list[str], cwd: str) -> int:
    """Run one `prefect` command of `deploy`, shown first; its exit code."""
    console.print("$ " + " ".join(step))
    try:
        return subprocess.run(step, cwd=cwd, check=False).returncode
    except FileNotFoundError:
        raise _fail(
            "`prefect` is not on PATH; run `uv run gpucost deploy` from the checkout (or activate its .venv)"
        ) from None


@app.command()
def serve(
    host: Annotated[
        str,
        typer.Option(
            help="Address to bind; 127.0.0.1 (loopback) by default. 0.0.0.0 exposes it to the network."
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port.")] = 8080,
    budget_seconds: Annotated[
        float,
        typer.Option(min=0.1, max=600.0, help="Most seconds of database work one estimate may take."),
    ] = 10.0,
) -> None:
    """The comparison page with a live job form, and a read-only JSON API over the answers
    (/api/estimate, /api/memory, /api/prices, /api/history, /api/status; schema at /docs)."""
    import socket

    from flows import web
    from warehouse.db import open_reader

    exposed = web.exposure(host, port, budget_seconds)
    try:
        family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
    except (OSError, UnicodeError) as exc:
        raise _fail(
            f"cannot listen on {host}:{port} ({getattr(exc, 'strerror', None) or exc}); is another "
            "server on that port, or the address not this machine's? "
            "pick another with --port"
        ) from None
    if exposed:
        err.print(f"[bold yellow]warning:[/] {exposed}", soft_wrap=True, highlight=False)
    try:  # say once, at start, what the answers will come from
        con, banner = open_reader()
        con.close()
    except WarehouseError as exc:
        banner = f"{exc} (the page and /api/prices answer 503 until then; memory and --gpu estimates work)"
    if banner:
        err.print(f"[yellow]{banner}[/]", soft_wrap=True, highlight=False)
    shown = f"[{host.strip('[]')}]" if ":" in host.strip("[]") else host
    console.print(
        f"gpucost serve: http://{shown}:{port}/ (the page), /api/estimate, /api/memory, /api/prices, "
        f"/api/history, /api/status; the schema at http://{shown}:{port}/docs. Ctrl-C stops it.",
        soft_wrap=True,
        highlight=False,
    )
    # uvicorn ends the process by the signal that stopped it: what is printed must be out by then
    sys.stdout.flush()
    sys.stderr.flush()
    web.serve(sock, budget_seconds=budget_seconds, any_host=exposed is not None)


server_app = typer.Typer(
    help="A local Prefect server for run tracking and schedules (pid, URL and log under $GPUCOST_HOME).",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")


@server_app.command("start")
def server_start(
    port: Annotated[
        int | None, typer.Option(min=1, max=65535, help="Port on 127.0.0.1 (default 4200, or a free one).")
    ] = None,
    database: Annotated[
        str | None,
        typer.Option(
            help="PostgreSQL for the server's database, postgresql://user:password@host:5432/db "
            "(default: PREFECT_API_DATABASE_CONNECTION_URL, else SQLite in PREFECT_HOME).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start a Prefect server in the background; later refreshes become flow runs there."""
    from flows import server
    from warehouse.db import Settings

    home = Settings().home
    try:
        pid, url = server.start(home, port=port, database=database)
    except server.DatabaseURLError as exc:
        raise _fail(str(exc), code=2) from None
    except RuntimeError as exc:
        raise _fail(str(exc)) from None
    on = server.running_database(home) or "SQLite in PREFECT_HOME"
    console.print(f"Prefect server running (pid {pid}) at {url} on {on}; UI at {url.removesuffix('/api')}")
    console.print(f"for deployments and workers: export PREFECT_API_URL={url}")


@server_app.command("stop")
def server_stop() -> None:
    """Stop the managed Prefect server."""
    from flows import server
    from warehouse.db import Settings

    stopped = server.stop(Settings().home)
    console.print("Prefect server stopped" if stopped else "no managed Prefect server was running")


@server_app.command("status")
def server_status() -> None:
    """Whether the managed Prefect server runs, where, and whether it answers."""
    from flows import server
    from warehouse.db import Settings

    home = Settings().home
    found = server.running(home)
    if not found:
        console.print(
            "no managed Prefect server is running; refreshes run in-process (`gpucost server start`)"
        )
        raise typer.Exit(3)
    pid, url = found
    state = "healthy" if server.healthy(url) else "not answering"
    on = server.running_database(home) or "SQLite"
    console.print(f"Prefect server pid {pid} at {url} on {on}: {state}; log {server.files(home).log}")


app.command()(cli_finetune.memory)
app.command()(cli_finetune.estimate)
app.command()(cli_finetune.models)
app.command()(cli_prices.prices)
app.command()(cli_prices.history)
app.command()(cli_providers.providers)
cli_backup.register(app)  # gpucost backup, gpucost restore
app.command()(cli_pull.pull)


if __name__ == "__main__":
    app()
