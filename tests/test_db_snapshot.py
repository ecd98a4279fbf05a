"""warehouse.db.snapshot, data_banner and reader_banner: what a long-lived reader keeps of a file.

`gpucost serve` answers from an in-memory copy of the relations a question reads
(answers.estimate.OfferBook), so the copy must be the warehouse's relations as they were, with
the same column types (a JSON column stays JSON: `->>` and the JSON functions behave as on the
file), and the banner it keeps must still age a pulled publication while the server runs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from warehouse import db

COLUMNS = """
    select table_schema, table_name, column_name, data_type
    from information_schema.columns where table_schema in ('core', 'marts')
    order by all
"""


@pytest.fixture
def warehouse() -> Iterator[duckdb.DuckDBPyConnection]:
    """A small warehouse of our own: a JSON column, a timestamp with zone, a decimal, nulls."""
    con = db.connect(":memory:")
    con.execute("create schema core; create schema marts")
    con.execute("create table core.gpus (gpu_name varchar, vram_gb decimal(6, 1))")
    con.execute("insert into core.gpus values ('H100-SXM', 80.0), ('L40S', 48.0), (null, null)")
    con.execute(
        "create table marts.gpu_offers (provider varchar, provider_data json, last_seen_at timestamptz,"
        " price_usd_per_hour double, available boolean)"
    )
    con.execute(
        "insert into marts.gpu_offers values "
        """('aws', '{"interruption_rate_min": 0.05}', '2026-12-01 10:00:00+00', 3.5, true), """
        "('runpod', null, '2026-12-02 11:30:00+00', 2.25, null)"
    )
    yield con
    con.close()


def test_the_copy_holds_each_relation_with_its_rows_and_column_types(warehouse):
    copy = db.snapshot(warehouse, ["marts.gpu_offers", "core.gpus"])
    try:
        assert copy.execute(COLUMNS).fetchall() == warehouse.execute(COLUMNS).fetchall()
        for relation in ("marts.gpu_offers", "core.gpus"):
            query = f"select * from {relation} order by all"
            assert copy.execute(query).fetchall() == warehouse.execute(query).fetchall()
        # JSON stays JSON (Arrow alone would have made it VARCHAR): its operators still answer
        rate = "select provider_data ->> 'interruption_rate_min' from marts.gpu_offers where provider = 'aws'"
        assert copy.execute(rate).fetchall() == [("0.05",)]
        assert copy.execute("select json_type(provider_data) from marts.gpu_offers limit 1").fetchall() == [
            ("OBJECT",)
        ]
    finally:
        copy.close()


def test_relations_the_warehouse_lacks_are_left_out(warehouse):
    copy = db.snapshot(warehouse, ["core.gpus", "core.providers", "marts.nothing"])
    try:
        tables = copy.execute(
            "select table_schema || '.' || table_name from information_schema.tables"
        ).fetchall()
        assert tables == [("core.gpus",)]
    finally:
        copy.close()


def test_relation_exists_names_tables_and_views_by_their_qualified_name():
    con = duckdb.connect()
    con.execute("create schema marts")
    con.execute("create table marts.t (x int)")
    con.execute("create view marts.v as select * from marts.t")
    assert db.relation_exists(con, "marts.t")
    assert db.relation_exists(con, "marts.v")
    # a name in the wrong schema, or no schema at all, is not there
    assert not db.relation_exists(con, "core.t")
    assert not db.relation_exists(con, "marts.missing")
    con.close()


def test_the_copy_is_its_own_database(warehouse):
    """Changes on either side after the copy do not reach the other."""
    copy = db.snapshot(warehouse, ["core.gpus"])
    try:
        warehouse.execute("delete from core.gpus")
        assert copy.execute("select count(*) from core.gpus").fetchall() == [(3,)]
        copy.execute("insert into core.gpus values ('B200', 180.0)")
        assert warehouse.execute("select count(*) from core.gpus").fetchall() == [(0,)]
    finally:
        copy.close()


def test_the_copy_reads_in_utc_as_every_warehouse_connection(warehouse):
    copy = db.snapshot(warehouse, ["marts.gpu_offers"])
    try:
        (hour,) = copy.execute("select min(hour(last_seen_at)) from marts.gpu_offers").fetchall()[0]
        assert hour == 10  # 10:00 UTC, not shifted to the machine's zone
    finally:
        copy.close()


# -- the banner a reader keeps ------------------------------------------------------------------


def test_the_data_banner_says_what_the_file_holds(tmp_path: Path):
    """No prices yet: NO_LIVE_REFRESH; prices: None (live). The sample banner is the replay's
    (tests/test_serve.py checks it on the replay warehouse)."""
    con = db.connect(tmp_path / "warehouse.duckdb")
    try:
        db.migrate(con)
        assert db.data_banner(con) == db.NO_LIVE_REFRESH
    finally:
        con.close()


def test_a_kept_banner_of_live_prices_ages_the_pulled_publication(tmp_path: Path):
    """Read from a pulled publication, the banner says how old the publication is now: a banner
    kept from when the copy was made would stop ageing while `gpucost serve` runs."""
    pulled = tmp_path / "pulled"
    pulled.mkdir()
    generated = datetime.now(UTC) - timedelta(hours=5)
    stamp = generated.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    (pulled / "manifest.json").write_text(json.dumps({"generated_at": stamp}))
    settings = db.Settings(home=tmp_path, pull_url="s3://bucket/feeds")
    line = db.reader_banner(None, settings)
    assert line == f"answers from the pulled publication generated {stamp} (5h old)"
    # a sample or an empty warehouse says so whatever the publication
    assert db.reader_banner(db.SAMPLE_BANNER, settings) == db.SAMPLE_BANNER
    assert db.reader_banner(db.NO_LIVE_REFRESH, settings) == db.NO_LIVE_REFRESH


def test_without_a_pull_the_banner_is_the_files(tmp_path: Path):
    settings = db.Settings(home=tmp_path)
    assert db.reader_banner(None, settings) is None
    assert db.reader_banner(db.SAMPLE_BANNER, settings) == db.SAMPLE_BANNER


# -- query_frame: one bind ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("select * from marts.gpu_offers order by provider", None),
        (
            "select provider, price_usd_per_hour * 2 as doubled from marts.gpu_offers where provider = ?",
            ["aws"],
        ),
        ("select * from core.gpus where vram_gb >= ? order by gpu_name", [48]),
        ("select * from core.gpus where false", None),  # no rows: the columns and types still come
    ],
)
def test_query_frame_is_what_the_relation_api_returns(warehouse, sql, params):
    """The same rows, names and types as `con.sql(sql, params=params).pl()` (which binds twice)."""
    got = db.query_frame(warehouse, sql, params)
    want = warehouse.sql(sql, params=params).pl()
    assert got.schema == want.schema
    assert got.equals(want)


def test_query_frame_says_nothing_of_the_arrow_copy_it_asks_for(tmp_path: Path):
    """Its Arrow read of a DB-API result is deliberate: a read command must not print DuckDB's
    warning about it on stderr (pytest resets warning filters, so this runs a process of its own)."""
    script = (
        "from warehouse import db\n"
        "con = db.connect(':memory:')\n"
        "print(db.query_frame(con, 'select 42 as answer')['answer'].to_list())\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", script],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "[42]"
    assert "Arrow output" not in done.stderr and "Warning" not in done.stderr, done.stderr
