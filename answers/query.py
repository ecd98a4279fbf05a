"""Ad-hoc read-only SQL (`gpucost sql`): the user's own question, run statement by statement.

The connection is the reader's sandboxed one (warehouse.db `connect(..., read_only=True)`), so a
statement that would write, touch files or the network, or load an extension fails in DuckDB; this
module only turns those failures into one `AnswerError` whose message says why.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from answers import AnswerError

__all__ = ["EmptyQuery", "QueryResult", "run_read_only"]


class EmptyQuery(AnswerError):
    """The text holds no statement at all: the caller's usage, not the warehouse's answer."""


@dataclass(frozen=True)
class QueryResult:
    title: str
    columns: list[str]
    rows: list[tuple]


def run_read_only(con: duckdb.DuckDBPyConnection, query: str) -> list[QueryResult]:
    """Every statement of `query` in turn; the results of those that return rows, titled by position."""
    results: list[QueryResult] = []
    try:
        statements = con.extract_statements(query)
        if not statements:
            raise EmptyQuery("no SQL statement given")
        for number, statement in enumerate(statements, 1):
            relation = con.sql(statement.query)
            if relation is not None:  # the API types sql() as optional; DuckDB 1.x returns a relation
                results.append(QueryResult(f"statement {number}", relation.columns, relation.fetchall()))
    except duckdb.PermissionException as exc:
        raise AnswerError(
            f"refused: {exc} (gpucost sql is read-only: no files, network or extensions)"
        ) from None
    except duckdb.Error as exc:
        text = str(exc)
        if "read-only" in text or "attached in read-only mode" in text:
            raise AnswerError(f"refused: gpucost sql is read-only ({text})") from None
        raise AnswerError(f"{type(exc).__name__}: {exc}") from None
    if not results:
        raise AnswerError("the statement returned no rows (only queries are useful read-only)")
    return results
