"""A small result table for answers read straight from DuckDB: named columns, rows as tuples.

Why not a polars frame: importing polars takes longer than everything else `gpucost prices` does
(benchmarks/startup.py), and an answer the warehouse's SQL already computed needs no dataframe
library to be shown. `Rows` keeps the part of a frame's interface the callers use (`columns`,
`height`, `is_empty`, `select`, `to_dicts`, `column`), and `to_polars()` gives the frame (polars
imported then) to a caller that writes CSV or computes further.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb
    import polars as pl


@dataclass(frozen=True)
class Rows:
    """`rows` of `columns`, in order; each row a tuple with one value per column."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]

    def __post_init__(self) -> None:
        if len(set(self.columns)) != len(self.columns):
            raise ValueError(f"duplicate column names: {self.columns}")
        for row in self.rows:
            if len(row) != len(self.columns):
                raise ValueError(f"a row of {len(row)} values for {len(self.columns)} columns")

    @classmethod
    def fetch(cls, cursor: duckdb.DuckDBPyConnection) -> Rows:
        """Every row of the statement `cursor` just executed, with its column names."""
        names = tuple(d[0] for d in cursor.description or ())
        return cls(names, tuple(tuple(r) for r in cursor.fetchall()))

    @property
    def height(self) -> int:
        return len(self.rows)

    def is_empty(self) -> bool:
        return not self.rows

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.to_dicts())

    def column(self, name: str) -> list[Any]:
        """The values of one column, in row order."""
        index = self._index(name)
        return [row[index] for row in self.rows]

    def select(self, names: Sequence[str]) -> Rows:
        """These columns, in this order (a name the rows lack is an error, as in polars)."""
        indexes = [self._index(n) for n in names]
        return Rows(tuple(names), tuple(tuple(row[i] for i in indexes) for row in self.rows))

    def to_dicts(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def to_polars(self) -> pl.DataFrame:
        """The same table as a polars frame (types inferred from every value, not the first rows)."""
        import polars as pl

        return pl.DataFrame(
            list(self.rows), schema=list(self.columns), orient="row", infer_schema_length=None
        )

    def _index(self, name: str) -> int:
        try:
            return self.columns.index(name)
        except ValueError:
            raise KeyError(f"no column {name!r}; columns are {', '.join(self.columns)}") from None
