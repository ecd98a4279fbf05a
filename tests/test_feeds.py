"""Feeds v2: one dictionary for every column (mart comments, Parquet metadata, docs/feeds.md), v1
unchanged beside v2, a manifest written last, and publishing to a local S3-compatible server."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from tests.factories import make_offer
from warehouse.db import connect, load_seeds, migrate, open_warehouse
from warehouse.dictionary import COLUMNS, MARTS, UndocumentedColumn, comment_marts, undocumented
from warehouse.export import FEEDS, MANIFEST, SAMPLE_MARKER, Feed, read_manifest, sha256_of, write_feeds
from warehouse.feeds_doc import DOC_PATH, render_markdown
from warehouse.finetune_marts import build_finetune_marts
from warehouse.load import load_offers
from warehouse.marts import build_marts
from warehouse.publish import (
    PublishError,
    PublishSettings,
    S3Location,
    publish_feeds,
    publish_if_configured,
    s3_client,
)

T0 = datetime(2026, 11, 29, 12, tzinfo=UTC)
RUN = "20261129T120000Z-feeds"
V1 = [f for f in FEEDS if f.version == 1]
V2 = [f for f in FEEDS if f.version == 2]
V3 = [f for f in FEEDS if f.version == 3]


def _fill(con: duckdb.DuckDBPyConnection, mode: str = "live", *, finetune: bool = True) -> None:
    """Four offers (one an unknown GPU), a recorded run, and the marts built from them."""
    load_offers(
        con,
        RUN,
        "aws",
        [
            make_offer("p5.48xlarge", 55.04, gpu_count=8.0),
            make_offer(
                "g6.xlarge", 0.3, gpu_count=1.0, pricing_type="spot", price_source="market", zone="us-east-1a"
            ),
        ],
        now=T0,
    )
    load_offers(
        con,
        RUN,
        "runpod",
        [
            make_offer(
                "1x NVIDIA GeForce RTX 4090 (secure)",
                0.69,
                provider="runpod",
                region="global",
                gpu_name_raw="NVIDIA GeForce RTX 4090",
                gpu_count=1.0,
            ),
            make_offer(
                "2x Mystery",
                1.0,
                provider="runpod",
                region="global",
                gpu_name_raw="Mystery GPU 9000",
                gpu_count=2.0,
            ),
        ],
        now=T0,
    )
    build_marts(con, finetune=build_finetune_marts if finetune else None)
    con.execute(
        "insert into ops.runs (run_id, started_at, status, mode, providers, marts_built_at) "
        "values (?, ?, 'ok', ?, ['aws', 'runpod'], ?)",
        [RUN, T0, mode, T0],
    )


@pytest.fixture(scope="module")
def warehouse() -> Iterator[duckdb.DuckDBPyConnection]:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    _fill(con)
    yield con
    con.close()


@pytest.fixture(scope="module")
def published(warehouse, tmp_path_factory) -> Path:
    """One publication of every feed, three hours after the prices were seen."""
    out = tmp_path_factory.mktemp("feeds")
    write_feeds(warehouse, out, now=T0 + timedelta(hours=3))
    return out


# --- the dictionary ------------------------------------------------------------------------------


def test_every_feed_column_is_documented():
    for feed in FEEDS:
        assert undocumented(feed.columns) == [], f"{feed.name} v{feed.version}"
        for name in feed.columns:
            entry = COLUMNS[name]
            assert entry.meaning and entry.type, name


def test_a_feed_column_missing_from_the_dictionary_fails_loudly():
    feed = Feed("odd", 2, "marts.gpu_offers", ("provider", "mystery"), ("provider",), documented_names=True)
    with pytest.raises(UndocumentedColumn, match=r"'mystery' has no entry in warehouse/dictionary\.py"):
        feed.query()
    with pytest.raises(UndocumentedColumn, match="mystery"):
        render_markdown([feed])


def test_every_mart_column_is_documented_with_the_type_duckdb_builds(warehouse):
    built = warehouse.execute(
        "select table_name, column_name, data_type from duckdb_columns() where schema_name = 'marts'"
    ).fetchall()
    assert {t for t, _, _ in built} == set(MARTS)
    missing = sorted(f"marts.{t}.{c}" for t, c, _ in built if c not in COLUMNS)
    assert missing == [], "add these to warehouse/dictionary.py COLUMNS"
    wrong = [(t, c, ty, COLUMNS[c].type) for t, c, ty in built if COLUMNS[c].type != ty]
    assert wrong == []


def test_every_dictionary_entry_names_a_column_that_exists(warehouse):
    in_marts = {
        c
        for (c,) in warehouse.execute(
            "select column_name from duckdb_columns() where schema_name = 'marts'"
        ).fetchall()
    }
    in_feeds = {c for feed in FEEDS for c in feed.columns}
    assert [name for name in COLUMNS if name not in in_marts | in_feeds] == []


def test_every_feed_column_has_the_type_the_dictionary_says(warehouse):
    warehouse.execute("set variable feeds_generated_at = now()")
    for feed in FEEDS:
        described = warehouse.execute(f"describe {feed.query()}").fetchall()
        assert [(name, kind) for name, kind, *_ in described] == [
            (name, COLUMNS[name].type) for name in feed.columns
        ], f"{feed.name} v{feed.version}"


def test_v2_names_carry_their_units():
    for feed in V2 + V3:
        for name in feed.columns:
            entry = COLUMNS[name]
            assert not name.endswith("_gbps"), f"{name}: say _gbytes_per_s or _gbits_per_s"
            if entry.unit.startswith("GB/s"):
                assert name.endswith("_gbytes_per_s"), name
            if entry.unit.startswith("Gb/s"):
                assert name.endswith("_gbits_per_s"), name
            if entry.type.startswith("TIMESTAMP"):
                assert name.endswith("_at"), name
            if entry.unit.startswith("USD per") and "hour" in entry.unit:
                assert "usd_per" in name and "hour" in name, name
            if entry.unit.startswith("GB"):
                assert "_gb" in name, name
            if entry.unit == "hours":
                assert name.endswith("_hours"), name


def test_marts_carry_the_dictionary_as_comments(warehouse):
    comments = dict(
        warehouse.execute(
            "select table_name || '.' || column_name, comment from duckdb_columns() "
            "where schema_name = 'marts'"
        ).fetchall()
    )
    assert all(comments.values()), [k for k, v in comments.items() if not v]
    assert comments["gpu_offers.intra_node_gbps"] == COLUMNS["intra_node_gbps"].comment
    assert "gigabytes per second despite the name" in comments["gpu_offers.intra_node_gbps"]
    assert comments["gpu_offers.inter_node_gbps"].endswith("[Gb/s (gigabits per second)]")
    tables = dict(
        warehouse.execute(
            "select table_name, comment from duckdb_tables() where schema_name = 'marts' union all "
            "select view_name, comment from duckdb_views() where schema_name = 'marts' and not internal"
        ).fetchall()
    )
    assert tables == MARTS


def test_comments_come_back_after_every_rebuild():
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    build_marts(con)
    build_marts(con)  # `create or replace` drops comments; build_marts puts them back
    assert con.execute(
        "select count(*) from duckdb_columns() where schema_name = 'marts' and comment is null"
    ).fetchall() == [(0,)]
    assert comment_marts(con) > 0


def test_docs_feeds_md_is_current():
    assert DOC_PATH.read_text() == render_markdown(FEEDS), (
        "docs/feeds.md is stale: run `uv run python -m warehouse.feeds_doc`"
    )


def _doc_columns(text: str) -> dict[str, list[str]]:
    """Feed file stem (`gpu_offers.v2`) -> the column names docs/feeds.md lists under its heading."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        heading = re.match(r"^## (\w+) v(\d+)$", line)
        if heading:
            current = f"{heading.group(1)}.v{heading.group(2)}"
            found[current] = []
        elif current and (cell := re.match(r"^\| `([^`]+)` \|", line)):
            found[current].append(cell.group(1))
    return found


def test_the_doc_names_exactly_the_columns_each_feed_file_has(published):
    documented = _doc_columns(DOC_PATH.read_text())
    assert set(documented) == {f"{f.name}.v{f.version}" for f in FEEDS}
    for stem, names in documented.items():
        files = sorted(published.glob(f"{stem}.*"))
        assert files, stem
        for path in files:
            actual = (
                pq.read_schema(path).names
                if path.suffix == ".parquet"
                else path.read_text().splitlines()[0].split(",")
            )
            assert names == actual, f"docs/feeds.md vs {path.name}"


# --- v1 stays, v2 beside it ----------------------------------------------------------------------


def test_v1_feeds_are_unchanged(published):
    # pinned here on purpose: a v1 feed is a promise to its readers, never edited
    assert {f.name: f.columns for f in V1} == {
        "gpu_offers": (
            "provider", "instance_type", "region", "zone", "pricing_type", "is_spot", "price_source",
            "price_usd_per_hour", "gpu_name", "gpu_count", "vram_gb", "total_vram_gb", "memory_type",
            "bf16_tflops", "intra_node_interconnect", "intra_node_gbps", "inter_node_fabric",
            "inter_node_gbps", "price_usd_per_gpu_hour", "price_usd_per_vram_gb_hour",
            "billing_granularity", "last_seen_at",
        ),
        "unmapped_gpus": ("provider", "gpu_name_raw", "gpu_memory_gb_raw", "offers"),
        "finetune_costs": (
            "job_id", "model_id", "method", "train_tokens", "provider", "instance_type", "region", "zone",
            "pricing_type", "price_source", "gpu_name", "gpus_used", "nodes_used", "sharding",
            "estimated_hours", "billed_hours", "on_demand_cost_usd", "expected_spot_cost_usd", "cost_usd",
            "usd_per_million_tokens",
        ),
    }  # fmt: skip
    for feed in V1:
        for fmt in ("csv", "parquet"):
            assert (published / feed.filename(fmt)).exists()
        assert pq.read_schema(published / feed.filename("parquet")).metadata is None or (
            b"feed_version" not in pq.read_schema(published / feed.filename("parquet")).metadata
        )
    v1 = pl.read_parquet(published / "gpu_offers.v1.parquet")
    assert v1.columns == list(V1[0].columns) and v1.height == 3


def test_v2_renames_the_ambiguous_columns_and_keeps_their_values(published):
    v1 = pl.read_parquet(published / "gpu_offers.v1.parquet").sort("instance_type")
    v2 = pl.read_parquet(published / "gpu_offers.v2.parquet").sort("instance_type")
    assert v2["intra_node_gbytes_per_s"].to_list() == v1["intra_node_gbps"].to_list()
    assert v2["inter_node_gbits_per_s"].to_list() == v1["inter_node_gbps"].to_list()
    assert v2["vram_gb_per_gpu"].to_list() == v1["vram_gb"].to_list()
    p5 = v2.filter(pl.col("instance_type") == "p5.48xlarge").row(0, named=True)
    # the H100 seeds: NVLink 4 at 900 GB/s per GPU inside the node, EFA at 3200 Gb/s between nodes
    assert (p5["intra_node_gbytes_per_s"], p5["inter_node_gbits_per_s"]) == (900.0, 3200.0)
    assert p5["price_usd_per_gpu_hour"] == pytest.approx(55.04 / 8)


def test_gpu_offers_v3_is_v2_plus_what_the_source_states(published):
    # adding mart columns (issue 18 item 3) made a v3 beside v2; v2's file stays as it was
    v2_feed = next(f for f in V2 if f.name == "gpu_offers")
    assert [(f.name, f.columns) for f in V3 if f.name == "gpu_offers"] == [
        (
            "gpu_offers",
            (
                *v2_feed.columns,
                "price_covers",
                "vram_gb_stated",
                "vram_source",
                "spec_conflict",
                "gpu_variant",
                "variant_source",
            ),
        )
    ]
    v2 = pl.read_parquet(published / "gpu_offers.v2.parquet")
    v3 = pl.read_parquet(published / "gpu_offers.v3.parquet").sort("instance_type")
    assert v2.columns == list(v2_feed.columns) and (published / "gpu_offers.v3.csv").exists()
    rows = {r["instance_type"]: r for r in v3.iter_rows(named=True)}
    # providers.csv: an AWS instance-hour covers the instance; RunPod's basis is not stated
    assert rows["p5.48xlarge"]["price_covers"] == "gpu_cpu_ram"
    assert rows["1x NVIDIA GeForce RTX 4090 (secure)"]["price_covers"] is None
    # no source here states VRAM: every figure is the seed's, none in conflict
    assert set(v3["vram_source"]) == {"seed"} and not v3["spec_conflict"].any()
    assert v3["vram_gb_stated"].is_null().all()
    # p5 resolves by instance type (AWS's docs say SXM); the L4 and RTX 4090 ship in one form factor
    assert (
        rows["p5.48xlarge"]["variant_source"] == "instance_type"
        and rows["p5.48xlarge"]["gpu_variant"] == "SXM"
    )
    assert rows["g6.xlarge"]["variant_source"] == "only_variant"
    assert rows["1x NVIDIA GeForce RTX 4090 (secure)"]["variant_source"] == "only_variant"


def test_finetune_costs_v3_is_v2_and_the_whole_bill(published):
    v2 = pl.read_parquet(published / "finetune_costs.v2.parquet")
    v3 = pl.read_parquet(published / "finetune_costs.v3.parquet")
    assert not (published / "finetune_costs.v3.csv").exists()  # Parquet only, as v2
    assert v3.columns[: len(v2.columns)] == v2.columns
    bill = v3.columns[len(v2.columns) :]
    assert "total_usd" in bill and "bill_missing_facts" in bill and "egress_usd" in bill
    key = ["job_id", "provider", "instance_type", "region", "pricing_type"]
    assert v3.select(v2.columns).sort(key).equals(v2.sort(key))  # v2's columns mean what they meant
    # rows in order of the whole bill per job; each total is at least the GPU time
    assert v3.equals(v3.sort(["job_id", "total_usd"], maintain_order=True))
    assert (v3["total_usd"] >= v3["compute_usd"] + v3["spot_rework_usd"] - 1e-9).all()


def test_v4_is_v3_and_what_billing_needs_beyond_the_hour(published):
    # v3 keeps the columns it was published with; v4 adds the fee item and the offer's fee
    costs_v3 = pl.read_parquet(published / "finetune_costs.v3.parquet")
    costs_v4 = pl.read_parquet(published / "finetune_costs.v4.parquet")
    assert "fees_usd" not in costs_v3.columns
    assert [c for c in costs_v4.columns if c not in costs_v3.columns] == ["fees_usd"]
    assert costs_v4.height == costs_v3.height and (costs_v4["fees_usd"] == 0).all()  # no fee stated
    offers_v3 = pl.read_parquet(published / "gpu_offers.v3.parquet")
    offers_v4 = pl.read_parquet(published / "gpu_offers.v4.parquet")
    assert offers_v4.columns == [*offers_v3.columns, "setup_fee", "setup_fee_usd", "serverless"]
    assert offers_v4["setup_fee"].is_null().all() and not offers_v4["serverless"].any()


def test_v5_is_v4_and_the_monthly_cap(published):
    # v4 stays as it was published; v5 adds the cap as published and in USD
    offers_v4 = pl.read_parquet(published / "gpu_offers.v4.parquet")
    offers_v5 = pl.read_parquet(published / "gpu_offers.v5.parquet")
    assert "monthly_price_cap" not in offers_v4.columns
    assert offers_v5.columns == [*offers_v4.columns, "monthly_price_cap", "monthly_price_cap_usd"]
    assert offers_v5.drop("monthly_price_cap", "monthly_price_cap_usd").equals(offers_v4)
    assert offers_v5["monthly_price_cap"].is_null().all()  # these offers state no cap


def test_price_age_is_hours_from_last_seen_to_generated_at(published):
    v2 = pl.read_parquet(published / "gpu_offers.v2.parquet")
    assert v2["last_seen_at"].unique().to_list() == [T0]
    assert v2["price_age_hours"].unique().to_list() == [3.0]  # written at T0 + 3 h


def test_finetune_costs_v2_rows_stand_alone(warehouse, published):
    v1 = pl.read_parquet(published / "finetune_costs.v1.parquet")
    v2 = pl.read_parquet(published / "finetune_costs.v2.parquet")
    assert v2.height == v1.height > 0
    assert not (published / "finetune_costs.v2.csv").exists()  # Parquet only
    jobs = warehouse.sql(
        "select job_id, seq_len, micro_batch, method, lora_rank from core.finetune_jobs"
    ).pl()
    joined = v2.join(jobs, on="job_id", how="left", suffix="_seed")
    assert (joined["seq_len_tokens"] == joined["seq_len"]).all()
    assert (joined["micro_batch_sequences"] == joined["micro_batch"]).all()
    full = joined["method"] == "full"
    assert joined.filter(full)["lora_rank_used"].null_count() == joined.filter(full).height
    assert (joined.filter(~full)["lora_rank_used"] == joined.filter(~full)["lora_rank"]).all()
    assert (v2["memory_per_gpu_gb"] <= v2["usable_vram_per_gpu_gb"]).all()
    assert (v2["is_spot"] == (v2["pricing_type"] == "spot")).all()
    assert set(v2["price_source"]) == {"list", "market"}
    assert v2["price_age_hours"].unique().to_list() == [3.0]
    spot = v2.filter(pl.col("is_spot"))
    assert (
        spot["expected_spot_cost_usd"].null_count() == 0
        and spot["on_demand_cost_usd"].null_count() == spot.height
    )
    # the same rows as v1, renamed: cost per 1M tokens is the v1 value
    assert sorted(v2["cost_usd_per_million_tokens"]) == sorted(v1["usd_per_million_tokens"])


def test_v2_parquet_metadata_names_the_publication(published):
    for feed in V2:
        path = published / feed.filename("parquet")
        metadata = {k.decode(): v.decode() for k, v in pq.read_schema(path).metadata.items()}
        assert {k: metadata[k] for k in ("feed", "feed_version", "run_id", "generated_at", "data_mode")} == {
            "feed": feed.name,
            "feed_version": "2",
            "run_id": RUN,
            "generated_at": "2026-11-29T15:00:00.000000Z",
            "data_mode": "live",
        }
        described = json.loads(metadata["columns"])
        assert [c["name"] for c in described] == pq.read_schema(path).names
        first = COLUMNS[feed.columns[0]]
        assert described[0] == {
            "name": first.name,
            "type": first.type,
            "unit": first.unit,
            "meaning": first.meaning,
        }


# --- the manifest --------------------------------------------------------------------------------


def test_the_manifest_lists_every_file_with_rows_and_checksums(published):
    manifest = read_manifest(published)
    assert (manifest["run_id"], manifest["generated_at"], manifest["data_mode"]) == (
        RUN,
        "2026-11-29T15:00:00.000000Z",
        "live",
    )
    files = {f["name"]: f for f in manifest["files"]}
    on_disk = {p.name for p in published.iterdir()} - {MANIFEST}
    assert set(files) == on_disk  # live: no SAMPLE_DATA.txt
    for name, entry in files.items():
        path = published / name
        assert entry["sha256"] == sha256_of(path) and entry["bytes"] == path.stat().st_size
        rows = pl.read_parquet(path).height if entry["format"] == "parquet" else pl.read_csv(path).height
        assert entry["rows"] == rows, name


def test_the_manifest_is_renamed_into_place_last(warehouse, tmp_path, monkeypatch):
    renamed: list[str] = []
    real_replace = Path.replace

    def recording_replace(self: Path, target):
        renamed.append(Path(target).name)
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", recording_replace)
    write_feeds(warehouse, tmp_path)
    assert renamed[-1] == MANIFEST and renamed.count(MANIFEST) == 1
    assert len(renamed) == 1 + sum(len(f.formats) for f in FEEDS)
    assert not list(tmp_path.glob(".*.tmp"))


def test_only_the_formats_asked_for_are_written_and_listed(warehouse, tmp_path):
    written = write_feeds(warehouse, tmp_path, ("csv",))
    assert {p.suffix for p, _ in written} == {".csv"}
    assert {f["name"] for f in read_manifest(tmp_path)["files"]} == {p.name for p, _ in written}
    assert "finetune_costs.v2.csv" not in {p.name for p, _ in written}


def test_no_marts_no_files_and_no_manifest(tmp_path):
    con = connect(":memory:")
    migrate(con)
    assert write_feeds(con, tmp_path) == []
    assert not (tmp_path / MANIFEST).exists()


def test_replay_feeds_say_so_everywhere(tmp_path):
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    _fill(con, mode="replay", finetune=False)
    write_feeds(con, tmp_path)  # sample is asked of the warehouse
    assert read_manifest(tmp_path)["data_mode"] == "replay"
    assert (tmp_path / SAMPLE_MARKER).exists()
    assert pq.read_schema(tmp_path / "gpu_offers.v2.parquet").metadata[b"data_mode"] == b"replay"
    write_feeds(con, tmp_path, sample=False)
    assert not (tmp_path / SAMPLE_MARKER).exists() and read_manifest(tmp_path)["data_mode"] == "live"


def test_write_feeds_keeps_its_old_call(warehouse, tmp_path):
    # the refresh flow calls write_feeds(con, out_dir) and reads (path, rows) pairs
    written = write_feeds(warehouse, tmp_path)
    assert all(isinstance(p, Path) and isinstance(r, int) for p, r in written)
    assert read_manifest(tmp_path)["run_id"] == RUN  # the last run that built marts


# --- publishing to object storage ----------------------------------------------------------------


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A local S3-compatible server (moto) on loopback, for this module only."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


SECRET = "s3cr3t-" + uuid.uuid4().hex


@pytest.fixture
def aws_env(monkeypatch, tmp_path) -> None:
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "gpucost-test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # never ask 169.254.169.254


@pytest.fixture
def bucket(s3_endpoint, aws_env) -> str:
    name = f"gpucost-feeds-{uuid.uuid4().hex[:12]}"
    s3_client(s3_endpoint).create_bucket(Bucket=name)
    return name


def _objects(endpoint: str, bucket: str) -> dict[str, bytes]:
    client = s3_client(endpoint)
    listed = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


def test_publish_uploads_every_file_and_polars_reads_it_back(published, s3_endpoint, bucket, caplog):
    settings = PublishSettings(feeds_url=f"s3://{bucket}/gpucost/feeds/", s3_endpoint_url=s3_endpoint)
    line = publish_if_configured(published, settings)
    manifest = read_manifest(published)
    assert (
        line
        == f"published {len(manifest['files']) + 1} files to s3://{bucket}/gpucost/feeds/ (manifest last)"
    )
    objects = _objects(s3_endpoint, bucket)
    assert set(objects) == {f"gpucost/feeds/{f['name']}" for f in manifest["files"]} | {
        "gpucost/feeds/manifest.json"
    }
    assert json.loads(objects["gpucost/feeds/manifest.json"]) == manifest
    head = s3_client(s3_endpoint).head_object(Bucket=bucket, Key="gpucost/feeds/gpu_offers.v2.parquet")
    assert head["Metadata"] == {"sha256": sha256_of(published / "gpu_offers.v2.parquet"), "run-id": RUN}
    # how a reader consumes it (README "Feeds"): polars straight from the bucket, no download step
    remote = pl.scan_parquet(
        f"s3://{bucket}/gpucost/feeds/gpu_offers.v2.parquet",
        storage_options={
            "aws_endpoint_url": s3_endpoint,
            "aws_access_key_id": "gpucost-test",
            "aws_secret_access_key": SECRET,
            "aws_region": "us-east-1",
            "aws_allow_http": "true",
        },
    )
    cheapest = remote.filter(pl.col("gpu_name") == "H100-SXM").select("price_usd_per_gpu_hour").collect()
    assert cheapest.item() == pytest.approx(55.04 / 8)
    assert remote.collect().equals(pl.read_parquet(published / "gpu_offers.v2.parquet"))
    assert SECRET not in caplog.text and SECRET not in line


def test_the_manifest_is_uploaded_last(published, s3_endpoint, bucket):
    client = s3_client(s3_endpoint)
    keys: list[str] = []
    client.meta.events.register(
        "before-parameter-build.s3.*",
        lambda params, model, **_: (
            keys.append(params["Key"]) if model.name in ("PutObject", "CreateMultipartUpload") else None
        ),
    )
    publish_feeds(published, f"s3://{bucket}", client=client)
    assert keys[-1] == MANIFEST and keys.count(MANIFEST) == 1
    assert set(keys[:-1]) == {f["name"] for f in read_manifest(published)["files"]}


class _FailingOn:
    """A client whose upload of one key fails the way S3 refuses a write."""

    def __init__(self, client, name: str) -> None:
        self._client, self._name = client, name

    def upload_file(self, filename, bucket, key, ExtraArgs=None):
        from botocore.exceptions import ClientError

        if key.endswith(self._name):
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "Access Denied"}}, "PutObject")
        return self._client.upload_file(filename, bucket, key, ExtraArgs=ExtraArgs)

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_a_failed_upload_leaves_the_previous_manifest_in_place(
    warehouse, published, s3_endpoint, bucket, tmp_path
):
    url = f"s3://{bucket}/feeds"
    publish_feeds(published, url, endpoint_url=s3_endpoint)
    later = tmp_path / "later"
    write_feeds(warehouse, later, run_id="r-later", now=T0 + timedelta(hours=4))
    failing = _FailingOn(s3_client(s3_endpoint), "finetune_costs.v2.parquet")
    with pytest.raises(
        PublishError, match=r"uploading finetune_costs.v2.parquet .* failed .*AccessDenied"
    ) as info:
        publish_feeds(later, url, client=failing)
    assert f"s3://{bucket}/feeds/manifest.json still describes the previous publication" in str(info.value)
    remote = json.loads(_objects(s3_endpoint, bucket)["feeds/manifest.json"])
    assert remote["run_id"] == RUN


def test_a_missing_bucket_is_one_clear_error(published, s3_endpoint, aws_env):
    with pytest.raises(PublishError, match=r"NoSuchBucket.*Check the bucket"):
        publish_feeds(published, "s3://gpucost-no-such-bucket/feeds", endpoint_url=s3_endpoint)


def test_missing_credentials_say_which_variables_to_set(published, s3_endpoint, aws_env, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(PublishError, match="set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        publish_feeds(published, "s3://gpucost-feeds/x", endpoint_url=s3_endpoint)


def test_sample_data_is_never_published_unless_asked(warehouse, tmp_path, s3_endpoint, bucket):
    out = tmp_path / "replay"
    write_feeds(warehouse, out, sample=True)
    settings = PublishSettings(feeds_url=f"s3://{bucket}/feeds", s3_endpoint_url=s3_endpoint)
    assert publish_if_configured(out, settings) == (
        f"not published to s3://{bucket}/feeds: these feeds are recorded sample data (replay)"
    )
    with pytest.raises(PublishError, match="recorded sample data"):
        publish_feeds(out, f"s3://{bucket}/feeds", endpoint_url=s3_endpoint)
    assert _objects(s3_endpoint, bucket) == {}
    publish_feeds(out, f"s3://{bucket}/feeds", endpoint_url=s3_endpoint, allow_sample=True)
    assert "feeds/SAMPLE_DATA.txt" in _objects(s3_endpoint, bucket)
    # a live publication over it takes the sample note away
    live = tmp_path / "live"
    write_feeds(warehouse, live)
    publish_if_configured(live, settings)
    assert "feeds/SAMPLE_DATA.txt" not in _objects(s3_endpoint, bucket)


def test_a_folder_changed_after_its_manifest_is_not_published(warehouse, tmp_path, s3_endpoint, bucket):
    write_feeds(warehouse, tmp_path)
    (tmp_path / "gpu_offers.v2.csv").write_text("provider\nnot the manifest's file\n")
    with pytest.raises(PublishError, match=r"differs from manifest\.json"):
        publish_feeds(tmp_path, f"s3://{bucket}", endpoint_url=s3_endpoint)
    assert _objects(s3_endpoint, bucket) == {}


def test_publishing_is_off_without_a_url(published):
    assert publish_if_configured(published, PublishSettings(feeds_url=None)) is None


@pytest.mark.parametrize("url", ["https://bucket/prefix", "s3://", "bucket/prefix"])
def test_a_feeds_url_that_is_not_s3_is_refused(url):
    with pytest.raises(PublishError, match="s3://bucket"):
        S3Location.parse(url)


def test_s3_locations_join_prefix_and_name():
    assert S3Location.parse("s3://b/a/b/").url("x.parquet") == "s3://b/a/b/x.parquet"
    assert S3Location.parse("s3://b").key("x.parquet") == "x.parquet"


# --- `gpucost export` ----------------------------------------------------------------------------


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("GPUCOST_FEEDS_DIR", str(tmp_path / "feeds"))
    con = open_warehouse(tmp_path / "data" / "warehouse.duckdb")
    _fill(con, finetune=False)
    con.close()
    return tmp_path


def test_export_publishes_when_a_feeds_url_is_set(home, s3_endpoint, bucket, monkeypatch):
    from flows.cli import app

    monkeypatch.setenv("GPUCOST_FEEDS_URL", f"s3://{bucket}/daily")
    monkeypatch.setenv("GPUCOST_S3_ENDPOINT_URL", s3_endpoint)
    result = CliRunner().invoke(app, ["export", "--format", "parquet"])
    assert result.exit_code == 0, result.output
    assert f"to s3://{bucket}/daily (manifest last)" in result.output
    names = {f["name"] for f in read_manifest(home / "feeds")["files"]}
    assert set(_objects(s3_endpoint, bucket)) == {f"daily/{n}" for n in names} | {"daily/manifest.json"}
    assert SECRET not in result.output


def test_export_refuses_a_bad_feeds_url_before_writing(home, monkeypatch):
    from flows.cli import app

    monkeypatch.setenv("GPUCOST_FEEDS_URL", "https://example.com/feeds")
    result = CliRunner().invoke(app, ["export"])
    assert result.exit_code == 2 and "GPUCOST_FEEDS_URL must look like s3://bucket/prefix" in result.output
    assert not (home / "feeds").exists()


def test_publishing_settings_and_reading_are_documented():
    from tests.conftest import REPO

    readme = (REPO / "README.md").read_text()
    for field in PublishSettings.model_fields:
        assert f"GPUCOST_{field.upper()}" in readme
    for needle in ("read_parquet('s3://", "pl.scan_parquet(", "docs/feeds.md", "manifest.json"):
        assert needle in readme, needle
