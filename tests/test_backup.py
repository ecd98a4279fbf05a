"""`gpucost backup` / `restore`: the raw archive and the warehouse, to a folder and to S3 (moto on
loopback); restore verifies everything before it replaces anything, and a retained run replays from
the restored archive exactly as before."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from connectors import CONNECTORS
from flows.cli import app
from tests.replay_warehouse import build_replay_warehouse
from warehouse import backup as backups
from warehouse.archive import archived_responses
from warehouse.backup import MANIFEST, BackupError, FolderStore, open_store
from warehouse.db import WarehouseBusy, connect

runner = CliRunner()


@pytest.fixture(scope="module")
def replay_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home a replay refresh filled: every provider's exchanges archived, marts built."""
    home = tmp_path_factory.mktemp("replay-home")
    build_replay_warehouse(home)
    return home


@pytest.fixture
def home(replay_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the replay home, as GPUCOST_HOME."""
    home = tmp_path / "home"
    shutil.copytree(replay_home, home)
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    for name in ("GPUCOST_FEEDS_URL", "GPUCOST_S3_ENDPOINT_URL", "PREFECT_API_URL"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def s3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A local S3-compatible server (moto) on loopback, a bucket, and test credentials."""
    from moto.server import ThreadedMotoServer

    from warehouse.publish import s3_client

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = f"gpucost-{uuid.uuid4().hex[:12]}"
    s3_client(endpoint).create_bucket(Bucket=bucket)
    yield endpoint, bucket
    server.stop()


def parsed_runs(home: Path) -> dict[tuple[str, str], str]:
    """Every retained provider run re-parsed from the archive (the replay path), as text."""
    con = connect(home / "warehouse.duckdb", read_only=True)
    try:
        runs = con.execute(
            "select distinct run_id, provider from raw.responses where pruned_at is null order by all"
        ).fetchall()
        return {
            (run_id, provider): repr(
                list(CONNECTORS[provider].parse(archived_responses(con, home / "raw", run_id, provider)))
            )
            for run_id, provider in runs
            if provider in CONNECTORS
        }
    finally:
        con.close()


def marts(home: Path) -> dict[str, list[tuple]]:
    con = connect(home / "warehouse.duckdb", read_only=True)
    try:
        tables = con.execute(
            "select table_name from information_schema.tables where table_schema = 'marts' order by 1"
        ).fetchall()
        return {t: con.execute(f'select * from marts."{t}" order by all').fetchall() for (t,) in tables}
    finally:
        con.close()


def wipe(home: Path) -> None:
    shutil.rmtree(home)


def one_error(result) -> str:
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


# --- the round trip ----------------------------------------------------------------------------------


def test_backup_wipe_restore_to_a_folder_replays_identically(home: Path, tmp_path: Path):
    before_parsed, before_marts = parsed_runs(home), marts(home)
    assert before_parsed and any(before_marts.values())  # the replay archived runs and built marts
    target = tmp_path / "backups"

    result = runner.invoke(app, ["backup", str(target)])
    assert result.exit_code == 0, result.output
    manifest = json.loads((target / MANIFEST).read_text())
    assert f"backed up {len(manifest['files'])} files" in result.output
    wipe(home)

    result = runner.invoke(app, ["restore", str(target)])
    assert result.exit_code == 0, result.output
    assert f"restored {len(manifest['files'])} files" in result.output
    assert parsed_runs(home) == before_parsed
    assert marts(home) == before_marts
    assert not [p.name for p in home.iterdir() if p.name.startswith(".restore-")]  # staging removed


def test_backup_wipe_restore_through_s3_replays_identically(home: Path, s3, monkeypatch):
    endpoint, bucket = s3
    monkeypatch.setenv("GPUCOST_S3_ENDPOINT_URL", endpoint)
    before_parsed, before_marts = parsed_runs(home), marts(home)

    result = runner.invoke(app, ["backup", f"s3://{bucket}/team/backup"])
    assert result.exit_code == 0, result.output
    assert f"to s3://{bucket}/team/backup;" in result.output
    wipe(home)

    result = runner.invoke(app, ["restore", f"s3://{bucket}/team/backup"])
    assert result.exit_code == 0, result.output
    assert parsed_runs(home) == before_parsed
    assert marts(home) == before_marts


def test_the_manifest_lists_every_archive_file_and_the_warehouse_with_its_sha256(home: Path, tmp_path: Path):
    report = backups.backup(home / "warehouse.duckdb", home / "raw", FolderStore(tmp_path / "b"))
    manifest = json.loads((tmp_path / "b" / MANIFEST).read_text())
    names = {e["name"] for e in manifest["files"]}
    archive = {f"raw/{p.parent.name}/{p.name}" for p in (home / "raw").glob("??/*")}
    assert names == archive | {manifest["warehouse"]}
    for entry in manifest["files"]:
        path = tmp_path / "b" / entry["name"]
        assert backups.sha256_file(path) == entry["sha256"]
        assert path.stat().st_size == entry["bytes"]
    assert report.files == len(names) and report.uploaded == len(names)


def test_a_second_backup_sends_only_what_changed_and_drops_what_is_gone(home: Path, tmp_path: Path):
    store = FolderStore(tmp_path / "b")
    first = backups.backup(home / "warehouse.duckdb", home / "raw", store)
    again = backups.backup(home / "warehouse.duckdb", home / "raw", store)
    assert again.files == first.files
    # the archive is content-addressed: nothing of it goes again
    assert again.uploaded <= 1 and again.uploaded_bytes < first.uploaded_bytes / 2

    con = connect(home / "warehouse.duckdb")
    con.execute("create table ops.backup_probe as select 1 as x")
    con.close()
    gone = sorted((home / "raw").glob("??/*"))[0]
    gone.unlink()
    old_warehouse = json.loads((tmp_path / "b" / MANIFEST).read_text())["warehouse"]
    third = backups.backup(home / "warehouse.duckdb", home / "raw", store)
    assert third.uploaded == 1  # the changed warehouse, under its new sha256
    assert not (tmp_path / "b" / old_warehouse).exists()
    assert not (tmp_path / "b" / "raw" / gone.parent.name / gone.name).exists()


# --- refusals -----------------------------------------------------------------------------------------


HOLD = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1])
    con.execute("create table if not exists ops.writer_probe (x int)")
    print("holding", flush=True)
    time.sleep(60)
    """
)


def test_backup_refuses_in_one_line_while_a_refresh_holds_the_warehouse(home: Path, tmp_path: Path):
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home / "warehouse.duckdb")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
        result = runner.invoke(app, ["backup", str(tmp_path / "b")])
        assert result.exit_code == 1
        assert f"in use by another process (process {writer.pid})" in one_error(result)
        assert not (tmp_path / "b" / MANIFEST).exists()
        # restore over a held warehouse is refused the same way, before anything is fetched
        FolderStore(tmp_path / "b").write(MANIFEST, b"")
        with pytest.raises(BackupError, match="not JSON"):
            backups.restore(
                home / "warehouse.duckdb", home / "raw", FolderStore(tmp_path / "b"), replace=True
            )
    finally:
        writer.kill()
        writer.wait()


def test_restore_refuses_a_busy_warehouse(home: Path, tmp_path: Path):
    store = FolderStore(tmp_path / "b")
    backups.backup(home / "warehouse.duckdb", home / "raw", store)
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(home / "warehouse.duckdb")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "holding"
        with pytest.raises(WarehouseBusy):
            backups.restore(home / "warehouse.duckdb", home / "raw", store, replace=True)
    finally:
        writer.kill()
        writer.wait()


def test_restore_replaces_a_home_only_when_asked(home: Path, tmp_path: Path):
    runner.invoke(app, ["backup", str(tmp_path / "b")])
    result = runner.invoke(app, ["restore", str(tmp_path / "b")])
    assert result.exit_code == 1
    assert "holds a warehouse or raw archive already" in one_error(result)
    assert "--replace" in one_error(result)

    con = connect(home / "warehouse.duckdb")
    con.execute("create table ops.after_backup as select 1 as x")
    con.close()
    result = runner.invoke(app, ["restore", "--replace", str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    con = connect(home / "warehouse.duckdb", read_only=True)
    tables = {t for (t,) in con.execute("select table_name from information_schema.tables").fetchall()}
    con.close()
    assert "after_backup" not in tables  # the home is the backup's again


def test_a_damaged_backup_restores_nothing(home: Path, tmp_path: Path):
    store = FolderStore(tmp_path / "b")
    backups.backup(home / "warehouse.duckdb", home / "raw", store)
    before = {p: p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()}
    manifest = json.loads((tmp_path / "b" / MANIFEST).read_text())
    damaged = tmp_path / "b" / manifest["files"][0]["name"]
    damaged.write_bytes(damaged.read_bytes() + b"!")

    result = runner.invoke(app, ["restore", "--replace", str(tmp_path / "b")])
    assert result.exit_code == 1
    assert "differs from backup-manifest.json" in one_error(result)
    assert "nothing was restored" in one_error(result)
    assert {p: p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()} == before

    damaged.unlink()
    result = runner.invoke(app, ["restore", "--replace", str(tmp_path / "b")])
    assert "is listed in backup-manifest.json but missing" in one_error(result)
    assert {p: p.read_bytes() for p in sorted(home.rglob("*")) if p.is_file()} == before


def test_an_interrupted_backup_leaves_the_last_complete_one_restorable(home: Path, tmp_path: Path):
    store = FolderStore(tmp_path / "b")
    backups.backup(home / "warehouse.duckdb", home / "raw", store)
    before_marts = marts(home)
    con = connect(home / "warehouse.duckdb")
    con.execute("create table ops.after_backup as select 1 as x")
    con.close()

    class Interrupted(FolderStore):
        def upload(self, path: Path, name: str) -> None:
            if name.startswith("warehouse/"):
                raise KeyboardInterrupt  # the machine went away mid-upload
            super().upload(path, name)

    with pytest.raises(KeyboardInterrupt):
        backups.backup(home / "warehouse.duckdb", home / "raw", Interrupted(tmp_path / "b"))
    assert not list(home.glob(".backup-*"))  # the local staging copy is gone
    wipe(home)
    backups.restore(home / "warehouse.duckdb", home / "raw", store)
    assert marts(home) == before_marts


def test_a_manifest_naming_files_outside_the_layout_is_refused(home: Path, tmp_path: Path):
    store = FolderStore(tmp_path / "b")
    manifest = {
        "format": "gpucost-backup",
        "version": 1,
        "created_at": "x",
        "warehouse": "warehouse/a.duckdb",
    }
    manifest["files"] = [{"name": "raw/../../escape", "sha256": "0" * 64, "bytes": 0}]
    store.write(MANIFEST, json.dumps(manifest).encode())
    wipe(home)
    with pytest.raises(BackupError, match="outside the backup's layout"):
        backups.restore(home / "warehouse.duckdb", home / "raw", store)
    assert not (tmp_path / "escape").exists()


def test_restore_says_when_there_is_no_backup_or_another_format(tmp_path: Path):
    store = FolderStore(tmp_path / "b")
    with pytest.raises(BackupError, match=r"no backup at .* back up with `gpucost backup`"):
        backups.restore(tmp_path / "h" / "warehouse.duckdb", tmp_path / "h" / "raw", store)
    store.write(MANIFEST, json.dumps({"format": "gpucost-backup", "version": 99}).encode())
    with pytest.raises(BackupError, match="format version 99; this gpucost reads version 1"):
        backups.restore(tmp_path / "h" / "warehouse.duckdb", tmp_path / "h" / "raw", store)
    store.write(MANIFEST, b"[]")
    with pytest.raises(BackupError, match="not a gpucost backup manifest"):
        backups.restore(tmp_path / "h" / "warehouse.duckdb", tmp_path / "h" / "raw", store)


def test_backup_of_a_home_without_a_warehouse_says_so(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, ["backup", str(tmp_path / "b")])
    assert result.exit_code == 1
    assert "no warehouse at" in one_error(result) and "nothing to back up" in one_error(result)


def test_targets_are_s3_prefixes_or_folders():
    with pytest.raises(BackupError, match="give s3://bucket/prefix or a folder"):
        open_store("https://example.org/backups")
    with pytest.raises(BackupError, match="names no bucket"):
        open_store("s3:///prefix")
    assert isinstance(open_store("/tmp/some/folder"), FolderStore)


def test_s3_failures_are_one_line_that_says_what_to_do(home: Path, s3, monkeypatch):
    endpoint, bucket = s3
    monkeypatch.setenv("GPUCOST_S3_ENDPOINT_URL", endpoint)
    result = runner.invoke(app, ["backup", f"s3://{bucket}-missing/backup"])
    assert result.exit_code == 1
    line = one_error(result)
    assert f"s3://{bucket}-missing/" in line and "NoSuchBucket" in line and "check the bucket" in line

    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    result = runner.invoke(app, ["backup", f"s3://{bucket}/backup"])
    assert result.exit_code == 1
    assert one_error(result).startswith(f"error: no AWS credentials for s3://{bucket}/backup: set")
    result = runner.invoke(app, ["restore", f"s3://{bucket}/backup"])
    assert "no AWS credentials" in one_error(result)
