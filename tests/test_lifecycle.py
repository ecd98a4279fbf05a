"""Provider lifecycle (warehouse/lifecycle.py): a retired provider leaves the defaults and its offers
close with the reason; a provider failing for longer than GPUCOST_STALE_AFTER_HOURS has its offers
marked stale, and stale offers leave prices, estimate, the page, the feeds and the cost mart unless
asked for; a run whose only failures are stale providers does not fail."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from answers.prices import OfferFilters, current_offers
from answers.report import offers_data
from connectors import CONNECTORS
from tests.factories import make_offer
from warehouse import finetune_marts as finetune
from warehouse.db import Settings, connect, load_seeds, migrate
from warehouse.export import write_feeds
from warehouse.lifecycle import close_retired, closed_as_retired, provider_health, retired, stale_providers
from warehouse.load import load_offers
from warehouse.marts import build_marts
from warehouse.pipeline import ProviderOutcome, default_providers, select_connectors

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
RUNPOD_H100 = {
    "provider": "runpod",
    "gpu_name_raw": "NVIDIA H100 80GB HBM3",
    "gpu_count": 1.0,
    "gpu_memory_gb_raw": 80.0,
}


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    return con


def run(con, run_id: str, provider: str, status: str, at: datetime, error: str | None = None) -> None:
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at, finished_at, error) "
        "values (?, ?, ?, ?, ?, ?)",
        [run_id, provider, status, at, at, error],
    )


def two_providers(con) -> None:
    """aws and runpod each load one H100 offer at T0 (both good runs)."""
    load_offers(con, "r0", "aws", [make_offer("p5.48xlarge", 55.04)], now=T0)
    load_offers(con, "r0", "runpod", [make_offer("NVIDIA H100 80GB HBM3", 2.99, **RUNPOD_H100)], now=T0)
    run(con, "r0", "aws", "ok", T0)
    run(con, "r0", "runpod", "ok", T0)


# --- retired ------------------------------------------------------------------------------------


def test_cudo_is_retired_as_data_with_a_date_reason_and_source():
    cudo = retired()["cudo"]
    assert cudo.since.isoformat() == "2026-03-31"
    assert cudo.source.startswith("https://github.com/dstackai/dstack/pull/4018")
    # the module stays registered: archived Cudo responses still re-parse (warehouse/archive.py)
    assert "cudo" in CONNECTORS


def test_a_retired_provider_leaves_the_defaults_and_naming_it_says_why_in_one_line():
    assert "cudo" not in default_providers()
    assert [c.name for c in select_connectors(None)] == default_providers()
    assert len(default_providers()) == len(CONNECTORS) - len(retired())
    with pytest.raises(ValueError) as caught:
        select_connectors(["aws", "cudo"])
    message = str(caught.value)
    assert "\n" not in message and "retired since 2026-03-31" in message and "--providers" in message
    with pytest.raises(ValueError, match="choose from azure, ") as unknown:
        select_connectors(["nope"])
    assert "cudo" not in str(unknown.value)  # the valid choices are the active ones


def test_the_scheduled_deployments_name_no_retired_provider():
    import yaml

    from tests.conftest import REPO

    deployments = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())["deployments"]
    named = {p for d in deployments for p in (d.get("parameters") or {}).get("providers") or []}
    assert named and not named & set(retired())


def test_retired_offers_are_never_current_and_the_next_run_closes_them_with_the_reason(con):
    load_offers(
        con, "r0", "cudo", [make_offer("epyc-milan-rtx-a6000", 0.79, provider="cudo", gpu_count=1.0)], now=T0
    )
    two_providers(con)
    build_marts(con, now=T0)
    # before any run closes them, the marts already leave them out
    assert con.execute("select count(*) from marts.gpu_offers where provider = 'cudo'").fetchall() == [(0,)]
    closed = close_retired(con, "r1", T0 + timedelta(hours=1), retired())
    assert closed == {"cudo": 1}
    ((valid_to, by, reason),) = con.execute(
        "select valid_to, closed_by_run_id, closed_reason from core.offer_prices where provider = 'cudo'"
    ).fetchall()
    assert (valid_to, by) == (T0 + timedelta(hours=1), "r1") and reason.startswith("retired: Cudo Compute")
    assert closed_as_retired(con) == {"cudo": 1}
    # a second run finds nothing left to close; other providers are untouched
    assert close_retired(con, "r2", T0 + timedelta(hours=2), retired()) == {}
    assert con.execute("select count(*) from core.offer_prices where valid_to is null").fetchall() == [(2,)]


# --- stale --------------------------------------------------------------------------------------


def test_stale_after_hours_is_a_setting_with_a_48_hour_default(monkeypatch):
    assert Settings().stale_after_hours == 48
    monkeypatch.setenv("GPUCOST_STALE_AFTER_HOURS", "6")
    assert Settings().stale_after_hours == 6
    # zero or less would make every failing provider stale at once
    from warehouse.settings import SettingsError

    monkeypatch.setenv("GPUCOST_STALE_AFTER_HOURS", "0")
    with pytest.raises(SettingsError, match="GPUCOST_STALE_AFTER_HOURS='0': Input should be greater than 0"):
        Settings()


def test_a_provider_is_stale_once_it_has_failed_longer_than_the_setting_since_its_last_good_run(con):
    two_providers(con)
    run(con, "r1", "aws", "failed", T0 + timedelta(hours=1), "Unreachable: first")
    run(con, "r2", "aws", "rejected", T0 + timedelta(hours=30), "the scope came back empty")
    # runpod: degraded still loaded its healthy scopes, so it is good, not failing
    run(con, "r1", "runpod", "degraded", T0 + timedelta(hours=1))
    at_47 = T0 + timedelta(hours=48)  # 47 h after the first failure
    (aws,) = provider_health(con, at_47, 48).to_dicts()
    assert (aws["provider"], aws["provider_state"], aws["failed_runs"]) == ("aws", "active", 2)
    assert aws["provider_failing_since"] == T0 + timedelta(hours=1) and aws["last_good_at"] == T0
    assert aws["last_error"] == "the scope came back empty"  # the newest failure's
    assert stale_providers(con, at_47, 48) == {}
    assert stale_providers(con, at_47 + timedelta(hours=2), 48) == {"aws": T0 + timedelta(hours=1)}
    # one good run ends it
    run(con, "r3", "aws", "ok", T0 + timedelta(hours=50))
    assert provider_health(con, T0 + timedelta(hours=51), 48).is_empty()


def stale_aws(con) -> None:
    """aws has failed for 72 h, runpod is healthy; marts built 72 h after the first failure."""
    two_providers(con)
    run(con, "r1", "aws", "failed", T0 + timedelta(hours=1), "HostNotFound: no DNS")
    build_marts(
        con, now=T0 + timedelta(hours=73), stale_after_hours=48, finetune=finetune.build_finetune_marts
    )


def test_the_mart_marks_a_stale_providers_offers(con):
    stale_aws(con)
    rows = con.execute(
        "select provider, provider_state, provider_failing_since, is_stale from marts.gpu_offers order by 1"
    ).fetchall()
    assert rows == [
        ("aws", "stale", T0 + timedelta(hours=1), True),
        ("runpod", "active", None, False),
    ]


def test_stale_offers_leave_prices_and_estimate_unless_include_stale(con):
    stale_aws(con)
    now = T0 + timedelta(hours=73)
    assert set(current_offers(con, OfferFilters(), now)["provider"]) == {"runpod"}
    shown = current_offers(con, OfferFilters(include_stale=True), now)
    assert set(shown["provider"]) == {"aws", "runpod"}
    # visible with their age
    aws = shown.filter(shown["provider"] == "aws").to_dicts()[0]
    assert aws["is_stale"] and aws["price_age_hours"] == pytest.approx(73)
    assert OfferFilters(include_stale=True).describe() == "--include-stale"


def test_stale_offers_leave_the_feeds_the_page_and_the_cost_mart(con, tmp_path: Path):
    stale_aws(con)
    fresh = dict((p.name, n) for p, n in write_feeds(con, tmp_path / "a", ("csv",)))
    every = dict((p.name, n) for p, n in write_feeds(con, tmp_path / "b", ("csv",), include_stale=True))
    assert (fresh["gpu_offers.v1.csv"], every["gpu_offers.v1.csv"]) == (1, 2)
    assert (fresh["gpu_offers.v2.csv"], every["gpu_offers.v2.csv"]) == (1, 2)
    page = offers_data(con)["offers"]
    providers = {row[page["columns"].index("provider")] for row in page["rows"]}
    assert providers == {"runpod"}
    every_page = offers_data(con, include_stale=True)["offers"]
    assert {row[every_page["columns"].index("provider")] for row in every_page["rows"]} == {"aws", "runpod"}
    assert con.execute("select distinct provider from marts.finetune_offers").fetchall() == [("runpod",)]


# --- what a run's outcome means -----------------------------------------------------------------


def outcome(provider: str, status: str, cause: str | None = None) -> ProviderOutcome:
    return ProviderOutcome(provider, status, 0, 0, 0, 0, 0, 0, 0.0, None, None, cause=cause)


def summary(outcomes: list[ProviderOutcome], stale: dict[str, datetime], status: str):
    from flows.orchestration import RefreshSummary

    return RefreshSummary("run", status, "live", outcomes, stale=stale)


def test_a_stale_provider_failing_again_does_not_fail_the_run_but_a_fresh_failure_does():
    from flows.refresh import final_state

    only_stale = summary([outcome("aws", "failed"), outcome("runpod", "ok")], {"aws": T0}, "partial")
    assert only_stale.unclean == [] and [o.provider for o in only_stale.still_failing] == ["aws"]
    state = final_state(only_stale)
    assert state.is_completed() and state.name == "Completed" and "stale" in state.message
    fresh = summary([outcome("aws", "failed"), outcome("runpod", "failed")], {"aws": T0}, "failed")
    assert [o.provider for o in fresh.unclean] == ["runpod"]
    assert final_state(fresh).is_failed()
    nothing_but_stale = summary([outcome("aws", "failed")], {"aws": T0}, "failed")
    assert final_state(nothing_but_stale).is_completed()


def test_a_run_is_offline_only_when_every_provider_that_ran_failed_on_dns():
    assert summary([outcome("aws", "failed", "dns"), outcome("gcp", "skipped")], {}, "failed").offline
    assert not summary([outcome("aws", "failed", "dns"), outcome("oci", "ok")], {}, "partial").offline
    assert not summary([outcome("aws", "failed", "unreachable")], {}, "failed").offline
    assert not summary([], {}, "ok").offline


# --- the commands -------------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "feeds"))
    monkeypatch.setenv("GPUCOST_HTTP_BACKOFF_SECONDS", "0.001")
    monkeypatch.delenv("PREFECT_API_URL", raising=False)  # the refresh runs in-process
    return tmp_path / "data"


def replay_warehouse_with_history(home: Path) -> datetime:
    """The replay warehouse: cudo still has an open offer, vultr has failed for 72 h since its last
    good run, runpod is healthy. Returns the time of vultr's first failure."""
    from warehouse.db import open_warehouse

    now = datetime.now(UTC)
    failing_since = now - timedelta(hours=72)
    con = open_warehouse(home / "replay" / "warehouse.duckdb")
    con.execute(
        "insert into ops.runs (run_id, started_at, finished_at, status, mode, providers) "
        "values ('r0', ?, ?, 'partial', 'replay', ['vultr'])",
        [failing_since, failing_since],
    )
    load_offers(con, "r0", "cudo", [make_offer("a6000", 0.79, provider="cudo", gpu_count=1.0)], now=now)
    load_offers(con, "r0", "runpod", [make_offer("NVIDIA H100 80GB HBM3", 2.99, **RUNPOD_H100)], now=now)
    load_offers(
        con,
        "r0",
        "vultr",
        [
            make_offer(
                "vcg-a100-1c",
                1.29,
                provider="vultr",
                **{"gpu_name_raw": "NVIDIA_A100", "gpu_count": 1.0, "gpu_memory_gb_raw": 80.0},
            )
        ],
        now=failing_since,
    )
    run(con, "r0", "runpod", "ok", now)
    run(con, "r-1", "vultr", "ok", failing_since - timedelta(hours=1))
    run(
        con, "r0", "vultr", "failed", failing_since, "FetchError: GET https://api.vultr.com answered HTTP 500"
    )
    build_marts(con, now=now)
    con.close()
    return failing_since


def test_status_says_which_providers_are_stale_since_when_and_why_and_which_are_retired(home):
    from typer.testing import CliRunner

    from flows.cli import app

    failing_since = replay_warehouse_with_history(home)
    result = CliRunner().invoke(app, ["status"], terminal_width=300)
    assert result.exit_code == 0, result.output
    (vultr,) = [line for line in result.output.splitlines() if line.startswith("vultr: stale")]
    assert f"since {failing_since:%Y-%m-%d %H:%M} UTC, 1 failed run(s)" in vultr
    assert "last error: FetchError: GET https://api.vultr.com answered HTTP 500" in vultr
    assert "cudo: retired since 2026-03-31" in result.output


def test_prices_leave_stale_offers_out_unless_include_stale(home):
    from typer.testing import CliRunner

    from flows.cli import app

    replay_warehouse_with_history(home)
    runner = CliRunner()
    shown = runner.invoke(app, ["prices", "--json"])
    assert shown.exit_code == 0, shown.output
    assert "vultr" not in shown.output and "runpod" in shown.output
    every = runner.invoke(app, ["prices", "--json", "--include-stale"])
    assert '"provider": "vultr"' in every.output and '"is_stale": true' in every.output


def test_a_refresh_closes_retired_offers_and_a_stale_provider_failing_again_does_not_fail_it(home, tmp_path):
    import json
    import shutil

    from typer.testing import CliRunner

    from flows.cli import app
    from tests.conftest import REPO

    replay_warehouse_with_history(home)
    cassette = tmp_path / "cassette"
    shutil.copytree(REPO / "tests" / "replay" / "api.vultr.com", cassette / "api.vultr.com")
    shutil.copytree(REPO / "tests" / "fixtures", tmp_path / "fixtures")  # bodies the cassette points at
    for meta in (cassette / "api.vultr.com").glob("*.json"):
        document = json.loads(meta.read_text())
        document["response"]["status"] = 500
        meta.write_text(json.dumps(document))
    result = CliRunner().invoke(
        app, ["refresh", "--providers", "vultr", "--replay", str(cassette)], terminal_width=300
    )
    assert result.exit_code == 0, result.output
    assert "cudo is retired: closed its 1 open offers" in result.output
    assert "still failing, stale and left out of the answers: vultr (since " in result.output
    assert "did not load cleanly" not in result.output
    con = duckdb.connect(str(home / "replay" / "warehouse.duckdb"), read_only=True)
    try:
        assert con.execute(
            "select count(*) from core.offer_prices where provider = 'cudo' and valid_to is null"
        ).fetchall() == [(0,)]
        assert con.execute("select status from ops.runs order by started_at desc limit 1").fetchall() == [
            ("failed",)
        ]
    finally:
        con.close()


def test_export_and_report_take_include_stale(home, tmp_path):
    from typer.testing import CliRunner

    from flows.cli import app

    replay_warehouse_with_history(home)
    runner = CliRunner()
    for flag, rows in (([], 1), (["--include-stale"], 2)):
        out = tmp_path / f"feeds{len(flag)}"
        result = runner.invoke(app, ["export", "--format", "csv", "--out", str(out), *flag])
        assert result.exit_code == 0, result.output
        assert f"gpu_offers.v2.csv  ({rows} rows)" in result.output
        site = tmp_path / f"site{len(flag)}"
        assert runner.invoke(app, ["report", "--out", str(site), *flag]).exit_code == 0
        page = (site / "index.html").read_text()
        assert ("vcg-a100-1c" in page) == bool(flag)
