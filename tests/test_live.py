"""Live smoke tests against the real provider APIs: `uv run pytest -m network`. Off by default.

Each fetches and parses one provider for real, through the same client the flow uses, and checks
that the answer still has the shape the parser expects and yields GPU offers.
"""

from __future__ import annotations

import os

import pytest

from connectors import CONNECTORS
from connectors.base import Offer, missing_credentials
from connectors.http import make_client

pytestmark = pytest.mark.network


@pytest.fixture(autouse=True)
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Undo the offline guard: these tests exist to talk to the providers."""
    import socket

    monkeypatch.undo()
    assert socket.socket.connect.__name__ == "connect"


@pytest.mark.parametrize("provider", ["azure", "runpod", "oci", "gcp"])
def test_provider_answers_with_gpu_offers(provider: str) -> None:
    connector = CONNECTORS[provider]
    env = dict(os.environ)
    if missing_credentials(connector, env):
        pytest.skip(f"{provider} needs {', '.join(connector.requires)}")
    creds = {name: env[name] for name in connector.requires}
    with make_client(secrets=creds.values()) as client:
        responses = list(connector.fetch(client, creds, None))
    offers = [o for o in connector.parse(responses) if isinstance(o, Offer)]
    assert offers, f"{provider} answered but yielded no offers"
    assert {o.pricing_type for o in offers} == {"on_demand", "spot"}
