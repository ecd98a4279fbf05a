"""answers/rows.py: the engine-free result table `gpucost prices` answers with."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import polars as pl
import pytest

from answers.rows import Rows

T0 = datetime(2026, 12, 1, 9, 25, tzinfo=UTC)


def sample() -> Rows:
    return Rows(("gpu", "price", "seen"), (("H100", 2.5, T0), ("L4", None, None)))


def test_fetch_keeps_names_order_and_values() -> None:
    con = duckdb.connect()
    con.execute("set TimeZone = 'UTC'")
    rows = Rows.fetch(con.execute("select 'a' as x, 1.5 as y, ? as t union all select 'b', null, null", [T0]))
    assert rows.columns == ("x", "y", "t")
    assert rows.rows == (("a", 1.5, T0), ("b", None, None))


def test_an_empty_answer_still_names_its_columns() -> None:
    con = duckdb.connect()
    rows = Rows.fetch(con.execute("select 1 as a, 'x' as b where false"))
    assert rows.is_empty() and rows.height == 0 and rows.columns == ("a", "b")
    assert rows.to_dicts() == []


def test_select_reorders_and_refuses_an_unknown_column() -> None:
    rows = sample().select(["price", "gpu"])
    assert rows.columns == ("price", "gpu") and rows.rows == ((2.5, "H100"), (None, "L4"))
    with pytest.raises(KeyError, match="no column 'vram'; columns are gpu, price, seen"):
        sample().select(["vram"])


def test_column_dicts_and_iteration_agree() -> None:
    rows = sample()
    assert rows.column("gpu") == ["H100", "L4"]
    assert (
        rows.to_dicts()
        == list(rows)
        == [
            {"gpu": "H100", "price": 2.5, "seen": T0},
            {"gpu": "L4", "price": None, "seen": None},
        ]
    )


def test_a_malformed_table_is_refused() -> None:
    with pytest.raises(ValueError, match="duplicate column"):
        Rows(("a", "a"), ())
    with pytest.raises(ValueError, match="a row of 1 values for 2 columns"):
        Rows(("a", "b"), ((1,),))


def test_to_polars_types_every_column_from_all_its_values() -> None:
    # the first row's null must not type the column: inference reads every row
    rows = Rows(("price",), tuple([(None,)] * 200 + [(1.5,)]))
    frame = rows.to_polars()
    assert frame.schema["price"] == pl.Float64 and frame["price"][-1] == 1.5
    assert sample().to_polars()["seen"].dtype == pl.Datetime("us", "UTC")
