"""warehouse/seeds/provider_storage.csv: one row of storage, egress and billing facts per provider.

Conventions the seed keeps (and this file checks):

* One row per provider of warehouse/seeds/providers.csv, in the columns below, nothing else.
* A fact is empty when the provider does not publish it (or we could not read it): never guessed.
  The row's notes then say so ("unpublished"), or why the fact has no single value (a
  marketplace's host-set prices, a range by data center).
* Booleans are `true`, `false` or empty. Prices are non-negative, in the row's `currency` (USD or
  EUR) as published, without FX.
* Per GB means 10^9 bytes. A price published per GiB is converted to per GB (÷ 1.073741824) and
  the notes keep the published figure as "<column>: published <price> <currency> per GiB".
* Rates are GB/s (10^9 bytes per second): a rate published in MiB/s is converted (× 2^20 / 10^9)
  and the notes keep it as "<column>: published <rate> MiB/s".
* `source` is one or more https URLs separated by " ; "; `checked` is the ISO date they were read.
"""

from __future__ import annotations

import csv
import re
from datetime import date
from pathlib import Path

import duckdb
import pytest

from answers import AnswerError
from answers.providers import FACT_COLUMNS, UNPUBLISHED, provider_facts, seeded_provider_facts
from warehouse.db import connect, load_seeds, migrate

SEEDS = Path(__file__).resolve().parents[1] / "warehouse" / "seeds"
COLUMNS = [
    "provider", "storage_persists_on_stop", "volume_kind", "volume_price_per_gb_month",
    "egress_price_per_gb", "egress_free_gb_per_month", "ingress_price_per_gb",
    "stopped_instance_bills", "boot_minutes", "internet_gbits_per_s", "disk_write_gbytes_per_s",
    "currency", "source", "checked", "notes",
]  # fmt: skip
NUMERIC = [
    "volume_price_per_gb_month", "egress_price_per_gb", "egress_free_gb_per_month",
    "ingress_price_per_gb", "boot_minutes", "internet_gbits_per_s", "disk_write_gbytes_per_s",
]  # fmt: skip
BOOLEAN = ["storage_persists_on_stop", "stopped_instance_bills"]
FACTS = [*BOOLEAN, "volume_kind", *NUMERIC]
PRICES = ["volume_price_per_gb_month", "egress_price_per_gb", "ingress_price_per_gb"]
GIB_IN_GB = 1.073741824  # 2^30 / 10^9
PUBLISHED_PER_GIB = re.compile(r"(\w+): published ([0-9.]+) (USD|EUR) per GiB")
PUBLISHED_MIB_S = re.compile(r"(\w+): published ([0-9.]+) MiB/s")
# host-set prices: the bill reads provider_data medians for these, never this seed
MARKETPLACES = {"vast", "tensordock", "lium", "akash"}


def _read(name: str) -> list[dict[str, str]]:
    with (SEEDS / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return _read("provider_storage.csv")


@pytest.fixture(scope="module")
def by_provider(rows: list[dict[str, str]]) -> dict[str, dict[str, str]]:
    return {row["provider"]: row for row in rows}


def test_the_columns_are_the_documented_ones_in_order() -> None:
    with (SEEDS / "provider_storage.csv").open(encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == COLUMNS


def test_every_provider_has_exactly_one_row(rows: list[dict[str, str]]) -> None:
    providers = [row["provider"] for row in _read("providers.csv")]
    seeded = [row["provider"] for row in rows]
    assert sorted(seeded) == sorted(providers)
    assert len(seeded) == len(set(seeded))
    # cudo is retired yet its archive still re-parses, so its facts stay
    assert "cudo" in seeded


def test_every_row_with_a_fact_has_a_source_url_and_a_checked_date(rows: list[dict[str, str]]) -> None:
    for row in rows:
        if not any(row[column] for column in FACTS):
            continue
        urls = row["source"].split(" ; ")
        assert all(re.fullmatch(r"https://\S+", url) for url in urls), row["provider"]
        checked = date.fromisoformat(row["checked"])
        assert date(2020, 1, 1) <= checked <= date.today(), row["provider"]


def test_every_row_says_where_it_comes_from(rows: list[dict[str, str]]) -> None:
    # even a row of empty facts names the page that was read and when, so a reader can recheck it
    for row in rows:
        assert row["source"].startswith("https://"), row["provider"]
        assert date.fromisoformat(row["checked"]) <= date.today()
        assert row["notes"].strip(), row["provider"]


def test_numeric_columns_are_empty_or_non_negative_numbers(rows: list[dict[str, str]]) -> None:
    for row in rows:
        for column in NUMERIC:
            if row[column]:
                assert float(row[column]) >= 0, (row["provider"], column)


def test_booleans_are_true_false_or_empty(rows: list[dict[str, str]]) -> None:
    for row in rows:
        for column in BOOLEAN:
            assert row[column] in {"true", "false", ""}, (row["provider"], column)


def test_currency_is_as_published(by_provider: dict[str, dict[str, str]]) -> None:
    assert {row["currency"] for row in by_provider.values()} <= {"USD", "EUR"}
    # both publish euro price lists (providers.md); their rows are in EUR, never converted
    assert by_provider["scaleway"]["currency"] == "EUR"
    assert by_provider["ovhcloud"]["currency"] == "EUR"


def test_empty_prices_say_why(rows: list[dict[str, str]]) -> None:
    for row in rows:
        if all(row[column] for column in PRICES):
            continue
        notes = row["notes"].lower()
        assert any(word in notes for word in ("unpublished", "host-set", "empty")), row["provider"]


def test_marketplace_prices_stay_empty(by_provider: dict[str, dict[str, str]]) -> None:
    for provider in MARKETPLACES:
        row = by_provider[provider]
        assert not any(row[column] for column in PRICES), provider
        assert "host" in row["notes"].lower() or "provider" in row["notes"].lower()


def test_per_gib_prices_are_converted_to_per_gb(rows: list[dict[str, str]]) -> None:
    converted = 0
    for row in rows:
        for column, published, currency in PUBLISHED_PER_GIB.findall(row["notes"]):
            assert column in NUMERIC, (row["provider"], column)
            assert currency == row["currency"]
            assert float(row[column]) == pytest.approx(float(published) / GIB_IN_GB, rel=1e-7)
            converted += 1
    assert converted >= 2  # digitalocean's egress and coreweave's file storage are published per GiB


def test_mib_per_second_rates_are_converted_to_gb_per_second(rows: list[dict[str, str]]) -> None:
    converted = 0
    for row in rows:
        for column, published in PUBLISHED_MIB_S.findall(row["notes"]):
            assert column.endswith("_gbytes_per_s"), (row["provider"], column)
            assert float(row[column]) == pytest.approx(float(published) * 2**20 / 1e9, rel=1e-7)
            converted += 1
    assert converted >= 1  # vultr's NVMe block storage target is published in MiB/s


def test_published_figures_read_back(by_provider: dict[str, dict[str, str]]) -> None:
    # a few figures as the providers' pages state them (docs.runpod.io, docs.vultr.com,
    # docs.digitalocean.com, docs.coreweave.com, docs.lambda.ai)
    runpod = by_provider["runpod"]
    assert float(runpod["volume_price_per_gb_month"]) == 0.07
    assert float(runpod["egress_price_per_gb"]) == 0 and float(runpod["ingress_price_per_gb"]) == 0
    assert runpod["stopped_instance_bills"] == "false"
    vultr = by_provider["vultr"]
    assert float(vultr["egress_price_per_gb"]) == 0.01 and vultr["stopped_instance_bills"] == "true"
    assert float(by_provider["digitalocean"]["egress_price_per_gb"]) == pytest.approx(0.01 / GIB_IN_GB)
    assert float(by_provider["coreweave"]["egress_price_per_gb"]) == 0
    lambdalabs = by_provider["lambdalabs"]
    assert lambdalabs["volume_price_per_gb_month"] == ""  # the doc's $0.20/GiB is only an example
    assert float(lambdalabs["egress_price_per_gb"]) == 0


# --- the loaded table -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    yield con
    con.close()


def test_the_loaded_table_reads_with_try_cast(con: duckdb.DuckDBPyConnection) -> None:
    # how other modules read it: auto_detect types an all-empty column as VARCHAR, so every
    # numeric column goes through try_cast(... as double), every boolean through try_cast(... as boolean)
    casts = ", ".join(
        [f"try_cast({c} as double) as {c}" for c in NUMERIC]
        + [f"try_cast({c} as boolean) as {c}" for c in BOOLEAN]
        + ["try_cast(checked as date) as checked"]
    )
    rel = con.sql(f"select provider, currency, {casts} from core.provider_storage")
    records = {row[0]: dict(zip(rel.columns, row, strict=True)) for row in rel.fetchall()}
    assert len(records) == len(_read("providers.csv"))
    assert records["runpod"]["volume_price_per_gb_month"] == 0.07
    assert records["runpod"]["stopped_instance_bills"] is False
    assert records["hyperstack"]["stopped_instance_bills"] is True
    assert records["aws"]["volume_price_per_gb_month"] is None
    assert records["aws"]["boot_minutes"] is None
    assert all(isinstance(r["checked"], date) for r in records.values())


def test_provider_facts_marks_what_is_unpublished(con: duckdb.DuckDBPyConnection) -> None:
    columns, rows = provider_facts(con)
    facts = {row[0]: dict(zip(columns, row, strict=True)) for row in rows}
    assert set(FACT_COLUMNS) <= set(columns)
    assert len(facts) == len(_read("providers.csv"))
    assert facts["aws"]["volume_price_per_gb_month"] == UNPUBLISHED
    assert facts["aws"]["storage_persists_on_stop"] is True
    assert facts["runpod"]["egress_price_per_gb"] == 0.0
    # from providers.csv: Vultr bills by the hour with a one-hour minimum
    assert facts["vultr"]["billing_granularity"] == "per_hour"
    assert facts["vultr"]["minimum_charge_seconds"] == 3600.0
    assert facts["runpod"]["minimum_charge_seconds"] == UNPUBLISHED
    # notes and sources are text, not facts: present or None, never "unpublished"
    assert all(f["source"] and f["source"] != UNPUBLISHED for f in facts.values())
    for record in facts.values():
        for name in FACT_COLUMNS:
            assert record[name] is not None, (record["provider"], name)


def test_the_seeded_answer_needs_no_warehouse() -> None:
    columns, rows = seeded_provider_facts()
    assert columns[0] == "provider" and len(rows) == len(_read("providers.csv"))
    assert [row[0] for row in rows] == sorted(row[0] for row in rows)


def test_a_warehouse_without_the_seed_gets_a_clear_error() -> None:
    con = connect(":memory:")
    try:
        migrate(con)  # schemas, but no seeds loaded
        with pytest.raises(AnswerError, match="gpucost refresh"):
            provider_facts(con)
    finally:
        con.close()
