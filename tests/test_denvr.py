"""Denvr Cloud GetConfigurations: one offer per configuration x cluster, per-instance hourly price."""

from __future__ import annotations

import csv
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import denvr
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "denvr" / "get-configurations__2026-12-01.json"
DERIVED = "denvr/opencomputeprices-denvr-2026-03-22.csv"
KEY = {denvr.CREDENTIAL: "replay-key"}  # sent as a header: the cassette matches on the URL
CATALOG = HardwareCatalog.load()


def load() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=denvr.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def offers(items: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def item(name: str, payload: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(i for i in payload["items"] if i["name"] == name)
    return found


def test_each_configuration_is_one_offer_per_cluster() -> None:
    items = list(denvr.parse([answer(load())]))
    found = offers(items)
    assert len(found) == 9
    h100 = found[("H100_80GB_SXM_8x", "Hou1")]
    assert (h100.price_per_hour, h100.currency, h100.gpu_count, h100.gpu_name_raw) == (
        17.6,
        "USD",
        8.0,
        "H100 80GB SXM",
    )
    assert (h100.vcpus, h100.ram_gb, h100.provider_data["storage_gb"]) == (176.0, 1800.0, 28000.0)
    assert (h100.pricing_type, h100.price_source, h100.scope) == ("on_demand", "list", "configurations")
    # one configuration in two clusters: two offers at the same price
    assert (
        found[("A100_40GB_PCIe_2x", "Hou1")].price_per_hour
        == found[("A100_40GB_PCIe_2x", "Msc1")].price_per_hour
    )
    assert exclusions(items) == {"cpu_only": 1, "no_cluster": 1}
    assert all(o.problem is None for o in found.values())


@pytest.mark.parametrize(
    ("price", "problem"), [(None, "price missing"), (0, "is not positive"), ("call us", "is not a number")]
)
def test_a_wrong_price_is_flagged(price: object, problem: str) -> None:
    payload = load()
    item("Gaudi2_8x", payload)["price"] = price
    found = offers(list(denvr.parse([answer(payload)])))
    gaudi = found[("Gaudi2_8x", "Hou1")]
    assert problem in (gaudi.problem or "")
    assert math.isnan(gaudi.price_per_hour) or gaudi.price_per_hour <= 0


def test_the_gpu_name_falls_back_to_the_older_fields() -> None:
    payload = load()
    config = item("A100_40GB_PCIe_1x", payload)
    del config["text_name"]
    config["gpu_name"] = None
    found = offers(list(denvr.parse([answer(payload)])))
    assert found[("A100_40GB_PCIe_1x", "Hou1")].gpu_name_raw == "NVIDIA A100"


@pytest.mark.parametrize("payload", [{"items": []}, {"result": {"items": []}}, []])
def test_an_empty_or_other_answer_raises(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="`items`"):
        list(denvr.parse([answer(payload)]))


def test_every_offer_maps_to_a_gpu_and_the_hgx_boards_to_nvswitch() -> None:
    found = offers(list(denvr.parse([answer(load())])))
    resolved = {
        k: CATALOG.resolve("denvr", k[0], o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in found.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    names = {k[0]: m.gpu_name for k, m in resolved.items() if m}
    assert names["A100_40GB_PCIe_8x"] == "A100-40GB-PCIe"
    assert names["A100_80GB_SXM_8x"] == "A100-80GB-SXM"
    assert names["H200_141GB_SXM_8x"] == "H200-SXM"
    assert names["Gaudi2_8x"] == "Gaudi2"
    h100 = resolved[("H100_80GB_SXM_8x", "Hou1")]
    assert h100 is not None and (h100.gpu_name, h100.intra_node_interconnect, h100.gpu_count) == (
        "H100-SXM",
        "NVSwitch",
        8,
    )


def test_derived_rows_name_gpus_the_seeds_know(shared_raw: Path) -> None:
    """OpenComputePrices' 2026-03-22 rows (derived from denvr.com/pricing) are a cross-check only:
    the page's GPUs (H200, H100, A100, Gaudi2) all resolve, and its per-GPU prices are of the
    order of our per-instance price divided by the GPU count."""
    with (shared_raw / DERIVED).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["gpu_name"] for r in rows} == {"H200", "H100", "A100", "gaudi2"}
    assert all(CATALOG.resolve("denvr", "", r["gpu_name"], None, 1) for r in rows)
    assert all(0 < float(r["price_per_gpu_hour"]) < 10 for r in rows)


def test_fetch_sends_the_api_key() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=load())

    with make_client(transport=httpx.MockTransport(handler), secrets=["k-123"]) as client:
        responses = list(denvr.fetch(client, {denvr.CREDENTIAL: "k-123"}))
    assert [str(r.url) for r in seen] == [denvr.API_URL]
    assert seen[0].headers["authorization"] == "ApiKey k-123"
    assert len(offers(list(denvr.parse(responses)))) == 9


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        found = offers(list(denvr.parse(list(denvr.fetch(client, KEY)))))
    assert len(found) == 9
    assert found[("H200_141GB_SXM_8x", "Hou1")].price_per_hour == 30.4


@pytest.mark.network
def test_live_configurations() -> None:
    key = os.environ.get(denvr.CREDENTIAL)
    if not key:
        pytest.skip(f"{denvr.CREDENTIAL} not set")
    with make_client(secrets=[key]) as client:
        found = offers(list(denvr.parse(list(denvr.fetch(client, {denvr.CREDENTIAL: key})))))
    assert found and all(o.problem is None for o in found.values())
