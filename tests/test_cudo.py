"""Cudo Compute: machine types -> whole-VM offers assembled from component prices; replay."""

from __future__ import annotations

import csv
import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from connectors import cudo
from connectors.base import LayoutChanged, Offer, RawResponse, exclusions
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "cudo" / "vms-machine-types-2__2026-12-01.json"


def answer(payload: Any) -> RawResponse:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return RawResponse(
        url=cudo.API_URL, method="GET", status=200, fetched_at=datetime(2026, 12, 1, tzinfo=UTC), body=body
    )


def offers_of(items: list[object]) -> dict[tuple[str, str], Offer]:
    return {(o.instance_type, o.region): o for o in items if isinstance(o, Offer)}


def machine(**overrides: Any) -> dict[str, Any]:
    base = json.loads(FIXTURE.read_text())["machineTypes"][0]
    return base | overrides


def test_component_price_reads_decimal_strings() -> None:
    assert cudo.component_price({"gpuPriceHr": {"value": "0.520000"}}, "gpuPriceHr") == 0.52
    assert cudo.component_price({}, "gpuPriceHr") is None
    assert cudo.component_price({"gpuPriceHr": {"value": "n/a"}}, "gpuPriceHr") is None
    assert cudo.component_price({"gpuPriceHr": {"value": "NaN"}}, "gpuPriceHr") is None


@pytest.mark.parametrize(
    ("free", "counts"),
    [(8, [1, 2, 4, 8]), (5, [1, 2, 4]), (1, [1]), (0, [1]), (None, [1]), (12, [1, 2, 4, 8])],
)
def test_shapes_follow_free_gpus_and_the_per_gpu_maximum(free: int | None, counts: list[int]) -> None:
    got = cudo.shapes(machine(maxGpuFree=free))
    assert [n for n, _, _ in got] == counts
    assert all((v, r) == (24 * n, 96 * n) for n, v, r in got)  # 24 vCPUs, 24 / 0.25 = 96 GiB per GPU


# --- the real 2024 sample (dstackai/gpuhunt test fixture; looks like a trimmed real payload) ---------


def test_real_machine_types_sample(shared_raw: Path) -> None:
    body = (shared_raw / "cudo" / "vms-machine-types-sample-2024.json").read_bytes()
    items = list(cudo.parse([answer(body)]))
    offers = offers_of(items)
    assert len(offers) == 6  # RTX 3080 (5 free): 1/2/4 GPUs; RTX A5000 (4 free): 1/2/4 GPUs
    one = offers[("1x cascade-lake", "br-saopaulo-1")]
    # 1 x 0.05 + 13 vCPU x 0.0025 + 52 GiB x 0.0038 (13 / 0.25 GiB) USD per hour
    assert (one.price_per_hour, one.vcpus, one.ram_gb, one.gpu_name_raw) == (0.2801, 13.0, 52.0, "RTX 3080")
    a5000 = offers[("1x epyc-rome-rtx-a5000", "no-luster-1")]
    assert (a5000.price_per_hour, a5000.vcpus, a5000.ram_gb) == (0.761, 16.0, 61.0)
    assert a5000.provider_data["components"]["gpu"] == 0.52
    # 64 vCPUs fit in 116 free, but 247 GiB do not fit in 219 GiB free
    assert offers[("4x epyc-rome-rtx-a5000", "no-luster-1")].available is False
    assert offers[("4x cascade-lake", "br-saopaulo-1")].price_per_hour == 1.1204
    assert all(
        o.currency == "USD" and o.pricing_type == "on_demand" and o.problem is None for o in offers.values()
    )
    hardware = HardwareCatalog.load()
    names = {
        hardware.resolve("cudo", o.instance_type, o.gpu_name_raw, None, o.gpu_count) for o in offers.values()
    }
    assert None not in names
    assert {m.gpu_name for m in names if m} == {"RTX3080", "RTXA5000"}


def test_derived_2026_rows_carry_the_gpu_component_only(shared_raw: Path) -> None:
    """Cross-check: OpenComputePrices' `price_per_hour` is the GPU component alone (DERIVED rows)."""
    with (shared_raw / "cudo" / "opencomputeprices-cudo-2026-03-22.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    h100 = next(r for r in rows if r["gpu_name"] == "H100")
    extra = json.loads(h100["raw_extra"])
    m = machine(gpuPriceHr={"value": h100["price_per_hour"]}, vcpuPriceHr={"value": extra["vcpu_price_hr"]})
    m["memoryGibPriceHr"] = {"value": extra["mem_price_hr"]}
    offer = cudo.machine_offers(m)[0]  # type: ignore[index]
    assert offer.provider_data["components"]["gpu"] == float(h100["price_per_hour"]) == 1.79
    assert offer.price_per_hour > 1.79  # the whole VM adds vCPUs and RAM


# --- rules, wrong rows, layout ------------------------------------------------------------------


def test_fixture_offers_and_exclusions() -> None:
    items = list(cudo.parse([answer(FIXTURE.read_bytes())]))
    offers = offers_of(items)
    assert exclusions(items) == {"cpu_only": 1}
    h100 = offers[("8x sapphire-rapids-h100", "se-smedjebacken-1")]
    assert (h100.price_per_hour, h100.gpu_count, h100.vcpus, h100.ram_gb, h100.available) == (
        22.032,
        8.0,
        192.0,
        768.0,
        True,
    )
    assert offers[("1x sapphire-rapids-h100", "se-smedjebacken-1")].price_per_hour == 2.754
    l40s = offers[("1x epyc-genoa-l40s", "no-kristiansand-1")]
    assert (l40s.price_per_hour, l40s.available) == (1.409, False)  # none free: 1-GPU shape, unavailable
    assert [k for k in offers if "l40s" in k[0]] == [("1x epyc-genoa-l40s", "no-kristiansand-1")]


@pytest.mark.parametrize(
    ("overrides", "problem"),
    [
        ({"gpuPriceHr": {"value": "0"}}, "not all positive"),
        ({"gpuPriceHr": {"value": "-1"}}, "not all positive"),
        ({"gpuPriceHr": {"amount": "2.25"}}, "missing or unreadable"),
        ({"vcpuPriceHr": None}, "missing or unreadable"),
    ],
)
def test_a_wrong_component_price_flags_every_shape(overrides: dict[str, Any], problem: str) -> None:
    offers = cudo.machine_offers(machine(**overrides))
    assert isinstance(offers, list) and len(offers) == 4
    assert all(problem in (o.problem or "") for o in offers)
    if "missing" in problem:
        assert all(math.isnan(o.price_per_hour) for o in offers)


def test_a_renamed_gpu_price_key_is_not_read_as_cpu_only() -> None:
    m = machine()
    m["gpuPrice"] = m.pop("gpuPriceHr")
    offers = cudo.machine_offers(m)
    assert isinstance(offers, list) and all("gpuPriceHr" in (o.problem or "") for o in offers)


@pytest.mark.parametrize("payload", [{"items": []}, {"machineTypes": []}, "nope"])
def test_unreadable_envelopes_are_layout_changes(payload: Any) -> None:
    with pytest.raises(LayoutChanged, match="machineTypes"):
        list(cudo.parse([answer(payload)]))


def test_a_machine_type_without_a_data_centre_is_a_layout_change() -> None:
    with pytest.raises(LayoutChanged, match="dataCenterId"):
        cudo.machine_offers(machine(dataCenterId=None))


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(cudo.fetch(client, {}))
    offers = offers_of(list(cudo.parse(responses)))
    assert len(offers) == 5
    assert offers[("2x sapphire-rapids-h100", "se-smedjebacken-1")].price_per_hour == 5.508


def test_every_fixture_gpu_maps() -> None:
    hardware = HardwareCatalog.load()
    offers = offers_of(list(cudo.parse([answer(FIXTURE.read_bytes())])))
    names = {
        k: hardware.resolve("cudo", o.instance_type, o.gpu_name_raw, None, o.gpu_count)
        for k, o in offers.items()
    }
    assert {m.gpu_name for m in names.values() if m} == {"H100-SXM", "L40S"}
    assert None not in names.values()


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_machine_types_yield_gpu_offers() -> None:
    with make_client() as client:
        responses = list(cudo.fetch(client, {}))
    offers = [o for o in cudo.parse(responses) if isinstance(o, Offer)]
    assert offers and all(o.currency == "USD" for o in offers)
