"""Provider connectors: HTTP + parsing only; nothing here knows DuckDB or Prefect.

`CONNECTORS` is the one explicit registry, checked against the modules in this package by a test.
Each entry is a module implementing the contract in `connectors.base`.
"""

from __future__ import annotations

from connectors import aws, azure, gcp, oci, runpod
from connectors.base import Connector

CONNECTORS: dict[str, Connector] = {module.name: module for module in (azure, runpod, oci, aws, gcp)}  # type: ignore[misc]

__all__ = ["CONNECTORS"]
