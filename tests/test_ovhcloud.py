"""OVHcloud order catalog: instance addons -> EUR offers, exclusions, layout changes, replay.

No real capture of `/v1/order/catalog/public/cloud` exists in ../shared/data/raw (PROVENANCE.md:
"Still NOT found anywhere: ... OVH /order/catalog/public/cloud JSON"), so these tests read our own
fixture, written in the catalog's structure; the only real OVHcloud prices we hold are derived
getdeploying rows, compared in the report, not here.
"""

from __future__ import annotations

import copy
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import ovhcloud
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "ovhcloud" / "order-catalog-public-cloud__2026-12-01.json"
URL = f"{ovhcloud.CATALOG_URL}?ovhSubsidiary=FR"


def catalog() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text())


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def offers_of(items: list[object]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def test_flavor_name() -> None:
    assert ovhcloud.flavor_name("h100-380.consumption") == "h100-380"
    assert ovhcloud.flavor_name("a10-45.monthly.postpaid") == "a10-45"


@pytest.mark.parametrize(
    ("pricings", "expected"),
    [
        ([{"intervalUnit": "hour", "interval": 1, "price": 280000000}], (2.8, None)),
        ([{"intervalUnit": "month", "interval": 1, "price": 204400000000}], None),
        (
            [{"intervalUnit": "hour", "interval": 1, "price": 0}],
            (0.0, "price 0.0 per hour is not a positive number"),
        ),
    ],
)
def test_hourly_price(pricings: list[dict[str, Any]], expected: tuple[float, str | None] | None) -> None:
    assert ovhcloud.hourly_price({"pricings": pricings}) == expected


@pytest.mark.parametrize(
    ("pricings", "problem"),
    [
        (None, "`pricings` missing"),
        ([{"intervalUnit": "hour", "interval": 1}], "`price` missing"),
        ([{"intervalUnit": "hour", "interval": 1, "price": "2.8"}], "unreadable price"),
        ([{"intervalUnit": "day", "interval": 1, "price": 1}], "no hourly pricing"),
    ],
)
def test_unreadable_prices_are_nan_with_a_problem(pricings: Any, problem: str) -> None:
    price, found = ovhcloud.hourly_price({"pricings": pricings})  # type: ignore[misc]
    assert math.isnan(price) and problem in (found or "")


def test_fixture_offers_in_eur_per_hour_for_the_whole_flavor() -> None:
    items = list(ovhcloud.parse([answer(catalog())]))
    offers = offers_of(items)
    assert set(offers) == {"h100-380", "h100-760", "l40s-90", "a10-90", "t2-45"}
    h100 = offers["h100-380"]
    assert (h100.price_per_hour, h100.currency, h100.region, h100.billing_unit) == (
        2.8,
        "EUR",
        "global",
        "hour",
    )
    assert (h100.gpu_name_raw, h100.gpu_count, h100.gpu_memory_gb_raw, h100.vcpus, h100.ram_gb) == (
        "H100",
        1.0,
        80.0,
        30.0,
        380.0,
    )
    assert offers["h100-760"].price_per_hour == 5.6 and offers["h100-760"].gpu_count == 2.0
    assert offers["a10-90"].price_per_hour == 1.52
    assert all(o.pricing_type == "on_demand" and o.price_source == "list" for o in offers.values())
    assert {o.scope for o in offers.values()} == {"catalog:FR"}
    # the monthly plan and the CPU flavor are left out by rule; the volume addon is not an instance
    assert exclusions(items) == {"monthly_billing": 1, "cpu_only": 1}


def test_a_renamed_price_key_flags_every_offer_instead_of_dropping_it() -> None:
    payload = catalog()
    for addon in payload["addons"]:
        for pricing in addon["pricings"]:
            pricing["amount"] = pricing.pop("price")
    offers = offers_of(list(ovhcloud.parse([answer(payload)])))
    assert len(offers) == 5
    assert all(
        math.isnan(o.price_per_hour) and "`price` missing" in (o.problem or "") for o in offers.values()
    )


def test_layout_changes_name_what_was_looked_for() -> None:
    with pytest.raises(LayoutChanged, match="`addons` list missing"):
        list(ovhcloud.parse([answer({"plans": []})]))
    payload = catalog()
    payload["plans"][0]["addonFamilies"][0]["name"] = "instances"
    with pytest.raises(LayoutChanged, match="addon family named 'instance'"):
        list(ovhcloud.parse([answer(payload)]))


def test_an_addon_outside_the_instance_family_is_ignored() -> None:
    payload = catalog()
    stray = copy.deepcopy(payload["addons"][0]) | {"planCode": "h100-999.consumption"}
    payload["addons"].append(stray)
    assert "h100-999" not in offers_of(list(ovhcloud.parse([answer(payload)])))


def test_every_fixture_gpu_maps_to_a_canonical_gpu() -> None:
    hardware = HardwareCatalog.load()
    offers = offers_of(list(ovhcloud.parse([answer(catalog())])))
    names = {
        t: hardware.resolve("ovhcloud", t, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for t, o in offers.items()
    }
    assert [t for t, match in names.items() if match is None] == []
    assert names["t2-45"].gpu_name == "V100-32GB-PCIe"


def _with_flavor(payload: dict[str, Any], addon: dict[str, Any]) -> dict[str, Any]:
    """`payload` with `addon` listed in the instance addon family, as the catalog lists flavors."""
    payload["addons"].append(addon)
    for plan in payload["plans"]:
        for family in plan.get("addonFamilies") or []:
            if family.get("name") == ovhcloud.INSTANCE_FAMILY:
                family["addons"].append(addon["planCode"])
    return payload


def test_a_windows_flavor_is_excluded_by_rule_and_one_without_an_os_is_kept() -> None:
    payload = catalog()
    h100 = next(a for a in payload["addons"] if a["planCode"] == "h100-380.consumption")
    windows = copy.deepcopy(h100) | {"planCode": "win-h100-380.consumption", "invoiceName": "win-h100-380"}
    windows["blobs"]["technical"]["os"] = {"family": "Windows"}
    no_os = copy.deepcopy(h100) | {"planCode": "h100x-380.consumption", "invoiceName": "h100x-380"}
    del no_os["blobs"]["technical"]["os"]
    items = list(ovhcloud.parse([answer(_with_flavor(_with_flavor(payload, windows), no_os))]))
    offers = offers_of(items)
    assert "win-h100-380" not in offers  # its price carries a Windows licence: not the GPU's rate
    assert exclusions(items)["windows_license"] == 1
    assert offers["h100x-380"].price_per_hour == offers["h100-380"].price_per_hour  # no allow-list


def test_the_catalog_is_fetched_with_a_longer_read_timeout() -> None:
    import httpx

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, content=FIXTURE.read_bytes())

    with make_client(transport=httpx.MockTransport(handler), timeout=httpx.Timeout(30.0)) as client:
        list(ovhcloud.fetch(client, {}))
    timeouts = seen[0].extensions["timeout"]
    assert (timeouts["read"], timeouts["connect"]) == (180.0, 10.0)  # python-ovh's default read wait
    assert str(seen[0].url) == URL


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(ovhcloud.fetch(client, {}))
    offers = offers_of(list(ovhcloud.parse(responses)))
    assert offers["l40s-90"].price_per_hour == 1.4
    assert offers["t2-45"].gpu_name_raw == "Tesla V100S"


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_catalog_has_gpu_flavors_in_eur() -> None:
    with make_client() as client:
        responses = list(ovhcloud.fetch(client, {}))
    offers = [o for o in ovhcloud.parse(responses) if isinstance(o, Offer)]
    assert offers and {o.currency for o in offers} == {"EUR"}
    assert all(o.problem is None for o in offers), [o.problem for o in offers if o.problem][:3]
