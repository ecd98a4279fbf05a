"""answers.query: the user's own SQL, run on the reader's sandboxed connection (gpucost sql).

Each refusal is one AnswerError whose message names the cause; an empty text is EmptyQuery, which the
CLI reports as a usage error. The warehouse is a tiny DuckDB file of this test's own."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from answers import AnswerError
from answers.query import EmptyQuery, QueryResult, run_read_only
from warehouse.db import Settings, open_reader, reader_path


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("GPUCOST_PULL_URL", raising=False)
    path = reader_path(Settings())
    path.parent.mkdir(parents=True, exist_ok=True)
    with duckdb.connect(str(path)) as con:
        con.execute("create table t as select range as n from range(3)")
    con, _banner = open_reader()
    yield con
    con.close()


def test_each_statement_that_returns_rows_is_one_titled_result(reader) -> None:
    results = run_read_only(reader, "select count(*) as n from t; select 'x' as a, 2 as b")
    assert results == [
        QueryResult("statement 1", ["n"], [(3,)]),
        QueryResult("statement 2", ["a", "b"], [("x", 2)]),
    ]


@pytest.mark.parametrize("query", ["", "  ", ";", "-- only a comment"])
def test_no_statement_is_empty_query(reader, query: str) -> None:
    with pytest.raises(EmptyQuery, match="no SQL statement"):
        run_read_only(reader, query)


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("insert into t values (9)", "read-only"),
        ("copy t to '/tmp/gpucost-query-test.csv'", "refused"),
        ("select * from read_csv('/etc/passwd')", "refused"),
    ],
)
def test_writes_and_file_access_are_refused_with_why(reader, query: str, words: str) -> None:
    with pytest.raises(AnswerError, match=words):
        run_read_only(reader, query)
    assert not Path("/tmp/gpucost-query-test.csv").exists()


def test_a_bad_query_names_duckdb_s_error(reader) -> None:
    with pytest.raises(AnswerError, match="CatalogException"):
        run_read_only(reader, "select * from no_such_table")


def test_a_statement_without_rows_still_shows_duckdb_s_success_result(reader) -> None:
    # DuckDB answers a statement such as PREPARE with a one-column "Success" relation, not None
    assert run_read_only(reader, "prepare p as select 1") == [QueryResult("statement 1", ["Success"], [])]
