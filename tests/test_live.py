"""Live smoke tests against the real provider APIs: `uv run pytest -m network`. Off by default.

One per registered connector: it fetches and parses the provider for real, through the same client
and collect step the flow uses, and checks that the answer still has the shape the parser expects
and yields at least one offer whose GPU the hardware seeds name. A provider whose credentials are
missing is skipped saying which to set; a retired one (seeds/provider_lifecycle.csv) is skipped
saying since when. `gpucost check` is the same question asked from the command line.
"""

from __future__ import annotations

import os

import pytest

from connectors import CONNECTORS
from connectors.base import missing_credentials
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog
from warehouse.lifecycle import retired
from warehouse.pipeline import collect, credentials_for

pytestmark = pytest.mark.network

# providers whose live answer carries spot prices next to on-demand ones
WITH_SPOT = ("azure", "runpod", "oci", "gcp")


@pytest.fixture(autouse=True)
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the offline guard: these tests exist to talk to the providers."""
    import socket

    monkeypatch.undo()
    assert socket.socket.connect.__name__ == "connect"


@pytest.mark.parametrize("provider", sorted(CONNECTORS))
def test_provider_answers_with_mapped_gpu_offers(provider: str, tmp_path) -> None:
    connector = CONNECTORS[provider]
    if provider in retired():
        pytest.skip(retired()[provider].message())
    env = dict(os.environ)
    missing = missing_credentials(connector, env)
    if missing:
        pytest.skip(f"{provider} needs {', '.join(missing)} in the environment")
    creds, secrets = credentials_for(connector, env, replay=False)
    with make_client(secrets=secrets, spool_dir=tmp_path) as client:
        batch = collect(connector, client, creds)
    assert batch.status == "fetched", f"{provider}: {batch.error} (what to do: {batch.hint})"
    if provider == "ecb":  # the reference-rate source: rates, not offers
        assert batch.fx_rates, "ecb answered but yielded no rates"
        return
    assert batch.offers, f"{provider} answered but yielded no offers"
    catalog = HardwareCatalog.load()
    mapped = [
        o
        for o in batch.offers
        if catalog.resolve(
            o.provider, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count or None
        )
    ]
    assert mapped, f"{provider}: none of {len(batch.offers)} offers maps to a GPU of warehouse/seeds"
    if provider in WITH_SPOT:
        assert {o.pricing_type for o in batch.offers} == {"on_demand", "spot"}
