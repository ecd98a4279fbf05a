"""The raw archive: compressed content-addressed bodies, the AWS prefilter, replay, retention (gc)."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
import zstandard
from typer.testing import CliRunner

from connectors import CONNECTORS, aws
from connectors.base import Excluded, Offer, RawResponse
from connectors.http import make_client
from tests.conftest import REPO
from warehouse import archive
from warehouse.archive import (
    ArchiveError,
    BodyPruned,
    archive_bytes,
    archived_responses,
    collect_garbage,
    keep_aws_offer_csv,
    read_body,
)
from warehouse.db import MIGRATIONS_DIR, connect, migrate
from warehouse.load import land_raw
from warehouse.pipeline import credentials_for

REPLAY = REPO / "tests" / "replay"
FIXTURES = REPO / "tests" / "fixtures"
T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
OFFER_CSV_URL = f"{aws.PRICING_HOST}/offers/v1.0/aws/AmazonEC2/20261127183045/us-east-1/index.csv"


@pytest.fixture
def con() -> duckdb.DuckDBPyConnection:
    con = connect(":memory:")
    migrate(con)
    yield con
    con.close()


def response(
    url: str = "https://x.test/a", body: bytes = b'{"price": 1.0}', fetched_at: datetime = T0, **kw
) -> RawResponse:
    return RawResponse(url=url, method="GET", status=200, fetched_at=fetched_at, body=body, **kw)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def stored(con) -> list[tuple]:
    return con.execute(
        "select seq, bytes, body_sha256, payload_path, compression, prefilter, stored_bytes "
        "from raw.responses order by run_id, seq"
    ).fetchall()


def replay_run(provider: str) -> list[RawResponse]:
    """What `provider` fetches from the committed cassette (spooled bodies are copies)."""
    connector = CONNECTORS[provider]
    creds, secrets = credentials_for(connector, {}, replay=True)
    with make_client(replay=REPLAY, secrets=secrets) as client:
        return list(connector.fetch(client, creds, None))


# --- storing ---------------------------------------------------------------------------------------


def test_bodies_are_compressed_and_addressed_by_the_uncompressed_sha256(con, tmp_path: Path):
    body = b'{"offers": [' + b'{"gpu": "H100", "price": 2.49},' * 200 + b"]}"
    landed = land_raw(
        con, tmp_path, "r1", "runpod", [response(body=body), response("https://x.test/b", body)]
    )
    assert landed == 2 * len(body)  # bytes as they came over the wire
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert [f.relative_to(tmp_path).as_posix() for f in files] == [f"{sha(body)[:2]}/{sha(body)}.zst"]
    assert zstandard.ZstdDecompressor().stream_reader(files[0].open("rb")).read() == body
    size = files[0].stat().st_size
    assert size < len(body) / 10  # a repetitive JSON body: zstd does far better than 10x
    relative = f"{sha(body)[:2]}/{sha(body)}.zst"
    assert stored(con) == [
        (0, len(body), sha(body), relative, "zstd", None, size),
        (1, len(body), sha(body), relative, "zstd", None, size),
    ]
    assert read_body(tmp_path, relative, "zstd") == body


def test_a_spooled_body_is_compressed_in_and_its_spool_file_removed(con, tmp_path: Path):
    spool = tmp_path / "spool" / "body-1"
    spool.parent.mkdir()
    spool.write_bytes(b"x" * 100_000)
    big = RawResponse(url="https://x.test/big", method="GET", status=200, fetched_at=T0, body_path=spool)
    assert land_raw(con, tmp_path / "raw", "r1", "azure", [big]) == 100_000
    assert not spool.exists()
    ((_, size, digest, path, compression, _, stored_bytes),) = stored(con)
    assert (size, digest) == (100_000, sha(b"x" * 100_000))
    assert read_body(tmp_path / "raw", path, compression) == b"x" * 100_000
    assert stored_bytes == (tmp_path / "raw" / path).stat().st_size < 1_000


@dataclass(frozen=True, slots=True)
class Hashed(RawResponse):
    """A RawResponse whose client hashed the body while downloading it."""

    sha256: str | None = None


def test_a_precomputed_sha256_is_used_instead_of_hashing_again(con, tmp_path: Path):
    claimed = "ab" * 32  # not the body's real hash: proves land_raw took it as given
    land_raw(
        con,
        tmp_path,
        "r1",
        "aws",
        [Hashed(url="u", method="GET", status=200, fetched_at=T0, body=b"x", sha256=claimed)],
    )
    ((_, _, digest, path, *_),) = stored(con)
    assert (digest, path) == (claimed, f"ab/{claimed}.zst")
    # and a second landing of the same hash finds the stored file without reading the body
    land_raw(
        con,
        tmp_path,
        "r2",
        "aws",
        [Hashed(url="u", method="GET", status=200, fetched_at=T0, body=b"", sha256=claimed)],
    )
    assert [p.name for p in tmp_path.rglob("*") if p.is_file()] == [f"{claimed}.zst"]


def test_plain_files_written_before_compression_stay_readable_and_are_reused(tmp_path: Path):
    """A warehouse from before migration 004: its rows and uncompressed files still replay."""
    old = tmp_path / "migrations-001-003"
    old.mkdir()
    for path in sorted(MIGRATIONS_DIR.glob("*.sql")):
        if int(path.name[:3]) < 4:
            shutil.copy(path, old / path.name)
    con = connect(":memory:")
    migrate(con, old)
    body = b'{"old": true}'
    (tmp_path / "raw" / sha(body)[:2]).mkdir(parents=True)
    (tmp_path / "raw" / sha(body)[:2] / sha(body)).write_bytes(body)
    con.execute(
        "insert into raw.responses values ('r0', 'vast', 0, 'GET', 'https://x.test/o', null, 200, ?, "
        "'application/json', '{}', ?, ?, ?)",
        [T0, len(body), sha(body), f"{sha(body)[:2]}/{sha(body)}"],
    )
    applied = migrate(con)  # 004 and every later migration, in order
    assert applied[0] == "004_raw_archive.sql" and applied == sorted(applied)
    (old_response,) = archived_responses(con, tmp_path / "raw", "r0", "vast")
    assert (old_response.body, old_response.url, old_response.status) == (body, "https://x.test/o", 200)
    land_raw(con, tmp_path / "raw", "r1", "vast", [response("https://x.test/o", body)])
    assert stored(con)[-1][3:6] == (f"{sha(body)[:2]}/{sha(body)}", None, None)  # the plain file, reused
    assert archive_bytes(tmp_path / "raw") == (1, len(body))


# --- the AWS prefilter ----------------------------------------------------------------------------


def _noisy_offer_csv() -> bytes:
    """The fixture offer file plus rows parsing never reads (Windows, RHEL, dedicated, reserved):
    most of a real offer file's bytes."""
    text = (FIXTURES / "aws" / "offer-us-east-1__2026-11-29.csv").read_bytes()
    lines = text.splitlines(keepends=True)
    rows = [line for line in lines if line.startswith(b'"') and b'"OnDemand"' in line]
    noise = []
    for row in rows:
        noise.append(row.replace(b'"Linux"', b'"Windows"'))
        noise.append(row.replace(b'"Linux"', b'"RHEL"'))
        noise.append(row.replace(b'"Shared"', b'"Dedicated"'))
        noise.append(row.replace(b'"OnDemand"', b'"Reserved"'))
    return text + b"".join(noise * 20)


def test_aws_offer_csv_keeps_what_parsing_reads_and_parses_the_same(con, tmp_path: Path):
    body = _noisy_offer_csv()
    offer_file = response(OFFER_CSV_URL, body, content_type="text/csv")
    expected = list(aws.parse([offer_file]))
    assert any(isinstance(i, Offer) for i in expected) and any(isinstance(i, Excluded) for i in expected)
    land_raw(con, tmp_path, "r1", "aws", [offer_file])
    ((_, size, digest, path, compression, prefilter, stored_bytes),) = stored(con)
    assert (size, digest, compression, prefilter) == (len(body), sha(body), "zstd", "aws-offer-csv")
    assert path == f"{sha(body)[:2]}/{sha(body)}.aws-offer-csv.zst"
    kept = read_body(tmp_path, path, compression)
    assert len(kept) < len(body) / 10 and stored_bytes < len(kept)
    assert b'"Windows"' not in kept and b'"Reserved"' not in kept
    assert kept.startswith(body[: body.index(b'"SKU"')])  # preamble kept byte for byte
    (replayed,) = archived_responses(con, tmp_path, "r1", "aws")
    assert repr(list(aws.parse([replayed]))) == repr(expected)  # offers and exclusions alike


def test_the_aws_prefilter_is_a_fixed_point():
    """Prefiltering what the prefilter kept keeps all of it: the kept file parses like the whole."""
    import io

    kept = b"".join(keep_aws_offer_csv(io.BytesIO(_noisy_offer_csv())))
    assert b"".join(keep_aws_offer_csv(io.BytesIO(kept))) == kept


def test_a_body_the_client_spooled_prefiltered_is_stored_as_it_is_under_the_prefilter(con, tmp_path: Path):
    """The HTTP client ran the prefilter while the body streamed (`keep=`, `aws.OfferCsvFilter`):
    the spool holds the kept bytes, and the archive stores them without reading a whole body."""
    import io

    body = _noisy_offer_csv()
    kept = b"".join(keep_aws_offer_csv(io.BytesIO(body)))
    spool = tmp_path / "spool" / "body-1"
    spool.parent.mkdir()
    spool.write_bytes(kept)
    offer_file = response(
        OFFER_CSV_URL, b"", body_path=spool, sha256=sha(body), prefilter="aws-offer-csv", wire_bytes=len(body)
    )
    expected = list(aws.parse([offer_file]))
    land_raw(con, tmp_path / "raw", "r1", "aws", [offer_file])
    ((_, size, digest, path, compression, prefilter, _),) = stored(con)
    # the same row and the same file as when the archive prefilters the whole body itself
    assert (size, digest, compression, prefilter) == (len(body), sha(body), "zstd", "aws-offer-csv")
    assert path == f"{sha(body)[:2]}/{sha(body)}.aws-offer-csv.zst"
    assert read_body(tmp_path / "raw", path, compression) == kept
    assert not spool.exists()  # landed: the spool is removed as any other
    (replayed,) = archived_responses(con, tmp_path / "raw", "r1", "aws")
    assert repr(list(aws.parse([replayed]))) == repr(expected)


def test_a_body_held_as_an_unknown_prefilter_is_refused(con, tmp_path: Path):
    held = response(
        OFFER_CSV_URL, b"kept lines\n", sha256=sha(b"x"), prefilter="no-such-filter", wire_bytes=9
    )
    with pytest.raises(ValueError, match="PREFILTERS does not list"):
        land_raw(con, tmp_path, "r1", "aws", [held])


def test_a_body_the_prefilter_cannot_read_is_stored_whole(con, tmp_path: Path):
    body = b"<html>503 Service Unavailable</html>"
    land_raw(con, tmp_path, "r1", "aws", [response(OFFER_CSV_URL, body)])
    ((_, _, digest, path, compression, prefilter, _),) = stored(con)
    assert (digest, compression, prefilter) == (sha(body), "zstd", None)
    assert read_body(tmp_path, path, compression) == body


def test_only_aws_offer_csv_files_are_prefiltered(con, tmp_path: Path):
    body = _noisy_offer_csv()
    json_url = OFFER_CSV_URL.removesuffix(".csv") + ".json"
    land_raw(con, tmp_path, "r1", "aws", [response(json_url, body), response(aws.SPOT_URL, b"callback({})")])
    land_raw(con, tmp_path, "r2", "azure", [response(OFFER_CSV_URL, body + b"\n")])
    assert [row[5] for row in stored(con)] == [None, None, None]


# --- replay from the archive ------------------------------------------------------------------------


@pytest.mark.parametrize("provider", sorted(CONNECTORS))
def test_replay_from_the_archive_parses_like_the_original_run(con, tmp_path: Path, provider: str):
    responses = replay_run(provider)
    assert responses, f"the cassette has nothing for {provider}"
    expected = repr(list(CONNECTORS[provider].parse(responses)))  # before landing removes spools
    land_raw(con, tmp_path / "raw", "run-1", provider, responses)
    replayed = archived_responses(con, tmp_path / "raw", "run-1", provider)
    assert [(r.url, r.status, dict(r.headers)) for r in replayed] == [
        (r.url, r.status, dict(r.headers)) for r in responses
    ]
    assert repr(list(CONNECTORS[provider].parse(replayed))) == expected
    if provider == "aws":  # the cassette's offer files went through the prefilter
        assert {row[5] for row in stored(con)} == {None, "aws-offer-csv"}


def test_a_large_body_is_read_back_into_a_spool_file(con, tmp_path: Path, monkeypatch):
    body = bytes(range(256)) * 40
    land_raw(con, tmp_path / "raw", "r1", "vast", [response(body=body)])
    monkeypatch.setattr(archive, "IN_MEMORY_MAX_BYTES", 1000)
    with pytest.raises(ArchiveError, match="pass spool_dir"):
        archived_responses(con, tmp_path / "raw", "r1", "vast")
    (big,) = archived_responses(con, tmp_path / "raw", "r1", "vast", spool_dir=tmp_path / "spool")
    assert big.body == b"" and big.body_path is not None and big.body_path.parent == tmp_path / "spool"
    assert big.read() == body


def test_a_corrupt_or_missing_body_says_so(con, tmp_path: Path):
    land_raw(con, tmp_path, "r1", "vast", [response(body=b"the real body")])
    ((_, _, _, path, _, _, _),) = stored(con)
    (tmp_path / path).write_bytes(zstandard.ZstdCompressor().compress(b"something else"))
    with pytest.raises(ArchiveError, match="does not match its sha256"):
        archived_responses(con, tmp_path, "r1", "vast")
    (tmp_path / path).unlink()
    with pytest.raises(ArchiveError, match="missing from the raw archive"):
        archived_responses(con, tmp_path, "r1", "vast")
    with pytest.raises(ArchiveError, match="no archived responses"):
        archived_responses(con, tmp_path, "r-unknown", "vast")


# --- retention --------------------------------------------------------------------------------------


def provider_run(con, run_id: str, provider: str, at: datetime, inserted: int = 0, closed: int = 0) -> None:
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers) values (?, ?, 'ok', 'live', [?]) "
        "on conflict do nothing",
        [run_id, at, provider],
    )
    con.execute(
        "insert into ops.provider_runs (run_id, provider, status, started_at, rows_inserted, rows_closed) "
        "values (?, ?, 'ok', ?, ?, ?)",
        [run_id, provider, at, inserted, closed],
    )


@pytest.fixture
def aged(con, tmp_path: Path):
    """Runs 40 days old and 1 day old, some of which changed prices; `now` is T0."""
    old = T0 - timedelta(days=40)
    plan = [
        ("old-changed", "runpod", old, 3, 0, [b"changed prices"]),
        ("old-closed", "vast", old, 0, 2, [b"closed offers"]),
        ("old-same", "runpod", old, 0, 0, [b"same prices, hour 1", b"shared index"]),
        ("old-same-2", "azure", old, 0, 0, [b"same prices, hour 2"]),
        ("recent-same", "runpod", T0 - timedelta(days=1), 0, 0, [b"same prices, today", b"shared index"]),
    ]
    for run_id, provider, at, inserted, closed, bodies in plan:
        land_raw(
            con,
            tmp_path,
            run_id,
            provider,
            [response(f"https://x.test/{i}", body, fetched_at=at) for i, body in enumerate(bodies)],
        )
        provider_run(con, run_id, provider, at, inserted, closed)
    return tmp_path


def _bodies(root: Path) -> set[bytes]:
    return {read_body(root, p, "zstd") for p in (f.relative_to(root).as_posix() for f in root.rglob("*.zst"))}


def test_gc_keeps_price_changes_and_recent_runs_and_removes_the_rest(con, aged: Path):
    report = collect_garbage(con, aged, retention_days=30, now=T0)
    assert _bodies(aged) == {b"changed prices", b"closed offers", b"same prices, today", b"shared index"}
    assert (report.changed_runs, report.kept_changed_files, report.kept_recent_files) == (2, 2, 2)
    assert (report.removed_files, report.removed_responses) == (2, 2)
    assert report.removed_bytes == report.freed_bytes > 0
    pruned = con.execute(
        "select run_id, seq from raw.responses where pruned_at is not null order by all"
    ).fetchall()
    assert pruned == [("old-same", 0), ("old-same-2", 0)]  # "shared index" is still kept
    with pytest.raises(BodyPruned, match="removed by `gpucost gc`"):
        archived_responses(con, aged, "old-same", "runpod")
    assert [r.body for r in archived_responses(con, aged, "old-changed", "runpod")] == [b"changed prices"]
    again = collect_garbage(con, aged, retention_days=30, now=T0)
    assert (again.removed_files, again.orphan_files, again.freed_bytes) == (0, 0, 0)


def test_gc_dry_run_reports_the_same_and_removes_nothing(con, aged: Path):
    before = sorted(p for p in aged.rglob("*") if p.is_file())
    dry = collect_garbage(con, aged, retention_days=30, now=T0, dry_run=True)
    assert sorted(p for p in aged.rglob("*") if p.is_file()) == before
    assert con.execute("select count(*) from raw.responses where pruned_at is not null").fetchall() == [(0,)]
    real = collect_garbage(con, aged, retention_days=30, now=T0)
    assert (dry.removed_files, dry.removed_bytes, dry.removed_responses) == (
        real.removed_files,
        real.removed_bytes,
        real.removed_responses,
    )
    assert dry.dry_run and not real.dry_run


def test_gc_with_zero_days_keeps_only_price_changes(con, aged: Path):
    collect_garbage(con, aged, retention_days=0, now=T0)
    assert _bodies(aged) == {b"changed prices", b"closed offers"}
    with pytest.raises(ValueError, match="0 or more"):
        collect_garbage(con, aged, retention_days=-1, now=T0)


def test_gc_removes_orphan_archive_files_and_nothing_else(con, aged: Path):
    (aged / f".incoming-{'0' * 32}.part").write_bytes(b"half a body")
    (aged / "ff").mkdir(exist_ok=True)
    (aged / "ff" / ("f" * 64 + ".zst")).write_bytes(b"landed, row never recorded")
    (aged / "notes.txt").write_text("someone's notes")
    report = collect_garbage(con, aged, retention_days=30, now=T0)
    assert (report.orphan_files, report.orphan_bytes) == (
        2,
        len(b"half a body") + len(b"landed, row never recorded"),
    )
    assert (aged / "notes.txt").exists() and not (aged / "ff" / ("f" * 64 + ".zst")).exists()


def test_gc_keeps_the_bodies_of_a_running_run(con, tmp_path: Path):
    old = T0 - timedelta(days=90)
    land_raw(con, tmp_path, "in-flight", "runpod", [response(body=b"landing now", fetched_at=old)])
    land_raw(con, tmp_path, "dead", "runpod", [response(body=b"no run row", fetched_at=old)])
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers) "
        "values ('in-flight', ?, 'running', 'live', ['runpod'])",
        [old],
    )
    report = collect_garbage(con, tmp_path, retention_days=1, now=T0)
    assert (report.kept_recent_files, report.removed_files) == (1, 1)
    assert _bodies(tmp_path) == {b"landing now"}


# --- the command ------------------------------------------------------------------------------------


def test_gpucost_gc_reports_and_frees(tmp_path: Path, monkeypatch):
    from flows.cli import app

    home = tmp_path / "home"
    con = connect(home / "warehouse.duckdb")
    migrate(con)
    old = datetime.now(UTC) - timedelta(days=45)
    land_raw(con, home / "raw", "old", "runpod", [response(body=b"x" * 5000)])
    provider_run(con, "old", "runpod", old)
    land_raw(con, home / "raw", "new", "runpod", [response(body=b"y" * 5000)])
    provider_run(con, "new", "runpod", datetime.now(UTC))
    con.close()
    monkeypatch.setenv("GPUCOST_HOME", str(home))
    monkeypatch.setenv("GPUCOST_RAW_RETENTION_DAYS", "30")
    runner = CliRunner()
    dry = runner.invoke(app, ["gc", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    assert "would free" in dry.output and "1 exchanges' bodies" in dry.output
    assert len(list((home / "raw").rglob("*.zst"))) == 2
    real = runner.invoke(app, ["gc"])
    assert real.exit_code == 0 and "freed" in real.output, real.output
    assert len(list((home / "raw").rglob("*.zst"))) == 1
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "nowhere"))
    missing = runner.invoke(app, ["gc"])
    assert missing.exit_code == 1 and "no warehouse" in missing.output
