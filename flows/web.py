"""`gpucost serve`: the comparison page with a live job form, and the answers as a JSON API.

    gpucost serve [--host 127.0.0.1] [--port 8080] [--budget-seconds 10]

| path | answer | the CLI's twin |
|---|---|---|
| `/` | the comparison page (answers.report) with a "Plan a job" view | `gpucost report` |
| `/api/estimate` | one job ranked on current offers, or on stated hardware | `gpucost estimate --json` |
| `/api/memory` | the per-GPU memory of one job | `gpucost memory --json` |
| `/api/prices` | the cheapest offer per GPU, provider and pricing type | `gpucost prices --json` |
| `/api/history` | price intervals and a summary per series | `gpucost history --json` |
| `/api/status` | freshness and the last run per provider | `gpucost status` |
| `/openapi.json`, `/docs` | the API's schema, and a page listing it (no CDN) | |

Nothing here answers a question: each endpoint validates its fields, turns them into the same
question object the CLI builds (flows/cli_finetune.py `estimate_ask`, `memory_ask`;
flows/cli_prices.py `prices_filters`, `history_ask`) and asks `answers/`. The fields come from
the commands' own signatures (flows/options_schema.py), so the form and the API take every
option the CLI does and cannot drift from it.

Read-only by construction: every endpoint is GET (estimate and memory also take their fields as
a JSON body by POST, for a pasted config.json); the warehouse is opened by
`warehouse.db.open_reader` (read-only, sandboxed: no files, network or extensions; with the
replay fallback and sample-data banner of the read commands) and closed after, so a refresh can
take its write lock. Prices, memory, history and status open it per request; an estimate opens
it only when the file changed since the last one (OfferBooks: its book holds an in-memory copy of
what an estimate reads, so between refreshes no estimate opens or locks the file). No endpoint
takes a URL or a path: a model is a seeded name, a Hugging Face id (looked up in the local Hub
cache, then the Hub unless HF_HUB_OFFLINE) or a pasted config.json parsed with limits
(flows/hf_configs.parse_config). Bodies are capped (MAX_BODY_BYTES); an estimate gets at most
`budget_seconds` of database work (DuckDB is interrupted past it) and at most CONCURRENT_ASKS run
at once.
"""

# no `from __future__ import annotations`: FastAPI reads the endpoints' annotations at run time,
# and the request models are built at import

import html
import json
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any

import duckdb
from fastapi import Body, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, Response
from pydantic import Field
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from answers import AnswerError
from finetune.architecture import ModelSpec
from finetune.cost import BILL_ITEMS
from flows import cli_finetune, cli_prices
from flows.hf_configs import MAX_CONFIG_BYTES
from flows.job_options import (
    JOB_OPTIONS,
    JobOptions,
    OptionError,
    quiet_option_errors,
    resolve_model,
)
from flows.options_schema import OptionField, command_fields, field_errors, finite, request_model
from warehouse.errors import WarehouseError

if TYPE_CHECKING:  # answers.estimate loads polars and the marts: imported when first asked
    from answers.estimate import OfferBook

__all__ = [
    "CONCURRENT_ASKS",
    "DEFAULT_BUDGET_SECONDS",
    "MAX_BODY_BYTES",
    "create_app",
    "exposure",
    "serve",
]

DEFAULT_BUDGET_SECONDS = 10.0
# two estimates at once keep both cores of a small machine busy; more would only queue in DuckDB
CONCURRENT_ASKS = 2
# a pasted config.json at its limit, JSON-escaped (up to 2×), and the other fields
MAX_BODY_BYTES = 2 * MAX_CONFIG_BYTES + 16 * 1024
# the rows of `excluded` an estimate answers with (the total is given too)
EXCLUDED_ROWS = 100
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")

CONFIG_JSON = (
    str | None,
    Field(
        None,
        max_length=MAX_CONFIG_BYTES,
        description="A Hugging Face config.json's text, instead of `model` (parsed with limits: no "
        "NaN, 1e400 or 15-digit integers, at most 1024 layers).",
    ),
)
# the options a request cannot give: a path the server would read, and output formats
ESTIMATE_FIELDS = command_fields(cli_finetune.estimate, frozenset({"config", "bill", "as_json"}))
MEMORY_FIELDS = command_fields(cli_finetune.memory, frozenset({"config", "as_json"}))
PRICES_FIELDS = command_fields(cli_prices.prices, frozenset({"as_json", "as_csv"}))
HISTORY_FIELDS = command_fields(cli_prices.history, frozenset({"as_json", "as_csv"}))
EstimateRequest = request_model("EstimateRequest", ESTIMATE_FIELDS, config_json=CONFIG_JSON)
MemoryRequest = request_model("MemoryRequest", MEMORY_FIELDS, config_json=CONFIG_JSON)
PricesRequest = request_model("PricesRequest", PRICES_FIELDS)
HistoryRequest = request_model("HistoryRequest", HISTORY_FIELDS)
StatusRequest = request_model("StatusRequest", [])  # no fields: anything given is refused
JOB_FIELDS = frozenset(JOB_OPTIONS) - {"config"}
_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")


class Refused(Exception):
    """An answer the server will not give: `status` and a message that says what to do; for a
    422, `errors` holds one `{"field", "flag", "message"}` per bad field."""

    def __init__(self, status: int, message: str, errors: list[dict[str, str]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors


def _errors(found: list[tuple[str, str]]) -> Refused:
    errors = [{"field": field, "flag": _flag_of(field), "message": message} for field, message in found]
    return Refused(422, "; ".join(message for _, message in found), errors)


def _flag_of(field: str) -> str:
    for f in (*ESTIMATE_FIELDS, *MEMORY_FIELDS):
        if f.name == field:
            return f.flag
    return field


def _field_named(message: str, fields: list[OptionField], fallback: str) -> str:
    """The field whose flag a rule's message names first (the messages start with it)."""
    flags = {f.flag: f.name for f in fields}
    for flag in _FLAG.findall(message):
        if flag in flags:
            return flags[flag]
    return fallback


# -- budget -------------------------------------------------------------------------------------


class Budget:
    """At most `concurrent` asks at once, each with at most `seconds` of database work."""

    def __init__(self, seconds: float, concurrent: int = CONCURRENT_ASKS) -> None:
        self.seconds = seconds
        self._slots = threading.BoundedSemaphore(concurrent)

    @contextmanager
    def spend(self, con: duckdb.DuckDBPyConnection | None) -> Iterator[None]:
        if not self._slots.acquire(timeout=self.seconds):
            raise Refused(503, f"the server is busy with other estimates for over {self.seconds:g} s; retry")
        started = time.monotonic()
        timer = None if con is None else threading.Timer(self.seconds, con.interrupt)
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            yield
        except duckdb.InterruptException:
            raise self._over() from None
        finally:
            if timer is not None:
                timer.cancel()
            self._slots.release()
        # work DuckDB could not interrupt (the model, polars) still counts against the budget
        if time.monotonic() - started > self.seconds:
            raise self._over()

    def _over(self) -> Refused:
        return Refused(
            503,
            f"this question needs more than the {self.seconds:g} s compute budget per request; narrow "
            "it (offer_gpu, provider, max_nodes) or start the server with a larger --budget-seconds",
        )


# -- the questions ------------------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(UTC)


@contextmanager
def _reader() -> Iterator[tuple[duckdb.DuckDBPyConnection, str | None]]:
    """The read commands' warehouse (`open_reader`: read-only, sandboxed, replay fallback)."""
    from warehouse.db import open_reader

    try:
        con, banner = open_reader()
    except WarehouseError as exc:  # missing, or a refresh holds it
        raise Refused(503, str(exc)) from None
    try:
        yield con, banner
    finally:
        con.close()


@contextmanager
def _question_reader(
    book: "OfferBook | None", banner: str | None
) -> Iterator[tuple[duckdb.DuckDBPyConnection, str | None]]:
    """What one estimate reads, and its banner: the book's copy of the warehouse (the banner
    the book was read with), or without a book the warehouse itself (`_reader`)."""
    if book is None:
        with _reader() as found:
            yield found
    else:
        with book.reader() as con:
            yield con, banner


def warehouse_version() -> tuple[str, int, int, int]:
    """The reader warehouse's file as a version: path, inode, mtime (ns) and size (zeros while it
    is missing). A refresh in another process rewrites or replaces the file, which changes it."""
    from warehouse.db import Settings, reader_path

    path = reader_path(Settings())
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (str(path), 0, 0, 0)
    return (str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)


class OfferBooks:
    """The reader warehouse's `answers.estimate.OfferBook` (its offers, billing rules, priced
    offers and a copy of what a question reads: everything an estimate reads whatever the job),
    with what the file holds (`warehouse.db.data_banner`), read again when the file's version
    changes. The version is taken before the warehouse is opened, so a book is never older than
    the version it is kept under (a change in between only reads it once more). Between changes
    no question opens the file: none pays for opening it, and none holds its lock when a refresh
    in another process wants to write."""

    def __init__(self) -> None:
        self._version: tuple[str, int, int, int] | None = None
        self._kept: tuple[OfferBook, str | None] | None = None
        self._lock = threading.Lock()

    def current(self, budget: Budget) -> tuple["OfferBook", str | None]:
        """The book of the warehouse as it is now, and its banner (`open_reader`'s): read when
        the file changed, within `budget`. Refused (503) while the file cannot be opened;
        WarehouseError before its first refresh (no marts.gpu_offers)."""
        from warehouse.db import reader_banner

        book, data = self.kept(warehouse_version(), lambda: self._read(budget))
        return book, reader_banner(data)

    def kept(
        self, version: tuple[str, int, int, int], read: Callable[[], tuple["OfferBook", str | None]]
    ) -> tuple["OfferBook", str | None]:
        """The book and data banner kept for `version`, or `read()` when another one is kept."""
        with self._lock:
            if version == self._version and self._kept is not None:
                return self._kept
        kept = read()
        with self._lock:
            self._version, self._kept = version, kept
        return kept

    @staticmethod
    def _read(budget: Budget) -> tuple["OfferBook", str | None]:
        from answers.estimate import OfferBook
        from warehouse.db import data_banner

        with _reader() as (con, _), budget.spend(con):
            return OfferBook.read(con), data_banner(con)


def _split(values: dict[str, Any]) -> tuple[JobOptions, dict[str, Any]]:
    job = JobOptions(**{k: values.pop(k) for k in list(values) if k in JOB_FIELDS})
    return job, values


def _model_and_job(
    job: JobOptions, own: dict[str, Any], pasted: str | None, fields: list[OptionField], sharding: str
) -> Any:
    """The model (OptionError as 422s): each rule checked on its own, so every bad field is named
    at once, then the model."""
    found: list[tuple[str, str]] = []
    checks: list[tuple[str, Callable[[], object]]] = [
        ("config_json" if pasted is not None else "model", lambda: resolve_model(job, pasted)),
        ("checkpoint_every", job.experiment),
        ("seq_len", lambda: job.job(sharding=sharding, padding_efficiency=own.get("padding_efficiency"))),
    ]
    if "tokens" in own:
        checks.append(("tokens", lambda: cli_finetune.parse_tokens(own["tokens"])))
    spec = None
    for fallback, check in checks:
        try:
            result = check()
        except OptionError as exc:
            found.append((_field_named(exc.message, fields, fallback), exc.message))
            continue
        if fallback in ("model", "config_json"):
            spec = result
    if not found and isinstance(spec, ModelSpec):
        # what only the model and the job together can refuse (`require_expressible`): a soft-capped
        # model's eager attention cannot keep packed documents apart
        try:
            job.job(sharding=sharding, padding_efficiency=own.get("padding_efficiency"), model=spec)
        except OptionError as exc:
            found.append((_field_named(exc.message, fields, "doc_len"), exc.message))
    if found:
        raise _errors(found)
    return spec


def ask_estimate(values: dict[str, Any], budget: Budget, books: OfferBooks | None = None) -> dict[str, Any]:
    """`/api/estimate`: the question `gpucost estimate` would ask, answered by answers.estimate;
    `books` keeps what is read of the warehouse between questions (None: read it each time)."""
    from answers.estimate import offer_memory
    from answers.prices import check_filters

    pasted = values.pop("config_json", None)
    job, own = _split(values)
    with quiet_option_errors():
        sharding = "zero3" if job.offload else "none"
        spec = _model_and_job(job, own, pasted, ESTIMATE_FIELDS, sharding)
        try:
            ask = cli_finetune.estimate_ask(job, spec=spec, **own)
        except OptionError as exc:
            raise _errors([(_field_named(exc.message, ESTIMATE_FIELDS, "gpu"), exc.message)]) from None
    head = {
        "model_id": spec.model_id,
        "params": spec.params,
        "method": ask.fjob.job.method,
        "train_tokens": ask.fjob.train_tokens,
        "experiment": cli_finetune.experiment_text(ask.fjob),
        "bill_items": list(BILL_ITEMS),
    }
    if ask.hardware is not None:
        with budget.spend(None):
            try:
                answer = ask.on_hardware()
            except AnswerError as exc:
                raise _errors([("gpu", str(exc))]) from None
        # on stated hardware the options are judged on the job as placed there
        head["warning"] = _warnings(job.context_warning(spec), ask.knob_warning(answer))
        return {**head, "kind": "stated", "notice": None, "stated": cli_finetune.stated_payload(
            answer, ask.fjob, ask.shape
        )}  # fmt: skip
    head["warning"] = _warnings(job.context_warning(spec), ask.knob_warning())
    book, banner = None, None
    if books is not None:
        try:
            book, banner = books.current(budget)
        except WarehouseError:  # no marts.gpu_offers yet: the warehouse itself says why, below
            book = None
    with _question_reader(book, banner) as (con, banner), budget.spend(con):
        try:  # a filter naming nothing that exists is the field's fault
            check_filters(con, ask.filters)
        except AnswerError as exc:
            raise _errors([(_field_named(str(exc), ESTIMATE_FIELDS, "offer_gpu"), str(exc))]) from None
        try:
            ranking = ask.rank(con, _now(), book)
        except AnswerError as exc:  # nothing matches, nothing fits: the answer says why
            return {**head, "kind": "ranking", "notice": banner, "why": str(exc), "offers": []}
        offers = ask.ranked_payload(ranking)
        excluded = ranking.excluded()
        best = ranking.shown(1, False).row(0, named=True)
        memory = offer_memory(spec, ask.fjob.job, best)
    return {
        **head,
        "kind": "ranking",
        "notice": banner,
        "why": None,
        "counts": {
            "offers": ranking.rows.height,
            "fitting": ranking.fitting,
            "priced": ranking.marked.height,
            "folded": ranking.folded,
        },
        "offers": offers,
        "memory": {
            "offer": {k: best[k] for k in ("provider", "instance_type", "region", "pricing_type")},
            "sharding": best["sharding"],
            "n_gpus": best["gpus_used"],
            "trainable_params": memory.trainable_params,
            "memory_gb": memory.breakdown.as_dict(),
            "totals_gb": cli_finetune.memory_totals(memory.breakdown),
        },
        "excluded": cli_finetune.json_ready(excluded.head(EXCLUDED_ROWS).to_dicts()),
        "excluded_total": excluded.height,
    }


def ask_memory(values: dict[str, Any], budget: Budget) -> dict[str, Any]:
    """`/api/memory`: `gpucost memory --json` for the same fields."""
    pasted = values.pop("config_json", None)
    job, own = _split(values)
    with quiet_option_errors():
        spec = _model_and_job(job, own, pasted, MEMORY_FIELDS, own["sharding"])
        try:
            ask = cli_finetune.memory_ask(job, gpus=own["gpus"], sharding=own["sharding"], spec=spec)
        except OptionError as exc:
            raise _errors([(_field_named(exc.message, MEMORY_FIELDS, "sharding"), exc.message)]) from None
    with budget.spend(None):
        payload = ask.payload()
    return {
        **cli_finetune.json_ready(payload),
        "warning": _warnings(job.context_warning(spec), ask.knob_warning()),
    }


def _warnings(*warnings: str | None) -> str | None:
    """The answer's one `warning` line: the context length's and the idle options', as given."""
    given = [w for w in warnings if w]
    return "; ".join(given) if given else None


def ask_prices(values: dict[str, Any]) -> dict[str, Any]:
    """`/api/prices`: `gpucost prices --json`'s rows, and why there are none."""
    from answers.prices import why_no_prices

    with quiet_option_errors():
        try:
            filters = cli_prices.prices_filters(**values)
        except OptionError as exc:
            raise _errors([(_field_named(exc.message, PRICES_FIELDS, "spot"), exc.message)]) from None
        now = _now()
        with _reader() as (con, banner):
            try:
                rows = cli_prices.price_rows(con, filters, now)
                why = why_no_prices(con, banner, filters, now) if rows.is_empty() else None
            except AnswerError as exc:  # a filter naming nothing that exists
                raise _errors([(_field_named(str(exc), PRICES_FIELDS, "gpu"), str(exc))]) from None
    return {"notice": banner, "why": why, "rows": cli_prices.rows_json(rows)}


def ask_history(values: dict[str, Any]) -> dict[str, Any]:
    """`/api/history`: `gpucost history --json`'s intervals and its summary per series."""
    from answers import prices as answers

    now = _now()
    with quiet_option_errors():
        try:
            filters, start = cli_prices.history_ask(now=now, **values)
        except OptionError as exc:
            raise _errors([(_field_named(exc.message, HISTORY_FIELDS, "since"), exc.message)]) from None
        with _reader() as (con, banner):
            try:
                intervals = answers.price_intervals(con, filters, start, now)
            except AnswerError as exc:
                raise _errors([(_field_named(str(exc), HISTORY_FIELDS, "gpu"), str(exc))]) from None
    summary = answers.history_summary(intervals, start, now) if not intervals.is_empty() else None
    return {
        "notice": banner,
        "since": start.isoformat(),
        "rows": cli_prices.rows_json(cli_prices.history_rows(intervals)),
        "summary": [] if summary is None else cli_prices.rows_json(summary),
    }


def ask_status() -> dict[str, Any]:
    """`/api/status`: what `gpucost status` prints, and the page's freshness panel."""
    from answers import status as answers_status
    from warehouse.db import Settings

    settings = Settings()
    with _reader() as (con, banner):
        freshness = answers_status.freshness(con)
        try:
            answer = answers_status.status(
                con, _now(), settings.stale_after_hours, settings.fx_stale_after_days
            )
        except AnswerError as exc:  # no run recorded yet
            return {"notice": banner, "why": str(exc), "providers": [], "freshness": freshness}
    return cli_finetune.json_ready(
        {
            "notice": banner,
            "why": None,
            "providers": [dict(zip(answer.columns, row, strict=True)) for row in answer.rows],
            "last_good": answer.last_good,
            "open_runs": [vars(run) for run in answer.open_runs],
            "failing": answer.health.to_dicts(),
            "stale_fx_rates": answer.stale_fx_rates,
            "dropped_offers": answer.dropped_offers,
            "freshness": freshness,
        }
    )


# -- the page -----------------------------------------------------------------------------------


def planner_context() -> dict[str, Any]:
    """What the page's "Plan a job" form is drawn from: estimate's fields and the seeded models."""
    from warehouse.seed_models import load_models

    return {
        "fields": [vars(f) for f in ESTIMATE_FIELDS],
        "models": sorted(load_models(), key=str.lower),
        "max_config_bytes": MAX_CONFIG_BYTES,
        "bill_items": list(BILL_ITEMS),
    }


class PageCache:
    """The rendered page per warehouse file version: rebuilt when a refresh changes the file."""

    def __init__(self) -> None:
        self._key: tuple[str, int, int, int] | None = None
        self._html = ""
        self._lock = threading.Lock()

    def page(self) -> str:
        from answers.report import ReportUnavailable, render_html, report_data

        key = warehouse_version()
        with self._lock:
            if key == self._key:
                return self._html
            with _reader() as (con, _):
                try:
                    data = report_data(con)
                except ReportUnavailable as exc:
                    raise Refused(503, str(exc)) from None
            self._html = render_html(data, planner=planner_context())
            self._key = key
            return self._html


def _docs_page(schema: dict[str, Any]) -> str:
    """/docs: the OpenAPI schema as one plain page (FastAPI's Swagger UI loads from a CDN)."""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{html.escape(schema['info']['title'])}</title>"
        "<style>body{font-family:system-ui,sans-serif;margin:1rem;max-width:60rem}"
        "td,th{text-align:left;padding:.2rem .5rem;vertical-align:top;border-bottom:1px solid #ddd}"
        "table{border-collapse:collapse;width:100%}code{font-size:.9em}</style></head><body>",
        f"<h1>{html.escape(schema['info']['title'])}</h1>",
        f"<p>{html.escape(schema['info'].get('description', ''))}</p>",
        "<p>The schema: <a href='/openapi.json'>/openapi.json</a></p>",
    ]
    for path, methods in schema["paths"].items():
        for method, operation in methods.items():
            parts.append(f"<h2><code>{method.upper()} {html.escape(path)}</code></h2>")
            what = operation.get("description") or operation.get("summary", "")
            parts.append(f"<p>{html.escape(what)}</p>")
            parameters = operation.get("parameters", [])
            if parameters:
                parts.append("<table><tr><th>field</th><th>type</th><th>default</th><th>what</th></tr>")
                for p in parameters:
                    kind = p.get("schema", {})
                    types_ = kind.get("type") or "/".join(
                        str(a.get("type") or a.get("enum") or a.get("const")) for a in kind.get("anyOf", [])
                    )
                    if "enum" in kind:
                        types_ = " | ".join(map(str, kind["enum"]))
                    required = " (required)" if p.get("required") else ""
                    parts.append(
                        f"<tr><td><code>{html.escape(p['name'])}</code>{required}"
                        f"</td><td>{html.escape(str(types_))}</td>"
                        f"<td>{html.escape(json.dumps(kind.get('default')))}</td>"
                        f"<td>{html.escape(p.get('description') or kind.get('description', ''))}</td></tr>"
                    )
                parts.append("</table>")
    parts.append("</body></html>")
    return "".join(parts)


# -- the app ------------------------------------------------------------------------------------


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is answered 413, and never read whole.

    A declared Content-Length over the limit is refused before anything is read; a body without
    one is counted as it arrives, and past the limit the app is told the client left (so it stops
    reading) and its answer is replaced by the 413."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(send)
            return
        seen = 0
        over = False

        async def counted() -> Message:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                over = True
                return {"type": "http.disconnect"}
            return message

        async def unless_over(message: Message) -> None:
            if not over:
                await send(message)

        await self.app(scope, counted, unless_over)
        if over:
            await self._refuse(send)

    async def _refuse(self, send: Send) -> None:
        body = json.dumps(
            {"detail": f"the request body is over {self.limit:,} bytes; a config.json is a few KB"}
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class Headers:
    """ASGI middleware: no MIME sniffing, and no Referer carrying a job's URL anywhere."""

    EXTRA = ((b"x-content-type-options", b"nosniff"), (b"referrer-policy", b"no-referrer"))

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.EXTRA]}
            await send(message)

        await self.app(scope, receive, with_headers if scope["type"] == "http" else send)


def _json(payload: Any, status: int = 200) -> Response:
    body = json.dumps(finite(payload), allow_nan=False, ensure_ascii=False)
    return Response(body, status_code=status, media_type="application/json")


def _answer(ask: Callable[[], dict[str, Any]]) -> Response:
    try:
        return _json(ask())
    except Refused as exc:
        return _json({"detail": exc.errors if exc.errors is not None else exc.message}, exc.status)


def create_app(
    *, budget_seconds: float = DEFAULT_BUDGET_SECONDS, allowed_hosts: tuple[str, ...] = LOOPBACK
) -> FastAPI:
    """The app `gpucost serve` runs; `allowed_hosts` the Host headers it answers (loopback names
    by default, so a web page elsewhere cannot reach it by DNS rebinding; "*" for any)."""
    budget = Budget(budget_seconds)
    pages = PageCache()
    books = OfferBooks()
    app = FastAPI(
        title="gpucost",
        description="Live GPU rental prices and what a fine-tuning job costs on them: the answers of "
        "`gpucost estimate`, `memory`, `prices`, `history` and `status` as JSON. Read-only.",
        version="1",
        docs_url=None,
        redoc_url=None,
    )

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, exc: RequestValidationError) -> Response:
        fields = [*ESTIMATE_FIELDS, *MEMORY_FIELDS, *PRICES_FIELDS, *HISTORY_FIELDS]
        # loc is ("query" | "body", field): the field is what a user named
        errors = [{**e, "loc": tuple(e["loc"][1:]) or ("request",)} for e in exc.errors()]
        return _json({"detail": field_errors(errors, fields)}, 422)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> Response:
        try:
            return HTMLResponse(pages.page())
        except Refused as exc:
            return HTMLResponse(f"<p>{html.escape(exc.message)}</p>", exc.status)

    @app.get("/docs", response_class=HTMLResponse, include_in_schema=False)
    def docs() -> Response:
        return HTMLResponse(_docs_page(app.openapi()))

    @app.get("/api/estimate")
    def estimate_get(query: Annotated[EstimateRequest, Query()]) -> Response:  # type: ignore[valid-type]
        """`gpucost estimate --json` for these fields: the ranking of current offers by the whole
        bill (or, with `gpu`, the job on stated hardware), the chosen offer's memory by component,
        and why each other offer was left out."""
        return _answer(lambda: ask_estimate(query.model_dump(), budget, books))  # type: ignore[attr-defined]

    @app.post("/api/estimate")
    def estimate_post(body: Annotated[EstimateRequest, Body()]) -> Response:  # type: ignore[valid-type]
        """The same as GET, the fields as a JSON object (a pasted config.json fits a body better)."""
        return _answer(lambda: ask_estimate(body.model_dump(), budget, books))  # type: ignore[attr-defined]

    @app.get("/api/memory")
    def memory_get(query: Annotated[MemoryRequest, Query()]) -> Response:  # type: ignore[valid-type]
        """`gpucost memory --json`: peak memory per GPU by component."""
        return _answer(lambda: ask_memory(query.model_dump(), budget))  # type: ignore[attr-defined]

    @app.post("/api/memory")
    def memory_post(body: Annotated[MemoryRequest, Body()]) -> Response:  # type: ignore[valid-type]
        """The same as GET, the fields as a JSON object."""
        return _answer(lambda: ask_memory(body.model_dump(), budget))  # type: ignore[attr-defined]

    @app.get("/api/prices")
    def prices(query: Annotated[PricesRequest, Query()]) -> Response:  # type: ignore[valid-type]
        """`gpucost prices --json`: the cheapest current offer per GPU, provider and pricing type."""
        return _answer(lambda: ask_prices(query.model_dump()))  # type: ignore[attr-defined]

    @app.get("/api/history")
    def history(query: Annotated[HistoryRequest, Query()]) -> Response:  # type: ignore[valid-type]
        """`gpucost history --json`: price intervals, and a summary per series."""
        return _answer(lambda: ask_history(query.model_dump()))  # type: ignore[attr-defined]

    @app.get("/api/status")
    def status(query: Annotated[StatusRequest, Query()]) -> Response:  # type: ignore[valid-type]
        """`gpucost status`: the last run per provider, failing and stale ones, freshness."""
        return _answer(ask_status)

    app.add_middleware(Headers)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts))
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)
    return app


def serve(sock: socket.socket, *, budget_seconds: float, any_host: bool) -> None:
    """Run the app on the bound `sock` until Ctrl-C or SIGTERM (uvicorn, one process)."""
    import uvicorn

    hosts = ("*",) if any_host else LOOPBACK
    app = create_app(budget_seconds=budget_seconds, allowed_hosts=hosts)
    config = uvicorn.Config(app, log_level="warning", server_header=False, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])


def exposure(host: str, port: int, budget_seconds: float = DEFAULT_BUDGET_SECONDS) -> str | None:
    """What binding to `host` exposes, for a host other than loopback; None on loopback."""
    if host in LOOPBACK:
        return None
    return (
        f"serving on {host}:{port}: anyone who can reach this machine on that port can read every "
        "current price, the price history and the run status of this warehouse, and make it compute "
        f"estimates (each within the {budget_seconds:g} s budget, {CONCURRENT_ASKS} at a time). "
        "Nothing can be written or refreshed through it and it fetches no URL a request gives; there "
        "is no login. Put it behind your own proxy with authentication, or bind 127.0.0.1"
    )
