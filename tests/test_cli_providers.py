"""`gpucost providers`: the facts table and its JSON, read from the shipped seeds."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flows.cli import app
from flows.cli_providers import DASH, billing_text

runner = CliRunner()
SEED = Path(__file__).resolve().parents[1] / "warehouse" / "seeds" / "provider_storage.csv"


def _seed() -> dict[str, dict[str, str]]:
    with SEED.open(newline="", encoding="utf-8") as handle:
        return {row["provider"]: row for row in csv.DictReader(handle)}


@pytest.fixture
def empty_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))  # no warehouse at all
    return tmp_path


def test_json_has_one_record_per_provider_with_its_sources(empty_home: Path) -> None:
    result = runner.invoke(app, ["providers", "--json"])
    assert result.exit_code == 0, result.output
    records = {r["provider"]: r for r in json.loads(result.output)}
    seed = _seed()
    assert set(records) == set(seed)
    for provider, record in records.items():
        assert record["source"] == seed[provider]["source"]
        assert record["checked"] == seed[provider]["checked"]
    runpod = records["runpod"]
    assert runpod["volume_price_per_gb_month"] == 0.07 and runpod["egress_price_per_gb"] == 0.0
    assert runpod["stopped_instance_bills"] is False and runpod["storage_persists_on_stop"] is True
    assert runpod["billing_granularity"] == "per_second"
    assert records["scaleway"]["currency"] == "EUR"
    assert not list(empty_home.iterdir())  # answered from the seeds: no warehouse was created


def test_json_says_unpublished_where_the_provider_states_nothing(empty_home: Path) -> None:
    records = {r["provider"]: r for r in json.loads(runner.invoke(app, ["providers", "--json"]).output)}
    assert records["aws"]["egress_price_per_gb"] == "unpublished"
    assert records["vast"]["volume_price_per_gb_month"] == "unpublished"
    assert records["fluidstack"]["storage_persists_on_stop"] == "unpublished"
    # Lambda has no stop state: its local disk goes at terminate and an idle kept instance bills
    assert records["lambdalabs"]["storage_persists_on_stop"] is False
    assert records["lambdalabs"]["stopped_instance_bills"] is True
    assert records["verda"]["notes"].startswith("The pricing and billing page")


def test_table_shows_each_provider_with_its_rules_and_sources(
    empty_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    result = runner.invoke(app, ["providers"])
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.output.splitlines()]
    seed = _seed()
    for provider, row in seed.items():
        assert any(line.strip().startswith(provider) for line in lines), provider
        assert f"  {provider}: {row['source']}" in result.output
    vultr = next(line for line in lines if line.startswith("vultr "))
    # per hour, one-hour minimum (providers.csv); stopped servers keep billing; 0.01 USD/GB egress
    assert "1 h, min 3600 s" in vultr and "0.01 USD" in vultr and "yes" in vultr
    aws = next(line for line in lines if line.startswith("aws "))
    assert "1 s, min 60 s" in aws and DASH in aws and "2026-12-02" in aws
    runpod = next(line for line in lines if line.startswith("runpod "))
    assert "0.07 USD" in runpod and "network volume" in runpod


def test_help_says_what_it_shows() -> None:
    result = runner.invoke(app, ["providers", "--help"])
    assert result.exit_code == 0
    assert "unpublished" in result.output and "--json" in result.output


@pytest.mark.parametrize(
    ("granularity", "minimum", "expected"),
    [
        ("per_second", 60.0, "1 s, min 60 s"),
        ("per_hour", 3600.0, "1 h, min 3600 s"),
        ("per_minute", "unpublished", "1 min"),
        ("not confirmed", "unpublished", "not confirmed"),
        ("unpublished", "unpublished", DASH),
    ],
)
def test_billing_text(granularity: str, minimum: object, expected: str) -> None:
    assert billing_text(granularity, minimum) == expected
