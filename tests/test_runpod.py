"""RunPod GraphQL connector: offer rules, real captures, errors, secrets, replay."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import runpod
from connectors.base import ConnectorError, LayoutChanged, Offer, RawResponse
from connectors.http import make_client

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"


def answer(payload: Any) -> RawResponse:
    return RawResponse(
        url=runpod.API_URL,
        method="POST",
        status=200,
        fetched_at=datetime(2026, 11, 29, tzinfo=UTC),
        body=json.dumps(payload).encode(),
    )


def by_key(offers: list[Any]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.pricing_type): o for o in offers if isinstance(o, Offer)}


def gpu(**overrides: Any) -> dict[str, Any]:
    base = {
        "id": "NVIDIA H100 80GB HBM3",
        "displayName": "H100 SXM",
        "memoryInGb": 80,
        "maxGpuCount": 8,
        "secureCloud": True,
        "communityCloud": True,
        "securePrice": 2.99,
        "communityPrice": 2.69,
        "secureSpotPrice": 1.75,
        "communitySpotPrice": 1.5,
    }
    return base | overrides


@pytest.mark.parametrize(
    ("max_count", "counts"),
    [(8, (1, 2, 4, 8)), (10, (1, 2, 4, 8)), (6, (1, 2, 4)), (2, (1, 2)), (1, (1,)), (0, ()), (None, (1,))],
)
def test_gpu_counts(max_count: int | None, counts: tuple[int, ...]) -> None:
    assert runpod.gpu_counts(max_count) == counts


def test_one_type_gives_secure_and_community_on_demand_and_spot_per_count() -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu())))
    assert len(offers) == 2 * 2 * 4
    eight = offers[("8x NVIDIA H100 80GB HBM3 (secure)", "on_demand")]
    assert (eight.price_per_hour, eight.gpu_count, eight.price_source) == (23.92, 8.0, "list")
    assert (eight.region, eight.gpu_name_raw, eight.gpu_memory_gb_raw) == (
        "global",
        "NVIDIA H100 80GB HBM3",
        80.0,
    )
    assert eight.provider_data["cloud"] == "secure"
    spot = offers[("1x NVIDIA H100 80GB HBM3 (community)", "spot")]
    assert (spot.price_per_hour, spot.price_source) == (1.5, "market")


def test_cloud_flag_false_wins_over_a_placeholder_price() -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu(communityCloud=False, communityPrice=0.5))))
    assert all("(secure)" in instance for instance, _ in offers)


def test_null_and_zero_prices_mean_not_offered() -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu(secureSpotPrice=None, communityPrice=0))))
    assert {pricing for instance, pricing in offers if "(secure)" in instance} == {"on_demand"}
    assert {pricing for instance, pricing in offers if "(community)" in instance} == {"spot"}


def test_per_cloud_maximum_limits_the_counts() -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu(maxGpuCountCommunityCloud=2))))
    community = {o.gpu_count for (instance, _), o in offers.items() if "(community)" in instance}
    assert community == {1.0, 2.0}


def test_graphql_errors_are_reported_with_their_message() -> None:
    with pytest.raises(ConnectorError, match="RunPod GraphQL answered errors: Unauthorized"):
        list(runpod.parse([answer({"errors": [{"message": "Unauthorized"}], "data": None})]))


@pytest.mark.parametrize("payload", [{"data": {}}, {"data": {"gpuTypes": []}}, [1, 2]])
def test_missing_or_empty_gpu_types_is_a_layout_change(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="gpuTypes"):
        list(runpod.parse([answer(payload)]))


# --- real captures: the data.gpuTypes array only, wrapped back into its GraphQL envelope ---------


@pytest.mark.parametrize(
    ("capture", "on_demand", "spot"),
    [
        ("graphql-gpuTypes-data-2025-06-21.json", 204, 177),
        ("graphql-gpuTypes-data-2025-06-15.json", 204, 177),
    ],
)
def test_real_capture(shared_raw: Path, capture: str, on_demand: int, spot: int) -> None:
    types = json.loads((shared_raw / "runpod" / capture).read_text())
    offers = by_key(list(runpod.parse([answer({"data": {"gpuTypes": types}})])))
    counts = {t: sum(p == t for _, p in offers) for t in ("on_demand", "spot")}
    assert counts == {"on_demand": on_demand, "spot": spot}
    h100 = offers[("1x NVIDIA H100 80GB HBM3 (secure)", "on_demand")]
    assert (h100.price_per_hour, h100.gpu_memory_gb_raw) == (2.99, 80.0)
    assert offers[("8x NVIDIA H100 80GB HBM3 (community)", "spot")].price_per_hour == 12.0
    assert offers[("8x NVIDIA B200 (secure)", "on_demand")].price_per_hour == 51.12
    # B200 is secure-only: its communityPrice 0.5 is a placeholder, not an offer.
    assert not any("B200 (community)" in instance for instance, _ in offers)
    # The A30 is community-only although it carries a securePrice.
    assert not any("A30 (secure)" in instance for instance, _ in offers)
    assert not any("unknown" in instance for instance, _ in offers)


# --- HTTP path ------------------------------------------------------------------------------------


def test_fetch_sends_the_optional_key_as_a_header_and_never_records_it() -> None:
    secret = "rpa_SECRET_KEY_123"
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"data": {"gpuTypes": [gpu()]}})

    with make_client(transport=httpx.MockTransport(handler), secrets=[secret]) as client:
        (response,) = runpod.fetch(client, {"RUNPOD_API_KEY": secret})
    assert sent[0].headers["authorization"] == f"Bearer {secret}"
    assert secret not in response.url
    assert secret.encode() not in (response.request_body or b"")
    assert all(secret not in value for value in response.headers.values())
    assert len(list(runpod.parse([response]))) == 16


def test_fetch_without_a_key_sends_no_authorization() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert "authorization" not in request.headers
        assert json.loads(request.content) == {"query": runpod.QUERY}
        return httpx.Response(200, json={"errors": [{"message": "Cannot query field x"}]})

    with make_client(transport=httpx.MockTransport(handler)) as client:
        responses = list(runpod.fetch(client, {}))
    with pytest.raises(ConnectorError, match="Cannot query field x"):
        list(runpod.parse(responses))


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(runpod.fetch(client, {}))
    offers = by_key(list(runpod.parse(responses)))
    assert offers[("8x NVIDIA H100 80GB HBM3 (secure)", "spot")].price_per_hour == 14.0
    assert offers[("2x NVIDIA H100 80GB HBM3 (community)", "on_demand")].price_per_hour == 5.38
    assert ("4x NVIDIA H100 80GB HBM3 (community)", "on_demand") not in offers  # community max is 2
    assert {i for i, _ in offers if "B200" in i} == {f"{n}x NVIDIA B200 (secure)" for n in (1, 2, 4, 8)}
    assert {(i, p) for i, p in offers if "3070" in i} == {
        (f"{n}x NVIDIA GeForce RTX 3070 (community)", p) for n in (1, 2, 4) for p in ("on_demand", "spot")
    }
