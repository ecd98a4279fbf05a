"""Every GPU offer our connectors parse from the real captures maps to a canonical GPU.

This joins the two halves that are tested apart elsewhere: the connectors' parsers (on the
captures in ../shared/data/raw) and the hardware seeds' resolver. An offer that does not resolve
would land in marts.unmapped_gpus; here it fails the test with its raw name and instance type.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import aws, azure, gcp, oci, runpod
from connectors.base import Offer, RawResponse
from tests.test_azure import eastus_items, northeurope_items
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
CATALOG = HardwareCatalog.load()


def _raw(url: str, body: bytes) -> RawResponse:
    return RawResponse(
        url=url, method="GET", status=200, fetched_at=datetime(2026, 11, 29, tzinfo=UTC), body=body
    )


def _unmapped(offers: list[Offer]) -> list[tuple[str, str | None, float | None]]:
    missing = set()
    for o in offers:
        match = CATALOG.resolve(
            o.provider, o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count or None
        )
        if match is None:
            missing.add((o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw))
    return sorted(missing, key=str)


def _azure_offers(items: list[dict]) -> list[Offer]:
    return [o for o in map(azure.classify_item, items) if isinstance(o, Offer)]


@pytest.mark.parametrize("capture", ["northeurope", "eastus"])
def test_azure_captures_map(shared_raw: Path, capture: str) -> None:
    items = northeurope_items(shared_raw) if capture == "northeurope" else eastus_items(shared_raw)
    offers = _azure_offers(items)
    assert len(offers) > 100
    assert _unmapped(offers) == []
    nc_a100 = next(o for o in offers if o.instance_type == "Standard_NC24ads_A100_v4")
    match = CATALOG.resolve("azure", nc_a100.instance_type, None, None)
    assert (match.gpu_name, match.gpu_count) == ("A100-80GB-PCIe", 1.0)


@pytest.mark.parametrize(
    "capture", ["graphql-gpuTypes-data-2025-06-21.json", "graphql-gpuTypes-data-2025-06-15.json"]
)
def test_runpod_captures_map(shared_raw: Path, capture: str) -> None:
    types = json.loads((shared_raw / "runpod" / capture).read_text())
    body = json.dumps({"data": {"gpuTypes": types}}).encode()
    offers = [o for o in runpod.parse([_raw(runpod.API_URL, body)]) if isinstance(o, Offer)]
    assert len(offers) == 381
    assert _unmapped(offers) == []
    names = {
        CATALOG.resolve("runpod", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw).gpu_name
        for o in offers
    }
    assert {"H100-SXM", "B200", "RTX4090", "RTX6000-Ada", "RTXA6000"} <= names


def test_oci_price_list_maps(shared_raw: Path) -> None:
    products = (shared_raw / "oci" / "cetools-products-prices_usd.json").read_bytes()
    shapes = (REPO / "tests" / "fixtures" / "oci" / "shapes__2026-11-29.json").read_bytes()
    offers = [
        o
        for o in oci.parse([_raw(oci.PRODUCTS_URL, products), _raw(oci.SHAPES_URL, shapes)])
        if isinstance(o, Offer)
    ]
    assert offers and _unmapped(offers) == []


def test_aws_bulk_sample_and_spot_feeds_map(shared_raw: Path) -> None:
    offers: list[Offer] = []
    offer_file = "/offers/v1.0/aws/AmazonEC2/20240528203522/us-east-1/index.json"
    body = (shared_raw / "aws" / "bulk-offer-AmazonEC2-us-east-1-p4d-truncated.json").read_bytes()
    offers += [o for o in aws.parse([_raw(aws.PRICING_HOST + offer_file, body)]) if isinstance(o, Offer)]
    for feed in ("spot-js-jsonp-2013.js", "spot-js-jsonp-2014.js"):
        body = (shared_raw / "aws" / feed).read_bytes()
        offers += [o for o in aws.parse([_raw(aws.SPOT_URL, body)]) if isinstance(o, Offer)]
    assert {o.instance_type for o in offers} >= {"p4d.24xlarge", "g2.2xlarge", "cg1.4xlarge"}
    assert _unmapped(offers) == []


def test_gcp_a100_sample_maps(shared_raw: Path) -> None:
    body = (shared_raw / "gcp" / "cloudbilling-skus-compute-A100-sample.json").read_bytes()
    offers = [o for o in gcp.parse([_raw(gcp.SKUS_URL, body)]) if isinstance(o, Offer)]
    assert len(offers) == 15 and _unmapped(offers) == []
    assert {
        CATALOG.resolve("gcp", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw).gpu_name for o in offers
    } == {"A100-40GB-SXM"}
