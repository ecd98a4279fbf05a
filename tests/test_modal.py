"""Modal pricing page: per-GPU-second rates of "GPU Tasks", the CPU/memory rates beside, replay.

No capture of modal.com/pricing exists (../shared/data/raw has none, PROVENANCE.md): the parser is
tested on our own page in the structure transcriptions of it describe (tests/fixtures/README.md).
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors import modal
from connectors.base import LayoutChanged, Offer, RawResponse, Unchanged
from connectors.http import make_client
from warehouse.hardware import HardwareCatalog

REPO = Path(__file__).resolve().parents[1]
REPLAY = REPO / "tests" / "replay"
FIXTURE = REPO / "tests" / "fixtures" / "modal" / "pricing__2026-12-02.html"


def answer(body: str | bytes, status: int = 200) -> RawResponse:
    data = body.encode() if isinstance(body, str) else body
    return RawResponse(
        url=modal.PAGE_URL,
        method="GET",
        status=status,
        fetched_at=datetime(2026, 12, 2, tzinfo=UTC),
        content_type="text/html",
        body=data,
    )


def offers_of(body: str | bytes) -> dict[str, Offer]:
    return {o.instance_type: o for o in modal.parse([answer(body)]) if isinstance(o, Offer)}


def page(rows: str, host: str = "") -> str:
    gpus = f"<div><h3>GPU Tasks</h3><ul>{rows}</ul></div>"
    return f"<html><body><h2>Compute costs</h2>{gpus}{host}</body></html>"


def test_fixture_page_offers_every_gpu_in_every_count_modal_sells() -> None:
    offers = offers_of(FIXTURE.read_bytes())
    # 9 types up to 8 GPUs, A10 up to 4, RTX PRO 6000 (no documented count) as 1
    assert len(offers) == 9 * 8 + 4 + 1
    h100 = offers["1x Nvidia H100"]
    assert (h100.price_per_hour, h100.currency, h100.gpu_count) == (3.9492, "USD", 1.0)
    assert h100.billing_unit == "second"
    assert (h100.pricing_type, h100.price_source, h100.region, h100.scope) == (
        "on_demand",
        "list",
        "global",
        "on_demand:gpu-tasks",
    )
    assert offers["8x Nvidia H100"].price_per_hour == pytest.approx(8 * 0.001097 * 3600)
    assert offers["4x Nvidia A10"].price_per_hour == pytest.approx(4 * 0.000306 * 3600)
    assert "5x Nvidia A10" not in offers and "2x Nvidia RTX PRO 6000" not in offers
    assert offers["1x Nvidia RTX PRO 6000"].provider_data["gpu_counts_documented"] is False
    a100 = offers["2x Nvidia A100, 80 GB"]
    assert (a100.gpu_name_raw, a100.gpu_memory_gb_raw) == ("A100 80GB", 80.0)
    assert all(o.problem is None for o in offers.values())


def test_cpu_and_memory_are_billed_beside_the_gpu_and_kept_with_each_offer() -> None:
    data = offers_of(FIXTURE.read_bytes())["1x Nvidia T4"].provider_data
    # the Functions rates, not the Sandboxes ones later on the page ($0.00003942 / core / sec)
    assert data["cpu_usd_per_core_hour"] == pytest.approx(0.0000131 * 3600)
    assert data["memory_usd_per_gib_hour"] == pytest.approx(0.00000222 * 3600)
    assert data["min_cpu_cores"] == 0.125
    assert (data["preemptible"], data["serverless"]) == (True, True)
    assert data["price_basis"] == "USD per GPU-second"


def test_a_page_without_cpu_and_memory_rows_still_prices_the_gpus() -> None:
    offers = offers_of(page("<li><span>Nvidia L4</span><span>$0.000222 / sec</span></li>"))
    assert "cpu_usd_per_core_hour" not in offers["1x Nvidia L4"].provider_data
    assert offers["1x Nvidia L4"].price_per_hour == pytest.approx(0.7992)


def test_every_gpu_resolves_to_a_canonical_gpu() -> None:
    hardware = HardwareCatalog.load()
    offers = offers_of(FIXTURE.read_bytes())
    resolved = {
        k: hardware.resolve("modal", o.instance_type, o.gpu_name_raw, o.gpu_memory_gb_raw, o.gpu_count)
        for k, o in offers.items()
    }
    assert [k for k, m in resolved.items() if m is None] == []
    mapped = {k: m for k, m in resolved.items() if m is not None}
    assert mapped["1x Nvidia A100, 40 GB"].gpu_name == "A100-40GB-SXM"
    assert mapped["3x Nvidia L40S"].gpu_name == "L40S"
    assert mapped["1x Nvidia H100"].intra_node_interconnect == "none"


def test_a_row_printed_per_second_and_per_hour_keeps_the_second_if_they_agree() -> None:
    both = "<li><span>Nvidia T4</span><span>$0.59 / h</span><span>$0.000164 / sec</span></li>"
    t4 = offers_of(page(both))["1x Nvidia T4"]
    assert t4.provider_data["price_text"] == "$0.000164 / sec"
    wrong = "<li><span>Nvidia T4</span><span>$0.000164 / sec</span><span>$0.90 / h</span></li>"
    with pytest.raises(LayoutChanged, match=r"0\.5904/hour but"):
        offers_of(page(wrong))


def test_a_zero_rate_is_a_flagged_offer() -> None:
    offers = offers_of(
        page(
            "<li><span>Nvidia L4</span><span>$0.000000 / sec</span></li>"
            "<li><span>Nvidia T4</span><span>$0.000164 / sec</span></li>"
        )
    )
    assert "not a positive number" in (offers["1x Nvidia L4"].problem or "")
    assert offers["1x Nvidia T4"].problem is None


def test_a_rate_without_its_time_unit_is_that_rows_problem_and_every_row_so_the_pages() -> None:
    one = offers_of(
        page(
            "<li><span>Nvidia L4</span><span>$0.000222</span></li>"
            "<li><span>Nvidia T4</span><span>$0.000164 / sec</span></li>"
        )
    )
    l4 = one["1x Nvidia L4"]
    assert math.isnan(l4.price_per_hour) and "time unit" in (l4.problem or "")
    with pytest.raises(LayoutChanged, match="time unit"):
        offers_of(page("<li><span>Nvidia L4</span><span>$0.000222</span></li>"))


@pytest.mark.parametrize(
    ("body", "match"),
    [
        ("<html><body><h3>GPU Functions</h3><p>Nvidia T4</p><p>$0.000164 / s</p></body></html>", "GPU Tasks"),
        (page("<li>Coming soon</li>"), "no priced row under `GPU Tasks`"),
        ("<html><body><h3>GPU Tasks</h3><p>$0.000164 / sec</p></body></html>", "no label before it"),
    ],
)
def test_a_changed_layout_names_what_it_looked_for(body: str, match: str) -> None:
    with pytest.raises(LayoutChanged, match=match):
        offers_of(body)


def test_gpu_name_drops_the_vendor_and_joins_the_memory() -> None:
    assert modal.gpu_name("Nvidia A100, 80 GB") == "A100 80GB"
    assert modal.gpu_name("Nvidia RTX PRO 6000") == "RTX PRO 6000"


def test_a_not_modified_page_keeps_its_scope() -> None:
    items = list(modal.parse([answer(b"", status=304)]))
    assert [i.scope for i in items if isinstance(i, Unchanged)] == [{"scope": modal.SCOPE}]


def test_replay_cassette_runs_fetch_and_parse_offline() -> None:
    with make_client(replay=REPLAY) as client:
        responses = list(modal.fetch(client, {}))
    offers = [o for o in modal.parse(responses) if isinstance(o, Offer)]
    assert len(offers) == 77
    assert {o.provider for o in offers} == {"modal"}


@pytest.fixture
def _allow_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.undo()  # lifts tests/conftest.py's offline guard for this one test


@pytest.mark.network
@pytest.mark.usefixtures("_allow_network")
def test_live_pricing_page_has_an_h100_rate() -> None:
    with make_client() as client:
        responses = list(modal.fetch(client, {}))
    offers = [o for o in modal.parse(responses) if isinstance(o, Offer)]
    assert any(o.gpu_name_raw == "H100" and o.problem is None for o in offers)
