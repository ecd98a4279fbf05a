"""SaladCloud GPU classes: every priority an interruptible list rate; credentials, layout, replay."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import salad
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions, missing_credentials
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "salad" / "gpu-classes__2026-12-02.json"
CATALOG = HardwareCatalog.load()
KEY, ORG = "salad_cloud_user_test-key", "acme-corp"
CREDS = {"SALAD_API_KEY": KEY, "SALAD_ORGANIZATION": ORG}


def answer(payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    fetched_at = datetime(2026, 12, 2, tzinfo=UTC)
    return RawResponse(url=salad.api_url(ORG), method="GET", status=200, fetched_at=fetched_at, body=body)


def gpu_class(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "00000000-0000-4000-8000-000000000009",
        "name": "RTX 4080 (16 GB)",
        "gpu_class_type": "community",
        "gpu_count": 1,
        "max_vcpu": 16,
        "max_ram": 30720,
        "prices": [{"priority": "high", "price": "0.200"}, {"priority": "batch", "price": "0.100"}],
    }
    return base | fields


def offers_of(items: Sequence[object]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def test_split_name_reads_the_model_and_its_memory() -> None:
    assert salad.split_name("RTX 4090 (24 GB)") == ("RTX 4090", 24.0)
    assert salad.split_name(" RTX 3060 Ti (8GB) ") == ("RTX 3060 Ti", 8.0)
    assert salad.split_name("RTX 5090") == ("RTX 5090", None)  # no suffix: no stated memory


def test_fixture_gives_one_spot_list_offer_per_class_and_priority() -> None:
    items = list(salad.parse([answer(FIXTURE.read_bytes())]))
    found = offers_of(items)
    assert len(found) == 18 and exclusions(items) == {"multi_gpu_class": 1}  # the 8x H100 class
    rtx4090 = found["RTX 4090 (24 GB) / batch"]
    assert (rtx4090.price_per_hour, rtx4090.currency, rtx4090.gpu_count) == (0.16, "USD", 1.0)
    assert (rtx4090.gpu_name_raw, rtx4090.gpu_memory_gb_raw) == ("RTX 4090", 24.0)
    # GPU rates include the replica's vCPUs and RAM, up to the class maximum (MB / 1024)
    assert (rtx4090.vcpus, rtx4090.ram_gb) == (16.0, 30.0)
    assert rtx4090.provider_data["price_includes_vcpu_ram"] is True
    assert found["RTX 4090 (24 GB) / high"].price_per_hour == 0.3
    assert found["RTX 3060 (12 GB) / low"].price_per_hour == 0.047  # the docs' billing example
    # every node is interruptible: no offer is on-demand, every rate is a published one
    assert {(o.pricing_type, o.price_source) for o in found.values()} == {("spot", "list")}
    assert {o.billing_unit for o in found.values()} == {"second"}
    assert {o.scope for o in found.values()} == {salad.SCOPE}
    assert {o.region for o in found.values()} == {"global"}
    assert all(o.problem is None for o in found.values())


def test_priorities_are_kept_apart_and_ranked_highest_first() -> None:
    found = offers_of(list(salad.parse([answer(FIXTURE.read_bytes())])))
    tiers = {o.provider_data["priority"]: o for o in found.values() if o.gpu_name_raw == "RTX 5090"}
    assert sorted(tiers, key=lambda t: tiers[t].provider_data["priority_rank"]) == list(salad.PRIORITIES)
    prices = [tiers[t].price_per_hour for t in salad.PRIORITIES]
    assert prices == sorted(prices, reverse=True)  # lower priority, lower price
    assert tiers["high"].provider_data["is_high_demand"] is True


def test_a_secure_class_is_its_own_offer_beside_the_community_one() -> None:
    found = offers_of(list(salad.parse([answer(FIXTURE.read_bytes())])))
    secure = found["RTX 4090 (24 GB) / secure / high"]
    assert secure.price_per_hour == 0.4 and secure.provider_data["gpu_class_type"] == "secure"
    assert found["RTX 4090 (24 GB) / high"].provider_data["gpu_class_type"] == "community"


def test_a_class_without_a_type_is_community_and_an_unknown_priority_lands() -> None:
    row = gpu_class(gpu_class_type=None, prices=[{"priority": "urgent", "price": "0.5"}])
    (offer,) = offers_of(list(salad.parse([answer({"items": [row]})]))).values()
    assert offer.instance_type == "RTX 4080 (16 GB) / urgent" and offer.problem is None
    assert offer.provider_data["priority_rank"] == len(salad.PRIORITIES)  # sorts after batch


def test_a_multi_gpu_class_is_excluded_since_its_basis_is_unstated() -> None:
    classes = [gpu_class(gpu_count=8), gpu_class(name="RTX 3090 (24 GB)")]
    items = list(salad.parse([answer({"items": classes})]))
    assert exclusions(items) == {"multi_gpu_class": 1}
    assert {o.gpu_name_raw for o in items if isinstance(o, Offer)} == {"RTX 3090"}


@pytest.mark.parametrize(
    ("price", "problem"),
    [
        (None, "price missing"),
        ("n/a", "not a number"),
        ("0", "not positive"),
        ("-0.1", "not positive"),
    ],
)
def test_wrong_prices_are_flagged_not_dropped(price: object, problem: str) -> None:
    entry = {"priority": "low"} if price is None else {"priority": "low", "price": price}
    (offer,) = offers_of(list(salad.parse([answer({"items": [gpu_class(prices=[entry])]})]))).values()
    assert offer.problem is not None and problem in offer.problem
    if price in (None, "n/a"):
        assert math.isnan(offer.price_per_hour)


def test_a_price_without_a_priority_is_flagged() -> None:
    row = gpu_class(prices=[{"priority": None, "price": "0.2"}])
    (offer,) = offers_of(list(salad.parse([answer({"items": [row]})]))).values()
    assert offer.instance_type.endswith("/ unknown") and "no `priority`" in (offer.problem or "")


@pytest.mark.parametrize("payload", [{}, {"items": []}, {"items": {}}, []])
def test_missing_or_empty_items_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="items"):
        list(salad.parse([answer(payload)]))


def test_a_class_without_name_or_prices_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="without `name`"):
        list(salad.parse([answer({"items": [gpu_class(name="")]})]))
    with pytest.raises(LayoutChanged, match="no `prices`"):
        list(salad.parse([answer({"items": [gpu_class(prices=[])]})]))


def test_both_credentials_are_required() -> None:
    assert salad.requires == ("SALAD_API_KEY", "SALAD_ORGANIZATION")
    assert missing_credentials(salad, {"SALAD_API_KEY": KEY}) == ("SALAD_ORGANIZATION",)
    assert missing_credentials(salad, CREDS) == ()


def test_fetch_sends_the_key_header_and_records_neither_key_nor_organization() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["salad-api-key"] == KEY
        assert request.url.path == f"/api/public/organizations/{ORG}/gpu-classes"
        return httpx.Response(200, json={"items": [gpu_class()]})

    with make_client(transport=httpx.MockTransport(handler), secrets=[KEY, ORG]) as client:
        (response,) = salad.fetch(client, CREDS)
    assert ORG not in response.url and KEY not in response.url
    assert all(KEY not in value for value in response.headers.values())
    assert len(offers_of(list(salad.parse([response])))) == 2


def test_replay_cassette_runs_fetch_and_parse_offline_and_every_gpu_maps() -> None:
    placeholders = {name: f"replay-placeholder-{name}" for name in salad.requires}
    with make_client(replay=REPLAY, secrets=list(placeholders.values())) as client:
        items = list(salad.parse(list(salad.fetch(client, placeholders))))
    found = offers_of(items)
    assert len(found) == 18
    resolved = {}
    for o in found.values():
        match = CATALOG.resolve("salad", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, 1.0)
        assert match is not None, o.instance_type
        resolved[o.gpu_name_raw] = match.gpu_name
    assert resolved == {
        "RTX 5090": "RTX5090",
        "RTX 4090": "RTX4090",
        "RTX 3090": "RTX3090",
        "RTX 3060": "RTX3060",  # 12 GB picks the 3060 over the 8 GB 3060 Ti
    }


DERIVED = "getdeploying/opencomputeprices-getdeploying-2026-03-22.csv"


def test_derived_getdeploying_salad_gpus_all_resolve(shared_raw: Path) -> None:
    """getdeploying's 21 Salad rows (DERIVED, 2026-03-22: a cross-check, never parser input) name
    the consumer GPUs Salad sells; each must map, so a live run lands none of them unmapped."""
    import csv

    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["provider"] == "salad"]
    assert len(rows) == 21
    resolved = {}
    for row in rows:
        # "cheapest_<GPU>" rows keep the full name ("RTX 4070 Ti Super") in instance_type
        raw = (
            row["instance_type"].removeprefix("cheapest_")
            if row["instance_type"].startswith("cheapest_")
            else row["gpu_name"]
        )
        match = CATALOG.resolve("salad", "", raw, float(row["gpu_memory_gb"]), 1.0)
        assert match is not None, raw
        resolved[raw] = match.gpu_name
    assert resolved["GTX 1660 Super"] == "GTX1660-SUPER" and resolved["RTX 3070 Ti"] == "RTX3070-Ti"
    assert resolved["A5000"] == "RTXA5000" and resolved["RTX 4070 Ti Super"] == "RTX4070-Ti-SUPER"


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_gpu_classes_are_interruptible_list_rates() -> None:
    import os

    creds = {name: os.environ.get(name, "") for name in salad.requires}
    if not all(creds.values()):
        pytest.skip("set SALAD_API_KEY and SALAD_ORGANIZATION to run the SaladCloud smoke test")
    with make_client(secrets=list(creds.values())) as client:
        items = list(salad.parse(list(salad.fetch(client, creds))))
    offers = [o for o in items if isinstance(o, Offer)]
    assert offers and {o.pricing_type for o in offers} == {"spot"}
    assert {o.provider_data["priority"] for o in offers} <= {*salad.PRIORITIES, "unknown"}
