"""IBM Cloud Global Catalog: is.instance plans, per-plan deployment pricing, USA/USD, spot."""

from __future__ import annotations

import copy
import json
import math
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import ibm
from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "ibm"
H100_PLAN = "99548819-fcbc-486c-8eeb-0355a56b035e"
CATALOG = HardwareCatalog.load()


def load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}__2026-12-02.json").read_text())
    return data


def answer(url: str, payload: Any) -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def listing(payload: Any | None = None) -> RawResponse:
    return answer(
        f"{ibm.PLANS_URL}?_offset=0&_limit=100", load("is-instance-plans") if payload is None else payload
    )


def pricing(payload: Any, plan: str = H100_PLAN) -> RawResponse:
    return answer(f"{ibm.API}/{plan}/pricing/deployment", payload)


def h100() -> dict[str, Any]:
    return load("pricing-deployment-gx3d-160x1792x8h100")


def every_answer() -> list[RawResponse]:
    plans = {name: plan_id for plan_id, name in ibm.plan_ids(load("is-instance-plans"))}
    priced = sorted(
        p.name.split("__")[0].removeprefix("pricing-deployment-") for p in FIXTURES.glob("pricing-*")
    )
    return [listing()] + [pricing(load(f"pricing-deployment-{p}"), plans[p]) for p in priced]


def offers(items: list[Any]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in items if isinstance(o, Offer)}


def one_metric(**changes: Any) -> dict[str, Any]:
    """The H100 answer cut to eu-de's on-demand metric, with `changes` applied to that metric."""
    payload = h100()
    deployment = payload["resources"][0]
    deployment["metrics"] = [deployment["metrics"][0]]
    deployment["metrics"][0].update(changes)
    return payload


def test_each_gpu_plan_is_one_offer_per_region_and_metric_priced_per_instance() -> None:
    items = list(ibm.parse(every_answer()))
    found = offers(items)
    assert len(found) == 20
    on_demand = found[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert (on_demand.price_per_hour, on_demand.currency, on_demand.gpu_count) == (99.6, "USD", 8.0)
    assert (on_demand.gpu_name_raw, on_demand.vcpus, on_demand.ram_gb) == ("h100", 160.0, 1792.0)
    assert (on_demand.price_source, on_demand.billing_unit, on_demand.scope) == (
        "list",
        "second",
        "plan:gx3d-160x1792x8h100",
    )
    assert on_demand.provider_data["plan_id"] == H100_PLAN
    assert on_demand.provider_data["charge_unit_name"] == "INSTANCE_HOURS_MULTI_TENANT"
    assert found[("gx3-16x80x1l4", "jp-tok", "on_demand")].price_per_hour == 1.83
    assert found[("gx3d-208x1792x8mi300x", "us-east", "on_demand")].gpu_name_raw == "mi300x"
    assert all(o.problem is None for o in found.values())


def test_spot_is_the_catalog_rate_of_the_spot_metric() -> None:
    found = offers(list(ibm.parse(every_answer())))
    spot = found[("gx3d-160x1792x8h100", "eu-de", "spot")]
    assert (spot.price_per_hour, spot.price_source, spot.pricing_type) == (24.8965, "list", "spot")
    assert "preempt" in spot.provider_data["interruptible"]
    # a region whose plan lists no spot metric has no spot offer
    assert ("gx3-16x80x1l4", "jp-tok", "spot") not in found
    assert sum(o.pricing_type == "spot" for o in found.values()) == 9


def test_what_is_left_out_is_counted_by_reason() -> None:
    items = list(ibm.parse(every_answer()))
    # gen2-instance and bx3d-128x640 are not GPU profiles; the RHEL and dedicated-host metrics are
    # not instance rates; jp-tok lists the H100 with no price; L40S us-south is listed twice
    assert exclusions(items) == {
        "no_gpu": 2,
        "other_metric": 7,
        "no_price_in_region": 1,
        "repeated_deployment": 2,
    }


def test_the_usa_usd_row_is_read_not_another_country() -> None:
    payload = one_metric()
    amounts = payload["resources"][0]["metrics"][0]["amounts"]
    payload["resources"][0]["metrics"][0]["amounts"] = list(reversed(amounts))
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert (offer.price_per_hour, offer.currency, offer.provider_data["price_country"]) == (
        99.6,
        "USD",
        "USA",
    )


def test_a_region_priced_in_no_usa_row_is_a_wrong_row_naming_what_it_has() -> None:
    payload = one_metric(
        amounts=[{"country": "EURO", "currency": "EUR", "prices": [{"quantity_tier": 1, "price": 90}]}]
    )
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert math.isnan(offer.price_per_hour)
    assert offer.problem == "no USA/USD amount (has EURO/EUR)"


def test_a_usa_row_without_prices_is_a_wrong_row() -> None:
    payload = one_metric(amounts=[{"country": "USA", "currency": "USD", "prices": []}])
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert offer.problem == "USA/USD amount has no `prices`"


@pytest.mark.parametrize(
    ("value", "problem"),
    [(0, "is not positive"), (-3, "is not positive"), ("n/a", "is not a number"), (None, "missing")],
)
def test_wrong_prices_are_flagged_not_dropped(value: object, problem: str) -> None:
    payload = one_metric(
        amounts=[{"country": "USA", "currency": "USD", "prices": [{"quantity_tier": 1, "price": value}]}]
    )
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert problem in (offer.problem or "")


def test_the_price_is_divided_by_the_charge_unit_quantity() -> None:
    payload = one_metric(charge_unit_quantity=10)
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert offer.price_per_hour == pytest.approx(9.96)
    assert offer.provider_data["charge_unit_quantity"] == 10


@pytest.mark.parametrize("quantity", [None, 0, "many"])
def test_an_unreadable_charge_unit_quantity_is_a_wrong_row_never_guessed_as_one(quantity: object) -> None:
    payload = one_metric(charge_unit_quantity=quantity)
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert offer.problem == f"charge_unit_quantity is {quantity!r}"


def test_of_several_tiers_the_first_is_read_and_all_are_kept() -> None:
    tiers = [{"quantity_tier": 999999999, "price": 80.0}, {"quantity_tier": 720, "price": 99.6}]
    payload = one_metric(amounts=[{"country": "USA", "currency": "USD", "prices": tiers}])
    offer = offers(list(ibm.parse([pricing(payload)])))[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert offer.price_per_hour == 99.6
    assert [t["quantity_tier"] for t in offer.provider_data["tiers"]] == [720, 999999999]


def test_two_deployments_disagreeing_on_a_region_flag_the_offer() -> None:
    payload = h100()
    twin = copy.deepcopy(payload["resources"][0])
    twin["metrics"][0]["amounts"][0]["prices"][0]["price"] = 101.0
    payload["resources"].append(twin)
    items = list(ibm.parse([pricing(payload)]))
    offer = offers(items)[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert offer.problem == "two deployments price eu-de differently: 99.6 and 101.0"
    assert (offer.price_per_hour, offer.provider_data["other_price"]) == (99.6, 101.0)
    assert exclusions(items)["repeated_deployment"] == 1  # its spot rate agrees


def test_the_region_falls_back_to_the_deployment_location() -> None:
    payload = one_metric()
    del payload["resources"][0]["deployment_region"]
    payload["resources"][0]["deployment_location"] = "eu-es"
    assert ("gx3d-160x1792x8h100", "eu-es", "on_demand") in offers(list(ibm.parse([pricing(payload)])))


def test_the_listing_name_travels_and_a_differing_one_is_said() -> None:
    found = offers(list(ibm.parse(every_answer())))
    assert (
        found[("gx3d-160x1792x8h200", "us-east", "on_demand")].provider_data["plan_name"]
        == "gx3d-160x1792x8h200"
    )
    payload = one_metric(metric_id="part-is.instance-hours-gx3d-160x1792x8h200")
    offer = next(o for o in ibm.parse([listing(), pricing(payload)]) if isinstance(o, Offer))
    assert (offer.instance_type, offer.provider_data["plan_name_differs"]) == ("gx3d-160x1792x8h200", True)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"items": []}, "`resources` list missing"),
        ({"resources": []}, "`resources` is empty"),
        ({"resources": [{"metrics": []}]}, "neither `deployment_region` nor `deployment_location`"),
        (
            {"resources": [{"deployment_region": "us-east", "metrics": []}]},
            "no `part-is.instance-hours-<profile>` metric",
        ),
    ],
)
def test_a_pricing_answer_of_another_shape_raises_naming_the_key(payload: Any, message: str) -> None:
    with pytest.raises(LayoutChanged, match=message):
        list(ibm.parse([pricing(payload)]))


def test_renamed_metric_ids_raise_instead_of_reading_as_nothing_sold() -> None:
    payload = h100()
    for deployment in payload["resources"]:
        for metric in deployment["metrics"]:
            metric["id"] = metric.pop("metric_id")
    with pytest.raises(LayoutChanged, match="has the metric been renamed"):
        list(ibm.parse([pricing(payload)]))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"resources": []}, "`resources` is empty"),
        ({"resources": [{"name": "gx3-16x80x1l4"}]}, "has both `id` and `name`"),
        ({"resources": [{"id": "x", "name": "bx2-2x8"}]}, "none of 1 plans is named like a GPU profile"),
    ],
)
def test_a_listing_of_another_shape_raises(payload: Any, message: str) -> None:
    with pytest.raises(LayoutChanged, match=message):
        list(ibm.parse([listing(payload)]))


def test_an_answer_it_never_asks_for_raises() -> None:
    with pytest.raises(LayoutChanged, match="not an answer the ibm connector asks for"):
        list(ibm.parse([answer(f"{ibm.API}/is.instance", {})]))


def test_profile_names_read_as_ibm_documents_them() -> None:
    assert ibm.profile("gx3-16x80x1l4") == (16, 80.0, 1, "l4")
    assert ibm.profile("gx3d-24x120x1a100p") == (24, 120.0, 1, "a100p")
    assert ibm.profile("gx4d-232x3840x8b300") == (232, 3840.0, 8, "b300")
    assert ibm.profile("gx3-48x240x-2l40s") == (48, 240.0, 2, "l40s")  # as the docs' table prints it
    assert ibm.profile("gx3d-160x1792x8Zeta Z9") == (160, 1792.0, 8, "zeta z9")
    # a variant suffix is not part of the accelerator word
    assert ibm.profile("gx3-16x80x1l4-tdx") == (16, 80.0, 1, "l4")
    for other in ("bx3d-128x640", "gen2-instance", "gx3-16x80x0l4", "16x80x1l4"):
        assert ibm.profile(other) is None


def test_metric_ids_name_the_profile_and_the_tier() -> None:
    assert ibm.metric_profile("part-is.instance-hours-gx3-16x80x1l4") == ("gx3-16x80x1l4", "on_demand")
    assert ibm.metric_profile("part-is.spot-gx3d-160x1792x8h200") == ("gx3d-160x1792x8h200", "spot")
    # dedicated-host and licence meters, and a CPU profile, are not read
    for other in (
        "part-is.instance-hours-dh-gx3-16x80x1l4",
        "part-is.os-rhel-vcpu-hours",
        "part-is.instance-hours-bx3d-2x10",
    ):
        assert ibm.metric_profile(other) is None


def test_usd_tiers_sorts_by_quantity_tier() -> None:
    metric = {
        "amounts": [
            {
                "country": "USA",
                "currency": "USD",
                "prices": [{"quantity_tier": 9, "price": 1}, {"quantity_tier": 1, "price": 2}],
            }
        ]
    }
    tiers, problem = ibm.usd_tiers(metric)
    assert ([t["price"] for t in tiers], problem) == ([2, 1], None)
    assert ibm.usd_tiers({}) == ([], "no USA/USD amount (has none)")


def test_every_offer_maps_to_a_gpu_with_its_interconnect() -> None:
    found = offers(list(ibm.parse(every_answer())))
    resolved = {
        k: CATALOG.resolve("ibm", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    assert {m.gpu_name for m in resolved.values() if m} == {"L4", "L40S", "H100-SXM", "H200-SXM", "MI300X"}
    h100 = resolved[("gx3d-160x1792x8h100", "eu-de", "on_demand")]
    assert h100 is not None and (h100.gpu_count, h100.intra_node_interconnect) == (8.0, "NVSwitch")
    l4 = resolved[("gx3-16x80x1l4", "us-south", "on_demand")]
    assert l4 is not None and (l4.vram_gb, l4.intra_node_interconnect) == (24.0, "PCIe")


def test_fetch_pages_the_plans_and_prices_only_gpu_plans() -> None:
    seen: list[str] = []
    second = f"{ibm.PLANS_URL}?_offset=2&_limit=2"

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        if request.url.path.endswith("/is.instance/plan"):
            if request.url.params.get("_offset") == "0":
                page = {
                    "count": 3,
                    "next": second,
                    "resources": [{"id": "a", "name": "bx2-2x8"}, {"id": "b", "name": "gx3-16x80x1l4"}],
                }
            else:
                page = {"offset": 2, "count": 3, "resources": [{"id": "c", "name": "gx3d-160x1792x8h100"}]}
            return httpx.Response(200, json=page)
        return httpx.Response(200, json={"resources": []})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(ibm.fetch(client, {}))
    assert len(responses) == 4
    assert seen == [
        f"{ibm.PLANS_URL}?_offset=0&_limit=100",
        second,
        f"{ibm.API}/b/pricing/deployment",
        f"{ibm.API}/c/pricing/deployment",
    ]


def test_a_listing_without_next_is_paged_by_its_count() -> None:
    page = {"offset": 0, "count": 250, "resources": [{"id": str(n), "name": "bx2-2x8"} for n in range(100)]}
    assert ibm._next(page) == f"{ibm.PLANS_URL}?_offset=100&_limit=100"
    assert ibm._next({**page, "offset": 150}) is None
    assert ibm._next({**page, "next": "https://x/next"}) == "https://x/next"
    assert ibm._next({"count": 3, "resources": []}) is None
    assert ibm._next([]) is None


def test_a_plan_listing_that_loops_raises() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, json={"next": f"{ibm.PLANS_URL}?_offset=1", "resources": [{"id": "a", "name": "bx2-2x8"}]}
        )

    with (
        make_client(transport=httpx.MockTransport(handler)) as client,
        pytest.raises(LayoutChanged, match="second time"),
    ):
        list(ibm.fetch(client, {}))


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        items = list(ibm.parse(list(ibm.fetch(client, {}))))
    found = offers(items)
    assert len(found) == 20
    assert found[("gx3d-160x1792x8h100", "us-east", "on_demand")].price_per_hour == 88.24
    assert Counter(type(i).__name__ for i in items) == {"Offer": 20, "Excluded": 4}
    assert all(isinstance(i, Offer | Excluded) for i in items)


@pytest.mark.network
def test_live_catalog() -> None:
    with make_client() as client:
        found = offers(list(ibm.parse(list(ibm.fetch(client, {})))))
    assert any(o.pricing_type == "on_demand" and o.problem is None for o in found.values())
    assert all(o.currency == "USD" and o.gpu_count >= 1 for o in found.values())
