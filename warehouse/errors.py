"""The warehouse's one error base, apart from warehouse.db so that `answers` and the CLI can name it
without importing DuckDB and pydantic (read commands and `--help` start faster, issue 22)."""


class WarehouseError(Exception):
    """Base for warehouse errors that carry advice for the user."""
