"""Warehouse: migrations, raw archive, validation, SCD2 history, shrink guard, marts, feeds."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pytest

from connectors.base import Offer, RawResponse, Unchanged
from tests.factories import make_offer
from warehouse.archive import read_body
from warehouse.db import (
    MigrationError,
    WarehouseBusy,
    WarehouseMissing,
    connect,
    load_seeds,
    migrate,
    open_warehouse,
)
from warehouse.export import FEEDS, write_feeds
from warehouse.load import land_raw, load_offers, previous_validators
from warehouse.marts import build_marts, sql_models

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)


def offer(instance_type: str = "p5.48xlarge", price: float = 55.04, **kw) -> Offer:
    return make_offer(instance_type, price, **{"gpu_count": 8.0, **kw})


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    yield con
    con.close()


def history(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute(
        "select instance_type, region, pricing_type, price_per_hour, valid_to is null "
        "from core.offer_prices order by instance_type, region, pricing_type, valid_from"
    ).fetchall()


def record_ok(con, run_id: str, provider: str, loaded: int, at: datetime) -> None:
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at, offers_loaded) "
        "values (?, ?, 'ok', ?, ?)",
        [run_id, provider, at, loaded],
    )


def test_migrations_twice_are_a_noop(con):
    assert migrate(con) == []
    tables = con.execute(
        "select table_schema || '.' || table_name from information_schema.tables order by 1"
    ).fetchall()
    assert ("core.offer_prices",) in tables and ("ops.quarantine",) in tables


def test_an_edited_migration_is_refused(con, tmp_path: Path):
    (tmp_path / "001_init.sql").write_text("select 1")
    with pytest.raises(MigrationError, match="edited after it was applied"):
        migrate(con, tmp_path)


def test_seeds_load_into_core(con):
    tables = {
        r[0]
        for r in con.execute("select table_name from duckdb_tables() where schema_name = 'core'").fetchall()
    }
    assert {"gpus", "gpu_aliases", "instance_types", "providers", "llm_models", "finetune_jobs"} <= tables
    assert con.execute("select vram_gb from core.gpus where gpu_name = 'L4'").fetchall() == [(24,)]


def test_rerun_with_unchanged_prices_adds_nothing(con):
    first = load_offers(con, "r1", "aws", [offer(), offer("g6.xlarge", 0.8048, gpu_count=1.0)], now=T0)
    assert (first.status, first.rows_inserted, first.rows_closed) == ("ok", 2, 0)
    record_ok(con, "r1", "aws", 2, T0)
    second = load_offers(
        con, "r2", "aws", [offer(), offer("g6.xlarge", 0.8048, gpu_count=1.0)], now=T0 + timedelta(hours=1)
    )
    assert (second.rows_inserted, second.rows_closed) == (0, 0)
    assert con.execute("select count(*), max(last_seen_at) from core.offer_prices").fetchall() == [
        (2, T0 + timedelta(hours=1))
    ]


def test_price_change_closes_and_opens_an_interval(con):
    load_offers(con, "r1", "aws", [offer()], now=T0)
    record_ok(con, "r1", "aws", 1, T0)
    result = load_offers(con, "r2", "aws", [offer(price=49.0)], now=T0 + timedelta(hours=1))
    assert (result.rows_inserted, result.rows_closed) == (1, 1)
    assert history(con) == [
        ("p5.48xlarge", "us-east-1", "on_demand", 55.04, False),
        ("p5.48xlarge", "us-east-1", "on_demand", 49.0, True),
    ]
    closed = con.execute(
        "select valid_to, closed_by_run_id from core.offer_prices where valid_to is not null"
    ).fetchall()
    assert closed == [(T0 + timedelta(hours=1), "r2")]


def test_vanished_offer_is_closed_but_unchanged_scope_is_kept(con):
    load_offers(
        con,
        "r1",
        "aws",
        [offer(), offer(region="eu-west-1"), offer("g6.xlarge", 0.8, gpu_count=1.0)],
        now=T0,
    )
    record_ok(con, "r1", "aws", 3, T0)
    # eu-west-1 was not re-read (its file is unchanged); g6.xlarge is gone from us-east-1.
    result = load_offers(
        con,
        "r2",
        "aws",
        [offer()],
        [Unchanged({"region": "eu-west-1", "pricing_type": "on_demand"})],
        now=T0 + timedelta(hours=1),
    )
    assert result.status == "ok" and result.offers_carried == 1 and result.rows_closed == 1
    current = con.execute(
        "select instance_type, region from core.offer_prices where valid_to is null order by 2"
    ).fetchall()
    assert current == [("p5.48xlarge", "eu-west-1"), ("p5.48xlarge", "us-east-1")]


def test_invalid_rows_are_quarantined_with_a_reason(con):
    rows = [
        offer(),
        offer("a", 0.0),
        offer("b", float("nan")),
        offer("c", -1.0),
        offer("d", 3.0, currency="EUR"),
        offer(),  # duplicate key
    ]
    result = load_offers(con, "r1", "aws", rows, now=T0)
    assert (result.offers_loaded, result.offers_quarantined) == (1, 5)
    reasons = dict(con.execute("select reason, count(*) from ops.quarantine group by 1").fetchall())
    assert reasons == {
        "zero or negative price": 2,
        "price is not a finite number": 1,
        "unknown currency 'EUR' (no rate in core.fx_rates)": 1,
        "duplicate offer key in one batch": 1,
    }
    quarantined = json.loads(
        con.execute("select offer from ops.quarantine where reason like 'unknown%'").fetchall()[0][0]
    )
    assert quarantined["instance_type"] == "d" and quarantined["price_per_hour"] == 3.0


def test_a_batch_that_shrinks_by_more_than_half_is_rejected(con):
    load_offers(con, "r1", "aws", [offer(f"t{i}", 1.0 + i) for i in range(10)], now=T0)
    record_ok(con, "r1", "aws", 10, T0)
    result = load_offers(con, "r2", "aws", [offer("t1", 2.0), offer("t2", 3.0)], now=T0 + timedelta(hours=1))
    assert result.status == "rejected" and "shrank from 10 to 2" in result.error
    assert con.execute("select count(*) from core.offer_prices where valid_to is null").fetchall() == [(10,)]
    forced = load_offers(
        con, "r3", "aws", [offer("t1", 2.0)], now=T0 + timedelta(hours=2), accept_shrink=True
    )
    assert forced.status == "ok" and forced.rows_closed == 9


def test_an_empty_batch_is_rejected(con):
    load_offers(con, "r1", "aws", [offer()], now=T0)
    result = load_offers(con, "r2", "aws", [], now=T0)
    assert result.status == "rejected"
    assert con.execute("select count(*) from core.offer_prices where valid_to is null").fetchall() == [(1,)]


def test_raw_bodies_are_content_addressed_and_stored_once(con, tmp_path: Path):
    body = b'{"Items": []}'
    responses = [
        RawResponse(
            url="https://x.test/a",
            method="GET",
            status=200,
            fetched_at=T0,
            body=body,
            headers={"etag": '"1"'},
        ),
        RawResponse(url="https://x.test/b", method="GET", status=200, fetched_at=T0, body=body),
    ]
    assert land_raw(con, tmp_path, "r1", "azure", responses) == 2 * len(body)
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) == 1 and read_body(tmp_path, files[0].relative_to(tmp_path).as_posix(), "zstd") == body
    rows = con.execute("select seq, url, payload_path from raw.responses order by seq").fetchall()
    assert rows[0][2] == rows[1][2] == files[0].relative_to(tmp_path).as_posix()
    record_ok(con, "r1", "azure", 1, T0)
    assert previous_validators(con, "azure")["https://x.test/a"] == {"etag": '"1"'}


def test_sql_models_run_in_dependency_order():
    order = [m.relation for m in sql_models()]
    assert order.index("staging.stg_offers__current") < order.index("marts.gpu_offers")
    assert order.index("staging.stg_offers__current") < order.index("marts.unmapped_gpus")


def test_gpu_offers_resolve_hardware_and_report_unmapped(con, tmp_path: Path):
    load_offers(
        con,
        "r1",
        "aws",
        [offer(), offer("g6.xlarge", 0.8048, gpu_count=0.0, pricing_type="spot", price_source="market")],
        now=T0,
    )
    load_offers(
        con,
        "r1",
        "runpod",
        [
            offer(
                "1x NVIDIA GeForce RTX 4090 (secure)",
                0.69,
                provider="runpod",
                region="global",
                gpu_name_raw="NVIDIA GeForce RTX 4090",
                gpu_count=1.0,
                gpu_memory_gb_raw=24.0,
            ),
            offer(
                "2x Mystery GPU (secure)",
                1.0,
                provider="runpod",
                region="global",
                gpu_name_raw="Mystery GPU 9000",
                gpu_count=2.0,
            ),
        ],
        now=T0,
    )
    counts = build_marts(con)
    assert counts["marts.gpu_offers"] == 3 and counts["marts.unmapped_gpus"] == 1
    rows = {
        r[0]: r[1:]
        for r in con.execute(
            "select instance_type, gpu_name, gpu_count, vram_gb, total_vram_gb, is_spot, "
            "intra_node_interconnect, price_usd_per_gpu_hour from marts.gpu_offers"
        ).fetchall()
    }
    assert rows["p5.48xlarge"] == ("H100-SXM", 8.0, 80.0, 640.0, False, "NVSwitch", 55.04 / 8)
    # the spot row states no GPU count (0): the instance type supplies it; L4 is 24 GB, not 22888 MiB
    assert rows["g6.xlarge"][:5] == ("L4", 1.0, 24.0, 24.0, True)
    assert rows["1x NVIDIA GeForce RTX 4090 (secure)"][0] == "RTX4090"
    unmapped = con.execute("select provider, gpu_name_raw, offers from marts.unmapped_gpus").fetchall()
    assert unmapped == [("runpod", "Mystery GPU 9000", 1)]

    written = write_feeds(con, tmp_path)
    feed = pl.read_parquet(tmp_path / "gpu_offers.v1.parquet")
    assert tuple(feed.columns) == FEEDS[0].columns and feed.height == 3
    assert {p.name for p, _ in written} >= {"gpu_offers.v1.csv", "unmapped_gpus.v1.parquet"}
    assert not list(tmp_path.glob(".*.tmp"))


def test_feed_columns_exist_in_their_marts(con):
    from warehouse.finetune_marts import build_finetune_marts

    build_marts(con, finetune=build_finetune_marts)
    con.execute("set variable feeds_generated_at = now()")  # v2's price_age_hours reads it
    for feed in FEEDS:
        if feed.documented_names:  # v2 renames and derives: its query must run and name every column
            assert [c[0] for c in con.execute(f"describe {feed.query()}").fetchall()] == list(feed.columns)
            continue
        columns = {c[0] for c in con.execute(f"describe {feed.relation}").fetchall()}
        assert set(feed.columns) <= columns, f"{feed.name}: {set(feed.columns) - columns}"


def test_read_only_open_of_a_missing_warehouse_says_what_to_do(tmp_path: Path):
    with pytest.raises(WarehouseMissing, match="run `gpucost refresh`"):
        connect(tmp_path / "none.duckdb", read_only=True)


def test_busy_warehouse_is_reported_clearly(tmp_path: Path):
    import subprocess
    import sys

    path = tmp_path / "w.duckdb"
    open_warehouse(path).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,time; c=duckdb.connect({str(path)!r}); print('ok', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline().strip() == b"ok"
        with pytest.raises(WarehouseBusy, match="in use by another process"):
            connect(path, read_only=True)
    finally:
        holder.kill()
        holder.wait()


def test_validators_remember_files_a_later_run_skipped(con, tmp_path: Path):
    def fetched(url: str, etag: str) -> RawResponse:
        return RawResponse(
            url=url, method="GET", status=200, fetched_at=T0, body=etag.encode(), headers={"etag": etag}
        )

    land_raw(
        con,
        tmp_path,
        "r1",
        "aws",
        [fetched("https://x.test/index", '"i1"'), fetched("https://x.test/us-east-1", '"f1"')],
    )
    record_ok(con, "r1", "aws", 1, T0)
    # r2 skipped the unchanged offer file: only the index was fetched
    land_raw(con, tmp_path, "r2", "aws", [fetched("https://x.test/index", '"i2"')])
    record_ok(con, "r2", "aws", 1, T0 + timedelta(hours=1))
    # a failed run's responses never count
    land_raw(con, tmp_path, "r3", "aws", [fetched("https://x.test/index", '"bad"')])
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at) "
        "values ('r3', 'aws', 'failed', ?)",
        [T0 + timedelta(hours=2)],
    )
    assert previous_validators(con, "aws") == {
        "https://x.test/index": {"etag": '"i2"'},
        "https://x.test/us-east-1": {"etag": '"f1"'},
    }


def test_spooled_bodies_land_in_the_archive(con, tmp_path: Path):
    spool = tmp_path / "spool"
    spool.mkdir()
    body = spool / "body-1"
    body.write_bytes(b"x" * 1000)
    response = RawResponse(url="https://x.test/big", method="GET", status=200, fetched_at=T0, body_path=body)
    assert land_raw(con, tmp_path / "raw", "r1", "aws", [response]) == 1000
    assert not body.exists()  # archived (compressed), then the spool file removed
    (path, compression) = con.execute("select payload_path, compression from raw.responses").fetchall()[0]
    assert read_body(tmp_path / "raw", path, compression) == b"x" * 1000
