"""RunPod GraphQL connector: offer rules, real captures, errors, secrets, replay."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from connectors import runpod
from connectors.base import ConnectorError, LayoutChanged, Offer, RawResponse, exclusions
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


def test_a_null_spot_price_means_no_spot_but_a_zero_price_is_flagged_not_dropped() -> None:
    items = list(runpod.gpu_type_offers(gpu(secureSpotPrice=None, communityPrice=0)))
    offers = by_key(items)
    assert {pricing for instance, pricing in offers if "(secure)" in instance} == {"on_demand"}
    assert exclusions(items) == {"no_spot_price": 1}
    # A $0 price in a cloud flagged as offered is wrong, not "not offered": flagged, every pod size.
    flagged = [o for (instance, p), o in offers.items() if "(community)" in instance and p == "on_demand"]
    assert len(flagged) == 4 and all(o.problem and "zero or negative" in o.problem for o in flagged)
    assert all(o.problem is None for o in offers.values() if o not in flagged)


@pytest.mark.parametrize(
    ("value", "wanted"),
    [
        (math.nan, "not a finite number"),
        ("2.99", "not a number"),
        (-1.0, "zero or negative"),
        (None, "is null"),
    ],
)
def test_wrong_on_demand_prices_are_flagged_offers(value: object, wanted: str) -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu(securePrice=value))))
    secure = [o for (i, p), o in offers.items() if "(secure)" in i and p == "on_demand"]
    assert len(secure) == 4
    assert all(wanted in (o.problem or "") for o in secure)
    if value is not None and not isinstance(value, str) and value == value:  # a number: kept as read
        assert secure[0].price_per_hour in (-1.0, -2.0, -4.0, -8.0)
    else:
        assert all(math.isnan(o.price_per_hour) for o in secure)


def test_a_renamed_price_key_yields_flagged_offers_not_an_empty_catalog() -> None:
    renamed = {k.replace("Price", "Cost"): v for k, v in gpu().items()}
    items = list(runpod.parse([answer({"data": {"gpuTypes": [renamed]}})]))
    offers = [i for i in items if isinstance(i, Offer)]
    assert len(offers) == 16  # the same keys as a good answer, so each holds its last good price
    assert all(o.problem and "missing" in o.problem and math.isnan(o.price_per_hour) for o in offers)


def test_scopes_are_cloud_by_pricing_type() -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu())))
    assert {o.scope_name for o in offers.values()} == {
        "secure:on_demand",
        "secure:spot",
        "community:on_demand",
        "community:spot",
    }
    assert offers[("2x NVIDIA H100 80GB HBM3 (community)", "spot")].scope == "community:spot"


def test_an_unknown_gpu_type_lands_with_its_raw_name() -> None:
    offers = by_key(list(runpod.gpu_type_offers(gpu(id="NVIDIA Zeta Z9", displayName="Zeta Z9"))))
    assert {o.gpu_name_raw for o in offers.values()} == {"NVIDIA Zeta Z9"}
    assert all(o.problem is None for o in offers.values())


def test_an_entry_without_id_is_flagged_and_an_answer_without_ids_is_a_layout_change() -> None:
    nameless = {k: v for k, v in gpu().items() if k != "id"}
    offers = [
        i for i in runpod.parse([answer({"data": {"gpuTypes": [gpu(), nameless]}})]) if isinstance(i, Offer)
    ]
    flagged = [o for o in offers if o.problem]
    assert len(offers) == 32 and len(flagged) == 16
    assert all("without `id`" in (o.problem or "") and "gpuTypes[1]" in o.instance_type for o in flagged)
    with pytest.raises(LayoutChanged, match="no gpuTypes entry has an `id`"):
        list(runpod.parse([answer({"data": {"gpuTypes": [nameless]}})]))


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
    items = list(runpod.parse([answer({"data": {"gpuTypes": types}})]))
    offers = by_key(items)
    assert not [o for o in offers.values() if o.problem]  # every real price reads clean
    # 39 types x 2 clouds: 23 cloud slots flagged off, 7 offered clouds without spot pods
    assert exclusions(items) == {"not_in_cloud": 23, "no_spot_price": 7}
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


@pytest.mark.parametrize(
    "dropped", [("secureCloud",), ("communityCloud",), ("secureCloud", "communityCloud")]
)
def test_an_answer_without_its_cloud_flags_is_a_layout_change_naming_them(
    shared_raw: Path, dropped: tuple[str, ...]
) -> None:
    # The real capture with the flags taken out: before, this parsed to 0 offers and no error.
    types = json.loads((shared_raw / "runpod" / "graphql-gpuTypes-data-2025-06-21.json").read_text())
    for entry in types:
        for key in dropped:
            entry.pop(key, None)
    with pytest.raises(LayoutChanged) as raised:
        list(runpod.parse([answer({"data": {"gpuTypes": types}})]))
    message = str(raised.value)
    assert all(f"`{key}`" in message for key in dropped) and "gpuTypes[0]" in message
    kept = {"secureCloud", "communityCloud"} - set(dropped)
    assert not any(f"`{key}`" in message for key in kept)


def test_a_null_cloud_flag_still_means_not_offered_there() -> None:
    items = list(runpod.parse([answer({"data": {"gpuTypes": [gpu(communityCloud=None)]}})]))
    assert {instance.rsplit(" ", 1)[-1] for instance, _ in by_key(items)} == {"(secure)"}
    assert exclusions(items) == {"not_in_cloud": 1}


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
