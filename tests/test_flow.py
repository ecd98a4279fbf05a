"""The refresh flow end to end from the committed replay cassette, and the CLI around it.

These share one Prefect test server (the session-scoped `prefect_harness`) and one warehouse per
test module, because every flow run costs about a second and a server start about ten.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from connectors import CONNECTORS
from tests.conftest import REPO
from warehouse.pipeline import default_providers

REPLAY = REPO / "tests" / "replay"
# every registered provider but the retired ones (seeds/provider_lifecycle.csv)
PROVIDERS = tuple(default_providers())
# providers whose replay cassette holds spot prices (the others' sources publish none)
WITH_SPOT = ("azure", "runpod", "oci", "aws", "gcp")


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpucost-home")


@pytest.fixture(autouse=True)
def _fast_retries(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(home / "feeds"))
    monkeypatch.setenv("GPUCOST_HTTP_BACKOFF_SECONDS", "0.001")
    for name in ("GOOGLE_API_KEY", "RUNPOD_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def query(home: Path, sql: str) -> list[tuple]:
    """Read the replay warehouse: `--replay` writes under $GPUCOST_HOME/replay/, never the live one."""
    con = duckdb.connect(str(home / "replay" / "warehouse.duckdb"), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def broken_cassette(tmp_path: Path, host: str, status: int = 500) -> Path:
    """A copy of the replay cassette in which every exchange with `host` answers `status`."""
    cassette = tmp_path / "replay"
    shutil.copytree(REPLAY, cassette)
    # the copies point at ../../fixtures; keep that relative path valid
    shutil.copytree(REPO / "tests" / "fixtures", tmp_path / "fixtures")
    for meta_path in (cassette / host).glob("*.json"):
        meta = json.loads(meta_path.read_text())
        meta["response"]["status"] = status
        meta_path.write_text(json.dumps(meta))
    return cassette


def test_replay_refresh_loads_every_provider(prefect_harness, home: Path):
    from flows.refresh import refresh

    summary = refresh(replay=str(REPLAY))
    assert summary.status == "ok", [(o.provider, o.error) for o in summary.outcomes]
    assert [o.provider for o in summary.outcomes] == list(PROVIDERS)
    assert all(o.offers_loaded > 0 for o in summary.outcomes)
    assert all(o.provider == p for o, p in zip(summary.outcomes, PROVIDERS, strict=True))

    offers = dict(
        ((p, t), n)
        for p, t, n in query(
            home, "select provider, pricing_type, count(*) from marts.gpu_offers group by all"
        )
    )
    for provider in WITH_SPOT:
        assert offers[(provider, "on_demand")] > 0 and offers[(provider, "spot")] > 0, provider
    assert not (home / "warehouse.duckdb").exists(), "a replay must not create the live warehouse"
    # canonical names and VRAM, not the raw labels
    assert query(
        home,
        "select distinct gpu_name, vram_gb from marts.gpu_offers "
        "where provider = 'runpod' and gpu_name_raw = 'NVIDIA H100 80GB HBM3'",
    ) == [("H100-SXM", 80.0)]
    assert query(home, "select count(*) from marts.unmapped_gpus") == [(0,)]
    # OCI's preemptible price is a rule, never shown as a market price
    assert set(
        query(home, "select distinct price_source from marts.gpu_offers where provider = 'oci' and is_spot")
    ) == {("estimated",)}
    assert (home / "replay" / "feeds" / "gpu_offers.v1.parquet").exists()
    assert "sample data" in (home / "replay" / "feeds" / "SAMPLE_DATA.txt").read_text()
    # what the parsers left out on purpose is recorded with the run, by reason
    (azure_excluded,) = query(home, "select excluded from ops.provider_runs where provider = 'azure'")[0]
    assert {"low_priority", "windows"} <= set(json.loads(azure_excluded))
    assert query(home, "select count(*) from raw.responses where url like '%key=replay-placeholder%'") == [
        (0,)
    ]


def test_refresh_publishes_status_and_cheapest_artifacts(prefect_harness, home: Path):
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with get_client(sync_client=True) as client:
        status = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpucost-refresh"]))
        )
        cheapest = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["gpucost-cheapest-gpus"]))
        )
    latest = max(status, key=lambda artifact: artifact.created)
    rows = json.loads(latest.data) if isinstance(latest.data, str) else latest.data
    assert [r["provider"] for r in rows] == list(PROVIDERS) and {r["status"] for r in rows} == {"ok"}
    assert "replay" in (max(cheapest, key=lambda artifact: artifact.created).description or "")


def test_identical_rerun_adds_no_history_rows(prefect_harness, home: Path):
    from flows.refresh import refresh

    before = query(home, "select count(*) from core.offer_prices")
    summary = refresh(replay=str(REPLAY))
    assert summary.status == "ok"
    assert query(home, "select count(*) from core.offer_prices") == before
    assert sum(o.rows_inserted + o.rows_closed for o in summary.outcomes) == 0


def test_unchanged_aws_offer_files_stay_skipped_run_after_run(prefect_harness, home: Path):
    from flows.refresh import refresh

    current = "select count(*) from core.offer_prices where provider = 'aws' and valid_to is null"
    before = query(home, current)
    for _ in range(2):
        (outcome,) = refresh(providers=["aws"], replay=str(REPLAY)).outcomes
        assert outcome.status == "ok" and outcome.rows_closed == 0
    offer_files_per_run = query(
        home,
        "select p.run_id, count(r.url) filter (where r.url like '%/index.csv') "
        "from ops.provider_runs as p left join raw.responses as r using (run_id, provider) "
        "where p.provider = 'aws' group by p.run_id, p.started_at order by p.started_at",
    )
    assert offer_files_per_run[0][1] == 2  # the first run fetched both fixture regions
    assert all(n == 0 for _, n in offer_files_per_run[1:]), offer_files_per_run
    assert query(home, current) == before


def test_one_provider_answering_500_keeps_its_prices_and_fails_the_command(
    prefect_harness, home: Path, tmp_path: Path
):
    from flows.cli import app

    runpod_before = query(
        home, "select count(*) from core.offer_prices where provider = 'runpod' and valid_to is null"
    )
    cassette = broken_cassette(tmp_path, "api.runpod.io", 500)
    result = CliRunner().invoke(app, ["refresh", "--replay", str(cassette)])
    assert result.exit_code == 1, result.output
    assert "runpod" in result.output and "failed" in result.output
    assert "HTTP 500" in result.output
    assert "last good prices stay current" in result.output
    status = dict(
        query(
            home,
            "select provider, status from ops.provider_runs "
            "where run_id = (select run_id from ops.runs order by started_at desc limit 1)",
        )
    )
    assert status == {p: "failed" if p == "runpod" else "ok" for p in PROVIDERS}
    assert (
        query(home, "select count(*) from core.offer_prices where provider = 'runpod' and valid_to is null")
        == runpod_before
    )
    assert query(home, "select count(*) from marts.gpu_offers where provider = 'runpod'")[0][0] > 0


def test_cli_sql_status_export(prefect_harness, home: Path, tmp_path: Path):
    from flows.cli import app

    runner = CliRunner()
    result = runner.invoke(
        app, ["sql", "select provider, count(*) as n from marts.gpu_offers group by 1 order by 1", "--csv"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "provider,n"
    assert {line.split(",")[0] for line in result.stdout.splitlines()[1:]} == set(PROVIDERS) - {"ecb"}
    # the only warehouse is the replay one: every answer from it says it is sample data
    assert "sample data" in result.stderr

    result = runner.invoke(app, ["sql", "create table marts.x as select 1"])
    assert result.exit_code == 1 and "read-only" in result.output.lower()

    result = runner.invoke(app, ["status"])
    assert result.exit_code == 0 and "runpod" in result.output and "failed" in result.output

    result = runner.invoke(app, ["export", "--format", "csv", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "gpu_offers.v1.csv").read_text().startswith("provider,instance_type,region")


def test_unknown_provider_is_a_clear_error(prefect_harness, home: Path):
    from flows.cli import app

    result = CliRunner().invoke(app, ["refresh", "--providers", "nope", "--replay", str(REPLAY)])
    assert result.exit_code == 2
    assert f"unknown provider(s) nope; choose from {', '.join(PROVIDERS)}" in result.output


def test_gcp_without_key_is_skipped_not_failed(prefect_harness, home: Path):
    from flows.refresh import refresh

    summary = refresh(providers=["gcp"])  # live mode, no GOOGLE_API_KEY: no request is made
    (outcome,) = summary.outcomes
    assert outcome.status == "skipped" and "GOOGLE_API_KEY" in (outcome.error or "")
    assert summary.status == "ok"


def test_credentials_come_from_secret_blocks_when_the_environment_lacks_them(prefect_harness):
    from prefect.blocks.system import Secret

    from flows.refresh import block_name, secrets_from_blocks

    assert block_name("GOOGLE_API_KEY") == "google-api-key"
    Secret(value="k-from-block").save("google-api-key", overwrite=True)
    try:
        assert secrets_from_blocks(["GOOGLE_API_KEY", "RUNPOD_API_KEY"]) == {"GOOGLE_API_KEY": "k-from-block"}
    finally:
        Secret.delete("google-api-key")  # later tests run gcp live without a key and expect a skip
    assert secrets_from_blocks(["GOOGLE_API_KEY"]) == {}


def test_readers_can_query_while_providers_are_fetched(prefect_harness, home: Path, monkeypatch):
    """The warehouse is closed during fetch + parse: a read in the middle of a download works."""
    from flows.refresh import refresh
    from warehouse.db import open_reader

    connector = CONNECTORS["oci"]
    original = connector.fetch
    seen = []

    def fetch_and_read(client, creds, previous=None):
        yield from original(client, creds, previous)
        reader, banner = open_reader()  # raises if a write connection were open in this process
        try:
            seen.append((reader.execute("select count(*) from ops.runs").fetchall()[0][0], banner))
        finally:
            reader.close()

    monkeypatch.setattr(connector, "fetch", fetch_and_read)
    summary = refresh(providers=["oci"], replay=str(REPLAY))
    assert summary.status == "ok" and seen and seen[0][0] >= 1


def test_flow_states_say_partial_and_failed_for_automations(prefect_harness, home: Path, tmp_path: Path):
    from flows.refresh import refresh

    cassette = broken_cassette(tmp_path, "api.runpod.io", 503)
    partial = refresh(providers=["runpod", "oci"], replay=str(cassette), return_state=True)
    assert partial.is_completed() and partial.name == "Partial"
    assert "runpod failed" in (partial.message or "")
    failed = refresh(providers=["runpod"], replay=str(cassette), return_state=True)
    assert failed.is_failed() and "nothing loaded" in (failed.message or "")
    summary = failed.result(raise_on_failure=False)
    assert summary.status == "failed"  # never "partial" when nothing loaded
    (status,) = query(home, f"select status from ops.runs where run_id = '{summary.run_id}'")[0]
    assert status == "failed"


def test_the_user_agent_setting_reaches_the_client_every_provider_uses(
    prefect_harness, home: Path, monkeypatch: pytest.MonkeyPatch
):
    import flows.orchestration as orchestration
    from flows.refresh import refresh

    agents: list[str] = []
    real = orchestration.make_client

    def recording(**kwargs):
        client = real(**kwargs)
        agents.append(client.headers["user-agent"])
        return client

    monkeypatch.setattr(orchestration, "make_client", recording)
    monkeypatch.setenv("GPUCOST_USER_AGENT", "acme-gpu-prices/1 (+https://acme.example/ops)")
    summary = refresh(providers=["oci"], replay=str(REPLAY))
    assert summary.status == "ok"
    assert agents == ["acme-gpu-prices/1 (+https://acme.example/ops)"]


def test_a_flow_test_leaves_no_events_websocket_open(prefect_harness, home: Path):
    # a flow run starts Prefect's events worker (a websocket to the server, pinged from a thread
    # that draws from the global `random`); the autouse fixture drains it after each test
    from prefect import flow
    from prefect.events.worker import EventsWorker

    from tests.conftest import drain_prefect_events

    @flow
    def tiny() -> int:
        return 1

    assert tiny() == 1
    assert EventsWorker._instances, "a flow run emits events through a worker"
    assert drain_prefect_events() >= 1
    assert not EventsWorker._instances
    assert drain_prefect_events() == 0  # nothing left to stop: the fixture's call is then free
