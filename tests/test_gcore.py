"""Gcore Cloud GPU flavors: one offer per flavor x region, per-server hourly price in its currency."""

from __future__ import annotations

import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import gcore
from connectors.base import Degraded, LayoutChanged, Offer, RawResponse, exclusions, missing_credentials
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog
from warehouse.pipeline import credentials_for

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "gcore"
PROJECT = "4242"
CATALOG = HardwareCatalog.load()


def load(stem: str) -> Any:
    return json.loads((FIXTURES / f"{stem}__2026-12-02.json").read_text())


def answer(payload: Any, url: str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=url,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def flavors_url(kind: str, region: str) -> str:
    return f"{gcore.flavors_url(kind, '***', region)}?include_prices=true"


def responses(
    regions: Any = None, baremetal: Any = None, virtual: Any = None, refused: bool = True
) -> list[RawResponse]:
    found = [
        answer(load("regions") if regions is None else regions, gcore.REGIONS_URL),
        answer(
            load("gpu-baremetal-flavors") if baremetal is None else baremetal, flavors_url("baremetal", "76")
        ),
        answer(load("gpu-virtual-flavors") if virtual is None else virtual, flavors_url("virtual", "76")),
    ]
    if refused:
        body = load("flavors-refused")
        found += [answer(body, flavors_url(kind, "150"), 403) for kind in gcore.KINDS]
    return found


def offers(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def flavor(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(f for f in payload["results"] if f["name"] == name)
    return found


def test_each_flavor_is_one_offer_in_its_region() -> None:
    items = list(gcore.parse(responses()))
    found = offers(items)
    assert len(found) == 5
    h100 = found[("bm3-ai-1xlarge-h100-80-8", "Luxembourg-2")]
    assert (
        h100.price_per_hour,
        h100.currency,
        h100.gpu_count,
        h100.gpu_name_raw,
        h100.gpu_memory_gb_raw,
    ) == (
        23.2,
        "EUR",
        8.0,
        "H100",
        80.0,
    )
    assert (h100.pricing_type, h100.price_source, h100.scope, h100.billing_unit) == (
        "on_demand",
        "list",
        "baremetal:Luxembourg-2",
        None,
    )
    # bare metal states its CPU and RAM as text only: kept, never parsed into numbers
    assert (h100.vcpus, h100.ram_gb) == (None, None)
    assert h100.provider_data["hardware_description"]["ram"] == "2 TB DDR5"
    assert h100.provider_data["nic_ib"] == "8x 400 Gbit/s"
    assert h100.provider_data["price_per_month"] == 16936.0
    assert exclusions(items) == {"disabled": 1, "price_hidden": 1, "region_refused": 2}
    assert all(o.problem is None for o in found.values())


def test_virtual_flavors_state_vcpus_and_ram_in_mib() -> None:
    found = offers(list(gcore.parse(responses())))
    eight = found[("g3-ai-192-1536-12000-l40s-48-8", "Luxembourg-2")]
    one = found[("g3-ai-24-192-1500-l40s-48-1", "Luxembourg-2")]
    # 1572864 MiB of RAM is 1536 GiB, as the flavor's name says
    assert (eight.vcpus, eight.ram_gb, eight.gpu_count, eight.scope) == (
        192.0,
        1536.0,
        8.0,
        "virtual:Luxembourg-2",
    )
    assert (one.vcpus, one.ram_gb, one.gpu_count, one.price_per_hour) == (24.0, 192.0, 1.0, 1.4)


def test_capacity_sets_availability() -> None:
    found = offers(list(gcore.parse(responses())))
    assert found[("bm3-ai-1xlarge-h200-141-8", "Luxembourg-2")].available is False
    assert found[("bm3-ai-1xlarge-h100-80-8", "Luxembourg-2")].available is True


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda f: f["price"].update(price_per_hour=None), "price_per_hour missing"),
        (lambda f: f["price"].update(price_per_hour=-1), "is not positive"),
        (lambda f: f["price"].update(price_per_hour="n/a"), "is not a number"),
        (lambda f: f["price"].update(price_status="error"), "price_status is 'error'"),
        (lambda f: f["price"].update(currency_code=None), "currency_code missing"),
        (lambda f: f.pop("price"), "no `price` object"),
    ],
)
def test_a_wrong_price_is_flagged(edit: Any, problem: str) -> None:
    payload = load("gpu-baremetal-flavors")
    edit(flavor("bm3-infrastructure-ai-large-l40s-48-8", payload))
    found = offers(list(gcore.parse(responses(baremetal=payload))))
    l40s = found[("bm3-infrastructure-ai-large-l40s-48-8", "Luxembourg-2")]
    assert problem in (l40s.problem or "")
    if "currency" in problem:
        # the price is readable, its currency is not: quarantined with the price as published
        assert (l40s.price_per_hour, l40s.currency) == (10.4, "")
    else:
        assert math.isnan(l40s.price_per_hour) or l40s.price_per_hour <= 0
    assert found[("bm3-ai-1xlarge-h100-80-8", "Luxembourg-2")].problem is None


def test_a_renamed_price_key_flags_every_offer_and_drops_none() -> None:
    def renamed(stem: str) -> Any:
        text = (FIXTURES / f"{stem}__2026-12-02.json").read_text()
        return json.loads(text.replace('"price_per_hour"', '"hourly"'))

    items = list(
        gcore.parse(
            responses(baremetal=renamed("gpu-baremetal-flavors"), virtual=renamed("gpu-virtual-flavors"))
        )
    )
    found = offers(items)
    assert len(found) == 5
    assert all("price_per_hour missing" in (o.problem or "") for o in found.values())


def test_a_region_selling_one_kind_only_is_no_error() -> None:
    found = offers(list(gcore.parse(responses(virtual={"count": 0, "results": []}))))
    assert len(found) == 3 and {o.scope for o in found.values()} == {"baremetal:Luxembourg-2"}


def test_every_list_empty_raises() -> None:
    empty = {"count": 0, "results": []}
    with pytest.raises(LayoutChanged, match="flavor lists are empty"):
        list(gcore.parse(responses(baremetal=empty, virtual=empty, refused=False)))


@pytest.mark.parametrize("payload", [{"items": []}, [], {"count": 1}])
def test_a_flavor_list_of_another_shape_raises(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`results` list missing from the flavor list"):
        list(gcore.parse(responses(virtual=payload)))


@pytest.mark.parametrize("count", [None, 0, "eight"])
def test_a_flavor_without_a_gpu_count_raises(count: object) -> None:
    payload = load("gpu-baremetal-flavors")
    flavor("bm3-ai-1xlarge-h100-80-8", payload)["hardware_properties"]["gpu_count"] = count
    with pytest.raises(LayoutChanged, match=r"hardware_properties\.gpu_count"):
        list(gcore.parse(responses(baremetal=payload)))


def test_the_regions_answer_is_required_and_must_list_gpu_regions() -> None:
    with pytest.raises(LayoutChanged, match="no answer from"):
        list(gcore.parse(responses()[1:]))
    regions = load("regions")
    for region in regions["results"]:
        region["has_ai_gpu"] = False
    with pytest.raises(LayoutChanged, match="`has_ai_gpu`"):
        list(gcore.parse(responses(regions=regions)))
    with pytest.raises(LayoutChanged, match="`results`"):
        list(gcore.parse(responses(regions={"regions": []})))


def test_no_flavor_answer_raises() -> None:
    with pytest.raises(LayoutChanged, match="no flavor list answered"):
        list(gcore.parse(responses()[:1]))


def test_a_paged_region_list_is_degraded() -> None:
    regions = load("regions")
    regions["count"] = 40
    items = list(gcore.parse(responses(regions=regions)))
    degraded = [i for i in items if isinstance(i, Degraded)]
    assert len(degraded) == 1 and "3 of 40 regions" in degraded[0].reason
    assert len(offers(items)) == 5


def test_gpu_regions_are_the_active_ones_with_gpus() -> None:
    regions = load("regions")
    regions["results"].append({**regions["results"][0], "id": 77, "state": "MAINTENANCE"})
    picked = gcore.gpu_regions(answer(regions, gcore.REGIONS_URL))
    assert [r["id"] for r in picked] == [76, 150]


@pytest.mark.parametrize(
    ("text", "gb"),
    [("8x NVIDIA H200 141GB", 141.0), ("1x L40S 48 GB", 48.0), ("NVIDIA A30", None), (None, None)],
)
def test_stated_memory(text: object, gb: float | None) -> None:
    assert gcore.stated_memory_gb(text) == gb


def test_every_offer_maps_to_a_gpu_with_the_variant_unknown_where_unstated() -> None:
    found = offers(list(gcore.parse(responses())))
    resolved = {
        k: CATALOG.resolve("gcore", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    names = {k[0]: m.gpu_name for k, m in resolved.items() if m}
    assert names["bm3-infrastructure-ai-large-l40s-48-8"] == "L40S"
    h100 = resolved[("bm3-ai-1xlarge-h100-80-8", "Luxembourg-2")]
    # the flavor states "H100" with no form factor: the seeds' default, published as unknown
    assert h100 is not None and (h100.gpu_name, h100.variant_source) == ("H100-SXM", "seed_default")


def test_without_key_or_project_the_provider_is_skipped() -> None:
    """Both are needed: flavor lists are per project, so a key alone prices nothing."""
    assert missing_credentials(gcore, {gcore.CREDENTIAL: "k"}) == (gcore.PROJECT,)
    assert missing_credentials(gcore, {gcore.PROJECT: PROJECT, gcore.CREDENTIAL: ""}) == (gcore.CREDENTIAL,)
    assert missing_credentials(gcore, {gcore.CREDENTIAL: "k", gcore.PROJECT: PROJECT}) == ()


def test_fetch_sends_the_key_and_asks_each_gpu_region_for_both_kinds() -> None:
    seen: list[httpx.Request] = []
    bodies = {
        gcore.REGIONS_URL: (200, load("regions")),
        flavors_url("baremetal", "76").replace("***", PROJECT): (200, load("gpu-baremetal-flavors")),
        flavors_url("virtual", "76").replace("***", PROJECT): (200, load("gpu-virtual-flavors")),
        flavors_url("baremetal", "150").replace("***", PROJECT): (403, load("flavors-refused")),
        flavors_url("virtual", "150").replace("***", PROJECT): (404, load("flavors-refused")),
    }

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = bodies[str(request.url)]
        return httpx.Response(status, json=body)

    creds = {gcore.CREDENTIAL: "k-123", gcore.PROJECT: PROJECT}
    with make_client(transport=httpx.MockTransport(handler), secrets=list(creds.values())) as client:
        got = list(gcore.fetch(client, creds))
    assert len(seen) == 5 and all(r.headers["authorization"] == "APIKey k-123" for r in seen)
    # region 8 sells no GPUs: never asked; the project id never reaches the archive
    assert not any("/8/" in str(r.url) for r in seen)
    assert all(PROJECT not in r.url for r in got)
    items = list(gcore.parse(got))
    assert len(offers(items)) == 5 and exclusions(items)["region_refused"] == 2


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    creds, secrets = credentials_for(gcore, {}, replay=True)
    with make_client(replay=REPLAY, secrets=secrets) as client:
        found = offers(list(gcore.parse(list(gcore.fetch(client, creds)))))
    assert len(found) == 5
    assert found[("bm3-ai-1xlarge-h200-141-8", "Luxembourg-2")].price_per_hour == 28.8


@pytest.mark.network
def test_live_flavors() -> None:
    creds = {k: os.environ.get(k, "") for k in gcore.requires}
    if not all(creds.values()):
        pytest.skip(f"{' and '.join(gcore.requires)} not set")
    with make_client(secrets=list(creds.values())) as client:
        found = offers(list(gcore.parse(list(gcore.fetch(client, creds)))))
    assert found and all(o.problem is None for o in found.values())
