"""AWS connector: pure helpers, parsers on the real captures, replay, resume and error paths."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
import math
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from connectors import aws
from connectors.base import Excluded, FetchError, LayoutChanged, Offer, RawResponse, Unchanged, exclusions
from connectors.http import make_client, remove_spooled
from warehouse.archive import keep_aws_offer_csv

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "aws"
REPLAY = REPO / "tests" / "replay"
OFFER_BASE = "https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2"
US_EAST_1_URL = f"{OFFER_BASE}/20261127183045/us-east-1/index.csv"
EU_WEST_1_URL = f"{OFFER_BASE}/20261126091512/eu-west-1/index.csv"
US_EAST_1_JSON_URL = US_EAST_1_URL.removesuffix(".csv") + ".json"
EU_WEST_1_JSON_URL = EU_WEST_1_URL.removesuffix(".csv") + ".json"


def _raw(url: str, path: Path | None = None, *, body: bytes = b"", status: int = 200) -> RawResponse:
    return RawResponse(
        url=url, method="GET", status=status, fetched_at=datetime.now(UTC), body=body, body_path=path
    )


def _offers(items) -> list[Offer]:
    return [i for i in items if isinstance(i, Offer)]


def _by_key(offers: list[Offer]) -> dict[tuple[str, str, str], Offer]:
    return {(o.region, o.instance_type, o.pricing_type): o for o in offers}


# --- pure helpers -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "gpu", "expected"),
    [
        ("p5en.48xlarge", None, True),
        ("p6-b200.48xlarge", None, True),
        ("g6f.large", "0.125", True),
        ("dl1.24xlarge", None, True),
        ("m7i.large", None, False),
        ("trn1.32xlarge", "16", False),  # Trainium is an accelerator, not a GPU
        ("g9x.xlarge", "4", True),  # a family not yet in the list is caught by its gpu attribute
        ("x9.large", "NA", False),
    ],
)
def test_is_gpu_instance(instance_type: str, gpu: str | None, expected: bool) -> None:
    assert aws.is_gpu_instance(instance_type, gpu) is expected


def test_gpu_family_keeps_dashed_family_names() -> None:
    assert aws.gpu_family("p6e-gb200.36xlarge") == "p6e-gb200"


def test_product_exclusion_reasons() -> None:
    plain = {
        "instanceType": "p5.48xlarge",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
        "marketoption": "OnDemand",
        "operation": "RunInstances",
    }
    assert aws.product_exclusion(plain) is None
    assert aws.product_exclusion({**plain, "marketoption": "CapacityBlock"}) == "capacity_block"
    assert aws.product_exclusion({**plain, "operation": "RunInstances:CB"}) == "capacity_block"
    assert aws.product_exclusion({**plain, "tenancy": "Dedicated"}) == "not_plain_linux"
    assert aws.product_exclusion({**plain, "capacitystatus": "UnusedCapacityReservation"}) == (
        "not_plain_linux"
    )
    assert aws.product_exclusion({**plain, "instanceType": "m5.large"}) == "cpu_only"
    assert aws.product_exclusion({**plain, "instanceType": "trn1.32xlarge", "gpu": "16"}) == (
        "not_gpu_accelerator"
    )
    # outside the selection first, so JSON and CSV count the same exclusions
    assert aws.product_exclusion({**plain, "instanceType": "m5.large", "tenancy": "Dedicated"}) == (
        "not_plain_linux"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1152 GiB", 1152.0), ("0.5 GiB", 0.5), ("22888 MiB", 22888 / 1024), ("24 GB", 24.0), ("NA", None)],
)
def test_parse_memory_gb(text: str, expected: float | None) -> None:
    assert aws.parse_memory_gb(text) == expected


def test_gpu_memory_is_read_as_instance_total_and_divided_per_gpu() -> None:
    assert aws.gpu_memory_per_gpu_gb("96 GB", 4) == 24.0
    assert aws.gpu_memory_per_gpu_gb("NA", 8) is None
    assert aws.gpu_memory_per_gpu_gb("24 GB", 0) is None


def test_hourly_rate_skips_reservation_terms_and_non_hourly_dimensions() -> None:
    terms = {
        "S.RES": {
            "termAttributes": {"LeaseContractLength": "3yr"},
            "priceDimensions": {"d": {"unit": "Hrs", "pricePerUnit": {"USD": "1.0"}}},
        },
        "S.OD": {
            "termAttributes": {},
            "priceDimensions": {
                "fee": {"unit": "Quantity", "pricePerUnit": {"USD": "1161"}},
                "hour": {"unit": "Hrs", "pricePerUnit": {"USD": "2.5000000000"}},
            },
        },
    }
    assert aws.hourly_rate(terms) == ("2.5000000000", "USD")
    assert aws.hourly_rate(
        {"S.X": {"priceDimensions": {"d": {"unit": "Hrs", "pricePerUnit": {"CNY": "3"}}}}}
    ) == (
        "3",
        "CNY",
    )
    assert aws.hourly_rate({}) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [("32.7726000000", 32.7726), ("0.0000000000", None), ("-1", None), ("NaN", None), ("N/A*", None)],
)
def test_valid_price(text: str, expected: float | None) -> None:
    assert aws.valid_price(text) == expected


def test_offer_location_makes_local_zones_zones_of_their_file_region() -> None:
    assert aws.offer_location("us-west-2-lax-1", "us-west-2") == ("us-west-2", "us-west-2-lax-1")
    assert aws.offer_location("us-east-1", "us-east-1") == ("us-east-1", None)
    assert aws.offer_location("eu-west-1", None) == ("eu-west-1", None)


@pytest.mark.parametrize(
    ("alias", "code"),
    [
        ("us-east", "us-east-1"),
        ("us-west", "us-west-1"),
        ("us-west-2", "us-west-2"),
        ("eu-ireland", "eu-west-1"),
        ("apac-sin", "ap-southeast-1"),
        ("apac-syd", "ap-southeast-2"),
        ("apac-tokyo", "ap-northeast-1"),
        ("sa-east-1", "sa-east-1"),
        ("ap-southeast-7", "ap-southeast-7"),
        ("mars-north", None),
    ],
)
def test_spot_region_code(alias: str, code: str | None) -> None:
    assert aws.spot_region_code(alias) == code


def test_spot_instance_type_both_generations() -> None:
    assert aws.spot_instance_type("gpuCurrentGen", "g2.2xlarge") == "g2.2xlarge"
    assert aws.spot_instance_type("clusterGPUI", "xxxxl") == "cg1.4xlarge"
    assert aws.spot_instance_type("stdSpot", "sm") is None  # legacy non-GPU pairs are not mapped


def test_jsonp_body_tolerates_trailing_commas_and_rejects_other_payloads() -> None:
    assert aws.jsonp_body('callback({"a": [1, 2,], "b": {"c": 1,},});') == {"a": [1, 2], "b": {"c": 1}}
    with pytest.raises(LayoutChanged, match="callback"):
        aws.jsonp_body("<html>Access Denied</html>")


def test_band_bounds_from_labels_with_max_fallback() -> None:
    ranges = [{"index": 0, "label": "<5%", "max": 5}, {"index": 1, "label": "odd", "max": 11}]
    assert aws.band_bounds("<5%", 0, ranges) == (0.0, 0.05)
    assert aws.band_bounds("5-10%", 1, ranges) == (0.05, 0.10)
    assert aws.band_bounds(">20%", 4, ranges) == (0.20, 1.0)
    assert aws.band_bounds("odd", 1, ranges) == (0.05, 0.11)


def test_conditional_headers() -> None:
    assert aws.conditional_headers(None) == {}
    assert aws.conditional_headers({"etag": '"x"', "last-modified": "Fri, 27 Nov 2026 18:30:45 GMT"}) == {
        "If-None-Match": '"x"',
        "If-Modified-Since": "Fri, 27 Nov 2026 18:30:45 GMT",
    }


def test_commercial_offer_urls_skips_china_and_govcloud() -> None:
    index = json.loads((FIXTURES / "region-index__2026-11-29.json").read_text())
    assert aws.commercial_offer_urls(index) == [("eu-west-1", EU_WEST_1_URL), ("us-east-1", US_EAST_1_URL)]
    assert not aws.is_commercial_region("cn-northwest-1")
    with pytest.raises(LayoutChanged, match="regions"):
        aws.commercial_offer_urls({"offers": {}})


# --- real captures ----------------------------------------------------------------------------------


def _shared_offer(shared_raw: Path, name: str, version: str, region: str) -> RawResponse:
    return _raw(f"{OFFER_BASE}/{version}/{region}/index.json", shared_raw / "aws" / name)


def test_real_us_east_1_p4d_offer(shared_raw: Path) -> None:
    response = _shared_offer(
        shared_raw, "bulk-offer-AmazonEC2-us-east-1-p4d-truncated.json", "20240528203522", "us-east-1"
    )
    offers = _offers(aws.parse([response]))
    assert len(offers) == 1  # the other p4d product is its $0 Capacity Block twin
    p4d = offers[0]
    assert (p4d.instance_type, p4d.region, p4d.pricing_type) == ("p4d.24xlarge", "us-east-1", "on_demand")
    assert p4d.price_per_hour == 32.7726 and p4d.currency == "USD" and p4d.price_source == "list"
    assert (p4d.gpu_count, p4d.vcpus, p4d.ram_gb, p4d.gpu_name_raw) == (8.0, 96.0, 1152.0, None)
    assert p4d.gpu_memory_gb_raw is None  # gpuMemory is "NA" in the file
    assert p4d.provider_data["sku"] == "H7NGEAC6UEHNTKSJ"
    assert p4d.provider_data["offer_version"] == "20240528203522"
    assert p4d.provider_data["network_performance"] == "400 Gigabit"
    assert exclusions(aws.parse([response])) == {"capacity_block": 1}


def test_real_us_east_2_sample_has_no_plain_linux_gpu_row(shared_raw: Path) -> None:
    # Its only GPU product is a p3.8xlarge under Windows BYOL; m5.large is not a GPU (counted).
    response = _shared_offer(
        shared_raw, "bulk-offer-AmazonEC2-us-east-2-truncated.json", "20230322145651", "us-east-2"
    )
    assert list(aws.parse([response])) == [Excluded("cpu_only")]


def test_real_china_sample_parses_to_nothing_and_is_not_fetched(shared_raw: Path) -> None:
    response = _shared_offer(
        shared_raw, "bulk-offer-AmazonEC2-cn-northwest-1-truncated.json", "20230314154740", "cn-northwest-1"
    )
    assert list(aws.parse([response])) == []
    assert not aws.is_commercial_region("cn-northwest-1")


def test_real_spot_js_2013_legacy_names(shared_raw: Path) -> None:
    response = _raw(aws.SPOT_URL, shared_raw / "aws" / "spot-js-jsonp-2013.js")
    offers = _by_key(_offers(aws.parse([response])))
    # clusterGPUI/xxxxl (cg1.4xlarge) has a Linux price only in us-east and eu-ireland.
    assert set(offers) == {
        ("us-east-1", "cg1.4xlarge", "spot"),
        ("eu-west-1", "cg1.4xlarge", "spot"),
    }
    assert offers["us-east-1", "cg1.4xlarge", "spot"].price_per_hour == 0.346
    assert offers["eu-west-1", "cg1.4xlarge", "spot"].price_per_hour == 0.54
    assert offers["us-east-1", "cg1.4xlarge", "spot"].price_source == "market"
    assert exclusions(aws.parse([response])) == {"spot_not_available": 6}  # the six "N/A*" regions


def test_real_spot_js_2014_current_names(shared_raw: Path) -> None:
    response = _raw(aws.SPOT_URL, shared_raw / "aws" / "spot-js-jsonp-2014.js")
    offers = _by_key(_offers(aws.parse([response])))
    assert len(offers) == 7
    assert offers["us-east-1", "g2.2xlarge", "spot"].price_per_hour == 0.0666
    assert offers["us-west-1", "g2.2xlarge", "spot"].price_per_hour == 0.702  # alias "us-west"
    assert offers["ap-northeast-1", "g2.2xlarge", "spot"].price_per_hour == 0.174  # "apac-tokyo"
    assert offers["eu-west-1", "cg1.4xlarge", "spot"].price_per_hour == 2.36
    assert ("ap-southeast-1", "g2.2xlarge", "spot") not in offers  # "N/A*" in apac-sin
    # The 2014 feed has no m1/m3 GPU lookalikes: every offer is a GPU family.
    assert {o.instance_type for o in offers.values()} == {"g2.2xlarge", "cg1.4xlarge"}


def test_cross_check_p4d_against_ec2instances_and_karpenter(shared_raw: Path) -> None:
    response = _shared_offer(
        shared_raw, "bulk-offer-AmazonEC2-us-east-1-p4d-truncated.json", "20240528203522", "us-east-1"
    )
    parsed = _offers(aws.parse([response]))[0].price_per_hour

    catalog = json.loads(
        (shared_raw / "aws" / "ec2instances-info-opszero-ondemand-spotavg-2024-04.json").read_text()
    )
    ec2i = {(r["region"], r["instance-type"]): r["ondemand"] for r in catalog["data"]}
    # ec2instances (April 2024) has the same list rate in us-east-2 ...
    assert float(ec2i["us-east-2", "p4d.24xlarge"]) == parsed
    # ... but "0" in us-east-1: it picked the $0 Capacity Block row, the trap this parser excludes.
    assert float(ec2i["us-east-1", "p4d.24xlarge"]) == 0.0

    with (shared_raw / "aws" / "karpenter-initial-ondemand-prices-aws.csv").open() as fh:
        karpenter = {
            (r["region"], r["instance_type"]): float(r["ondemand_usd_per_hour"]) for r in csv.DictReader(fh)
        }
    # Karpenter's table is from July 2026, after AWS cut P4d on-demand prices by a third (June 2025):
    # 21.957642 = 32.7726 x 0.67.
    assert karpenter["us-east-1", "p4d.24xlarge"] == pytest.approx(parsed * 0.67, rel=1e-6)


# --- replay: the committed cassette -----------------------------------------------------------------


def _replay_client():
    return make_client(replay=REPLAY)


def test_replay_fetch_and_parse_the_committed_cassette() -> None:
    with _replay_client() as client:
        responses = list(aws.fetch(client, {}))
    assert [r.url for r in responses] == [
        aws.REGION_INDEX_URL,
        EU_WEST_1_URL,
        US_EAST_1_URL,
        aws.SPOT_URL,
        aws.ADVISOR_URL,
    ]
    assert responses[1].body_path is not None  # offer files are spooled to disk
    items = list(aws.parse(responses))
    assert not [i for i in items if isinstance(i, Unchanged)]
    offers = _by_key(_offers(items))
    assert set(offers) == {
        ("us-east-1", "p5.48xlarge", "on_demand"),
        ("us-east-1", "g6.xlarge", "on_demand"),
        ("us-east-1", "g4dn.xlarge", "on_demand"),
        ("us-east-1", "g5.xlarge", "on_demand"),  # $0 in the offer file: flagged, not excluded
        ("eu-west-1", "g5.xlarge", "on_demand"),
        ("eu-west-1", "p4d.24xlarge", "on_demand"),
        ("us-east-1", "g6.xlarge", "spot"),
        ("us-east-1", "p5.48xlarge", "spot"),
        ("eu-west-1", "g5.xlarge", "spot"),
        ("eu-west-1", "p4d.24xlarge", "spot"),
    }
    p5 = offers["us-east-1", "p5.48xlarge", "on_demand"]
    assert (p5.price_per_hour, p5.gpu_count, p5.vcpus, p5.ram_gb) == (55.04, 8.0, 192.0, 2048.0)
    assert p5.provider_data["offer_version"] == "20261127183045"
    assert offers["us-east-1", "g6.xlarge", "on_demand"].gpu_memory_gb_raw == 24.0
    assert offers["us-east-1", "g4dn.xlarge", "on_demand"].zone == "us-east-1-bos-1"

    g6_spot = offers["us-east-1", "g6.xlarge", "spot"]
    assert (g6_spot.price_per_hour, g6_spot.price_source, g6_spot.vcpus, g6_spot.ram_gb) == (
        0.3412,
        "market",
        4.0,
        16.0,
    )
    assert g6_spot.provider_data == {
        "savings_pct": 58,
        "interruption_band": "5-10%",
        "interruption_rate_min": 0.05,
        "interruption_rate_max": 0.10,
    }
    assert offers["us-east-1", "p5.48xlarge", "spot"].provider_data["interruption_band"] == ">20%"
    assert offers["eu-west-1", "g5.xlarge", "spot"].provider_data["interruption_rate_max"] == 0.05
    # No advisor row for p4d in eu-west-1: the offer stands, without a band.
    assert "interruption_band" not in offers["eu-west-1", "p4d.24xlarge", "spot"].provider_data
    # The advisor knows g6.xlarge in eu-west-1, spot.js has no price: no offer is invented.
    assert ("eu-west-1", "g6.xlarge", "spot") not in offers

    g5 = offers["us-east-1", "g5.xlarge", "on_demand"]
    assert (g5.price_per_hour, g5.problem) == (
        0.0,
        "on-demand hourly pricePerUnit is zero or negative: '0.0000000000'",
    )
    assert [k for k, o in offers.items() if o.problem] == [("us-east-1", "g5.xlarge", "on_demand")]
    # m7i on-demand and spot, c7g: CPU-only; trn1: Trainium; the p5 Capacity Block; g5 spot "N/A*"
    assert exclusions(aws.parse(responses)) == {
        "capacity_block": 1,
        "cpu_only": 3,
        "not_gpu_accelerator": 1,
        "spot_not_available": 1,
    }


def test_replay_second_run_with_previous_skips_offer_files() -> None:
    with _replay_client() as client:
        first = list(aws.fetch(client, {}))
        previous = {r.url: dict(r.headers) for r in first}
        second = list(aws.fetch(client, {}, previous))
    assert [r.url for r in second] == [aws.REGION_INDEX_URL, aws.SPOT_URL, aws.ADVISOR_URL]
    items = list(aws.parse(second))
    assert [i.scope for i in items if isinstance(i, Unchanged)] == [
        {"region": "eu-west-1", "pricing_type": "on_demand"},
        {"region": "us-east-1", "pricing_type": "on_demand"},
    ]
    assert {o.pricing_type for o in _offers(items)} == {"spot"}


# --- resume and error paths through MockTransport ---------------------------------------------------


def _fixture_server(overrides=None, seen=None):
    bodies = {
        aws.REGION_INDEX_URL: FIXTURES / "region-index__2026-11-29.json",
        US_EAST_1_URL: FIXTURES / "offer-us-east-1__2026-11-29.csv",
        EU_WEST_1_URL: FIXTURES / "offer-eu-west-1__2026-11-29.csv",
        aws.SPOT_URL: FIXTURES / "spot-json__2026-11-29.json",
        aws.ADVISOR_URL: FIXTURES / "spot-advisor-data__2026-11-29.json",
    }

    def handler(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if seen is not None:
            seen.append(request)
        if overrides and url in overrides:
            return overrides[url](request)
        if url not in bodies:
            return httpx.Response(404, text="NoSuchKey")
        etag = f'"{bodies[url].name}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"etag": etag})
        return httpx.Response(200, content=bodies[url].read_bytes(), headers={"etag": etag})

    return make_client(transport=httpx.MockTransport(handler), sleep=lambda _: None)


def test_unchanged_spot_feed_is_revalidated_with_its_etag() -> None:
    seen: list[httpx.Request] = []
    with _fixture_server(seen=seen) as client:
        first = list(aws.fetch(client, {}))
        previous = {r.url: dict(r.headers) for r in first}
        seen.clear()
        second = list(aws.fetch(client, {}, previous))
    spot_request = next(r for r in seen if str(r.url) == aws.SPOT_URL)
    assert spot_request.headers["if-none-match"] == '"spot-json__2026-11-29.json"'
    assert [r.status for r in second] == [200, 304, 200]
    items = list(aws.parse(second))
    assert {"pricing_type": "spot"} in [i.scope for i in items if isinstance(i, Unchanged)]
    assert _offers(items) == []


def test_a_new_version_of_one_region_is_fetched_and_the_other_left_unchanged() -> None:
    with _fixture_server() as client:
        first = list(aws.fetch(client, {}))
    previous = {r.url: dict(r.headers) for r in first if r.url != US_EAST_1_URL}
    with _fixture_server() as client:
        second = list(aws.fetch(client, {}, previous))
    assert US_EAST_1_URL in [r.url for r in second] and EU_WEST_1_URL not in [r.url for r in second]
    items = list(aws.parse(second))
    assert [i.scope for i in items if isinstance(i, Unchanged)] == [
        {"region": "eu-west-1", "pricing_type": "on_demand"},
        {"pricing_type": "spot"},  # spot.js answered 304 to its revalidation
    ]
    assert {o.region for o in _offers(items) if o.pricing_type == "on_demand"} == {"us-east-1"}


def test_server_errors_are_retried_then_reported() -> None:
    calls = []

    def flaky(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(503, text="Slow Down")

    with _fixture_server({US_EAST_1_URL: flaky}) as client, pytest.raises(FetchError, match="503"):
        list(aws.fetch(client, {}))
    assert len(calls) == 5  # the first try and the HTTP layer's four retries


def test_missing_offer_file_fails_without_retry() -> None:
    calls = []

    def gone(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(404, text="NoSuchKey")

    with _fixture_server({EU_WEST_1_URL: gone}) as client, pytest.raises(FetchError, match="404"):
        list(aws.fetch(client, {}))
    assert len(calls) == 1


def test_truncated_offer_file_is_a_layout_error() -> None:
    body = (FIXTURES / "offer-us-east-1__2026-11-29.json").read_bytes()[:3000]
    with pytest.raises(LayoutChanged, match="not valid JSON"):
        list(aws.parse([_raw(US_EAST_1_JSON_URL, body=body)]))


def test_offer_file_without_products_is_a_layout_error() -> None:
    with pytest.raises(LayoutChanged, match="products"):
        list(aws.parse([_raw(US_EAST_1_JSON_URL, body=b'{"offerCode": "AmazonEC2", "terms": {}}')]))


def test_gpu_products_without_on_demand_terms_is_a_layout_error() -> None:
    data = json.loads((FIXTURES / "offer-us-east-1__2026-11-29.json").read_text())
    data["terms"] = {"OnDemandTerms": data["terms"]["OnDemand"]}
    with pytest.raises(LayoutChanged, match=r"terms\.OnDemand"):
        list(aws.parse([_raw(US_EAST_1_JSON_URL, body=json.dumps(data).encode())]))


def test_bad_spot_feed_and_advisor_are_layout_errors() -> None:
    with pytest.raises(LayoutChanged, match=r"config\.regions"):
        list(aws.parse([_raw(aws.SPOT_URL, body=b'callback({"vers": 0.01})')]))
    with pytest.raises(LayoutChanged, match="spot_advisor"):
        list(aws.parse([_raw(aws.ADVISOR_URL, body=b"{}")]))


def test_reserved_section_is_never_tokenized() -> None:
    # A kept sku without an on-demand term keeps pass 2 reading until its section ends; the
    # Reserved section ends in bytes that are not JSON, so parsing it would raise.
    data = json.loads((FIXTURES / "offer-us-east-1__2026-11-29.json").read_text())
    del data["terms"]["OnDemand"]["AAAAG6LINUX00003"]
    data["terms"]["Reserved"] = {"PAD": "x" * (12 * 1024 * 1024)}
    text = json.dumps(data)
    cut = text.rindex('"PAD"') + 10 * 1024 * 1024
    body = (text[:cut] + "<<not json>>").encode()
    offers = _offers(aws.parse([_raw(US_EAST_1_JSON_URL, body=body)]))
    # the $0 g5.xlarge is a flagged offer (quarantined by the warehouse), not an exclusion
    assert {o.instance_type for o in offers if not o.problem} == {"p5.48xlarge", "g4dn.xlarge"}
    assert {o.instance_type for o in offers if o.problem} == {"g5.xlarge"}
    assert exclusions(aws.parse([_raw(US_EAST_1_JSON_URL, body=body)]))["no_hourly_rate"] == 1


def test_section_reader_stops_after_idle_chunks() -> None:
    reader = aws._SectionReader(io.BytesIO(b"x" * (20 * 1024 * 1024)))
    reader.read(1024 * 1024)
    reader.item()
    with pytest.raises(aws._SectionDone):
        for _ in range(20):
            reader.read(1024 * 1024)
    assert reader.bytes_read == (1 + aws._IDLE_CHUNKS) * 1024 * 1024


# --- CSV offer files --------------------------------------------------------------------------------


def _fixture_csv(region: str) -> str:
    return (FIXTURES / f"offer-{region}__2026-11-29.csv").read_text()


def _csv_body(text: str) -> bytes:
    return text.encode()


def _sorted(offers: list[Offer]) -> list[Offer]:
    return sorted(offers, key=lambda o: o.provider_data["sku"])


def test_csv_offer_url_is_the_json_url_with_index_csv() -> None:
    assert aws.csv_offer_url(US_EAST_1_JSON_URL) == US_EAST_1_URL
    with pytest.raises(LayoutChanged, match=r"does not end in /index\.json"):
        aws.csv_offer_url(f"{OFFER_BASE}/20261127183045/us-east-1/offers.json")


@pytest.mark.parametrize(
    ("region", "json_url", "csv_url"),
    [("us-east-1", US_EAST_1_JSON_URL, US_EAST_1_URL), ("eu-west-1", EU_WEST_1_JSON_URL, EU_WEST_1_URL)],
)
def test_csv_and_json_fixtures_of_a_region_give_identical_offers(
    region: str, json_url: str, csv_url: str
) -> None:
    from_json = [_raw(json_url, FIXTURES / f"offer-{region}__2026-11-29.json")]
    from_csv = [_raw(csv_url, FIXTURES / f"offer-{region}__2026-11-29.csv")]
    json_offers = _sorted(_offers(aws.parse(from_json)))
    assert json_offers and _sorted(_offers(aws.parse(from_csv))) == json_offers
    assert exclusions(aws.parse(from_csv)) == exclusions(aws.parse(from_json))


def test_csv_parse_reads_the_preamble_and_the_plain_rows() -> None:
    offers = _by_key(_offers(aws.parse([_raw(US_EAST_1_URL, body=_csv_body(_fixture_csv("us-east-1")))])))
    assert set(offers) == {
        ("us-east-1", "p5.48xlarge", "on_demand"),
        ("us-east-1", "g6.xlarge", "on_demand"),
        ("us-east-1", "g4dn.xlarge", "on_demand"),
        ("us-east-1", "g5.xlarge", "on_demand"),  # its $0 rate: flagged, for the quarantine
    }
    assert [k for k, o in offers.items() if o.problem] == [("us-east-1", "g5.xlarge", "on_demand")]
    p5 = offers["us-east-1", "p5.48xlarge", "on_demand"]
    assert p5.price_per_hour == 55.04  # the OnDemand row, not the Reserved row of the same sku
    assert p5.provider_data["offer_version"] == "20261127183045"
    assert p5.provider_data["publication_date"] == "2026-11-27T18:30:45Z"


def test_csv_header_missing_columns_are_named() -> None:
    text = (
        _fixture_csv("eu-west-1")
        .replace('"Pre Installed S/W"', '"PreInstalled"')
        .replace('"GPU",', '"Gpus",')
    )
    with pytest.raises(LayoutChanged, match=r"'GPU', 'Pre Installed S/W'"):
        list(aws.parse([_raw(EU_WEST_1_URL, body=_csv_body(text))]))


def test_csv_without_header_row_is_a_layout_error() -> None:
    with pytest.raises(LayoutChanged, match="no header row"):
        list(aws.parse([_raw(EU_WEST_1_URL, body=b"<html>Access Denied</html>\n")]))


def test_unquoted_csv_header_is_a_layout_error() -> None:
    lines = _fixture_csv("eu-west-1").splitlines(keepends=True)
    lines[5] = lines[5].replace('"', "")
    with pytest.raises(LayoutChanged, match="not quoted"):
        list(aws.parse([_raw(EU_WEST_1_URL, body=_csv_body("".join(lines)))]))


def test_truncated_csv_row_is_a_layout_error() -> None:
    text = _fixture_csv("eu-west-1")
    start = text.index('"BBBBP4DLINUX0002","JRTCKXETXF"')
    body = text[
        : text.index('"Used"', start) + 20
    ]  # the p4d on-demand row, cut after what the prefilter needs
    with pytest.raises(LayoutChanged, match="fields, the header"):
        list(aws.parse([_raw(EU_WEST_1_URL, body=_csv_body(body))]))


def test_csv_gpu_rows_without_on_demand_hourly_rows_is_a_layout_error() -> None:
    text = _fixture_csv("eu-west-1").replace('"Hrs"', '"Hours of use"')
    with pytest.raises(LayoutChanged, match="OnDemand hourly row"):
        list(aws.parse([_raw(EU_WEST_1_URL, body=_csv_body(text))]))


def test_csv_crlf_line_ends_and_small_blocks_give_the_same_offers() -> None:
    text = _fixture_csv("us-east-1")
    expected = _sorted(_offers(aws.parse([_raw(US_EAST_1_URL, body=_csv_body(text))])))
    crlf = _sorted(_offers(aws.parse([_raw(US_EAST_1_URL, body=_csv_body(text.replace("\n", "\r\n")))])))
    assert crlf == expected
    fh = io.BytesIO(_csv_body(text))
    _header, columns = aws.read_csv_preamble(fh)
    rest = fh.read()

    def scanned(size: int) -> list[bytes]:
        scanner = aws.CandidateScanner(aws.term_type_field(columns))
        found = [line for i in range(0, len(rest), size) for line in scanner.feed(rest[i : i + size])]
        return found + scanner.flush()

    small = scanned(97)
    assert small == scanned(len(rest))
    # Every plain Linux on-demand row, GPU or not (the CSV stage decides): p5 and its Capacity Block
    # twin, g6, the $0 g5, m7i, the Boston g4dn, trn1; not the Windows g6 nor any Reserved row.
    assert len(small) == 7


def test_candidate_lines_keep_plain_linux_on_demand_rows_only() -> None:
    def line(term_type: str, os: str = "Linux", tenancy: str = "Shared", capacity: str = "Used") -> bytes:
        return (
            f'"SKU1","T","SKU1.T.R","{term_type}","x, y","{tenancy}",,"{os}","No License required",'
            f'"{capacity}","OnDemand"'
        ).encode()

    kept = line("OnDemand")
    rows = [kept, line("Reserved"), line("OnDemand", os="Windows"), line("OnDemand", tenancy="Dedicated")]
    rows.append(line("OnDemand", capacity="UnusedCapacityReservation"))
    block = b"\n".join(rows) + b"\n"
    assert list(aws.candidate_lines(block, len(block), 3)) == [kept]
    # Not positional (TermType after a free-text column): a superset, the CSV stage decides.
    assert list(aws.candidate_lines(block, len(block), None)) == [kept, line("Reserved")]


def test_term_type_field_only_when_code_columns_precede_it() -> None:
    assert aws.term_type_field(["SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription"]) == 3
    assert aws.term_type_field(["SKU", "PriceDescription", "TermType"]) is None


def test_csv_with_term_type_after_a_free_text_column_still_parses() -> None:
    rows = list(csv.reader(io.StringIO(_fixture_csv("us-east-1"))))
    preamble, header, data = rows[:5], rows[5], rows[6:]
    order = [header.index(c) for c in ("SKU", "PriceDescription", "TermType")]
    order += [i for i in range(len(header)) if i not in order]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows(preamble)
    writer.writerows([r[i] for i in order] for r in [header, *data])
    moved = _sorted(_offers(aws.parse([_raw(US_EAST_1_URL, body=out.getvalue().encode())])))
    expected = _sorted(
        _offers(aws.parse([_raw(US_EAST_1_URL, FIXTURES / "offer-us-east-1__2026-11-29.csv")]))
    )
    assert moved == expected


def test_csv_prefers_the_usd_hourly_row() -> None:
    text = _fixture_csv("eu-west-1")
    g5 = next(line for line in text.splitlines() if line.startswith('"BBBBG5LINUX00001","JRTCKXETXF"'))
    eur = g5.replace('"1.1230000000","USD"', '"1.0500000000","EUR"')
    body = text.replace(g5, eur + "\n" + g5)
    offers = _by_key(_offers(aws.parse([_raw(EU_WEST_1_URL, body=_csv_body(body))])))
    g5_offer = offers["eu-west-1", "g5.xlarge", "on_demand"]
    assert (g5_offer.price_per_hour, g5_offer.currency) == (1.123, "USD")


# --- unknown hardware, wrong rows, scopes -----------------------------------------------------------


@pytest.mark.parametrize(
    ("instance_type", "gpu", "group", "expected"),
    [
        # on-demand: the lists first, then the offer file's gpu attribute
        ("p5.48xlarge", None, None, None),
        ("p7.48xlarge", None, None, None),  # a new family of a GPU series
        ("zeta9.48xlarge", "8", None, None),  # a family nobody knows, with GPUs stated
        ("zeta9.48xlarge", "NA", None, "cpu_only"),
        ("m7i.large", None, None, "cpu_only"),
        ("trn3.48xlarge", "16", None, "not_gpu_accelerator"),  # a new Trainium, by its series
        ("inf2.xlarge", None, None, "not_gpu_accelerator"),
        # spot.js: no hardware stated; a known CPU series is left out, anything unknown lands
        ("p7.48xlarge", None, "acceleratedComputing", None),
        ("zeta9.48xlarge", None, "generalCurrentGen", None),
        ("q1.xlarge", None, "gpuCurrentGen", None),
        ("m9i.large", None, "generalCurrentGen", "cpu_only"),
        ("x2iedn.xlarge", None, "hiMemCurrentGen", "cpu_only"),
        ("hpc7g.16xlarge", None, "hpcCurrentGen", "cpu_only"),
        ("f2.12xlarge", None, "fpgaCurrentGen", "not_gpu_accelerator"),
        ("mac2.metal", None, "generalCurrentGen", "cpu_only"),
    ],
)
def test_hardware_exclusion_rule(
    instance_type: str, gpu: str | None, group: str | None, expected: str | None
) -> None:
    assert aws.hardware_exclusion(instance_type, gpu, spot_group=group) == expected


def _spot_js(replacements: dict[str, str]) -> RawResponse:
    """The spot feed as fetched (spot.json), with `replacements` applied."""
    text = (FIXTURES / "spot-json__2026-11-29.json").read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return _raw(aws.SPOT_URL, body=text.encode())


def test_the_plain_json_feed_and_the_jsonp_form_give_the_same_spot_offers() -> None:
    # spot.json is what is fetched; spot.js bodies in the raw archive (fetched before 2026-12)
    # must re-parse to the same offers
    fetched = _raw(aws.SPOT_URL, FIXTURES / "spot-json__2026-11-29.json")
    archived = _raw(aws.LEGACY_SPOT_JS_URL, FIXTURES / "spot-js__2026-11-29.js")
    assert aws.SPOT_URL.endswith("/spot.json")
    from_json, from_js = list(aws.parse([fetched])), list(aws.parse([archived]))
    assert _offers(from_json) and from_json == from_js


def test_a_broken_plain_json_spot_feed_is_a_layout_error() -> None:
    with pytest.raises(LayoutChanged, match="spot feed is not JSON"):
        list(aws.parse([_raw(aws.SPOT_URL, body=b'{"vers": 0.01, "config": {"regions": [')]))


def test_a_new_spot_family_lands_unless_it_is_a_known_cpu_series() -> None:
    response = _spot_js(
        {'"size": "p5.48xlarge"': '"size": "zeta9.48xlarge"', '"size": "m7i.large"': '"size": "p7.48xlarge"'}
    )
    items = list(aws.parse([response]))
    offers = _by_key(_offers(items))
    zeta = offers["us-east-1", "zeta9.48xlarge", "spot"]
    assert (zeta.price_per_hour, zeta.problem, zeta.gpu_name_raw) == (33.2134, None, None)
    # listed under generalCurrentGen, but of the P (GPU) series: it lands too
    assert offers["us-east-1", "p7.48xlarge", "spot"].price_per_hour == 0.0402
    assert "cpu_only" not in exclusions(items)
    cpu = _spot_js({'"size": "m7i.large"': '"size": "m9i.large"'})
    assert exclusions(aws.parse([cpu]))["cpu_only"] == 1


@pytest.mark.parametrize(
    ("cell", "wanted", "nan"),
    [("0", "zero or negative", False), ("abc", "not a number", True), ("NaN", "not a finite", True)],
)
def test_a_wrong_spot_price_is_flagged_not_excluded(cell: str, wanted: str, nan: bool) -> None:
    items = list(aws.parse([_spot_js({'"USD": "0.3412"': f'"USD": "{cell}"'})]))
    g6 = _by_key(_offers(items))["us-east-1", "g6.xlarge", "spot"]
    assert wanted in (g6.problem or "") and math.isnan(g6.price_per_hour) is nan
    assert exclusions(items) == {"cpu_only": 1, "spot_not_available": 1}


def test_spot_not_available_markers_stay_exclusions() -> None:
    items = list(aws.parse([_spot_js({'"USD": "0.3412"': '"USD": "-1"'})]))
    assert ("us-east-1", "g6.xlarge", "spot") not in _by_key(_offers(items))
    assert exclusions(items)["spot_not_available"] == 2


def test_a_renamed_spot_prices_key_yields_flagged_offers_not_an_empty_feed() -> None:
    offers = _offers(aws.parse([_spot_js({'"prices"': '"rates"'})]))
    assert {(o.region, o.instance_type) for o in offers} == {
        ("us-east-1", "g6.xlarge"),
        ("us-east-1", "p5.48xlarge"),
        ("us-east-1", "g5.xlarge"),
        ("eu-west-1", "g5.xlarge"),
        ("eu-west-1", "p4d.24xlarge"),
    }
    assert all("no `prices`" in (o.problem or "") and math.isnan(o.price_per_hour) for o in offers)


def test_a_nan_on_demand_rate_is_flagged_in_csv_and_json() -> None:
    csv_text = _fixture_csv("us-east-1").replace('"55.0400000000"', '"NaN"')
    data = json.loads((FIXTURES / "offer-us-east-1__2026-11-29.json").read_text())
    for term in data["terms"]["OnDemand"]["AAAAP5LINUX00001"].values():
        for dimension in term["priceDimensions"].values():
            dimension["pricePerUnit"]["USD"] = "NaN"
    for response in (
        _raw(US_EAST_1_URL, body=_csv_body(csv_text)),
        _raw(US_EAST_1_JSON_URL, body=json.dumps(data).encode()),
    ):
        p5 = _by_key(_offers(aws.parse([response])))["us-east-1", "p5.48xlarge", "on_demand"]
        assert math.isnan(p5.price_per_hour) and "not a finite number" in (p5.problem or "")


def test_a_renamed_price_per_unit_in_json_is_flagged_not_read_as_not_offered() -> None:
    data = json.loads((FIXTURES / "offer-us-east-1__2026-11-29.json").read_text())
    for terms in data["terms"]["OnDemand"].values():
        for term in terms.values():
            for dimension in term["priceDimensions"].values():
                dimension["price"] = dimension.pop("pricePerUnit")
    items = list(aws.parse([_raw(US_EAST_1_JSON_URL, body=json.dumps(data).encode())]))
    offers = _offers(items)
    assert {o.instance_type for o in offers} == {"p5.48xlarge", "g6.xlarge", "g5.xlarge", "g4dn.xlarge"}
    assert all(o.problem and math.isnan(o.price_per_hour) for o in offers)
    assert "no_hourly_rate" not in exclusions(items)


def test_an_unknown_on_demand_family_with_gpus_lands_under_its_name() -> None:
    text = _fixture_csv("us-east-1").replace("p5.48xlarge", "zeta9.48xlarge")
    offers = _by_key(_offers(aws.parse([_raw(US_EAST_1_URL, body=_csv_body(text))])))
    zeta = offers["us-east-1", "zeta9.48xlarge", "on_demand"]
    assert (zeta.price_per_hour, zeta.gpu_count, zeta.problem) == (55.04, 8.0, None)


def test_scopes_are_per_region_for_on_demand_and_spot_and_a_304_still_covers_spot() -> None:
    from warehouse.load import _covered  # the warehouse's own matching of Unchanged scopes

    with _replay_client() as client:
        items = list(aws.parse(list(aws.fetch(client, {}))))
    offers = _offers(items)
    assert {o.scope_name for o in offers} == {
        "on_demand:us-east-1",
        "on_demand:eu-west-1",
        "spot:us-east-1",
        "spot:eu-west-1",
    }
    # the Boston Local Zone offer belongs to its file's scope
    assert _by_key(offers)["us-east-1", "g4dn.xlarge", "on_demand"].scope_name == "on_demand:us-east-1"
    not_modified = [aws.Unchanged({"pricing_type": "spot"}, reason="spot feed not modified (HTTP 304)")]
    for o in offers:
        fields = {
            "instance_type": o.instance_type,
            "region": o.region,
            "zone": o.zone,
            "pricing_type": o.pricing_type,
            "price_source": o.price_source,
            "scope": o.scope_name,
        }
        assert _covered(fields, not_modified) is (o.pricing_type == "spot")


# --- parse while the offer file streams -------------------------------------------------------------


def _pieces(body: bytes, size: int) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


@pytest.mark.parametrize("size", [1, 7, 97, 4096, 10**9])
@pytest.mark.parametrize("crlf", [False, True])
def test_csv_pushed_in_pieces_of_any_size_parses_like_the_archived_file(size: int, crlf: bool) -> None:
    text = _fixture_csv("us-east-1")
    body = _csv_body(text.replace("\n", "\r\n") if crlf else text)
    from_file = list(aws.parse([_raw(US_EAST_1_URL, body=body)]))
    parser = aws.CsvOfferParser(US_EAST_1_URL)
    for piece in _pieces(body, size):
        parser.feed(piece)
    assert list(parser.close()) == from_file
    assert len(_offers(from_file)) == 4


def test_candidate_scanner_carries_only_the_split_line() -> None:
    fh = io.BytesIO(_csv_body(_fixture_csv("eu-west-1")))
    _header, columns = aws.read_csv_preamble(fh)
    rest = fh.read()
    whole = list(aws.candidate_lines(rest, len(rest), aws.term_type_field(columns)))
    scanner = aws.CandidateScanner(aws.term_type_field(columns))
    found = [line for piece in _pieces(rest, 333) for line in scanner.feed(piece)] + scanner.flush()
    assert found == whole and whole
    # a last line without a line end is still scanned
    scanner = aws.CandidateScanner(aws.term_type_field(columns))
    assert scanner.feed(rest.rstrip(b"\n")) + scanner.flush() == whole


def test_candidate_lines_from_an_offset_skip_what_is_before_it() -> None:
    line = b'"S","T","S.T.R","OnDemand","Shared",,"Linux","No License required","Used"\n'
    block = line + b"junk" + line
    assert list(aws.candidate_lines(block, len(block), 3, begin=len(line) + 4)) == [line.rstrip(b"\n")]


def test_a_preamble_split_across_pieces_and_a_body_shorter_than_the_wait() -> None:
    body = _csv_body(_fixture_csv("eu-west-1"))
    expected = list(aws.parse([_raw(EU_WEST_1_URL, body=body)]))
    parser = aws.CsvOfferParser(EU_WEST_1_URL)
    for piece in _pieces(body, 50):  # the header row arrives in many pieces
        parser.feed(piece)
    assert list(parser.close()) == expected
    # a body shorter than the eight lines the preamble waits for is read at close
    parser = aws.CsvOfferParser(EU_WEST_1_URL)
    parser.feed(b'"FormatVersion","v1.0"\n')
    with pytest.raises(LayoutChanged, match="no header row"):
        parser.close()


@pytest.mark.parametrize("size", [1, 7, 97, 4096, 10**9])
def test_the_body_filter_keeps_the_same_bytes_in_pieces_of_any_size(size: int) -> None:
    body = _csv_body(_fixture_csv("us-east-1"))
    body_filter = aws.OfferCsvFilter(US_EAST_1_URL)
    kept = b"".join(body_filter.feed(piece) for piece in _pieces(body, size)) + body_filter.close()
    assert kept == b"".join(keep_aws_offer_csv(io.BytesIO(body)))
    assert kept.startswith(body[: body.index(b'"SKU"')])  # the preamble byte for byte
    # fed what it kept, the parser gives what it gives for the whole file
    parser = aws.CsvOfferParser(US_EAST_1_URL)
    for piece in _pieces(kept, size):
        parser.feed(piece)
    assert list(parser.close()) == list(aws.parse([_raw(US_EAST_1_URL, body=body)]))


def test_the_body_filter_refuses_a_body_that_is_no_offer_csv_before_keeping_anything() -> None:
    body_filter = aws.OfferCsvFilter(US_EAST_1_URL)
    assert body_filter.feed(b"<html>\n<body>\n") == b""  # waiting for the preamble
    with pytest.raises(LayoutChanged, match="no header row"):
        body_filter.feed(b"<p>503</p>\n" * 10)


def test_stream_parser_errors_are_the_archive_parser_errors() -> None:
    text = _fixture_csv("eu-west-1").replace('"Pre Installed S/W"', '"PreInstalled"')
    parser = aws.CsvOfferParser(EU_WEST_1_URL)
    with pytest.raises(LayoutChanged, match="Pre Installed S/W"):
        parser.feed(_csv_body(text))


def test_fetch_parses_offer_files_while_they_stream_and_hashes_them() -> None:
    with _replay_client() as client:
        responses = list(aws.fetch(client, {}))
    offer_files = [r for r in responses if r.url in (US_EAST_1_URL, EU_WEST_1_URL)]
    assert [r.parsed is not None for r in offer_files] == [True, True]
    for response in responses:
        if response not in offer_files:
            assert response.sha256 == hashlib.sha256(response.read()).hexdigest()
    # An offer file is spooled as what the archive's prefilter keeps of it; the hash and the size
    # are those of the file as it came.
    for response, name in zip(offer_files, ("eu-west-1", "us-east-1"), strict=True):
        whole = (FIXTURES / f"offer-{name}__2026-11-29.csv").read_bytes()
        assert response.prefilter == "aws-offer-csv"
        assert response.sha256 == hashlib.sha256(whole).hexdigest()
        assert response.size_bytes == len(whole) > response.body_path.stat().st_size
        assert response.read() == b"".join(keep_aws_offer_csv(io.BytesIO(whole)))
    # The items parsed while streaming are those of the archived bodies, in the same order.
    from_archive = [dataclasses.replace(r, parsed=None) for r in responses]
    assert list(aws.parse(responses)) == list(aws.parse(from_archive))
    for response in responses:
        remove_spooled(response)


def test_a_broken_stream_parse_leaves_the_whole_body_for_parse_to_report() -> None:
    broken = (FIXTURES / "offer-us-east-1__2026-11-29.csv").read_bytes().replace(b'"GPU",', b'"Gpus",')

    def renamed(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=broken)

    with _fixture_server({US_EAST_1_URL: renamed}) as client:
        responses = list(aws.fetch(client, {}))
    offer = next(r for r in responses if r.url == US_EAST_1_URL)
    # the stream parser is dropped; the filter, which only reads bytes, still keeps what parse reads
    assert offer.parsed is None and offer.read() == b"".join(keep_aws_offer_csv(io.BytesIO(broken)))
    assert offer.sha256 == hashlib.sha256(broken).hexdigest()
    with pytest.raises(LayoutChanged, match="'GPU'"):
        list(aws.parse(responses))
    for response in responses:
        remove_spooled(response)


class _BreaksOnce(httpx.SyncByteStream):
    def __init__(self, body: bytes, broke: list[bool]) -> None:
        self._body, self._broke = body, broke

    def __iter__(self):
        if not self._broke:
            self._broke.append(True)
            yield self._body[: len(self._body) * 2 // 3]  # most of the file: offers already seen
            raise httpx.RemoteProtocolError("peer closed connection without sending complete body")
        yield self._body


def test_a_body_retried_after_breaking_off_is_parsed_once_from_the_good_attempt() -> None:
    body = (FIXTURES / "offer-us-east-1__2026-11-29.csv").read_bytes()
    broke: list[bool] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=_BreaksOnce(body, broke))

    with _fixture_server({US_EAST_1_URL: flaky}) as client:
        responses = list(aws.fetch(client, {}))
    offer = next(r for r in responses if r.url == US_EAST_1_URL)
    # the spool holds what the filter kept of the good attempt only, hashed as the whole body
    assert broke and offer.read() == b"".join(keep_aws_offer_csv(io.BytesIO(body)))
    assert (offer.sha256, offer.size_bytes) == (hashlib.sha256(body).hexdigest(), len(body))
    assert offer.parsed == tuple(aws.parse([dataclasses.replace(offer, parsed=None)]))
    for response in responses:
        remove_spooled(response)


def _many_regions(regions: list[str]) -> dict:
    return {
        "regions": {
            r: {
                "regionCode": r,
                "currentVersionUrl": f"/offers/v1.0/aws/AmazonEC2/20261127183045/{r}/index.json",
            }
            for r in regions
        }
    }


def _region_server(regions: list[str], per_host: int, on_file=None, spool_dir: Path | None = None):
    """A client whose region index lists `regions`, each served us-east-1's CSV fixture."""
    csv_body = (FIXTURES / "offer-us-east-1__2026-11-29.csv").read_bytes()
    index = json.dumps(_many_regions(regions)).encode()

    def handler(request: httpx.Request) -> httpx.Response:
        url = str(request.url)
        if url == aws.REGION_INDEX_URL:
            return httpx.Response(200, content=index)
        if url.endswith("/index.csv"):
            if on_file is not None:
                return on_file(request, csv_body)
            return httpx.Response(200, content=csv_body)
        if url == aws.SPOT_URL:
            return httpx.Response(200, content=(FIXTURES / "spot-json__2026-11-29.json").read_bytes())
        return httpx.Response(200, content=(FIXTURES / "spot-advisor-data__2026-11-29.json").read_bytes())

    return make_client(
        transport=httpx.MockTransport(handler), per_host=per_host, sleep=lambda _: None, spool_dir=spool_dir
    )


def test_region_files_download_concurrently_within_the_per_host_bound() -> None:
    regions = ["ap-south-1", "eu-west-1", "sa-east-1", "us-east-1", "us-west-2"]
    lock = threading.Lock()
    in_flight, peak = [0], [0]

    class Counted(httpx.SyncByteStream):
        def __init__(self, body: bytes) -> None:
            self._body = body

        def __iter__(self):
            time.sleep(0.05)  # long enough for the other downloads to start
            yield self._body

        def close(self) -> None:
            with lock:
                in_flight[0] -= 1

    def on_file(request: httpx.Request, body: bytes) -> httpx.Response:
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        return httpx.Response(200, stream=Counted(body))

    with _region_server(regions, per_host=2, on_file=on_file) as client:
        responses = list(aws.fetch(client, {}))
    assert peak[0] == 2  # in parallel, and never past the bound
    offer_urls = [r.url for r in responses if r.url.endswith("/index.csv")]
    assert [urlsplit(u).path.split("/")[-2] for u in offer_urls] == regions  # in region order
    assert all(r.parsed is not None for r in responses if r.url.endswith("/index.csv"))
    for response in responses:
        remove_spooled(response)


def test_region_files_are_yielded_in_order_whatever_finishes_first() -> None:
    regions = ["eu-west-1", "us-east-1", "us-west-2"]

    def on_file(request: httpx.Request, body: bytes) -> httpx.Response:
        class Slow(httpx.SyncByteStream):
            def __iter__(self):
                if "/eu-west-1/" in str(request.url):
                    time.sleep(0.1)  # the first region is the last to arrive
                yield body

        return httpx.Response(200, stream=Slow())

    with _region_server(regions, per_host=4, on_file=on_file) as client:
        responses = list(aws.fetch(client, {}))
    assert [urlsplit(r.url).path.split("/")[-2] for r in responses[1:4]] == regions
    for response in responses:
        remove_spooled(response)


def test_a_failed_region_cancels_the_others_and_leaves_no_spool_file(tmp_path: Path) -> None:
    regions = ["eu-west-1", "us-east-1", "us-west-2"]
    started = threading.Event()

    def on_file(request: httpx.Request, body: bytes) -> httpx.Response:
        if "/eu-west-1/" in str(request.url):
            started.wait(5)  # fail once another region is mid-download
            return httpx.Response(404, text="NoSuchKey")

        class Endless(httpx.SyncByteStream):
            def __iter__(self):
                yield body
                started.set()
                for _ in range(1000):  # 10 s unless the cancellation stops it
                    time.sleep(0.01)
                    yield b"x" * 1024

        return httpx.Response(200, stream=Endless())

    begun = time.monotonic()
    with (
        _region_server(regions, per_host=4, on_file=on_file, spool_dir=tmp_path) as client,
        pytest.raises(FetchError, match="404"),
    ):
        list(aws.fetch(client, {}))
    assert time.monotonic() - begun < 5
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def test_the_provider_deadline_bounds_region_files_fetched_in_parallel() -> None:
    from connectors.base import DeadlineExceeded
    from connectors.http import provider_deadline

    def on_file(request: httpx.Request, body: bytes) -> httpx.Response:
        class Drip(httpx.SyncByteStream):
            def __iter__(self):
                for i in range(0, len(body), 100):
                    time.sleep(0.01)
                    yield body[i : i + 100]

        return httpx.Response(200, stream=Drip())

    begun = time.monotonic()
    with (
        _region_server(["eu-west-1", "us-east-1"], per_host=4, on_file=on_file) as client,
        provider_deadline(0.3),
        pytest.raises(DeadlineExceeded),
    ):
        list(aws.fetch(client, {}))
    assert time.monotonic() - begun < 3


def test_csv_anchor_is_the_longer_needle_only_when_the_columns_are_adjacent() -> None:
    header = next(csv.reader(io.StringIO(_fixture_csv("us-east-1").splitlines()[5])))
    assert aws.csv_anchor(header) == b'"Linux","No License required"'
    moved = [c for c in header if c != "License Model"] + ["License Model"]
    assert aws.csv_anchor(moved) == b'"Linux"'


def test_the_long_anchor_finds_the_same_candidates_as_the_short_one() -> None:
    fh = io.BytesIO(_csv_body(_fixture_csv("us-east-1")))
    _header, columns = aws.read_csv_preamble(fh)
    rest = fh.read()
    term_type = aws.term_type_field(columns)
    short = list(aws.candidate_lines(rest, len(rest), term_type))
    assert list(aws.candidate_lines(rest, len(rest), term_type, anchor=aws.csv_anchor(columns))) == short
    assert len(short) == 7  # as in test_csv_crlf_line_ends_and_small_blocks_give_the_same_offers


def test_csv_with_license_model_apart_from_the_operating_system_still_parses() -> None:
    rows = list(csv.reader(io.StringIO(_fixture_csv("us-east-1"))))
    preamble, header, data = rows[:5], rows[5], rows[6:]
    order = [i for i, c in enumerate(header) if c != "License Model"] + [header.index("License Model")]
    out = io.StringIO()
    writer = csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n")
    writer.writerows(preamble)
    writer.writerows([r[i] for i in order] for r in [header, *data])
    moved = _sorted(_offers(aws.parse([_raw(US_EAST_1_URL, body=out.getvalue().encode())])))
    assert moved == _sorted(
        _offers(aws.parse([_raw(US_EAST_1_URL, body=_csv_body(_fixture_csv("us-east-1")))]))
    )
