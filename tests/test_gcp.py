"""The GCP connector: SKU reading, machine assembly, pagination, errors, key redaction, replay."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import gcp
from connectors.base import Excluded, FetchError, LayoutChanged, MissingCredentials, Offer, RawResponse
from connectors.http import Client, make_client

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "gcp"
REPLAY = TESTS / "replay"
PAGE_1 = FIXTURES / "skus-page-1__2026-11-29.json"
PAGE_2 = FIXTURES / "skus-page-2__2026-11-29.json"
KEY = "AIzaSyTEST-not-a-real-key-0123456789"


def raw(
    body: bytes | str | Mapping[str, Any] | list[Any], url: str = "https://example.test/skus"
) -> RawResponse:
    if isinstance(body, Mapping | list):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    return RawResponse(url=url, method="GET", status=200, fetched_at=datetime.now(UTC), body=body)


def sku(
    description: str,
    *,
    units: str | None = "0",
    nanos: int | None = 500_000_000,
    unit: str = "h",
    usage: str | None = None,
    regions: list[str] | None = None,
    sku_id: str = "TEST-0000-0001",
    currency: str = "USD",
) -> dict[str, Any]:
    unit_price: dict[str, Any] = {"currencyCode": currency}
    if units is not None:
        unit_price["units"] = units
    if nanos is not None:
        unit_price["nanos"] = nanos
    out: dict[str, Any] = {
        "skuId": sku_id,
        "description": description,
        "pricingInfo": [
            {
                "pricingExpression": {
                    "usageUnit": unit,
                    "tieredRates": [{"startUsageAmount": 0, "unitPrice": unit_price}],
                }
            }
        ],
    }
    if usage is not None:
        out["category"] = {"resourceFamily": "Compute", "usageType": usage}
    if regions is not None:
        out["serviceRegions"] = regions
    return out


def by_key(offers: list[Offer]) -> dict[tuple[str, str, str], Offer]:
    return {(o.instance_type, o.region, o.pricing_type): o for o in offers}


# --- pure helpers ---------------------------------------------------------------------------------


def test_money_adds_units_and_nanos_and_treats_omitted_fields_as_zero() -> None:
    assert gcp.money({"units": "2", "nanos": 933908000}) == pytest.approx(2.933908)
    assert gcp.money({"nanos": 4237000}) == pytest.approx(0.004237)  # proto3 JSON omits units=0
    assert gcp.money({"units": "3"}) == 3.0


def test_hourly_rate_takes_the_tier_starting_at_zero() -> None:
    tiered = sku("Nvidia L4 GPU running in Belgium")
    tiered["pricingInfo"][0]["pricingExpression"]["tieredRates"] = [
        {"startUsageAmount": 100, "unitPrice": {"currencyCode": "USD", "nanos": 100_000_000}},
        {"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "nanos": 700_000_000}},
    ]
    assert gcp.hourly_rate(tiered) == (pytest.approx(0.7), "USD", "h")


@pytest.mark.parametrize(
    "breakage",
    [
        lambda s: s.pop("pricingInfo"),
        lambda s: s["pricingInfo"].clear(),
        lambda s: s["pricingInfo"][0]["pricingExpression"].pop("usageUnit"),
        lambda s: s["pricingInfo"][0]["pricingExpression"]["tieredRates"][0].update(startUsageAmount=5),
    ],
)
def test_hourly_rate_raises_layout_changed_naming_the_sku(breakage: Callable[[dict[str, Any]], Any]) -> None:
    broken = sku("Nvidia L4 GPU running in Belgium", sku_id="BROK-EN00-0001")
    breakage(broken)
    with pytest.raises(LayoutChanged, match="BROK-EN00-0001"):
        gcp.hourly_rate(broken)


@pytest.mark.parametrize(
    ("description", "usage_type", "expected"),
    [
        ("Nvidia L4 GPU running in Belgium", "OnDemand", "on_demand"),
        ("Nvidia L4 GPU attached to Spot Preemptible VMs running in Belgium", "Preemptible", "spot"),
        ("Commitment v1: Nvidia L4 GPU in Belgium for 1 Year", "Commit1Yr", None),
        # reduced captures: no category, the description decides
        ("Nvidia L4 GPU running in Belgium", None, "on_demand"),
        ("Nvidia L4 GPU attached to Spot Preemptible VMs running in Belgium", None, "spot"),
        ("Spot Preemptible A2 Instance Core running in Americas", None, "spot"),
        ("Commitment v1: Nvidia L4 GPU in Belgium for 1 Year", None, None),
        ("A2 Instance Core running in Americas for 3 Years", None, None),
    ],
)
def test_usage_of(description: str, usage_type: str | None, expected: str | None) -> None:
    assert gcp.usage_of(sku(description, usage=usage_type)) == expected


def test_regions_prefer_service_regions_then_the_location_table() -> None:
    with_regions = sku("Nvidia L4 GPU running in Americas", regions=["us-east1", "us-central1"])
    assert gcp.regions_of(with_regions, "Americas") == ("us-central1", "us-east1")
    assert gcp.regions_of(sku("x"), "Netherlands") == ("europe-west4",)
    assert (
        gcp.regions_of(sku("x"), "Virginia") == gcp.regions_of(sku("x"), "Northern Virginia") == ("us-east4",)
    )
    assert gcp.regions_of(sku("x"), "Americas") == ()  # multi-region: not resolvable from text


@pytest.mark.parametrize(
    ("description", "kind", "subject", "usage"),
    [
        ("Nvidia Tesla A100 GPU running in Americas", "gpu", "nvidia-tesla-a100", "on_demand"),
        ("Nvidia Tesla A100 80GB GPU running in Belgium", "gpu", "nvidia-a100-80gb", "on_demand"),
        (
            "Nvidia H100 80GB GPU attached to Spot Preemptible VMs running in Virginia",
            "gpu",
            "nvidia-h100-80gb",
            "spot",
        ),
        ("Nvidia H100 80GB Plus GPU running in Americas", "gpu", "nvidia-h100-mega-80gb", "on_demand"),
        ("Nvidia H100 80GB Mega GPU running in Tokyo", "gpu", "nvidia-h100-mega-80gb", "on_demand"),
        (
            "H200 141GB GPU attached to Spot Preemptible VMs running in Dallas",
            "gpu",
            "nvidia-h200-141gb",
            "spot",
        ),
        ("Nvidia Tesla T4 GPU running in Japan", "gpu", "nvidia-tesla-t4", "on_demand"),
        ("A2 Instance Core running in Americas", "core", "a2", "on_demand"),
        ("A2 Instance Ram running in Americas", "ram", "a2", "on_demand"),
        ("Spot Preemptible A3Plus Instance Ram running in Tokyo", "ram", "a3-mega", "spot"),
        ("N1 Predefined Instance Core running in Netherlands", "core", "n1", "on_demand"),
        ("Spot Preemptible G2 Instance Core running in Belgium", "core", "g2", "spot"),
    ],
)
def test_read_sku_components(description: str, kind: str, subject: str, usage: str) -> None:
    unit = "GiBy.h" if kind == "ram" else "h"
    component = gcp.read_sku(sku(description, unit=unit))
    assert isinstance(component, gcp.Component)
    assert (component.kind, component.subject, component.usage) == (kind, subject, usage)
    assert component.price == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("description", "reason"),
    [
        ("Commitment v1: Nvidia H100 80GB GPU in Americas for 1 Year", "committed use"),
        ("Reserved Nvidia H100 80GB GPU in Americas", "reservation"),
        ("Nvidia L4 GPU attached to DWS Defined Duration VMs running in Belgium", "DWS flex-start"),
        ("Nvidia H100 80GB GPU running in Belgium in Calendar Mode", "DWS calendar mode"),
        ("N1 Sole Tenancy Instance Core running in Americas", "sole tenancy"),
        ("Custom Instance Core running in Americas", "custom machine type"),
        (
            "Licensing Fee for Ubuntu Pro 22.04 LTS (Jammy Jellyfish) on VM with up to 1 GPU (GPU cost)",
            "licence fee",
        ),
        ("E2 Instance Core running in Americas", "machine family without GPUs"),
        ("Network Internet Egress from Americas to EMEA", "not a GPU, core or RAM SKU"),
    ],
)
def test_read_sku_skips_with_a_reason(description: str, reason: str) -> None:
    skipped = gcp.read_sku(sku(description))
    assert isinstance(skipped, gcp.Skipped)
    assert skipped.reason == reason


def test_read_sku_keeps_an_unknown_gpu_label_as_stated() -> None:
    component = gcp.read_sku(sku("Nvidia Quantum X9 GPU running in Belgium"))
    assert isinstance(component, gcp.Component)
    assert (component.kind, component.subject, component.known, component.problem) == (
        "gpu",
        "Nvidia Quantum X9",
        False,
        None,
    )


@pytest.mark.parametrize(
    ("overrides", "wanted", "nan"),
    [
        ({"units": "0", "nanos": 0}, "zero or negative price", False),
        ({"units": "-1", "nanos": 0}, "zero or negative price", False),
        ({"nanos": float("nan")}, "unreadable unitPrice", True),
        ({"units": "one"}, "unreadable unitPrice", True),
        ({"unit": "GiBy.h"}, "usageUnit 'GiBy.h', expected 'h'", True),
    ],
)
def test_read_sku_flags_a_wrong_price_instead_of_skipping_or_raising(
    overrides: dict[str, Any], wanted: str, nan: bool
) -> None:
    component = gcp.read_sku(sku("Nvidia Tesla V100 GPU running in Jakarta", **overrides))
    assert isinstance(component, gcp.Component)
    assert wanted in (component.problem or "")
    assert math.isnan(component.price) is nan


def test_read_sku_flags_a_sku_whose_price_key_is_missing() -> None:
    broken = sku("Nvidia L4 GPU running in Belgium", sku_id="BROK-EN00-0002")
    broken["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unit_price"] = broken["pricingInfo"][0][
        "pricingExpression"
    ]["tieredRates"][0].pop("unitPrice")
    component = gcp.read_sku(broken)
    assert isinstance(component, gcp.Component) and math.isnan(component.price)
    assert "BROK-EN00-0002" in (component.problem or "") and "unitPrice" in (component.problem or "")


def test_read_sku_skips_non_compute_resource_families() -> None:
    licence = sku("Nvidia L4 GPU running in Belgium")
    licence["category"] = {"resourceFamily": "License", "usageType": "OnDemand"}
    skipped = gcp.read_sku(licence)
    assert isinstance(skipped, gcp.Skipped) and skipped.reason == "resource family License"


def test_read_sku_raises_on_a_missing_description() -> None:
    # a SKU without a description cannot be told apart from any other: nothing to flag it as
    with pytest.raises(LayoutChanged, match="no `description`"):
        gcp.read_sku({"skuId": "X"})


def test_index_prefers_the_sku_covering_fewer_regions_then_the_lower_id() -> None:
    wide = gcp.read_sku(
        sku("Nvidia L4 GPU running in Americas", regions=["us-central1", "us-east1"], sku_id="B")
    )
    narrow = gcp.read_sku(sku("Nvidia L4 GPU running in Iowa", regions=["us-central1"], sku_id="C", nanos=1))
    twin = gcp.read_sku(
        sku("Nvidia L4 GPU running in Americas", regions=["us-central1", "us-east1"], sku_id="A")
    )
    assert (
        isinstance(wide, gcp.Component)
        and isinstance(narrow, gcp.Component)
        and isinstance(twin, gcp.Component)
    )
    for order in ([wide, narrow, twin], [twin, narrow, wide]):
        index = gcp.index_components(order)
        assert index[("gpu", "nvidia-l4", "on_demand", "us-central1")].sku_id == "C"
        assert index[("gpu", "nvidia-l4", "on_demand", "us-east1")].sku_id == "A"


SHAPE = gcp.MachineShape("g2-standard-8", "g2", 8, 32, "nvidia-l4", 1, 24, "https://cloud.google.com/x")


def _components(*descriptions: tuple[str, str, int], currency: str = "USD") -> list[gcp.Component]:
    out = []
    for description, unit, nanos in descriptions:
        item = gcp.read_sku(
            sku(description, unit=unit, nanos=nanos, regions=["europe-west1"], currency=currency)
        )
        assert isinstance(item, gcp.Component)
        out.append(item)
    return out


def test_assemble_prices_a_machine_from_its_parts() -> None:
    parts = _components(
        ("G2 Instance Core running in Belgium", "h", 25_000_000),
        ("G2 Instance Ram running in Belgium", "GiBy.h", 3_000_000),
        ("Nvidia L4 GPU running in Belgium", "h", 600_000_000),
    )
    offers, incomplete = gcp.assemble(parts, [SHAPE])
    assert not incomplete
    (offer,) = offers
    assert offer.key == ("gcp", "g2-standard-8", "europe-west1", None, "on_demand")
    assert offer.price_per_hour == pytest.approx(8 * 0.025 + 32 * 0.003 + 0.6)
    assert (offer.price_source, offer.currency, offer.gpu_name_raw, offer.gpu_count) == (
        "list",
        "USD",
        "nvidia-l4",
        1,
    )
    assert (offer.vcpus, offer.ram_gb, offer.gpu_memory_gb_raw) == (8, 32, 24)
    assert offer.provider_data["components"] == {
        "vcpu_usd_per_hour": 0.025,
        "ram_usd_per_gb_hour": 0.003,
        "gpu_usd_per_hour": 0.6,
        "vcpus": 8,
        "ram_gb": 32,
        "gpus": 1,
        "currency": "USD",
    }
    json.dumps(dict(offer.provider_data))  # must be JSON-serialisable


def test_assemble_counts_machines_missing_a_part_instead_of_offering_them() -> None:
    parts = _components(
        ("G2 Instance Core running in Belgium", "h", 25_000_000),
        ("Nvidia L4 GPU running in Belgium", "h", 600_000_000),
    )
    offers, incomplete = gcp.assemble(parts, [SHAPE])
    assert offers == []
    assert incomplete == {("g2-standard-8", "on_demand", "missing ram"): 1}


def test_assemble_refuses_to_add_prices_in_different_currencies() -> None:
    parts = _components(
        ("G2 Instance Core running in Belgium", "h", 25_000_000),
        ("G2 Instance Ram running in Belgium", "GiBy.h", 3_000_000),
    ) + _components(("Nvidia L4 GPU running in Belgium", "h", 600_000_000), currency="EUR")
    offers, incomplete = gcp.assemble(parts, [SHAPE])
    assert offers == [] and incomplete == {("g2-standard-8", "on_demand", "mixed currencies"): 1}


def test_shape_table_is_sourced_and_consistent() -> None:
    shapes = gcp.load_shapes()
    names = [s.machine_type for s in shapes]
    assert len(names) == len(set(names))
    assert all(s.source.startswith("https://cloud.google.com/compute/docs/") for s in shapes)
    assert {s.family for s in shapes} <= set(gcp.FAMILY_LABELS.values())
    # every accelerator is one the GPU label table can price, except B200: no A4 GPU SKU seen yet
    assert {s.accelerator for s in shapes} - set(gcp.GPU_LABELS.values()) == {"nvidia-b200"}
    assert {s.family for s in shapes} == {"a2", "a3", "a3-mega", "a3-ultra", "a4", "g2", "n1"}
    n1 = [s for s in shapes if s.family == "n1"]
    assert all(s.machine_type == f"{s.machine_type.split('+')[0]}+{s.gpu_count}x{s.accelerator}" for s in n1)
    a3 = {s.machine_type: s for s in shapes}["a3-highgpu-8g"]
    assert (a3.vcpus, a3.ram_gb, a3.accelerator, a3.gpu_count) == (208, 1872, "nvidia-h100-80gb", 8)


def test_pages_must_be_objects_with_skus() -> None:
    assert gcp.skus_of(raw({}), 1) == []
    assert gcp.skus_of(raw({"nextPageToken": "t"}), 1) == []
    with pytest.raises(LayoutChanged, match="`skus` missing"):
        gcp.skus_of(raw({"items": []}), 2)
    with pytest.raises(LayoutChanged, match="expected a JSON object"):
        gcp.skus_of(raw([]), 1)
    with pytest.raises(LayoutChanged, match="expected JSON"):
        gcp.skus_of(raw("<html>quota</html>"), 1)


def test_parse_refuses_an_empty_catalog_or_one_it_cannot_read() -> None:
    with pytest.raises(LayoutChanged, match="held no SKUs"):
        list(gcp.parse([raw({"skus": []})]))
    with pytest.raises(LayoutChanged, match="none of 1 SKU descriptions matched"):
        list(gcp.parse([raw({"skus": [sku("Some Future Thing running in Belgium")]})]))


# --- real captures (../shared/data/raw/gcp, never copied here) -----------------------------------


def test_real_a100_sample_assembles_a2_machines(shared_raw: Path) -> None:
    response = raw((shared_raw / "gcp" / "cloudbilling-skus-compute-A100-sample.json").read_bytes())
    offers = [o for o in gcp.parse([response]) if isinstance(o, Offer)]
    # 5 A2 shapes with the 40 GB A100 (highgpu 1/2/4/8g, megagpu-16g) × us-central1/us-east1/us-west1
    assert len(offers) == 15
    assert {o.pricing_type for o in offers} == {"on_demand"}  # the sample holds no Preemptible SKUs
    a2 = by_key(offers)[("a2-highgpu-1g", "us-central1", "on_demand")]
    # A2 core 0.031611 $/vCPU-h, A2 RAM 0.004237 $/GiB-h, A100 GPU 2.933908 $/h ("... in Americas")
    assert a2.price_per_hour == pytest.approx(12 * 0.031611 + 85 * 0.004237 + 2.933908)
    assert a2.price_per_hour == pytest.approx(3.673385)
    assert a2.provider_data["sku_ids"] == ["2922-40C5-B19F", "2390-DCAF-DA38", "039F-D0DA-4055"]
    mega = by_key(offers)[("a2-megagpu-16g", "us-west1", "on_demand")]
    assert mega.price_per_hour == pytest.approx(96 * 0.031611 + 1360 * 0.004237 + 16 * 2.933908)

    summary = gcp.report([response])
    assert summary.skus == 7
    assert summary.skipped == {"machine family without GPUs": 4}  # E2 and T2D core/RAM (some in IDR)
    assert summary.offers == {"on_demand": 15}
    # the A100 80GB GPU SKU is not in the sample, so a2-ultragpu has core and RAM but no GPU price
    assert summary.incomplete[("a2-ultragpu-8g", "on_demand", "missing gpu")] == 3


def test_real_gpu_capture_components(shared_raw: Path) -> None:
    skus = json.loads((shared_raw / "gcp" / "cloudbilling-skus-gpu-filtered-2025-06-17.json").read_bytes())
    assert len(skus) == 1632
    components, skipped = gcp.read_catalog(skus)
    usages = [c.usage for c in components]
    assert (usages.count("on_demand"), usages.count("spot")) == (288, 290)
    assert {c.kind for c in components} == {"gpu"}
    assert all(c.known for c in components)  # every GPU label of the capture is in GPU_LABELS
    # V100 listed at $0 where it is not sold: read and flagged (quarantined), not skipped
    flagged = [c for c in components if c.problem]
    assert len(flagged) == 6 and {c.subject for c in flagged} == {"nvidia-tesla-v100"}
    assert all(c.problem == "zero or negative price: 0.0" for c in flagged)
    reasons = [s.reason for s in skipped]
    assert reasons.count("committed use") == 582
    assert reasons.count("reservation") == 202
    assert reasons.count("DWS flex-start") == 115
    assert reasons.count("licence fee") == 155
    assert "zero or negative price" not in reasons

    index = gcp.index_components(components)
    l4 = index[("gpu", "nvidia-l4", "on_demand", "europe-west4")]
    assert (l4.sku_id, l4.price, l4.description) == (
        "E975-984D-BEFA",
        pytest.approx(0.588630286),
        "Nvidia L4 GPU running in Netherlands",
    )
    assert index[("gpu", "nvidia-l4", "spot", "europe-west4")].price == pytest.approx(0.2106)
    assert index[("gpu", "nvidia-h100-80gb", "on_demand", "us-east4")].price == pytest.approx(9.796551)
    assert index[("gpu", "nvidia-h100-80gb", "spot", "us-east4")].price == pytest.approx(1.7632)


def test_real_gpu_capture_alone_builds_no_machine(shared_raw: Path) -> None:
    # The capture kept GPU SKUs only: without core and RAM prices no whole machine can be priced.
    skus = json.loads((shared_raw / "gcp" / "cloudbilling-skus-gpu-filtered-2025-06-17.json").read_bytes())
    response = raw({"skus": skus})
    items = list(gcp.parse([response]))
    assert not any(isinstance(item, Offer) for item in items)
    # everything left out is said, by reason: here above all machines missing their core and RAM
    excluded = {item.reason: item.count for item in items if isinstance(item, Excluded)}
    assert excluded["machine: missing core"] > 0 and excluded["machine: missing ram"] > 0
    summary = gcp.report([response])
    assert summary.offers == {}
    # 39 L4 spot SKUs; two name multi-region or unmapped locations, so 37 regions lack a G2 core
    assert summary.incomplete[("g2-standard-4", "spot", "missing core")] == 37
    assert summary.unassigned_locations["Americas"] == 20  # multi-region names need serviceRegions


# --- fetch: pagination, errors, the key -----------------------------------------------------------


def _client(handler: Callable[[httpx.Request], httpx.Response], secrets: list[str] | None = None) -> Client:
    return make_client(
        transport=httpx.MockTransport(handler), secrets=secrets or [KEY], sleep=lambda _s: None, retries=2
    )


def _pages(requests: list[httpx.Request]) -> Callable[[httpx.Request], httpx.Response]:
    bodies = {"": PAGE_1.read_bytes(), "fixture-page-2": PAGE_2.read_bytes()}

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, content=bodies[request.url.params.get("pageToken", "")])

    return handler


def test_fetch_follows_next_page_token_and_parse_reads_every_page() -> None:
    requests: list[httpx.Request] = []
    with _client(_pages(requests)) as client:
        responses = list(gcp.fetch(client, {"GOOGLE_API_KEY": KEY}))
    assert len(responses) == 2
    assert [dict(r.url.params) for r in requests] == [
        {"key": KEY, "currencyCode": "USD", "pageSize": "5000"},
        {"key": KEY, "currencyCode": "USD", "pageSize": "5000", "pageToken": "fixture-page-2"},
    ]
    assert all(r.url.path == "/v1/services/6F81-5844-456A/skus" for r in requests)
    offers = list(gcp.parse(responses))
    assert {o.instance_type for o in offers if isinstance(o, Offer)} >= {
        "g2-standard-4",
        "n1-standard-8+1xnvidia-tesla-t4",
    }


def test_the_key_never_reaches_a_raw_response() -> None:
    with _client(_pages([])) as client:
        responses = list(gcp.fetch(client, {"GOOGLE_API_KEY": KEY}))
    for response in responses:
        assert "key=%2A%2A%2A" in response.url or "key=***" in response.url
        stored = [response.url, *response.headers.values(), (response.request_body or b"").decode()]
        assert not any(KEY in text for text in stored)
        assert KEY.encode() not in response.read()


def test_a_repeated_page_token_stops_the_listing() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"skus": [], "nextPageToken": "same"})

    with _client(handler) as client, pytest.raises(LayoutChanged, match="'same' a second time"):
        list(gcp.fetch(client, {"GOOGLE_API_KEY": KEY}))


def test_a_failing_page_names_the_page_and_token_reached_without_the_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("pageToken"):
            return httpx.Response(503, text="backend unavailable")
        return httpx.Response(200, content=PAGE_1.read_bytes())

    got: list[RawResponse] = []
    with _client(handler) as client, pytest.raises(FetchError) as failure:
        got.extend(gcp.fetch(client, {"GOOGLE_API_KEY": KEY}))
    message = str(failure.value)
    assert "page 2 (pageToken 'fixture-page-2') after 1 complete page(s)" in message
    assert "HTTP 503" in message and "rerun the refresh" in message
    assert KEY not in message


def test_an_invalid_key_says_to_check_google_api_key(shared_raw: Path) -> None:
    error_body = (shared_raw / "gcp" / "cloudbilling-error-invalid-api-key.json").read_bytes()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, content=error_body, headers={"content-type": "application/json"})

    with _client(handler) as client, pytest.raises(FetchError) as failure:
        list(gcp.fetch(client, {"GOOGLE_API_KEY": KEY}))
    message = str(failure.value)
    assert "HTTP 400 (INVALID_ARGUMENT API key not valid. Please pass a valid API key.)" in message
    assert "check GOOGLE_API_KEY" in message
    assert KEY not in message


def test_a_forbidden_key_says_to_check_google_api_key() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            403, json={"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "denied"}}
        )

    with _client(handler) as client, pytest.raises(FetchError, match=r"HTTP 403 .*check GOOGLE_API_KEY"):
        list(gcp.fetch(client, {"GOOGLE_API_KEY": KEY}))


def test_fetch_without_the_key_is_a_skip_not_a_failure() -> None:
    with _client(_pages([])) as client, pytest.raises(MissingCredentials, match="GOOGLE_API_KEY"):
        list(gcp.fetch(client, {}))


# --- replay: the offline refresh ------------------------------------------------------------------


def test_replay_cassette_yields_on_demand_and_spot_offers_in_every_fixture_region() -> None:
    placeholder = "replay-placeholder-google-api-key"
    with make_client(replay=REPLAY, secrets=[placeholder]) as client:
        responses = list(gcp.fetch(client, {"GOOGLE_API_KEY": placeholder}))
    assert len(responses) == 2
    offers = [o for o in gcp.parse(responses) if isinstance(o, Offer)]
    regions = {"us-central1", "us-east1", "europe-west4"}
    assert {(o.region, o.pricing_type) for o in offers} == {
        (r, p) for r in regions for p in ("on_demand", "spot")
    }
    # 8 G2 shapes × 2 regions × 2 usages + 4 N1+T4 combinations × 1 region × 2 usages, and the 4
    # N1+V100 combinations of europe-west4 whose V100 SKU says $0: flagged, for the quarantine
    assert len(offers) == 44
    flagged = [o for o in offers if o.problem]
    assert {(o.instance_type.split("+")[1], o.region, o.pricing_type) for o in flagged} == {
        ("1xnvidia-tesla-v100", "europe-west4", "on_demand"),
        ("2xnvidia-tesla-v100", "europe-west4", "on_demand"),
        ("4xnvidia-tesla-v100", "europe-west4", "on_demand"),
        ("8xnvidia-tesla-v100", "europe-west4", "on_demand"),
    }
    assert all(math.isnan(o.price_per_hour) and "FX02-0000-0007" in (o.problem or "") for o in flagged)
    offer = by_key(offers)
    assert offer[("g2-standard-4", "us-central1", "on_demand")].price_per_hour == pytest.approx(
        4 * 0.025 + 16 * 0.003 + 0.56
    )
    spot = offer[("g2-standard-4", "us-east1", "spot")]
    assert (spot.price_per_hour, spot.price_source) == (
        pytest.approx(4 * 0.01 + 16 * 0.0012 + 0.22),
        "market",
    )
    t4 = offer[("n1-standard-8+1xnvidia-tesla-t4", "europe-west4", "on_demand")]
    assert t4.price_per_hour == pytest.approx(8 * 0.035 + 30 * 0.0047 + 0.35)
    assert (t4.gpu_name_raw, t4.gpu_count, t4.gpu_memory_gb_raw) == ("nvidia-tesla-t4", 1.0, 16.0)

    summary = gcp.report(responses)
    assert summary.skipped == {
        "committed use": 1,
        "machine family without GPUs": 1,
        "DWS flex-start": 1,
    }
    assert summary.flagged == {"on_demand": 4}
    assert summary.incomplete[("a3-highgpu-8g", "on_demand", "missing core")] == 1  # H100 without A3 core/RAM


# --- wrong rows, unknown GPUs, scopes -------------------------------------------------------------


def _replay_pages(edit: Callable[[dict[str, Any]], None] | None = None, only: str = "") -> list[RawResponse]:
    """The replay cassette's two pages, `edit` applied to each SKU whose description is `only`
    (to every SKU when `only` is empty)."""
    pages, edited = [], 0
    for path in (PAGE_1, PAGE_2):
        payload = json.loads(path.read_text())
        for item in payload["skus"]:
            if edit is not None and (not only or item["description"] == only):
                edit(item)
                edited += 1
        pages.append(raw(payload, url=gcp.SKUS_URL))
    assert edit is None or edited, f"no SKU described {only!r} in the replay pages"
    return pages


def _unit_price(item: dict[str, Any]) -> dict[str, Any]:
    return item["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]


def test_one_nan_price_flags_its_machines_and_never_fails_the_provider() -> None:
    def nan_nanos(item: dict[str, Any]) -> None:
        _unit_price(item)["nanos"] = float("nan")

    pages = _replay_pages(nan_nanos, only="Nvidia L4 GPU running in Americas")
    offers = [o for o in gcp.parse(pages) if isinstance(o, Offer)]
    assert len(offers) == 44  # every offer key is still there, so each keeps its last good price
    flagged = {(o.instance_type, o.region) for o in offers if o.problem and "FX01-0000-0003" in o.problem}
    assert len(flagged) == 16  # the 8 G2 shapes in us-central1 and us-east1, on-demand
    assert all(
        o.pricing_type == "on_demand" and o.instance_type.startswith("g2-")
        for o in offers
        if o.problem and "FX01-0000-0003" in o.problem
    )
    g2_spot = by_key(offers)[("g2-standard-4", "us-east1", "spot")]
    assert g2_spot.problem is None and g2_spot.price_per_hour == pytest.approx(4 * 0.01 + 16 * 0.0012 + 0.22)


def test_a_renamed_price_key_yields_flagged_offers_not_an_exception() -> None:
    def rename(item: dict[str, Any]) -> None:
        for tier in item["pricingInfo"][0]["pricingExpression"]["tieredRates"]:
            tier["price"] = tier.pop("unitPrice")

    offers = [o for o in gcp.parse(_replay_pages(rename)) if isinstance(o, Offer)]
    assert len(offers) == 44
    assert all(o.problem and "unitPrice" in o.problem and math.isnan(o.price_per_hour) for o in offers)


def test_a_readable_part_wins_over_a_flagged_twin() -> None:
    good = gcp.read_sku(
        sku("Nvidia L4 GPU running in Americas", regions=["us-central1", "us-east1"], sku_id="B")
    )
    bad = gcp.read_sku(sku("Nvidia L4 GPU running in Iowa", regions=["us-central1"], sku_id="A", nanos=0))
    assert isinstance(good, gcp.Component) and isinstance(bad, gcp.Component) and bad.problem
    for order in ([good, bad], [bad, good]):
        assert gcp.index_components(order)[("gpu", "nvidia-l4", "on_demand", "us-central1")].sku_id == "B"


def test_assemble_flags_a_machine_with_a_wrong_part_and_keeps_the_parts() -> None:
    parts = _components(
        ("G2 Instance Core running in Belgium", "h", 25_000_000),
        ("G2 Instance Ram running in Belgium", "GiBy.h", 3_000_000),
        ("Nvidia L4 GPU running in Belgium", "h", 0),
    )
    (offer,), incomplete = gcp.assemble(parts, [SHAPE])
    assert not incomplete
    assert math.isnan(offer.price_per_hour) and offer.currency == "USD"
    assert "gpu SKU TEST-0000-0001" in (offer.problem or "") and "zero or negative" in (offer.problem or "")
    assert offer.provider_data["components"]["vcpu_usd_per_hour"] == 0.025


def test_an_unknown_gpu_sku_lands_as_a_gpu_only_offer() -> None:
    def zeta(item: dict[str, Any]) -> None:
        item["description"] = "Nvidia Zeta Z9 GPU running in Netherlands"

    responses = _replay_pages(zeta, only="Nvidia H100 80GB GPU running in Netherlands")
    offers = by_key([o for o in gcp.parse(responses) if isinstance(o, Offer)])
    zeta = offers[("Nvidia Zeta Z9 (GPU only)", "europe-west4", "on_demand")]
    assert (zeta.gpu_name_raw, zeta.gpu_count, zeta.price_per_hour, zeta.problem) == (
        "Nvidia Zeta Z9",
        1.0,
        pytest.approx(11.05),
        None,
    )
    assert "one GPU only" in zeta.provider_data["price_covers"]
    assert gcp.report(responses).unknown_gpus == {"Nvidia Zeta Z9": 1}


def test_scopes_are_the_default_pricing_type_and_region() -> None:
    offers = [o for o in gcp.parse(_replay_pages()) if isinstance(o, Offer)]
    assert all(o.scope is None and o.zone is None for o in offers)
    assert {o.scope_name for o in offers} == {
        f"{p}:{r}" for r in ("us-central1", "us-east1", "europe-west4") for p in ("on_demand", "spot")
    }


def test_a_component_without_a_region_is_said_not_lost() -> None:
    multi = sku("Nvidia L4 GPU running in Americas")  # no serviceRegions: the text names no region
    items = list(gcp.parse([raw({"skus": [multi]})]))
    assert not [i for i in items if isinstance(i, Offer)]
    assert {i.reason: i.count for i in items if isinstance(i, Excluded)} == {
        "sku: location without a region": 1
    }
