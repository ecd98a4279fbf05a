"""`gpucost pull`: a publication read back from a folder, a loopback HTTP server and a loopback S3
API (moto), verified file by file; half-published and interrupted uploads are refused and the
previous pull kept; the pulled warehouse answers `prices` exactly as the scraped one."""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar

import duckdb
import pytest
from typer.testing import CliRunner

from flows import cli_prices
from flows.cli import app
from tests.replay_warehouse import build_replay_warehouse
from warehouse.export import MANIFEST, write_publication
from warehouse.publish import publish_feeds, s3_client
from warehouse.pull import (
    OFFERS_FEED,
    OFFERS_FEEDS,
    READER_FEEDS,
    PullError,
    previous_manifest,
    pull,
    reader_warehouse,
)

runner = CliRunner()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Path:
    """A home whose warehouse a replay refresh filled (tests/replay_warehouse.py)."""
    home = tmp_path_factory.mktemp("scraped")
    build_replay_warehouse(home)
    return home


@pytest.fixture(scope="module")
def publication(scraped, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("publication")
    con = duckdb.connect(str(scraped / "warehouse.duckdb"), read_only=True)
    try:
        write_publication(con, out)
    finally:
        con.close()
    return out


def _copy(publication: Path, tmp_path: Path) -> Path:
    served = tmp_path / "www" / "feeds"
    shutil.copytree(publication, served)
    return served


def _manifest(folder: Path) -> dict:
    return json.loads((folder / MANIFEST).read_text())


class _FrozenClock(datetime):
    """Both `prices` calls answer as of one instant: their ages are then comparable to the digit."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return datetime(2026, 12, 2, 2, 0, tzinfo=UTC)


def _prices(home: Path, monkeypatch, pull_url: str | None = None) -> str:
    monkeypatch.setattr(cli_prices, "datetime", _FrozenClock)
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    if pull_url:
        monkeypatch.setenv("GPUCOST_PULL_URL", pull_url)
    else:
        monkeypatch.delenv("GPUCOST_PULL_URL", raising=False)
    result = runner.invoke(app, ["prices", "--gpu", "H100", "--json"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_a_pulled_folder_answers_prices_as_the_scraped_warehouse(scraped, publication, tmp_path, monkeypatch):
    home = tmp_path / "reader"
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_PULL_URL", str(publication))
    result = runner.invoke(app, ["pull"])
    assert result.exit_code == 0, result.output
    reader_bytes = sum(e["bytes"] for e in _manifest(publication)["files"] if e["name"] in READER_FEEDS)
    # the offers (v5, and v4 and v3 for publications older than them) and the unmapped GPUs
    assert f"pulled 4 files ({reader_bytes:,} bytes), 0 unchanged" in result.stdout
    assert "(recorded sample data: replay)" in result.stdout
    expected = _prices(scraped, monkeypatch)
    assert json.loads(expected)  # the comparison below is over real rows
    assert _prices(home, monkeypatch, str(publication)) == expected
    # the same marts: every offer column the feed carries, and the fine-tuning grid
    con = duckdb.connect(str(reader_warehouse(home)), read_only=True)
    con.execute(f"attach '{scraped / 'warehouse.duckdb'}' as scraped (read_only)")
    for relation, query in (
        (
            "marts.gpu_offers",
            "select provider, instance_type, region, pricing_type, price_usd_per_gpu_hour, "
            "gpu_name, vram_gb, available, last_seen_at, price_since, setup_fee_usd, serverless from {}",
        ),
        ("marts.finetune_requirements", "select * from {}"),
        ("marts.finetune_costs", "select * from {} where not (provider = 'aws' and pricing_type = 'spot')"),
    ):
        mine = con.execute(query.format(relation) + " order by all").fetchall()
        theirs = con.execute(query.format("scraped." + relation) + " order by all").fetchall()
        assert mine and mine == theirs, relation
    con.close()


def test_estimate_and_report_answer_from_the_pull(publication, tmp_path, monkeypatch):
    home = tmp_path / "reader"
    pull(str(publication), home)
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_PULL_URL", str(publication))
    estimate = runner.invoke(app, ["estimate", "--model", "meta-llama/Llama-3.1-8B", "--method", "lora"])
    assert estimate.exit_code == 0, estimate.output
    assert "$" in estimate.stdout or "USD" in estimate.stdout
    report = runner.invoke(app, ["report", "--out", str(tmp_path / "site")])
    assert report.exit_code == 0, report.output
    assert (tmp_path / "site" / "index.html").stat().st_size > 0


def test_read_commands_before_any_pull_say_to_pull(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    monkeypatch.setenv("GPUCOST_PULL_URL", "s3://nowhere/feeds")
    result = runner.invoke(app, ["prices"])
    assert result.exit_code == 1
    assert "nothing pulled yet from GPUCOST_PULL_URL=s3://nowhere/feeds; run `gpucost pull`" in result.output


def test_pull_without_a_url_says_how_to_give_one(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    monkeypatch.delenv("GPUCOST_PULL_URL", raising=False)
    result = runner.invoke(app, ["pull"])
    assert result.exit_code == 2
    assert "give a URL" in result.output


# --- HTTP: a loopback server over a copy of the publication --------------------------------------


class _Handler(http.server.SimpleHTTPRequestHandler):
    cut: ClassVar[set[str]] = set()  # names whose body is cut short: a download interrupted mid-file

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        name = self.path.rsplit("/", 1)[-1]
        if name not in self.cut:
            return super().do_GET()
        body = Path(self.translate_path(self.path)).read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2])
        self.close_connection = True


@pytest.fixture
def served(publication, tmp_path) -> Iterator[tuple[str, Path]]:
    folder = _copy(publication, tmp_path)
    _Handler.cut = set()
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_Handler, directory=str(folder.parent))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/feeds", folder
    server.shutdown()
    server.server_close()


def test_http_pull_fetches_only_what_changed_and_refuses_a_half_published_one(served, tmp_path):
    url, folder = served
    home = tmp_path / "reader"
    first = pull(url, home)
    assert set(first.fetched) == READER_FEEDS and not first.reused
    again = pull(url, home)
    assert again.fetched == () and again.fetched_bytes == 0
    held = previous_manifest(home)
    built = reader_warehouse(home).stat().st_mtime_ns
    # files changed, manifest old: a newer publication on its way
    (folder / OFFERS_FEED).write_bytes(b"PAR1 not yet the manifest's file")
    # a reader holding the manifest's files already has that publication whole: nothing to fetch
    assert pull(url, home).fetched == ()
    # one that must fetch the changed file meets a disagreement and keeps what it had
    (home / "pulled" / "feeds" / OFFERS_FEED).unlink()
    with pytest.raises(
        PullError, match=r"gpu_offers.v5.parquet differs from manifest.json .*kept the previous pull"
    ):
        pull(url, home)
    assert previous_manifest(home) == held and reader_warehouse(home).stat().st_mtime_ns == built
    with pytest.raises(PullError, match=r"differs from manifest.json .*nothing was pulled before"):
        pull(url, tmp_path / "fresh")
    assert not reader_warehouse(tmp_path / "fresh").exists()


def test_http_interrupted_download_keeps_the_previous_pull(served, publication, tmp_path):
    url, folder = served
    home = tmp_path / "reader"
    pull(url, home)
    held = previous_manifest(home)
    # a new publication: new bytes and a manifest that lists them
    manifest = _manifest(folder)
    manifest["generated_at"] = "2026-12-02T03:00:00.000000Z"
    (folder / MANIFEST).write_text(json.dumps(manifest))
    entry = next(e for e in manifest["files"] if e["name"] == OFFERS_FEED)
    _Handler.cut = {OFFERS_FEED}
    (home / "pulled" / "feeds" / OFFERS_FEED).unlink()  # so the pull must fetch it
    with pytest.raises(PullError, match="kept the previous pull"):
        pull(url, home)
    assert previous_manifest(home) == held
    # the half file stayed in incoming/ (cleared by the next pull), never among the held feeds
    assert not (home / "pulled" / "feeds" / OFFERS_FEED).exists()
    assert (home / "pulled" / "incoming" / OFFERS_FEED).stat().st_size < entry["bytes"]
    _Handler.cut = set()
    again = pull(url, home)  # the upload finished: the next pull completes, fetching only that file
    assert again.fetched == (OFFERS_FEED,) and previous_manifest(home) == manifest
    assert not (home / "pulled" / "incoming").exists()


def test_http_missing_file_listed_by_a_new_manifest_is_refused(served, tmp_path):
    url, folder = served
    (folder / OFFERS_FEED).unlink()  # manifest new, file not there yet
    with pytest.raises(
        PullError, match=r"is missing \(404\), though manifest.json lists it.*nothing was pulled"
    ):
        pull(url, tmp_path / "reader")
    assert not reader_warehouse(tmp_path / "reader").exists()


def test_a_folder_that_is_not_a_publication_says_so(tmp_path):
    with pytest.raises(PullError, match="no publication to pull; nothing was pulled before"):
        pull(str(tmp_path), tmp_path / "reader")
    (tmp_path / MANIFEST).write_text("{}")
    with pytest.raises(PullError, match="is not a gpucost manifest"):
        pull(str(tmp_path), tmp_path / "reader")


# --- S3: moto on loopback, published by warehouse.publish ------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint, monkeypatch, tmp_path) -> str:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "gpucost-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test-" + uuid.uuid4().hex)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    name = f"gpucost-pull-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def test_s3_pull_and_half_published_uploads(publication, s3_endpoint, bucket, tmp_path):
    url = f"s3://{bucket}/team/feeds"
    publish_feeds(publication, url, endpoint_url=s3_endpoint, allow_sample=True)
    home = tmp_path / "reader"
    result = pull(url, home, endpoint_url=s3_endpoint, every_file=True)  # a mirror: every file
    assert result.fetched_bytes == sum(e["bytes"] for e in _manifest(publication)["files"])
    assert {p.name for p in (home / "pulled" / "feeds").iterdir()} == {
        e["name"] for e in _manifest(publication)["files"]
    }
    held = previous_manifest(home)
    client = s3_client(s3_endpoint)
    # files changed, manifest old
    client.put_object(Bucket=bucket, Key=f"team/feeds/{OFFERS_FEED}", Body=b"newer bytes")
    (home / "pulled" / "feeds" / OFFERS_FEED).write_bytes(b"damaged locally")  # so it is fetched again
    with pytest.raises(PullError, match=r"differs from manifest\.json"):
        pull(url, home, endpoint_url=s3_endpoint)
    assert previous_manifest(home) == held
    # manifest new, one of its files not uploaded (the others as the manifest says)
    client.put_object(
        Bucket=bucket, Key=f"team/feeds/{OFFERS_FEED}", Body=(publication / OFFERS_FEED).read_bytes()
    )
    manifest = _manifest(publication)
    manifest["files"].append(dict(manifest["files"][0], name="gpu_offers.v9.parquet"))
    client.put_object(Bucket=bucket, Key="team/feeds/manifest.json", Body=json.dumps(manifest).encode())
    with pytest.raises(PullError, match=r"gpu_offers.v9.parquet is missing .*kept the previous pull"):
        pull(url, home, endpoint_url=s3_endpoint, every_file=True)
    assert previous_manifest(home) == held


def test_a_reader_machine_never_scrapes(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    monkeypatch.setenv("GPUCOST_PULL_URL", "https://feeds.example/gpucost")
    result = runner.invoke(app, ["refresh"])
    assert result.exit_code == 2
    assert (
        "this machine reads the published feeds (GPUCOST_PULL_URL=https://feeds.example/gpucost)"
        in result.output
    )
    assert not (tmp_path / "warehouse.duckdb").exists()


def test_a_live_publication_pulled_says_how_old_it_is(scraped, tmp_path, monkeypatch):
    out = tmp_path / "live"
    con = duckdb.connect(str(scraped / "warehouse.duckdb"), read_only=True)
    try:
        # the replay rows published as a live publication generated an hour before the clock
        write_publication(con, out, sample=False, now=datetime(2026, 12, 2, 1, 0, tzinfo=UTC))
    finally:
        con.close()
    home = tmp_path / "reader"
    pull(str(out), home)
    monkeypatch.setattr(cli_prices, "datetime", _FrozenClock)
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_PULL_URL", str(out))
    result = runner.invoke(app, ["prices", "--gpu", "H100"])
    assert result.exit_code == 0, result.output
    assert "answers from the pulled publication generated 2026-12-02T01:00:00.000000Z" in result.stderr
    assert "live prices fetched" in result.stdout and "sample" not in result.stdout


def test_a_reader_pull_fetches_only_its_feeds_and_a_mirror_checks_every_file(served, tmp_path):
    url, folder = served
    # a cost feed still on its way: the reader's pull never reads it, a mirror refuses it
    (folder / "finetune_costs.v1.csv").write_text("job_id\n")
    assert set(pull(url, tmp_path / "reader").fetched) == READER_FEEDS
    with pytest.raises(PullError, match=r"finetune_costs.v1.csv differs from manifest\.json"):
        pull(url, tmp_path / "mirror", every_file=True)


def test_history_on_a_pull_shows_the_current_prices_since_they_were_set(
    scraped, publication, tmp_path, monkeypatch
):
    home = tmp_path / "reader"
    pull(str(publication), home)
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_PULL_URL", str(publication))
    pulled = runner.invoke(app, ["history", "--gpu", "H100", "--json"])
    assert pulled.exit_code == 0, pulled.output
    rows = json.loads(pulled.stdout)
    assert rows and all(r["valid_to"] is None for r in rows)  # closed intervals are not published
    monkeypatch.setenv("GPUCOST_HOME", str(scraped))
    monkeypatch.delenv("GPUCOST_PULL_URL")
    scraped_rows = json.loads(runner.invoke(app, ["history", "--gpu", "H100", "--json"]).stdout)

    def offers(found: list[dict]) -> list[tuple]:
        return sorted((r["provider"], r["instance_type"], r["region"], r["pricing_type"]) for r in found)

    assert offers(rows) == offers([r for r in scraped_rows if r["valid_to"] is None])


def test_the_age_line_says_minutes_hours_or_days(tmp_path):
    from warehouse.db import publication_line
    from warehouse.freshness import format_age  # the ages of prices and publications read alike

    assert (format_age(0.5), format_age(3.25), format_age(72)) == ("30m", "3h", "3d")
    assert publication_line(tmp_path) is None
    (tmp_path / "pulled").mkdir()
    (tmp_path / "pulled" / MANIFEST).write_text(json.dumps({"generated_at": "2026-12-01T02:00:00.000000Z"}))
    line = publication_line(tmp_path, datetime(2026, 12, 2, 2, 0, tzinfo=UTC))
    assert line == "answers from the pulled publication generated 2026-12-01T02:00:00.000000Z (24h old)"


# --- what a pull refuses, in one line ------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://host/feeds", "is neither s3://bucket/prefix, an http(s) URL nor a folder"),
        ("s3:///feeds", "the pull URL names no bucket"),
    ],
)
def test_a_url_pull_cannot_read_says_which_forms_it_can(url, message, tmp_path):
    with pytest.raises(PullError, match=re.escape(message)):
        pull(url, tmp_path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m["files"].append(dict(m["files"][0], name="../escape.parquet")), "outside its folder"),
        (
            lambda m: m.update(files=[f for f in m["files"] if f["name"] not in OFFERS_FEEDS]),
            "lists no gpu_offers.v5",
        ),
        (lambda m: m.pop("generated_at"), "is not a gpucost manifest (KeyError"),
    ],
)
def test_a_manifest_the_reader_cannot_trust_is_refused(change, message, publication, tmp_path):
    folder = _copy(publication, tmp_path)
    manifest = _manifest(folder)
    change(manifest)
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(PullError, match=re.escape(message)):
        pull(str(folder), tmp_path / "reader")
    assert not (tmp_path / "reader" / "pulled" / MANIFEST).exists()


def test_s3_without_credentials_says_which_variables_to_set(s3_endpoint, bucket, monkeypatch, tmp_path):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(PullError, match=r"no AWS credentials to read s3://.*set AWS_ACCESS_KEY_ID"):
        pull(f"s3://{bucket}/feeds", tmp_path, endpoint_url=s3_endpoint)


def _older(publication: Path, tmp_path: Path, newer: tuple[str, ...]) -> Path:
    """The publication as one written before the feeds `newer` existed."""
    folder = _copy(publication, tmp_path)
    manifest = _manifest(folder)
    manifest["files"] = [f for f in manifest["files"] if f["name"] not in newer]
    for name in newer:
        (folder / name).unlink()
    (folder / MANIFEST).write_text(json.dumps(manifest))
    return folder


def test_the_monthly_cap_reaches_the_reader_from_v5(scraped, publication, tmp_path):
    result = pull(str(publication), tmp_path / "reader")
    assert OFFERS_FEED == "gpu_offers.v5.parquet" and OFFERS_FEED in result.fetched
    query = (
        "select provider, count(monthly_price_cap_usd) from marts.gpu_offers group by 1 "
        "having count(monthly_price_cap_usd) > 0 order by 1"
    )
    con = duckdb.connect(str(scraped / "warehouse.duckdb"), read_only=True)
    scraped_caps = con.execute(query).fetchall()
    con.close()
    con = duckdb.connect(str(reader_warehouse(tmp_path / "reader")), read_only=True)
    assert con.execute(query).fetchall() == scraped_caps
    con.close()
    # the replay's capped providers (Hetzner's GEX servers, Linode) state it
    assert {p for p, _ in scraped_caps} >= {"hetzner", "linode"}


def test_a_publication_from_before_v5_pulls_from_its_v4_without_caps(publication, tmp_path):
    folder = _older(publication, tmp_path, OFFERS_FEEDS[:1])
    result = pull(str(folder), tmp_path / "reader")
    assert OFFERS_FEEDS[1] in result.fetched and OFFERS_FEED not in result.fetched
    con = duckdb.connect(str(reader_warehouse(tmp_path / "reader")), read_only=True)
    assert con.execute("select count(monthly_price_cap_usd) from marts.gpu_offers").fetchall() == [(0,)]
    con.close()


def test_a_publication_from_before_v4_pulls_from_its_v3(publication, tmp_path):
    folder = _older(publication, tmp_path, OFFERS_FEEDS[:2])
    result = pull(str(folder), tmp_path / "reader")
    assert OFFERS_FEEDS[2] in result.fetched and not {OFFERS_FEED, OFFERS_FEEDS[1]} & set(result.fetched)
    con = duckdb.connect(str(reader_warehouse(tmp_path / "reader")), read_only=True)
    # v3 carries no set-up fee: the reader's offers hold none, and its bill charges none
    assert con.execute("select count(*), count(setup_fee_usd) from marts.gpu_offers").fetchall()[0][1] == 0
    assert con.execute("select count(*) from marts.finetune_costs where fees_usd > 0").fetchall() == [(0,)]
    con.close()


def test_the_cli_refusal_is_one_line_and_exit_1(publication, tmp_path, monkeypatch):
    folder = _copy(publication, tmp_path)
    (folder / OFFERS_FEED).write_bytes(b"half")
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "reader"))
    result = runner.invoke(app, ["pull", str(folder)])
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: gpu_offers.v5.parquet differs from manifest.json (4 bytes,")
    assert line.endswith("nothing was pulled before; pull again later")


# --- a newer publication replaces the pulled one ------------------------------------------------


def test_a_newer_publication_replaces_the_pulled_one(scraped, tmp_path, monkeypatch):
    out = tmp_path / "publication"
    con = duckdb.connect(str(scraped / "warehouse.duckdb"), read_only=True)
    try:
        write_publication(con, out, now=datetime(2026, 12, 1, 2, 0, tzinfo=UTC))
        home = tmp_path / "reader"
        first = pull(str(out), home)
        # the next publication: the same offers an hour later (every price_age_hours and every
        # Parquet file's generated_at metadata moves, so both reader feeds change)
        write_publication(con, out, now=datetime(2026, 12, 1, 3, 0, tzinfo=UTC))
    finally:
        con.close()
    second = pull(str(out), home)
    assert first.fetched_bytes > 0 and set(second.fetched) == READER_FEEDS and second.reused == ()
    assert previous_manifest(home)["generated_at"] == "2026-12-01T03:00:00.000000Z"
    pulled = duckdb.connect(str(reader_warehouse(home)), read_only=True)
    try:
        assert pulled.execute("select marts_built_at from ops.runs").fetchall() == [
            (datetime(2026, 12, 1, 3, 0, tzinfo=UTC),)
        ]
        # the marts carry the dictionary's comments, as a refresh's do
        comment = pulled.execute(
            "select comment from duckdb_columns() where schema_name = 'marts' and table_name = 'gpu_offers' "
            "and column_name = 'price_usd_per_gpu_hour'"
        ).fetchall()[0][0]
        assert comment
    finally:
        pulled.close()
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_PULL_URL", str(out))
    sql = runner.invoke(app, ["sql", "select count(*) as offers from marts.gpu_offers"])
    assert sql.exit_code == 0, sql.output
    offers_rows = next(f["rows"] for f in _manifest(out)["files"] if f["name"] == OFFERS_FEED)
    assert f"│ {offers_rows} " in sql.stdout
