"""`gpucost prices`, `gpucost history` and the filters and frontier of `gpucost estimate`, through
the real typer app over a small warehouse (tests/test_answers_prices.py's offers)."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows import cli_finetune
from flows.cli import app
from flows.cli_prices import format_age, gpus_text, price_text, source_text, sparkline
from tests.test_answers_prices import fill, runpod_offers
from warehouse.db import open_warehouse
from warehouse.load import load_offers

runner = CliRunner()
# the CLI ages prices against the real clock: the data is from 10 days ago, history from 12
T0 = (datetime.now(UTC) - timedelta(days=10)).replace(minute=0, second=0, microsecond=0)
STAMP = f"{T0:%Y-%m-%d %H:%M} UTC"
RUN = "insert into ops.runs (run_id, started_at, status, mode, providers) values ('r1', ?, 'ok', ?, [])"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A live warehouse: the offers of tests/test_answers_prices.py, and RunPod's 1x H100 two days
    before at $2.49."""
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    load_offers(con, "r0", "runpod", runpod_offers(one_x_price=2.49), now=T0 - timedelta(days=2))
    fill(con, T0)
    con.execute(RUN, [T0, "live"])
    con.close()
    return tmp_path


@pytest.fixture
def sample_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Only a replay warehouse (recorded sample data) exists."""
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "replay" / "warehouse.duckdb")
    fill(con, T0)
    con.execute(RUN, [T0, "replay"])
    con.close()
    return tmp_path


def _json(*args: str) -> list[dict]:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.output
    return lines[0]


# --- prices ------------------------------------------------------------------------------------


def test_prices_table_groups_by_gpu_and_says_when_prices_were_fetched(home: Path) -> None:
    result = runner.invoke(app, ["prices"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for gpu in ("GH200", "H100-NVL", "H100-PCIe", "H100-SXM", "RTX4090"):
        assert out.count(f"\n{gpu} ") == 1, out  # named once, on its group's first row
    assert "≥2.00" in out  # nebius' "from" price shown as a lower bound
    assert "market p10" in out  # vast's marketplace statistic
    assert "8×NVSwitch" in out and "us-east-1" in out
    assert "global +1" in out  # runpod's 8x stands for the 1x too
    assert f"live prices fetched {STAMP}" in out and "10d ago" in out
    assert "sample" not in result.output


def test_prices_json_has_one_row_per_gpu_provider_and_pricing_type(home: Path) -> None:
    rows = _json("prices", "--gpu", "H100")
    assert {r["gpu_name"] for r in rows} == {"H100-SXM", "H100-PCIe", "H100-NVL"}
    keys = [(r["gpu_name"], r["provider"], r["is_spot"]) for r in rows]
    # H100-SXM: runpod and aws on-demand and spot, nebius spot, vast; H100-PCIe runpod; H100-NVL azure
    assert len(keys) == len(set(keys)) == 8
    runpod = rows[keys.index(("H100-SXM", "runpod", False))]
    assert (runpod["instance_type"], runpod["price_usd_per_gpu_hour"]) == ("8x H100 SXM", 2.59)
    assert runpod["offers"] == 2
    assert runpod["last_seen_at"] == T0.isoformat()
    # the 1x changed price at T0, so the 8x's price is older than the 1x's
    assert runpod["price_since"] == (T0 - timedelta(days=2)).isoformat()
    assert runpod["price_age_hours"] == pytest.approx(
        (datetime.now(UTC) - T0).total_seconds() / 3600, abs=0.1
    )


@pytest.mark.parametrize(
    ("args", "check", "whole_groups"),
    [
        (["--spot"], lambda r: r["is_spot"], True),
        (["--on-demand"], lambda r: not r["is_spot"], True),
        (["--provider", "aws,AZURE"], lambda r: r["provider"] in {"aws", "azure"}, True),
        (["--gpu", "H100-PCIe,RTX4090"], lambda r: r["gpu_name"] in {"H100-PCIe", "RTX4090"}, True),
        (["--min-vram", "90"], lambda r: r["vram_gb"] >= 90, True),
        (["--region", "us-*"], lambda r: r["region"].startswith("us-"), False),
        (["--max-price", "2"], lambda r: r["price_usd_per_gpu_hour"] <= 2, False),
    ],
)
def test_each_prices_filter(home: Path, args: list[str], check, whole_groups: bool) -> None:
    every = _json("prices")
    rows = _json("prices", *args)
    assert rows and all(check(r) for r in rows)
    if whole_groups:  # a filter on what a GPU × provider × kind group shares keeps or drops it whole

        def timeless(row: dict) -> dict:  # the age moves with the clock between the two calls
            return {k: v for k, v in row.items() if k != "price_age_hours"}

        assert [timeless(r) for r in every if check(r)] == [timeless(r) for r in rows]
    else:  # one on single offers changes the groups (aws p5: us-east-1 only, 1 offer not 2)
        assert len(rows) < len(every) and all(r["offers"] == 1 for r in rows)


def test_prices_csv(home: Path) -> None:
    result = runner.invoke(app, ["prices", "--gpu", "RTX4090", "--csv"])
    assert result.exit_code == 0, result.output
    (row,) = csv.DictReader(io.StringIO(result.stdout))
    assert (row["provider"], row["price_usd_per_gpu_hour"], row["gpu_count"]) == ("runpod", "0.69", "1.0")
    assert row["last_seen_at"].startswith(f"{T0:%Y-%m-%d}")


def test_prices_on_sample_data_say_so(sample_home: Path) -> None:
    result = runner.invoke(app, ["prices", "--gpu", "GH200"])
    assert result.exit_code == 0, result.output
    assert "sample data" in result.stderr
    assert f"sample prices (replay cassette, not live) fetched {STAMP}" in result.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--gpu", "H1OO"], "did you mean H100"),
        (["--provider", "nope"], "known: "),
        (["--gpu", "H100", "--max-price", "0.1"], "no current offers match --gpu H100 --max-price 0.1"),
    ],
)
def test_prices_bad_or_empty_filters_are_one_line(home: Path, args: list[str], words: str) -> None:
    result = runner.invoke(app, ["prices", *args])
    assert result.exit_code == 1 and words in _one_error_line(result)


def test_prices_json_and_csv_are_exclusive(home: Path) -> None:
    assert runner.invoke(app, ["prices", "--json", "--csv"]).exit_code == 2


def test_prices_without_a_warehouse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, ["prices"])
    assert result.exit_code == 1 and "gpucost refresh" in _one_error_line(result)


# --- history -----------------------------------------------------------------------------------


def test_history_table_and_chart(home: Path) -> None:
    result = runner.invoke(app, ["history", "--gpu", "H100-SXM", "--provider", "runpod", "--on-demand"])
    assert result.exit_code == 0, result.output
    (line,) = [row for row in result.stdout.splitlines() if row.startswith("H100-SXM")]
    # 1x at 2.49 from T0−2d; at T0 it went to 2.69 and the 8x at 2.59 arrived: min 2.49 → 2.59
    first, now, low, high, changes, chart = line.split()[2:8]
    assert (first, now, low, high, changes) == ("2.49", "2.59", "2.49", "2.59", "1")
    assert len(chart) == 24 and chart.startswith("·") and chart.endswith("█") and "▁" in chart
    assert f"live prices fetched between {T0 - timedelta(days=2):%Y-%m-%d %H:%M} and {STAMP}" in result.stdout


def test_history_json_lists_the_intervals(home: Path) -> None:
    rows = _json("history", "--gpu", "H100-SXM", "--provider", "runpod", "--on-demand")
    one_x = [r for r in rows if r["instance_type"] == "1x H100 SXM"]
    assert [(r["price_usd_per_gpu_hour"], r["valid_to"]) for r in one_x] == [
        (2.49, T0.isoformat()),
        (2.69, None),
    ]


def test_history_since_narrows_the_window(home: Path) -> None:
    rows = _json("history", "--gpu", "H100-SXM", "--provider", "runpod", "--on-demand", "--since", "5d")
    assert sorted(r["price_usd_per_gpu_hour"] for r in rows) == [2.59, 2.69]
    result = runner.invoke(app, ["history", "--gpu", "GH200", "--provider", "aws"])
    assert result.exit_code == 1 and "try a longer --since" in _one_error_line(result)


@pytest.mark.parametrize(
    ("args", "words", "code"),
    # a malformed --since is a usage error (2); a GPU name no offer has is an answer's refusal (1)
    [(["--since", "soon"], "--since", 2), (["--gpu", "X9"], "--gpu", 1)],
)
def test_history_bad_input_is_one_line(home: Path, args: list[str], words: str, code: int) -> None:
    result = runner.invoke(app, ["history", "--gpu", "H100", *args])
    assert result.exit_code == code and words in _one_error_line(result)


def test_history_needs_a_gpu(home: Path) -> None:
    assert runner.invoke(app, ["history"]).exit_code == 2


# --- estimate: filters, frontier, price age and source ----------------------------------------

ESTIMATE = ["estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--tokens", "50M"]


def test_estimate_filters_offers(home: Path) -> None:
    rows = _json(*ESTIMATE, "--offer-gpu", "H100", "--provider", "runpod", "--spot")
    assert rows and {(r["provider"], r["gpu_name"]) for r in rows} == {
        ("runpod", "H100-SXM"),
        ("runpod", "H100-PCIe"),
    }
    spot = _json(*ESTIMATE, "--spot-only", "--region", "us-*")
    assert [(r["provider"], r["instance_type"], r["is_spot"]) for r in spot] == [("aws", "p5.48xlarge", True)]
    assert {r["gpu_name"] for r in _json(*ESTIMATE, "--min-vram", "90")} == {"H100-NVL", "GH200"}


def test_estimate_folds_offers_off_the_frontier(home: Path) -> None:
    args = [*ESTIMATE, "--offer-gpu", "H100-SXM", "--provider", "runpod,aws"]
    kept = _json(*args)
    every = _json(*args, "--all")
    # runpod on-demand: the 8x ($2.59/GPU-h) is faster and cheaper than the 1x ($2.69); aws:
    # eu-west-1 is the same instance as us-east-1, dearer
    assert {(r["provider"], r["instance_type"], r["region"]) for r in kept} == {
        ("runpod", "8x H100 SXM", "global"),
        ("aws", "p5.48xlarge", "us-east-1"),
    }
    folded = {(r["instance_type"], r["region"]) for r in every if not r["on_frontier"]}
    assert folded == {("1x H100 SXM", "global"), ("p5.48xlarge", "eu-west-1")}
    words = " ".join(runner.invoke(app, args).stdout.split())  # the caption wraps
    assert "2 offer(s) neither faster nor cheaper than another" in words
    assert "folded (--all shows them)" in words
    assert "(folded)" in runner.invoke(app, [*args, "--all"]).stdout


def test_estimate_shows_price_source_age_and_the_spot_band(home: Path) -> None:
    result = runner.invoke(app, [*ESTIMATE, "--offer-gpu", "H100-SXM", "--spot-only"])
    assert result.exit_code == 0, result.output
    aws = next(line for line in result.stdout.splitlines() if line.lstrip().startswith("aws"))
    assert "market 10d" in aws and "5%–10%/mo" in aws
    nebius = next(line for line in result.stdout.splitlines() if line.lstrip().startswith("nebius"))
    assert "list from 10d" in nebius and "~0.0068/h" in nebius  # the market default, per hour
    assert "interrupt.: the spot interruption rate assumed" in " ".join(result.stdout.split())
    assert f"live prices fetched {STAMP}" in result.stdout
    row = next(
        r for r in _json(*ESTIMATE, "--offer-gpu", "H100-SXM", "--spot-only") if r["provider"] == "aws"
    )
    assert (row["interruption_rate_min"], row["interruption_source"]) == (0.05, "spot_advisor_band")
    assert row["last_seen_at"].startswith(f"{T0:%Y-%m-%d}")


def test_estimate_on_a_narrow_terminal_puts_price_details_under_the_offer(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cli_finetune.console, "width", 80)
    result = runner.invoke(app, [*ESTIMATE, "--offer-gpu", "H100-SXM", "--provider", "aws", "--spot-only"])
    assert result.exit_code == 0, result.output
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    assert "5%–10%/mo" in result.stdout and "interrupt." in result.stdout


def test_estimate_filters_do_not_mix_with_stated_hardware(home: Path) -> None:
    result = runner.invoke(app, [*ESTIMATE, "--gpu", "H100-SXM", "--provider", "aws"])
    assert result.exit_code == 1 and "--offer-gpu is the GPU filter" in _one_error_line(result)


def test_estimate_with_filters_matching_nothing(home: Path) -> None:
    result = runner.invoke(app, [*ESTIMATE, "--offer-gpu", "RTX4090", "--provider", "aws"])
    assert result.exit_code == 1
    # the filter named as estimate spells it (its --gpu states hardware)
    assert "no current on-demand offers match --offer-gpu RTX4090 --provider aws" in _one_error_line(result)


# --- help and formatting -------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["prices", "history", "estimate"])
def test_help_fits_80_columns(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0
    assert max(len(line) for line in result.output.splitlines()) <= 80


@pytest.mark.parametrize(
    ("hours", "text"),
    [(None, ""), (0.001, "now"), (0.5, "30m"), (3, "3h"), (47, "47h"), (50, "2d"), (24 * 45, "45d"),
     (24 * 90, "3mo")],
)  # fmt: skip
def test_format_age(hours: float | None, text: str) -> None:
    assert format_age(hours) == text


def test_cell_formats() -> None:
    prices = [price_text(v, False) for v in (2.5, 0.5, 0.0712)] + [price_text(0.79, True)]
    assert prices == ["2.50", "0.50", "0.0712", "≥0.79"]
    assert (source_text("list", None), source_text("market", "weighted_average")) == ("list", "market w.avg")
    assert (gpus_text(8, "NVSwitch"), gpus_text(1, "none"), gpus_text(0.5, None)) == (
        "8×NVSwitch",
        "1×",
        "0.5×",
    )


def test_sparkline_scales_each_series_to_its_own_range() -> None:
    assert sparkline([1.0, 2.0, 3.0]) == "▁▅█"
    assert sparkline([None, 2.0, 2.0]) == "·▄▄"  # no offer, then a flat price
    assert sparkline([None, None]) == "··"


# --- available and price_covers (issue 18 item 3) ---------------------------------------------


@pytest.fixture
def stock_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """RunPod's H100 SXM out of stock (available false) under its PCIe, and Daytona's GPU-only
    H100 rate (providers.csv: price_covers 'gpu')."""
    from tests.factories import make_offer
    from tests.test_answers_prices import _runpod

    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    con = open_warehouse(tmp_path / "warehouse.duckdb")
    runpod = [
        _runpod("1x H100 SXM", "NVIDIA H100 80GB HBM3", 1, 1.99, available=False),
        _runpod("1x H100 PCIe", "H100 PCIe", 1, 2.39, available=True),
    ]
    load_offers(con, "r1", "runpod", runpod, now=T0)
    daytona = make_offer("1x H100", 3.95, "daytona", region="global", gpu_name_raw="H100", gpu_count=1)
    load_offers(con, "r1", "daytona", [daytona], now=T0)
    from warehouse.marts import build_marts

    build_marts(con)
    con.execute(RUN, [T0, "live"])
    con.close()
    return tmp_path


def test_prices_leave_out_unavailable_offers_unless_asked(stock_home: Path) -> None:
    rows = {(r["provider"], r["gpu_name"]): r for r in _json("prices")}
    assert ("runpod", "H100-SXM") not in rows and rows[("runpod", "H100-PCIe")]["available"] is True
    assert rows[("daytona", "H100-SXM")]["price_covers"] == "gpu"
    assert rows[("runpod", "H100-PCIe")]["price_covers"] is None  # runpod's basis is not stated yet
    every = {(r["provider"], r["gpu_name"]): r for r in _json("prices", "--include-unavailable")}
    assert every[("runpod", "H100-SXM")]["available"] is False
    table = runner.invoke(app, ["prices", "--include-unavailable"]).stdout
    assert "runpod ✗" in table and "3.95†" in table  # marked, with the legend in the caption
    assert "the price is for the GPU alone" in " ".join(table.split())


def test_estimate_leaves_out_unavailable_offers_unless_asked(stock_home: Path) -> None:
    shown = {(r["provider"], r["instance_type"]) for r in _json(*ESTIMATE, "--all")}
    assert ("runpod", "1x H100 SXM") not in shown and ("runpod", "1x H100 PCIe") in shown
    every = _json(*ESTIMATE, "--all", "--include-unavailable")
    marked = {r["instance_type"]: r["available"] for r in every if r["provider"] == "runpod"}
    assert marked == {"1x H100 SXM": False, "1x H100 PCIe": True}
    assert "✗" in runner.invoke(app, [*ESTIMATE, "--include-unavailable"]).stdout
