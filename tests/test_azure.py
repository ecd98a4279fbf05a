"""Azure Retail Prices connector: item rules, real captures, pagination, replay."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import azure
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "azure"
REPLAY = REPO / "tests" / "replay"
NORTHEUROPE = "azure/retail-prices-vm-northeurope-reduced-2026-08.json"
EASTUS = "azure/retail-prices-gpu-normalized-eastus-2025-06-21.json"


def item(**overrides: Any) -> dict[str, Any]:
    base = {
        "currencyCode": "USD",
        "retailPrice": 3.673,
        "unitPrice": 3.673,
        "armRegionName": "eastus",
        "location": "US East",
        "effectiveStartDate": "2024-05-01T00:00:00Z",
        "meterId": "m-1",
        "meterName": "NC24ads A100 v4",
        "productName": "Virtual Machines NCads A100 v4 Series",
        "skuName": "NC24ads A100 v4",
        "serviceName": "Virtual Machines",
        "serviceFamily": "Compute",
        "unitOfMeasure": "1 Hour",
        "type": "Consumption",
        "isPrimaryMeterRegion": True,
        "armSkuName": "Standard_NC24ads_A100_v4",
    }
    return base | overrides


def page(
    items: list[Mapping[str, Any]], next_link: str | None = None, url: str = azure.API_URL
) -> RawResponse:
    body = {"BillingCurrency": "USD", "CustomerEntityId": "Default", "Items": items}
    body |= {"NextPageLink": next_link, "Count": len(items)}
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 11, 29, tzinfo=UTC),
        body=json.dumps(body).encode(),
    )


def by_key(offers: list[Offer]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in offers}


# --- one item -------------------------------------------------------------------------------------


def test_linux_consumption_meter_is_an_on_demand_list_offer() -> None:
    offer = azure.classify_item(item())
    assert isinstance(offer, Offer)
    assert offer.key == ("azure", "Standard_NC24ads_A100_v4", "eastus", None, "on_demand")
    assert (offer.price_source, offer.price_per_hour, offer.currency) == ("list", 3.673, "USD")
    assert offer.gpu_name_raw is None
    assert offer.gpu_count == 0.0 and offer.provider_data["gpu_count_source"] == "unknown"


def test_spot_meter_is_a_market_spot_offer() -> None:
    offer = azure.classify_item(item(meterName="NC24ads A100 v4 Spot", skuName="NC24ads A100 v4 Spot"))
    assert isinstance(offer, Offer)
    assert (offer.pricing_type, offer.price_source) == ("spot", "market")


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        (
            {"meterName": "NC24ads A100 v4 Low Priority", "skuName": "NC24ads A100 v4 Low Priority"},
            "low_priority",
        ),
        ({"productName": "Virtual Machines NCads A100 v4 Series Windows"}, "windows"),
        ({"productName": "Virtual Machines NCCadsv5 Srs Win"}, "windows"),
        ({"productName": "NDamsr A100 v4 Series Dedicated Host"}, "dedicated_host"),
        ({"type": "Reservation"}, "not_consumption"),
        ({"armSkuName": "Standard_D4s_v5"}, "not_gpu_series"),
        ({"armSkuName": ""}, "not_gpu_series"),
        ({"unitOfMeasure": "1/Month"}, "unit"),
        # a rule wins over a wrong price: a Windows meter is excluded whatever its price says
        ({"productName": "Virtual Machines NCads A100 v4 Series Windows", "retailPrice": "NaN"}, "windows"),
    ],
)
def test_excluded_items_say_why(overrides: dict[str, Any], reason: str) -> None:
    result = azure.classify_item(item(**overrides))
    assert isinstance(result, azure.Excluded)
    assert result.reason == reason


@pytest.mark.parametrize(
    ("price", "wanted", "nan"),
    [
        (0, "zero or negative", False),
        (-1.0, "zero or negative", False),
        ("NaN", "not a finite number", True),
        (float("nan"), "not a finite number", True),
        ("3,67", "not a finite number", True),
        (None, "not a finite number", True),
    ],
)
def test_a_wrong_price_is_a_flagged_offer_never_an_exclusion(price: Any, wanted: str, nan: bool) -> None:
    offer = azure.classify_item(item(retailPrice=price))
    assert isinstance(offer, Offer)
    assert offer.key == ("azure", "Standard_NC24ads_A100_v4", "eastus", None, "on_demand")
    assert wanted in (offer.problem or "")
    assert math.isnan(offer.price_per_hour) is nan
    assert offer.provider_data["retail_price_raw"] == price or nan


def test_a_renamed_price_key_yields_flagged_offers_not_an_exception() -> None:
    renamed = [{("retailPriceUSD" if k == "retailPrice" else k): v for k, v in i.items()} for i in (item(),)]
    renamed.append(renamed[0] | {"meterName": "NC24ads A100 v4 Spot", "skuName": "NC24ads A100 v4 Spot"})
    offers = [o for o in azure.parse([page(renamed)]) if isinstance(o, Offer)]
    assert {o.pricing_type for o in offers} == {"on_demand", "spot"}
    assert all("`retailPrice` missing" in (o.problem or "") and math.isnan(o.price_per_hour) for o in offers)


def test_a_well_priced_meter_wins_over_a_flagged_twin() -> None:
    good = item(meterId="good", effectiveStartDate="2023-01-01T00:00:00Z")
    bad = item(meterId="bad", retailPrice=0, effectiveStartDate="2025-01-01T00:00:00Z")
    for order in ([good, bad], [bad, good]):
        offers = [o for o in azure.parse([page(order)]) if isinstance(o, Offer)]
        assert [(o.provider_data["meter_id"], o.problem) for o in offers] == [("good", None)]


def test_an_unknown_n_series_size_lands_under_its_arm_name() -> None:
    offer = azure.classify_item(item(armSkuName="Standard_ND_Zeta_Z9", meterName="ND Zeta Z9"))
    assert isinstance(offer, Offer) and offer.problem is None
    assert (offer.instance_type, offer.gpu_name_raw) == ("Standard_ND_Zeta_Z9", None)


def test_scope_is_the_default_pricing_type_and_region() -> None:
    spot = azure.classify_item(item(meterName="NC24ads A100 v4 Spot", armRegionName="westeurope"))
    assert isinstance(spot, Offer)
    assert spot.scope is None and spot.scope_name == "spot:westeurope"


def test_item_missing_a_documented_field_is_a_layout_change() -> None:
    broken = item()
    del broken["armSkuName"]
    with pytest.raises(LayoutChanged, match="armSkuName"):
        azure.classify_item(broken)


def test_duplicate_meters_keep_the_latest_then_the_cheapest() -> None:
    old = item(meterId="old", retailPrice=4.0, effectiveStartDate="2023-01-01T00:00:00Z")
    new = item(meterId="new", retailPrice=4.5, effectiveStartDate="2025-01-01T00:00:00Z")
    twin = item(meterId="twin", retailPrice=4.2, effectiveStartDate="2025-01-01T00:00:00Z")
    responses = [page([old, new, twin])]
    (offer, excluded) = azure.parse(responses)
    assert isinstance(offer, Offer)
    assert offer.provider_data["meter_id"] == "twin"
    assert excluded == Excluded("duplicate_meter", count=2)
    assert exclusions(azure.parse(responses)) == {"duplicate_meter": 2}


def test_page_without_items_is_a_layout_change() -> None:
    bad = RawResponse(azure.API_URL, "GET", 200, datetime(2026, 11, 29, tzinfo=UTC), body=b'{"value": []}')
    with pytest.raises(LayoutChanged, match="`Items`"):
        list(azure.parse([bad]))


def test_an_empty_catalog_is_refused() -> None:
    with pytest.raises(LayoutChanged, match="no price items"):
        list(azure.parse([page([])]))


# --- real captures (reduced / normalized by third parties, adapted to the documented item) --------


def _arm_sku_name(sku_name: str) -> str:
    """The captures lack armSkuName: "Standard_" + skuName with spaces -> "_", Spot/Low Priority cut.

    An approximation for tests only: it is right for "NC24ads A100 v4" -> Standard_NC24ads_A100_v4
    but not for compact skuNames like "NC40adsH100v5" (real: Standard_NC40ads_H100_v5).
    """
    for suffix in (" Low Priority", " Spot"):
        sku_name = sku_name.removesuffix(suffix)
    return sku_name if sku_name.startswith("Standard_") else "Standard_" + sku_name.replace(" ", "_")


def northeurope_items(raw: Path) -> list[dict[str, Any]]:
    """{skuId|meterId|type|term: {armRegionName, meterName, productName, retailPrice, ...}} -> items."""
    reduced = json.loads((raw / NORTHEUROPE).read_text())
    items = []
    for key, row in reduced.items():
        _sku_id, meter_id, price_type, _term = key.split("|")
        items.append(
            row
            | {
                "meterId": meter_id,
                "type": price_type,
                "currencyCode": "USD",
                "armSkuName": _arm_sku_name(row["skuName"]),
            }
        )
    return items


def eastus_items(raw: Path) -> list[dict[str, Any]]:
    """[{region, skuName, productName, pricePerHour, currency, unitOfMeasure}] -> items.

    The normalizer dropped `type`, so reservation rows (1/3/5-year totals such as 551221.0 for
    ND96isr H100 v5) sit next to the hourly price. In this capture each group of rows with the same
    region, skuName and productName starts with the Consumption row; the rest are reservations.
    """
    rows = json.loads((raw / EASTUS).read_text())
    seen: defaultdict[tuple[str, str, str], int] = defaultdict(int)
    items = []
    for row in rows:
        group = (row["region"], row["skuName"], row["productName"])
        seen[group] += 1
        items.append(
            {
                "armRegionName": row["region"],
                "meterName": row["skuName"],
                "skuName": row["skuName"],
                "productName": row["productName"],
                "retailPrice": row["pricePerHour"],
                "currencyCode": row["currency"],
                "unitOfMeasure": row["unitOfMeasure"],
                "type": "Consumption" if seen[group] == 1 else "Reservation",
                "armSkuName": _arm_sku_name(row["skuName"]),
            }
        )
    return items


def test_northeurope_capture(shared_raw: Path) -> None:
    responses = [page(northeurope_items(shared_raw))]
    offers = [o for o in azure.parse(responses) if isinstance(o, Offer)]
    offers_by_key = by_key(offers)
    a100 = offers_by_key[("Standard_NC24ads_A100_v4", "northeurope", "on_demand")]
    assert (a100.price_per_hour, a100.price_source) == (4.408, "list")
    spot = offers_by_key[("Standard_NC24ads_A100_v4", "northeurope", "spot")]
    assert (spot.price_per_hour, spot.price_source) == (0.814598, "market")
    h200 = offers_by_key[("Standard_ND96isrH200v5", "northeurope", "on_demand")]
    assert h200.price_per_hour == 101.76
    # Low Priority is excluded, never presented as Spot: its 0.882 is nowhere among the offers.
    assert all(o.price_per_hour != 0.882 for o in offers)
    counts = {t: sum(o.pricing_type == t for o in offers) for t in ("on_demand", "spot")}
    assert counts == {"on_demand": 62, "spot": 55}
    excluded = exclusions(azure.parse(responses))
    # NM16ads_MA35D is an N-series size with a media accelerator, not a GPU
    assert not any(o.instance_type.startswith(("Standard_NM", "Standard_NP")) for o in offers)
    assert excluded["low_priority"] == 28  # Linux GPU Low Priority meters (+1 NM, excluded as non-GPU)
    assert excluded["windows"] == 145  # +3 NM Windows meters, excluded as non-GPU first
    assert excluded["dedicated_host"] == 1
    assert "duplicate_meter" not in excluded


def test_eastus_normalized_capture(shared_raw: Path) -> None:
    responses = [page(eastus_items(shared_raw))]
    offers = [o for o in azure.parse(responses) if isinstance(o, Offer)]
    offers_by_key = by_key(offers)
    assert offers_by_key[("Standard_NC24ads_A100_v4", "eastus", "on_demand")].price_per_hour == 3.673
    assert offers_by_key[("Standard_ND96isrH100v5", "eastus", "on_demand")].price_per_hour == 98.32
    assert offers_by_key[("Standard_ND96isrH100v5", "eastus", "spot")].price_per_hour == 40.271872
    assert (
        offers_by_key[("Standard_NC24ads_A100_v4", "germanywestcentral", "spot")].price_per_hour == 1.070078
    )
    assert len({o.region for o in offers}) == 18
    counts = {t: sum(o.pricing_type == t for o in offers) for t in ("on_demand", "spot")}
    assert counts == {"on_demand": 161, "spot": 161}
    assert all(o.price_per_hour < 1000 for o in offers)  # no reservation total leaked in
    excluded = exclusions(azure.parse(responses))
    assert (excluded["low_priority"], excluded["windows"], excluded["not_consumption"]) == (123, 445, 814)
    # NCC H100 v5 Windows meters say "Srs Win", not "Windows"; they must not shadow Linux prices.
    assert offers_by_key[("Standard_NCC40adsH100v5", "westeurope", "on_demand")].price_per_hour == 8.9
    assert "duplicate_meter" not in excluded


# --- HTTP path ------------------------------------------------------------------------------------


def _client(handler: Any) -> Any:
    return make_client(transport=httpx.MockTransport(handler), sleep=lambda _: None)


def test_fetch_follows_next_page_link_until_null() -> None:
    next_link = "https://prices.azure.com:443/api/retail/prices?$filter=x&$skip=100"
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if "skip" in str(request.url):
            return httpx.Response(
                200, json={"Items": [item(armRegionName="westeurope")], "NextPageLink": None}
            )
        return httpx.Response(200, json={"Items": [item()], "NextPageLink": next_link})

    with _client(handler) as client:
        responses = list(azure.fetch(client, {}))
    assert len(responses) == 2
    assert "startswith" in httpx.URL(seen[0]).params["$filter"]
    assert httpx.URL(seen[0]).params["meterRegion"] == "'primary'"
    assert {o.region for o in azure.parse(responses) if isinstance(o, Offer)} == {"eastus", "westeurope"}


def test_fetch_stops_a_page_loop() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"Items": [item()], "NextPageLink": azure.API_URL + "?$skip=100"})

    with _client(handler) as client, pytest.raises(LayoutChanged, match="already followed"):
        list(azure.fetch(client, {}))


def test_fetch_page_missing_items_is_a_layout_change() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"error": {"code": "Throttled"}})

    with _client(handler) as client, pytest.raises(LayoutChanged, match="`Items` list missing"):
        list(azure.fetch(client, {}))


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(azure.fetch(client, {}))
    assert len(responses) == 2
    offers = by_key([o for o in azure.parse(responses) if isinstance(o, Offer)])
    assert set(offers) == {
        ("Standard_NC24ads_A100_v4", "eastus", "on_demand"),
        ("Standard_NC24ads_A100_v4", "eastus", "spot"),
        ("Standard_ND96isr_H100_v5", "westeurope", "on_demand"),
        ("Standard_ND96isr_H100_v5", "westeurope", "spot"),
    }
    assert offers[("Standard_ND96isr_H100_v5", "westeurope", "spot")].price_per_hour == 40.271872
    assert exclusions(azure.parse(responses)) == {"low_priority": 1, "windows": 1}


def test_fixture_pages_are_small_and_documented_shape() -> None:
    for path in FIXTURES.glob("*.json"):
        assert path.stat().st_size < 8_000
        assert {"BillingCurrency", "Items", "NextPageLink", "Count"} <= set(json.loads(path.read_text()))
