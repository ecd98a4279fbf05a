"""Readers that pull a publication instead of scraping: `gpucost pull URL`.

A publication is what `warehouse.export.write_publication` writes (feeds, then `manifest.json`
last) to a folder, and what `warehouse.publish` copies to object storage. A pull reads it from a
folder, an `https://` (or `http://`) base URL, or `s3://bucket/prefix`, and keeps under
`GPUCOST_HOME/pulled/`:

* `manifest.json`, the manifest of the last publication pulled whole; written last, so it always
  describes the files beside it and the warehouse built from them;
* `feeds/`, that publication's files the reader warehouse is built from (`gpu_offers.v3.parquet`,
  `unmapped_gpus.v2.parquet`), or every file with `gpucost pull --all`; a file whose sha256 is
  the one already held is not fetched again;
* `warehouse.duckdb`, the reader warehouse the read commands open while `GPUCOST_PULL_URL` is set.

Every fetched file is checked against the manifest (bytes and sha256) in `pulled/incoming/` before
anything held is touched: a publication whose manifest and files disagree is one still on its way
(`publish` uploads data first, manifest last, so a reader can meet new files under an old manifest)
or a broken one. It is refused whole and the previous pull stays as it was.

The reader warehouse is a normal warehouse (migrations, seeds) whose marts are loaded from the feeds:
`marts.gpu_offers` from `gpu_offers.v3` (the feed's documented names mapped back to the mart's, the
feed holds no stale offer, so `is_stale` is false), the current intervals of `core.offer_prices`
from the same rows, `core.fx_rates` from the rates those rows carry, `marts.unmapped_gpus` from
`unmapped_gpus.v2`, and the fine-tuning marts rebuilt by `warehouse.finetune_marts` from those
offers, the code a refresh runs. What the feeds do not carry, a pull cannot know: past (closed)
price intervals, so `history` shows the current prices since they were set; the raw responses
and provider runs (`status`); and the provider's own data per offer (`provider_data`: AWS's spot
interruption band), so an AWS spot offer's expected interruptions fall back to the seed's
(finetune/offer.py).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from warehouse.db import WarehouseError, open_warehouse
from warehouse.dictionary import column, comment_marts
from warehouse.export import MANIFEST, sha256_of

PULLED = "pulled"
# the offers feed a reader warehouse is built from, newest first: v5 carries the monthly cap and
# v4 the set-up fee the bill needs; a publication written before them still pulls from its v4
# (no cap: billed hourly) or v3 (fees unknown: 0)
OFFERS_FEEDS = ("gpu_offers.v5.parquet", "gpu_offers.v4.parquet", "gpu_offers.v3.parquet")
OFFERS_FEED = OFFERS_FEEDS[0]
UNMAPPED_FEED = "unmapped_gpus.v2.parquet"
# what the reader warehouse is built from: tens of kB of the replay publication's 22.9 MB (the cost
# feeds are rebuilt from the offers, finetune_costs.v1.csv alone is 16.6 MB)
READER_FEEDS = frozenset({*OFFERS_FEEDS, UNMAPPED_FEED})
_CHUNK = 1 << 20


class PullError(WarehouseError):
    """A pull failed or was refused; the previous pull is kept; the message says what to do."""


def pulled_dir(home: Path) -> Path:
    return home / PULLED


def reader_warehouse(home: Path) -> Path:
    """The warehouse read commands open when GPUCOST_PULL_URL is set."""
    return pulled_dir(home) / "warehouse.duckdb"


# --- sources: a folder, HTTP(S), S3 ----------------------------------------------------------------

Fetch = Callable[[str, Path], None]  # copy the publication's file `name` to a local path


def _folder(root: Path) -> Fetch:
    def fetch(name: str, target: Path) -> None:
        try:
            shutil.copyfile(root / name, target)
        except FileNotFoundError:
            raise PullError(f"{root / name} is missing") from None

    return fetch


def _http(base: str, timeout: float) -> Fetch:
    import httpx

    def fetch(name: str, target: Path) -> None:
        url = f"{base.rstrip('/')}/{name}"
        try:
            with httpx.stream("GET", url, timeout=timeout, follow_redirects=True) as response:
                if response.status_code == 404:
                    raise PullError(f"{url} is missing (404)")
                response.raise_for_status()
                with target.open("wb") as handle:
                    for block in response.iter_bytes(_CHUNK):
                        handle.write(block)
        except httpx.HTTPError as exc:
            raise PullError(f"downloading {url} failed ({type(exc).__name__}: {exc})") from None

    return fetch


def _s3(url: str, endpoint_url: str | None) -> Fetch:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    from warehouse.publish import PublishError, S3Location, s3_client

    try:
        location = S3Location.parse(url)
    except PublishError as exc:
        raise PullError(str(exc).replace("GPUCOST_FEEDS_URL", "the pull URL")) from None
    client = s3_client(endpoint_url)

    def fetch(name: str, target: Path) -> None:
        try:
            client.download_file(location.bucket, location.key(name), str(target))
        except NoCredentialsError:
            raise PullError(
                f"no AWS credentials to read {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(or AWS_PROFILE)"
            ) from None
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("404", "NoSuchKey", "NotFound", "403"):
                raise PullError(f"{location.url(name)} is missing ({code})") from None
            raise PullError(f"downloading {location.url(name)} failed ({exc})") from None
        except BotoCoreError as exc:
            raise PullError(f"downloading {location.url(name)} failed ({exc})") from None

    return fetch


def source(url: str, *, endpoint_url: str | None = None, timeout: float = 120.0) -> Fetch:
    """The fetcher for `url`: s3://bucket/prefix, http(s)://..., or a folder."""
    if url.startswith("s3://"):
        return _s3(url, endpoint_url)
    if url.startswith(("https://", "http://")):
        return _http(url, timeout)
    folder = Path(url.removeprefix("file://")).expanduser()
    if not folder.is_dir():
        raise PullError(f"{url} is neither s3://bucket/prefix, an http(s) URL nor a folder")
    return _folder(folder)


# --- the pull --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PullResult:
    manifest: dict[str, Any]
    fetched: tuple[str, ...]
    reused: tuple[str, ...]
    fetched_bytes: int
    warehouse: Path

    @property
    def generated_at(self) -> datetime:
        return datetime.fromisoformat(self.manifest["generated_at"].replace("Z", "+00:00"))

    def age_hours(self, now: datetime) -> float:
        return (now - self.generated_at).total_seconds() / 3600


def _parse_manifest(raw: bytes, url: str) -> dict[str, Any]:
    try:
        manifest = json.loads(raw)
        files = manifest["files"]
        datetime.fromisoformat(manifest["generated_at"].replace("Z", "+00:00"))
        for entry in files:
            entry["name"], entry["sha256"], int(entry["bytes"])
    except (ValueError, KeyError, TypeError) as exc:
        raise PullError(f"{url}/{MANIFEST} is not a gpucost manifest ({type(exc).__name__}: {exc})") from None
    if any("/" in e["name"] or e["name"].startswith(".") for e in files):
        raise PullError(f"{url}/{MANIFEST} names a file outside its folder; refusing it")
    if not any(e["name"] in OFFERS_FEEDS for e in files):
        raise PullError(f"{url}/{MANIFEST} lists no {OFFERS_FEED}: the read commands need it")
    return manifest


def previous_manifest(home: Path) -> dict[str, Any] | None:
    path = pulled_dir(home) / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def _kept(home: Path) -> str:
    held = previous_manifest(home)
    if held is None:
        return "nothing was pulled before"
    return f"kept the previous pull (generated {held['generated_at']})"


def pull(
    url: str,
    home: Path,
    *,
    endpoint_url: str | None = None,
    timeout: float = 120.0,
    every_file: bool = False,
) -> PullResult:
    """Fetch the publication at `url` into `home/pulled/`, verified, and build its reader warehouse.

    Only the feeds the reader warehouse is built from (`READER_FEEDS`) are fetched unless
    `every_file` (`gpucost pull --all`, a mirror of the whole publication)."""
    fetch = source(url, endpoint_url=endpoint_url, timeout=timeout)
    root = pulled_dir(home)
    feeds, incoming = root / "feeds", root / "incoming"
    feeds.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(incoming, ignore_errors=True)  # an interrupted pull's leftovers
    incoming.mkdir()
    try:
        fetch(MANIFEST, incoming / MANIFEST)
    except PullError as exc:
        raise PullError(f"{exc}: no publication to pull; {_kept(home)}") from None
    manifest = _parse_manifest((incoming / MANIFEST).read_bytes(), url)
    wanted = [e for e in manifest["files"] if every_file or e["name"] in READER_FEEDS]
    fetched: list[str] = []
    reused: list[str] = []
    for entry in wanted:
        name = entry["name"]
        held = feeds / name
        if held.exists() and held.stat().st_size == entry["bytes"] and sha256_of(held) == entry["sha256"]:
            reused.append(name)
            continue
        try:
            fetch(name, incoming / name)
        except PullError as exc:
            raise PullError(
                f"{exc}, though {MANIFEST} lists it: the publication is incomplete (still on its way?); "
                f"{_kept(home)}; pull again later"
            ) from None
        got = incoming / name
        if got.stat().st_size != entry["bytes"] or sha256_of(got) != entry["sha256"]:
            raise PullError(
                f"{name} differs from {MANIFEST} ({got.stat().st_size} bytes, {entry['bytes']} listed, "
                f"sha256 differs): the publication is still on its way or broken; {_kept(home)}; "
                "pull again later"
            )
        fetched.append(name)
    target = reader_warehouse(home)
    if not fetched and target.exists() and previous_manifest(home) == manifest:
        shutil.rmtree(incoming, ignore_errors=True)  # the publication already held: nothing to rebuild
        return PullResult(manifest, (), tuple(reused), 0, target)
    paths = {e["name"]: (incoming if e["name"] in fetched else feeds) / e["name"] for e in wanted}
    building = root / f".warehouse.{os.getpid()}.building.duckdb"
    building.unlink(missing_ok=True)
    try:
        build_reader(building, paths, manifest, url)
    except BaseException:
        building.unlink(missing_ok=True)
        raise
    # every check passed: the new files, the warehouse, then the manifest (last, as a publication)
    for name in fetched:
        (incoming / name).replace(feeds / name)
    listed = set(paths)
    for stale in feeds.iterdir():
        if stale.name not in listed:
            stale.unlink()
    building.replace(target)
    (incoming / MANIFEST).replace(root / MANIFEST)
    shutil.rmtree(incoming, ignore_errors=True)
    fetched_bytes = sum(e["bytes"] for e in wanted if e["name"] in fetched)
    return PullResult(manifest, tuple(fetched), tuple(reused), fetched_bytes, target)


# --- the reader warehouse --------------------------------------------------------------------------


def _mart_columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    return [name for (name, *_rest) in con.execute(f"describe {relation}").fetchall()]


def _offers_select(con: duckdb.DuckDBPyConnection, feed_columns: list[str]) -> str:
    """The feed's columns under the mart's names: a documented column whose source is a mart
    column is renamed back; one derived at publication (price_age_hours) is left out."""
    mart = set(_mart_columns(con, "marts.gpu_offers"))
    parts = []
    for name in feed_columns:
        origin = column(name).source or name
        if origin in mart:
            parts.append(f'feed_offers."{name}" as "{origin}"')
    return ", ".join(parts)


def build_reader(path: Path, files: dict[str, Path], manifest: dict[str, Any], url: str) -> None:
    """A warehouse at `path` whose marts answer as the publishing warehouse's did."""
    from warehouse.finetune_marts import build_finetune_marts
    from warehouse.marts import build_marts

    generated_at = datetime.fromisoformat(manifest["generated_at"].replace("Z", "+00:00"))
    run_id = manifest.get("run_id") or f"pull-{manifest['generated_at']}"
    mode = "replay" if manifest.get("data_mode") == "replay" else "live"
    offers_feed = next(name for name in OFFERS_FEEDS if name in files)
    offers = files[offers_feed].as_posix()
    con = open_warehouse(path)
    try:
        build_marts(con, now=generated_at)  # empty: the marts' own schemas, to load the feeds into
        con.execute(f"create temp view feed_offers as select * from read_parquet('{offers}')")
        feed_columns = _mart_columns(con, "feed_offers")
        con.execute(
            "insert into marts.gpu_offers by name select "
            f"{_offers_select(con, feed_columns)}, gpus.model as gpu_model, false as is_stale, "
            "'active' as provider_state from feed_offers "
            "left join core.gpus as gpus on feed_offers.gpu_name = gpus.gpu_name"
        )
        # the current intervals: `history` and the freshness lines read them
        con.execute(
            """
            insert into core.offer_prices by name
            select provider, instance_type, region, zone, pricing_type, price_source,
                published_price_per_hour as price_per_hour, currency, price_usd_per_hour,
                gpu_name_raw, gpu_count, vram_gb_stated as gpu_memory_gb_raw, vcpus, ram_gb,
                available, md5(concat_ws('|', price_source, published_price_per_hour, currency,
                    gpu_name_raw, gpu_count, vcpus, ram_gb)) as attributes_hash,
                price_since_at as valid_from, price_since_at as first_seen_at, last_seen_at,
                ? as opened_by_run_id, pricing_type || ':' || region as scope, fx_rate_date
            from feed_offers
            """,
            [run_id],
        )
        con.execute(
            """
            insert into core.fx_rates
            select currency, fx_rate_date, any_value(fx_usd_per_unit), ?, ?, ?
            from feed_offers
            where currency <> 'USD' and fx_rate_date is not null and fx_usd_per_unit is not null
            group by currency, fx_rate_date
            """,
            [f"{url}/{offers_feed}", run_id, generated_at],
        )
        if UNMAPPED_FEED in files:
            con.execute(
                "insert into marts.unmapped_gpus by name select provider, gpu_name_raw, gpu_memory_gb_raw, "
                "offer_count as offers, string_split(example_instance_type_list, '; ') as "
                "example_instance_types, first_seen_at "
                f"from read_parquet('{files[UNMAPPED_FEED].as_posix()}')"
            )
        build_finetune_marts(con)
        comment_marts(con)
        providers = [
            p for (p,) in con.execute("select distinct provider from feed_offers order by 1").fetchall()
        ]
        con.execute(
            "insert into ops.runs (run_id, started_at, finished_at, status, mode, providers, marts_built_at) "
            "values (?, ?, ?, 'ok', ?, ?, ?)",
            [run_id, generated_at, generated_at, mode, providers, generated_at],
        )
        con.execute("checkpoint")
    finally:
        con.close()
