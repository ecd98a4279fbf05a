"""Seeweb ECS plans: one offer per GPU plan x compatible region, per-server hourly price in EUR."""

from __future__ import annotations

import ast
import csv
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import seeweb
from connectors.base import Degraded, LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "seeweb"
PLANS = FIXTURES / "plans__2026-12-02.json"
AVAILABLE = FIXTURES / "plans-availables__2026-12-02.json"
DERIVED = "skypilot-catalog/v9/seeweb-vms.csv"
# the fixture's GPU plans that the derived catalog also lists (14 of its 27 GPU rows)
CHECKED = 14
KEY = {seeweb.CREDENTIAL: "replay-token"}  # sent as a header: the cassette matches on the URL
CATALOG = HardwareCatalog.load()


def load(path: Path = PLANS) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def answer(payload: Any, url: str = seeweb.PLANS_URL) -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def both(plans: Any = None, available: Any = None) -> list[RawResponse]:
    return [
        answer(load() if plans is None else plans),
        answer(load(AVAILABLE) if available is None else available, seeweb.AVAILABLE_URL),
    ]


def offers(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def plan(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(p for p in payload["plans"] if p["name"] == name)
    return found


def test_each_gpu_plan_is_one_offer_per_compatible_region() -> None:
    items = list(seeweb.parse(both()))
    found = offers(items)
    assert len(found) == 17
    h200 = found[("ECS8GPU10", "it-fr2")]
    assert (h200.price_per_hour, h200.currency, h200.gpu_count, h200.gpu_name_raw) == (
        20.8,
        "EUR",
        8.0,
        "H200 141GB",
    )
    # RAM is stated in MiB: 2097152 MiB is 2048 GiB; the label's suffix is the per-GPU memory
    assert (h200.vcpus, h200.ram_gb, h200.gpu_memory_gb_raw) == (255.0, 2048.0, 141.0)
    assert (h200.pricing_type, h200.price_source, h200.scope, h200.billing_unit) == (
        "on_demand",
        "list",
        "plans",
        "hour",
    )
    # the monthly price is kept as stated, never turned into an hourly rate
    assert h200.provider_data["monthly_price"] == 15184.0
    assert h200.provider_data["disk_gb"] == 8000.0
    # one plan in two regions: two offers at the same price
    assert found[("ECS1GPU7", "it-fr2")].price_per_hour == found[("ECS1GPU7", "it-mi2")].price_per_hour
    assert found[("ECS1GPU7", "it-mi2")].provider_data["region_description"] == "Milano"
    assert exclusions(items) == {"cpu_only": 1, "no_regions": 1, "plan_inactive": 1, "windows": 1}
    assert all(o.problem is None for o in found.values())


def test_multi_gpu_plans_are_priced_per_server() -> None:
    """The 2x and 4x A100 plans cost two and four times the 1x one: the price is the server's."""
    found = offers(list(seeweb.parse(both())))
    one, two, four = (found[(f"ECS{n}GPU3", "it-fr2")] for n in (1, 2, 3))
    assert (one.gpu_count, two.gpu_count, four.gpu_count) == (1.0, 2.0, 4.0)
    assert two.price_per_hour == pytest.approx(2 * one.price_per_hour)
    assert four.price_per_hour == pytest.approx(4 * one.price_per_hour)


def test_availability_comes_from_the_activatable_list() -> None:
    found = offers(list(seeweb.parse(both())))
    # compatible with two regions, activatable in one
    assert found[("ECS1GPU6", "it-fr2")].available is True
    assert found[("ECS1GPU6", "it-mi2")].available is False
    # listed with no region, and not listed at all
    assert found[("ECS3GPU3", "it-fr2")].available is False
    assert found[("ECS1GPU8", "it-fr2")].available is False


def test_without_the_availability_answer_availability_is_unknown() -> None:
    found = offers(list(seeweb.parse([answer(load())])))
    assert len(found) == 17
    assert {o.available for o in found.values()} == {None}


@pytest.mark.parametrize(
    "available",
    [{"status": "ok", "plans": []}, {"status": "ok"}, {"status": "ok", "plans": [{"name": "ECS1GPU3"}]}],
)
def test_an_unreadable_availability_answer_degrades_but_prices_load(available: Any) -> None:
    items = list(seeweb.parse(both(available=available)))
    degraded = [i for i in items if isinstance(i, Degraded)]
    assert len(degraded) == 1 and seeweb.AVAILABLE_URL in degraded[0].reason
    found = offers(items)
    assert len(found) == 17 and {o.available for o in found.values()} == {None}


@pytest.mark.parametrize(
    ("price", "problem"),
    [(None, "hourly_price missing"), (0, "is not positive"), ("su richiesta", "is not a number")],
)
def test_a_wrong_price_is_flagged(price: object, problem: str) -> None:
    payload = load()
    plan("ECS1GPU12", payload)["hourly_price"] = price
    found = offers(list(seeweb.parse(both(payload))))
    pro = found[("ECS1GPU12", "it-fr2")]
    assert problem in (pro.problem or "")
    assert math.isnan(pro.price_per_hour) or pro.price_per_hour <= 0
    assert found[("ECS1GPU3", "it-fr2")].problem is None


def test_a_renamed_price_key_flags_every_offer_and_drops_none() -> None:
    text = PLANS.read_text().replace('"hourly_price"', '"price_hourly"')
    found = offers(list(seeweb.parse([answer(json.loads(text))])))
    assert len(found) == 17
    assert all("hourly_price missing" in (o.problem or "") for o in found.values())


@pytest.mark.parametrize("payload", [{"status": "ok", "plans": []}, {"status": "ok", "items": []}, []])
def test_an_empty_or_other_answer_raises(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`plans`"):
        list(seeweb.parse(both(payload)))


def test_an_error_status_raises() -> None:
    with pytest.raises(LayoutChanged, match="`status` is 'KO'"):
        list(seeweb.parse(both({"status": "KO", "plans": load()["plans"]})))


def test_no_plans_answer_raises() -> None:
    with pytest.raises(LayoutChanged, match="no answer from"):
        list(seeweb.parse([answer(load(AVAILABLE), seeweb.AVAILABLE_URL)]))


@pytest.mark.parametrize("count", [None, "una", "0"])
def test_a_gpu_plan_without_a_readable_count_raises(count: object) -> None:
    payload = load()
    plan("ECS1GPU3", payload)["gpu"] = count
    with pytest.raises(LayoutChanged, match="`gpu` count"):
        list(seeweb.parse(both(payload)))


@pytest.mark.parametrize(
    ("label", "gb"), [("H200 141GB", 141.0), ("L40s 48GB", 48.0), ("A30", None), ("X 7.5 gb", 7.5)]
)
def test_label_memory(label: str, gb: float | None) -> None:
    assert seeweb.label_memory_gb(label) == gb


def test_every_offer_maps_to_a_gpu_and_the_unstated_variants_stay_unknown() -> None:
    found = offers(list(seeweb.parse(both())))
    resolved = {
        k: CATALOG.resolve("seeweb", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    names = {k[0]: m.gpu_name for k, m in resolved.items() if m}
    assert names["ECS1GPU"] == "Quadro-RTX6000"  # 24 GB: the Turing card, not the 48 GB Ada
    assert names["ECS1GPU2"] == "RTXA6000"
    assert names["ECS1GPU6"] == "L4"
    assert names["ECS1GPU7"] == "L40S"
    assert names["ECS1GPU11"] == "A30"
    assert names["ECS1GPU9"] == "MI300X"
    # Seeweb names no form factor for its A100, H100 and H200: priced on the seeds' default,
    # published with the variant unknown
    for plan_name in ("ECS1GPU3", "ECS1GPU8", "ECS1GPU10"):
        match = resolved[(plan_name, "it-fr2")]
        assert match is not None and match.variant_source == "seed_default", plan_name


def test_derived_catalog_agrees_with_the_parsed_offers(shared_raw: Path) -> None:
    """SkyPilot's v9 Seeweb catalog is derived from the same /plans list (its Price column is
    hourly_price, MemoryGiB is ram / 1024, Region is where the plan was activatable): a
    cross-check of our units and counts, never replay input. Every GPU row with a region is one of
    our offers with the same price, vCPUs, GiB and GPU count, and is activatable in our fixture;
    every GPU row without one is a plan activatable nowhere in ours."""
    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["AcceleratorName"]]
    assert len(rows) == 27  # the GPU rows of the capture (PROVENANCE: 73 lines in all)
    found = offers(list(seeweb.parse(both())))
    by_plan: dict[str, list[Offer]] = {}
    for (plan_name, _), offer in found.items():
        by_plan.setdefault(plan_name, []).append(offer)
    checked = 0
    for row in rows:
        ours = by_plan.get(row["InstanceType"])
        if not ours:
            continue
        checked += 1
        offer = ours[0]
        assert offer.price_per_hour == float(row["Price"]), row["InstanceType"]
        assert (offer.vcpus, offer.ram_gb) == (float(row["vCPUs"]), float(row["MemoryGiB"]))
        assert offer.gpu_count == float(row["AcceleratorCount"])
        info = ast.literal_eval(row["GpuInfo"])
        mib = info["Gpus"][0]["MemoryInfo"]["SizeInMiB"]
        if mib and offer.gpu_memory_gb_raw:
            # SkyPilot multiplies the label's GB by 1024 (48384 MiB for the A6000): within 5 %
            assert offer.gpu_memory_gb_raw == pytest.approx(mib / 1024, rel=0.05)
        if row["Region"]:
            assert any(o.region == row["Region"] and o.available for o in ours), row["InstanceType"]
        else:
            assert not any(o.available for o in ours), row["InstanceType"]
    assert checked == CHECKED


def test_fetch_sends_the_token_to_both_lists() -> None:
    seen: list[httpx.Request] = []
    bodies = {seeweb.PLANS_URL: load(), seeweb.AVAILABLE_URL: load(AVAILABLE)}

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=bodies[str(request.url)])

    with make_client(transport=httpx.MockTransport(handler), secrets=["t-123"]) as client:
        responses = list(seeweb.fetch(client, {seeweb.CREDENTIAL: "t-123"}))
    assert [str(r.url) for r in seen] == [seeweb.PLANS_URL, seeweb.AVAILABLE_URL]
    assert all(r.headers["x-apitoken"] == "t-123" for r in seen)
    assert all("t-123" not in json.dumps(dict(r.headers)) for r in responses)
    assert len(offers(list(seeweb.parse(responses)))) == 17


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        found = offers(list(seeweb.parse(list(seeweb.fetch(client, KEY)))))
    assert len(found) == 17
    assert found[("ECS1GPU10", "it-fr2")].price_per_hour == 2.6
    assert found[("ECS1GPU2", "it-fr2")].available is True


@pytest.mark.network
def test_live_plans() -> None:
    token = os.environ.get(seeweb.CREDENTIAL)
    if not token:
        pytest.skip(f"{seeweb.CREDENTIAL} not set")
    with make_client(secrets=[token]) as client:
        found = offers(list(seeweb.parse(list(seeweb.fetch(client, {seeweb.CREDENTIAL: token})))))
    assert found and all(o.problem is None for o in found.values())
    assert {o.currency for o in found.values()} == {"EUR"}
