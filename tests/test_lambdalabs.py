"""Lambda pricing page (and optional instance-types API): real capture, tabs, API join, layout changes."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from connectors import lambdalabs
from connectors.base import ConnectorError, Excluded, LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures" / "lambdalabs"
CAPTURE = "lambda/pricing-page-excerpt-wayback-20260109.html"
CATALOG = HardwareCatalog.load()


def page(body: bytes | str, status: int = 200) -> RawResponse:
    return RawResponse(
        url=lambdalabs.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        content_type="text/html; charset=utf-8",
        body=body.encode() if isinstance(body, str) else body,
    )


def api(payload: object) -> RawResponse:
    return RawResponse(
        url=lambdalabs.API_URL,
        method="GET",
        status=200,
        fetched_at=datetime(2026, 12, 1, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def offers(items: list[object]) -> dict[str, Offer]:
    return {o.instance_type: o for o in items if isinstance(o, Offer)}


def fixture_page() -> str:
    return (FIXTURES / "pricing__2026-12-01.html").read_text()


# --- the real capture (verbatim excerpt of the 2026-01-09 Wayback copy: the 8x tab) -------------


def test_real_capture(shared_raw: Path) -> None:
    items = list(lambdalabs.parse([page((shared_raw / CAPTURE).read_bytes())]))
    found = offers(items)
    assert len(found) == 5 and not exclusions(items)
    b200 = found["8x NVIDIA B200 SXM6 180GB"]
    # $4.99 per GPU-hour x 8 GPUs
    assert (b200.price_per_hour, b200.gpu_count, b200.gpu_memory_gb_raw) == (39.92, 8.0, 180.0)
    assert (b200.vcpus, b200.ram_gb, b200.currency, b200.region) == (208.0, 2900.0, "USD", "global")
    assert b200.provider_data["price_per_gpu_hour"] == 4.99
    assert b200.provider_data["storage"] == "22 TiB SSD"
    assert found["8x NVIDIA H100 SXM 80GB"].price_per_hour == 23.92
    # the two A100 SXM rows differ only by VRAM, and stay two offers
    assert found["8x NVIDIA A100 SXM 80GB"].price_per_hour == 14.32
    assert found["8x NVIDIA A100 SXM 40GB"].price_per_hour == 10.32
    assert found["8x NVIDIA Tesla V100 16GB"].price_per_hour == 4.40
    assert {o.pricing_type for o in found.values()} == {"on_demand"}  # Lambda has no spot
    assert {o.scope for o in found.values()} == {"on_demand:8x"}
    assert all(o.problem is None for o in found.values())


def test_real_capture_maps_to_gpus_and_interconnect(shared_raw: Path) -> None:
    found = offers(list(lambdalabs.parse([page((shared_raw / CAPTURE).read_bytes())])))
    resolved = {
        it: CATALOG.resolve("lambdalabs", it, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for it, o in found.items()
    }
    assert all(m is not None for m in resolved.values()), resolved
    names = {it: (m.gpu_name, m.intra_node_interconnect) for it, m in resolved.items()}
    assert names == {
        "8x NVIDIA B200 SXM6 180GB": ("B200", "NVSwitch"),
        "8x NVIDIA H100 SXM 80GB": ("H100-SXM", "NVSwitch"),
        "8x NVIDIA A100 SXM 80GB": ("A100-80GB-SXM", "NVSwitch"),
        "8x NVIDIA A100 SXM 40GB": ("A100-40GB-SXM", "NVSwitch"),
        "8x NVIDIA Tesla V100 16GB": ("V100-16GB-SXM", "NVLink mesh"),
    }
    # the GPU name alone resolves too (an offer never depends on the instance-type pattern only)
    assert all(CATALOG.resolve("lambdalabs", "", o.gpu_name_raw, o.gpu_memory_gb_raw) for o in found.values())


def test_derived_skypilot_rows_are_a_cross_check_only(shared_raw: Path) -> None:
    """anycloud's lambda catalog (2026-05-20, derived) is four months newer than the capture and
    prices every 8x shape higher: a disagreement to report, not a parser input."""
    import csv

    with (shared_raw / "skypilot-format" / "anycloud-lambda-vms-2026-05-20.csv").open() as handle:
        sky = {r["InstanceType"]: float(r["Price"]) for r in csv.DictReader(handle)}
    found = offers(list(lambdalabs.parse([page((shared_raw / CAPTURE).read_bytes())])))
    pairs = {
        "8x NVIDIA H100 SXM 80GB": "gpu_8x_h100_sxm5",
        "8x NVIDIA B200 SXM6 180GB": "gpu_8x_b200_sxm6",
        "8x NVIDIA A100 SXM 80GB": "gpu_8x_a100_80gb_sxm4",
        "8x NVIDIA A100 SXM 40GB": "gpu_8x_a100",
        "8x NVIDIA Tesla V100 16GB": "gpu_8x_v100",
    }
    assert {ours: sky[theirs] for ours, theirs in pairs.items()} == {
        "8x NVIDIA H100 SXM 80GB": 31.92,
        "8x NVIDIA B200 SXM6 180GB": 53.52,
        "8x NVIDIA A100 SXM 80GB": 22.32,
        "8x NVIDIA A100 SXM 40GB": 15.92,
        "8x NVIDIA Tesla V100 16GB": 6.32,
    }
    # both are whole-instance prices: the derived rows are 8x a per-GPU rate too (3.99 x 8)
    assert all(found[ours].price_per_hour < sky[theirs] for ours, theirs in pairs.items())


# --- the fixture page: all four tabs ------------------------------------------------------------


def test_every_tab_gives_its_gpu_count() -> None:
    items = list(lambdalabs.parse([page(fixture_page())]))
    found = offers(items)
    assert {o.scope for o in found.values()} == {
        "on_demand:8x",
        "on_demand:4x",
        "on_demand:2x",
        "on_demand:1x",
    }
    four = found["4x NVIDIA H100 SXM 80GB"]
    assert (four.gpu_count, four.price_per_hour) == (4.0, 12.36)
    assert found["1x NVIDIA GH200 96GB"].price_per_hour == 1.49
    # "Sold out" is not a price and not a wrong row: counted as not available
    assert "1x NVIDIA Quadro RTX 6000 24GB" not in found
    assert exclusions(items) == {"not_available": 1}
    # the 1-Click Clusters table (another section, no VRAM/GPU column) is not read as instances
    assert not any("cluster" in it.lower() for it in found)
    assert len(found) == 18


def test_every_fixture_offer_maps() -> None:
    found = offers(list(lambdalabs.parse([page(fixture_page())])))
    unmapped = [
        it
        for it, o in found.items()
        if CATALOG.resolve("lambdalabs", it, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count) is None
    ]
    assert unmapped == []


def test_contact_sales_is_excluded_and_words_are_a_wrong_row() -> None:
    body = fixture_page().replace(">$2.99<", ">Contact sales<").replace(">$0.55<", ">call for price<")
    items = list(lambdalabs.parse([page(body)]))
    found = offers(items)
    assert "8x NVIDIA H100 SXM 80GB" not in found
    assert exclusions(items) == {"contact_sales": 1, "not_available": 1}
    wrong = found["8x NVIDIA Tesla V100 16GB"]
    assert wrong.problem and "call for price" in wrong.problem


def test_a_zero_price_is_a_wrong_row() -> None:
    found = offers(list(lambdalabs.parse([page(fixture_page().replace(">$0.55<", ">$0.00<"))])))
    assert "not a positive number" in (found["8x NVIDIA Tesla V100 16GB"].problem or "")


# --- layout changes ----------------------------------------------------------------------------


def test_a_renamed_price_header_raises_naming_it() -> None:
    body = fixture_page().replace("PRICE/GPU/HR*", "COST")
    with pytest.raises(LayoutChanged, match="VRAM/GPU, Price"):
        list(lambdalabs.parse([page(body)]))


def test_a_price_header_without_per_gpu_raises() -> None:
    body = fixture_page().replace("PRICE/GPU/HR*", "PRICE/HR")
    with pytest.raises(LayoutChanged, match=r"no price basis \(per GPU or per instance\) stated"):
        list(lambdalabs.parse([page(body)]))


def test_a_removed_table_raises() -> None:
    body = fixture_page()
    start, end = body.index('<div class="_tabPanels'), body.index("</section>")
    with pytest.raises(
        LayoutChanged, match="no table with columns VRAM/GPU, Price found in the instances table"
    ):
        list(lambdalabs.parse([page(body[:start] + body[end:])]))


def test_a_removed_heading_raises() -> None:
    with pytest.raises(LayoutChanged, match="heading `Instances pricing` not found"):
        list(lambdalabs.parse([page(fixture_page().replace("Instances pricing", "Our GPUs"))]))


def test_not_modified_keeps_every_on_demand_offer() -> None:
    assert list(lambdalabs.parse([page(b"", status=304)])) == [
        Unchanged({"pricing_type": "on_demand"}, reason=f"{lambdalabs.PAGE_URL} not modified (HTTP 304)")
    ]


# --- the optional API --------------------------------------------------------------------------


def api_payload() -> object:
    return json.loads((FIXTURES / "instance-types__2026-12-01.json").read_text())


def test_api_adds_availability_per_region() -> None:
    items = list(lambdalabs.parse([page(fixture_page()), api(api_payload())]))
    found = offers(items)
    b200 = found["8x NVIDIA B200 SXM6 180GB"]
    assert (b200.available, b200.provider_data["regions_with_capacity"]) == (True, ["us-east-3"])
    assert b200.provider_data["api_instance_type"] == "gpu_8x_b200_sxm6"
    assert b200.provider_data["api_price_per_hour"] == 39.92
    h100 = found["8x NVIDIA H100 SXM 80GB"]
    assert (h100.available, h100.provider_data["regions_with_capacity"]) == (False, [])
    # A10: the page does not say PCIe, the API does; the only 24 GB A10 still matches
    assert found["1x NVIDIA A10 24GB"].provider_data["api_instance_type"] == "gpu_1x_a10"
    # H100 PCIe vs SXM are told apart
    assert found["1x NVIDIA H100 PCIe 80GB"].provider_data["api_instance_type"] == "gpu_1x_h100_pcie"
    assert "api_instance_type" not in found["1x NVIDIA H100 SXM 80GB"].provider_data
    # rows the API does not list keep available=None; API-only types are counted, not offered
    assert found["8x NVIDIA Tesla V100 16GB"].available is None
    assert exclusions(items) == {"api_only": 1, "not_available": 1}  # cpu_4x_general


def test_api_error_names_the_key() -> None:
    error = {"error": {"code": "global/invalid-api-key", "message": "API key was invalid"}}
    with pytest.raises(ConnectorError, match="LAMBDA_API_KEY"):
        list(lambdalabs.parse([page(fixture_page()), api(error)]))


def test_api_without_data_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="`data`"):
        list(lambdalabs.parse([page(fixture_page()), api({"items": []})]))


def test_fetch_without_a_key_reads_the_page_alone() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, text=fixture_page())

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(lambdalabs.fetch(client, {}))
    assert [str(r.url) for r in seen] == [lambdalabs.PAGE_URL]
    assert "authorization" not in seen[0].headers
    assert len(offers(list(lambdalabs.parse(responses)))) == 18


def test_fetch_with_a_key_sends_it_as_bearer_and_never_records_it() -> None:
    secret = "secret_lambda_key_123"
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.host == "cloud.lambda.ai":
            return httpx.Response(200, json=api_payload())
        return httpx.Response(200, text=fixture_page())

    with make_client(transport=httpx.MockTransport(handler), secrets=[secret]) as client:
        responses = list(lambdalabs.fetch(client, {"LAMBDA_API_KEY": secret}))
    assert seen[1].headers["authorization"] == f"Bearer {secret}"
    assert all(secret not in r.url and secret not in json.dumps(dict(r.headers)) for r in responses)


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        items = list(lambdalabs.parse(list(lambdalabs.fetch(client, {}))))
    assert len(offers(items)) == 18
    with make_client(replay=REPLAY, secrets=["replay-key"]) as client:
        items = list(lambdalabs.parse(list(lambdalabs.fetch(client, {"LAMBDA_API_KEY": "replay-key"}))))
    assert offers(items)["1x NVIDIA GH200 96GB"].available is True
    assert any(isinstance(i, Excluded) and i.reason == "api_only" for i in items)


@pytest.mark.network
def test_live_pricing_page() -> None:
    creds = {k: v for k in ("LAMBDA_API_KEY",) if (v := os.environ.get(k))}
    with make_client(secrets=list(creds.values())) as client:
        found = offers(list(lambdalabs.parse(list(lambdalabs.fetch(client, creds)))))
    assert any(o.gpu_count == 8 for o in found.values())
    assert all(o.price_per_hour > 0 for o in found.values())
