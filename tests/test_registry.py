"""The connector registry matches the modules, and each module honours the contract."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import connectors
from connectors import CONNECTORS
from connectors.base import Connector

NOT_PROVIDERS = {"base", "http", "market", "pages"}


def provider_modules() -> set[str]:
    modules = pkgutil.iter_modules(connectors.__path__)
    return {m.name for m in modules if m.name not in NOT_PROVIDERS and not m.ispkg}


def test_every_provider_module_is_registered_and_nothing_else():
    assert set(CONNECTORS) == provider_modules()


def test_each_connector_follows_the_contract():
    for slug, module in CONNECTORS.items():
        assert isinstance(module, Connector), slug
        assert module.name == slug == module.__name__.rsplit(".", 1)[1]
        assert isinstance(module.requires, tuple) and all(isinstance(r, str) for r in module.requires)
        assert (module.__doc__ or "").strip(), f"{slug} needs a docstring naming its sources and quirks"
        assert "https://" in module.__doc__, f"{slug}'s docstring should name its source URLs"


def test_connectors_import_neither_warehouse_nor_prefect():
    for name in provider_modules() | NOT_PROVIDERS:
        module = importlib.import_module(f"connectors.{name}")
        source = Path(module.__file__).read_text()
        assert "import warehouse" not in source and "from warehouse" not in source, name
        assert "prefect" not in source, name


def test_warehouse_never_imports_prefect():
    import warehouse

    for info in pkgutil.iter_modules(warehouse.__path__):
        module = importlib.import_module(f"warehouse.{info.name}")
        source = Path(module.__file__).read_text()
        assert "import prefect" not in source and "from prefect" not in source, info.name
