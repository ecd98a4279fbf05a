"""The raw archive: every body that came over the wire, compressed, and kept under a budget.

Layout under the archive root (`$GPUCOST_HOME/raw`), one file per distinct body::

    <sha[:2]>/<sha>                   a body stored as it came (written before migration 004; still read)
    <sha[:2]>/<sha>.zst               the body, zstd-compressed
    <sha[:2]>/<sha>.<prefilter>.zst   what a prefilter keeps of the body, zstd-compressed

`sha` is always the sha256 of the body *as it came over the wire*, whatever is stored: identical
bodies are stored once, and a prefiltered file is the deterministic function of the body its name
says. `raw.responses` records, per exchange, `body_sha256`, `bytes` (as it came), `payload_path`,
`compression`, `prefilter`, `stored_bytes` and `pruned_at` (migration 004).

Prefilters. An AWS offer file is hundreds of MB per region and a new version is published every few
days, while parsing reads one row in a few hundred. Its CSV is kept as its preamble and header row
plus the rows `connectors.aws` prefilters at the byte level (plain Linux, shared, on-demand: every
GPU product and the CPU ones whose exclusion a run counts), so parsing the kept file yields exactly
what parsing the whole file yielded. The whole file stays re-fetchable from its URL, which embeds
its version. A body the prefilter cannot read (not an AWS CSV any more) is stored whole.

Retention (`collect_garbage`, `gpucost gc`): the bodies of every provider run that changed the price
history (inserted or closed rows of `core.offer_prices`, or new FX rates) are kept for ever, and
the rest for `GPUCOST_RAW_RETENTION_DAYS`; a body shared with a kept exchange is kept. The rows of
`raw.responses` stay (validators, sizes, hashes): gc only removes files and sets `pruned_at`.

Replay: `archived_responses(con, root, run_id, provider)` reads a run's exchanges back as
`RawResponse`s, decompressed, ready for the connector's `parse`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import duckdb
import polars as pl
import zstandard

from connectors import aws
from connectors.base import RawResponse
from warehouse.db import WarehouseError, transaction

log = logging.getLogger(__name__)

COMPRESSION = "zstd"
# Level 9: measured on the replay fixtures, within 2 % of level 19's ratio at a sixth of its time;
# an hour's bodies (a few MB) compress in a fraction of a second.
ZSTD_LEVEL = 9
# A body read back larger than this goes to a spool file instead of memory.
IN_MEMORY_MAX_BYTES = 64 * 1024 * 1024
_CHUNK = 1024 * 1024
# Names the archive writes (and gc may remove when nothing references them).
_ARCHIVE_NAME = re.compile(r"^[0-9a-f]{64}(\.[a-z0-9-]+)?(\.zst|\.part)?$")
_INCOMING = re.compile(r"^\.incoming-[0-9a-f]{32}\.part$")


class ArchiveError(WarehouseError):
    """A body cannot be read back from the raw archive."""


class BodyPruned(ArchiveError):
    """The body was removed by `gpucost gc` under the retention policy."""


# --- prefilters ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Prefilter:
    """Keeps of a body only what parsing reads. `keep` must be deterministic and yield, from a
    stream over the whole body, bytes that the provider's `parse` reads exactly like the body."""

    name: str  # a file-name suffix: lowercase, digits, dashes
    applies: Callable[[str, RawResponse], bool]  # (provider, response)
    keep: Callable[[BinaryIO], Iterator[bytes]]


_AWS_OFFER_CSV = re.compile(r"/offers/v1\.0/aws/AmazonEC2/[^/]+/[^/]+/index\.csv$")


def _is_aws_offer_csv(provider: str, response: RawResponse) -> bool:
    if provider != "aws" or response.status != 200:
        return False
    return bool(_AWS_OFFER_CSV.search(urlsplit(response.url).path))


def keep_aws_offer_csv(fh: BinaryIO) -> Iterator[bytes]:
    """An AWS CSV offer file's preamble and header row, then the lines `connectors.aws`'s byte-level
    prefilter passes on to the CSV parser, each ending in a newline (`aws.OfferCsvFilter`, the
    filter the HTTP client runs while the file downloads: one implementation for both).

    The parser only ever sees those lines, and which lines pass depends on each line and the header
    alone, so the kept file parses to the same offers and exclusions as the whole file.
    """
    body_filter = aws.OfferCsvFilter()
    while block := fh.read(_CHUNK):
        if kept := body_filter.feed(block):
            yield kept
    if kept := body_filter.close():
        yield kept


PREFILTERS: tuple[Prefilter, ...] = (
    Prefilter(aws.OfferCsvFilter.name, _is_aws_offer_csv, keep_aws_offer_csv),
)


def prefilter_for(provider: str, response: RawResponse) -> Prefilter | None:
    return next((p for p in PREFILTERS if p.applies(provider, response)), None)


# --- writing ---------------------------------------------------------------------------------------


class _HashingReader:
    """A read-only stream that hashes and counts what passes through it."""

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._sha = hashlib.sha256()

    def read(self, size: int = -1) -> bytes:
        data = self._fh.read(size)
        self._sha.update(data)
        return data

    def readline(self, size: int = -1) -> bytes:
        data = self._fh.readline(size)
        self._sha.update(data)
        return data

    def drain(self) -> None:
        while self.read(_CHUNK):
            pass

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


@dataclass(frozen=True)
class Stored:
    sha256: str
    relative: str  # payload_path
    compression: str | None
    prefilter: str | None
    stored_bytes: int


def _relative(sha: str, compression: str | None, prefilter: str | None) -> str:
    name = sha + (f".{prefilter}" if prefilter else "") + (".zst" if compression else "")
    return f"{sha[:2]}/{name}"


def _existing(raw_root: Path, sha: str, prefilter: Prefilter | None) -> Stored | None:
    """The body already stored, in any form that reads back to what parsing needs."""
    forms: list[tuple[str | None, str | None]] = [(COMPRESSION, prefilter.name)] if prefilter else []
    forms += [(COMPRESSION, None), (None, None)]  # the whole body (plain: written before 004)
    for compression, name in forms:
        relative = _relative(sha, compression, name)
        path = raw_root / relative
        if path.is_file():
            return Stored(sha, relative, compression, name, path.stat().st_size)
    return None


def _sha256(response: RawResponse) -> str:
    known = getattr(response, "sha256", None)  # computed while downloading, where the client does
    if known:
        return known
    if response.body_path is None:
        return hashlib.sha256(response.body).hexdigest()
    reader = _HashingReader(response.body_path.open("rb"))
    try:
        reader.drain()
    finally:
        reader._fh.close()
    return reader.hexdigest()


class _PrefilterFailed(Exception):
    pass


def _write(
    raw_root: Path,
    response: RawResponse,
    prefilter: Prefilter | None,
    sha: str | None,
    *,
    held_as: str | None = None,
) -> Stored:
    """Compress (what the prefilter keeps of) the body into the archive; hash it in the same pass
    when `sha` is not known yet. `held_as`: the body held already is that prefilter's output."""
    raw_root.mkdir(parents=True, exist_ok=True)
    incoming = raw_root / f".incoming-{uuid.uuid4().hex}.part"
    try:
        with response.open() as source, incoming.open("wb") as out:
            reader = _HashingReader(source)
            compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
            with compressor.stream_writer(out, closefd=False) as writer:
                if prefilter is None:
                    while chunk := reader.read(_CHUNK):
                        writer.write(chunk)
                else:
                    try:
                        # the hashing reader has the read() the filter uses, not all of BinaryIO
                        for piece in prefilter.keep(reader):  # type: ignore[arg-type]
                            writer.write(piece)
                    except Exception as exc:  # landing must never lose a body: store it whole
                        raise _PrefilterFailed(f"{prefilter.name}: {exc}") from exc
                    reader.drain()  # the rest of the body, for its hash
        sha = sha or reader.hexdigest()
        name = prefilter.name if prefilter else held_as
        relative = _relative(sha, COMPRESSION, name)
        target = raw_root / relative
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            incoming.replace(target)
        return Stored(sha, relative, COMPRESSION, name, target.stat().st_size)
    finally:
        incoming.unlink(missing_ok=True)


def _store_filtered(raw_root: Path, response: RawResponse) -> Stored:
    """A body the HTTP client spooled as a prefilter's output while it downloaded (a `BodyFilter`,
    connectors/base.py "Large bodies"): stored as it is under that prefilter's name, with the hash
    of the body as it came; the whole body is never written or read again."""
    prefilter = next((p for p in PREFILTERS if p.name == response.prefilter), None)
    if prefilter is None or not response.sha256:
        raise ValueError(
            f"{response.url}: the body is held as the output of prefilter {response.prefilter!r}, "
            "which warehouse/archive.py PREFILTERS does not list (or it has no sha256); register the "
            "filter there so the archive knows what its files hold"
        )
    if (found := _existing(raw_root, response.sha256, prefilter)) is not None:
        return found
    return _write(raw_root, response, None, response.sha256, held_as=prefilter.name)


def store_body(raw_root: Path, provider: str, response: RawResponse) -> Stored:
    """Archive one body (once per distinct body) and say where and how it is stored."""
    if response.prefilter is not None:
        return _store_filtered(raw_root, response)
    prefilter = prefilter_for(provider, response)
    sha = getattr(response, "sha256", None)
    if prefilter is None:
        # Hash first (memory speed), so a body already archived is not compressed again.
        sha = sha or _sha256(response)
    if sha is not None and (found := _existing(raw_root, sha, prefilter)) is not None:
        return found
    if prefilter is not None:
        try:
            # One pass: hash, prefilter and compress (the body may be gigabytes).
            stored = _write(raw_root, response, prefilter, sha)
        except _PrefilterFailed as exc:
            log.warning("%s: storing the whole body (%s)", response.url, exc)
        else:
            return stored
        sha = sha or _sha256(response)
        if (found := _existing(raw_root, sha, None)) is not None:
            return found
    return _write(raw_root, response, None, sha)


_INSERT = (
    "insert into raw.responses (run_id, provider, seq, method, url, request_body, status, fetched_at, "
    "content_type, headers, bytes, body_sha256, payload_path, compression, prefilter, stored_bytes) "
    "values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def land_raw(
    con: duckdb.DuckDBPyConnection,
    raw_root: Path,
    run_id: str,
    provider: str,
    responses: Sequence[RawResponse],
) -> int:
    """Archive bodies (each distinct body stored once, compressed, prefiltered where a prefilter
    applies) and record the exchanges; bytes as they came over the wire.

    A spooled body is deleted once archived, as it was when it moved in whole: parse before landing.
    """
    rows = []
    total = 0
    for seq, response in enumerate(responses):
        size = response.size_bytes
        stored = store_body(raw_root, provider, response)
        if response.body_path is not None:
            response.body_path.unlink(missing_ok=True)
        total += size
        rows.append(
            (
                run_id,
                provider,
                seq,
                response.method,
                response.url,
                response.request_body.decode("utf-8", "replace") if response.request_body else None,
                response.status,
                response.fetched_at,
                response.content_type,
                json.dumps(dict(response.headers)),
                size,
                stored.sha256,
                stored.relative,
                stored.compression,
                stored.prefilter,
                stored.stored_bytes,
            )
        )
    if rows:
        con.executemany(_INSERT, rows)
    return total


# --- reading ---------------------------------------------------------------------------------------


def open_body(raw_root: Path, payload_path: str, compression: str | None) -> BinaryIO:
    """A stream over a stored body as parsing reads it (decompressed), whatever form it has."""
    path = raw_root / payload_path
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise ArchiveError(
            f"{path} is missing from the raw archive; was the archive moved or cleaned by hand? "
            "`gpucost gc --dry-run` lists what the warehouse expects"
        ) from None
    if compression is None:
        return fh
    if compression != COMPRESSION:
        fh.close()
        raise ArchiveError(f"{path}: unknown compression {compression!r}; is this gpucost too old for it?")
    return zstandard.ZstdDecompressor().stream_reader(fh, closefd=True)


def read_body(raw_root: Path, payload_path: str, compression: str | None) -> bytes:
    """A stored body in memory, decompressed. For bodies that may be large, use `open_body`."""
    with open_body(raw_root, payload_path, compression) as fh:
        return fh.read()


@dataclass(frozen=True)
class _Row:
    seq: int
    method: str
    url: str
    request_body: str | None
    status: int
    fetched_at: datetime
    content_type: str | None
    headers: str | None
    bytes: int
    body_sha256: str
    payload_path: str
    compression: str | None
    prefilter: str | None
    pruned_at: datetime | None


def archived_responses(
    con: duckdb.DuckDBPyConnection,
    raw_root: Path,
    run_id: str,
    provider: str,
    *,
    spool_dir: Path | None = None,
) -> list[RawResponse]:
    """One provider run's exchanges read back from the archive, in order, ready for `parse`.

    Bodies come back decompressed; a prefiltered one is what its prefilter kept (which parses like
    the whole body). Whole bodies are checked against their sha256. A body larger than
    `IN_MEMORY_MAX_BYTES` is written to a file in `spool_dir` (`body_path`; delete it when done).
    """
    columns = ", ".join(_Row.__dataclass_fields__)
    found = con.execute(
        f"select {columns} from raw.responses where run_id = ? and provider = ? order by seq",
        [run_id, provider],
    ).fetchall()
    rows = [_Row(*r) for r in found]
    if not rows:
        raise ArchiveError(
            f"no archived responses for provider {provider!r} in run {run_id!r}; list them with "
            '`gpucost sql "select distinct run_id, provider from raw.responses"`'
        )
    pruned = [r for r in rows if r.pruned_at is not None]
    if pruned:
        raise BodyPruned(
            f"{len(pruned)} of {len(rows)} bodies of {provider} in run {run_id} were removed by "
            f"`gpucost gc` on {pruned[0].pruned_at:%Y-%m-%d} (the run changed no prices and was older "
            "than GPUCOST_RAW_RETENTION_DAYS); replay a retained run instead"
        )
    responses = []
    for row in rows:
        body, body_path = _materialize(raw_root, row, spool_dir)
        responses.append(
            RawResponse(
                url=row.url,
                method=row.method,
                status=row.status,
                fetched_at=row.fetched_at,
                headers=json.loads(row.headers or "{}"),
                content_type=row.content_type or "",
                request_body=row.request_body.encode() if row.request_body is not None else None,
                body=body,
                body_path=body_path,
            )
        )
    return responses


def _materialize(raw_root: Path, row: _Row, spool_dir: Path | None) -> tuple[bytes, Path | None]:
    digest = hashlib.sha256()
    buffer = bytearray()
    spooled: BinaryIO | None = None
    spool_path: Path | None = None
    with open_body(raw_root, row.payload_path, row.compression) as fh:
        try:
            while chunk := fh.read(_CHUNK):
                digest.update(chunk)
                if spooled is None and len(buffer) + len(chunk) > IN_MEMORY_MAX_BYTES:
                    if spool_dir is None:
                        raise ArchiveError(
                            f"the body of {row.url} is over {IN_MEMORY_MAX_BYTES >> 20} MB; "
                            "pass spool_dir to read it into a file"
                        )
                    spool_dir.mkdir(parents=True, exist_ok=True)
                    spool_path = spool_dir / f"{row.body_sha256}-{row.seq}"
                    spooled = spool_path.open("wb")
                    spooled.write(buffer)
                    buffer = bytearray()
                if spooled is not None:
                    spooled.write(chunk)
                else:
                    buffer += chunk
        finally:
            if spooled is not None:
                spooled.close()
    if row.prefilter is None and digest.hexdigest() != row.body_sha256:
        raise ArchiveError(
            f"{raw_root / row.payload_path}: content does not match its sha256 {row.body_sha256}; "
            "the archive file is corrupt (restore it from a backup, or re-fetch the URL)"
        )
    return (b"", spool_path) if spool_path is not None else (bytes(buffer), None)


# --- retention -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GcReport:
    """What `collect_garbage` kept and removed (or, with `dry_run`, would remove)."""

    retention_days: int
    cutoff: datetime
    dry_run: bool
    changed_runs: int  # provider runs whose bodies are kept because they changed prices
    kept_changed_files: int
    kept_changed_bytes: int
    kept_recent_files: int  # kept only because they are within the retention window
    kept_recent_bytes: int
    removed_files: int
    removed_bytes: int
    removed_responses: int  # rows of raw.responses marked `pruned_at`
    orphan_files: int  # archive files no exchange references (a crash mid-landing)
    orphan_bytes: int
    missing_files: int  # referenced but absent: moved or deleted by hand

    @property
    def freed_bytes(self) -> int:
        return self.removed_bytes + self.orphan_bytes


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _archive_files(raw_root: Path) -> Iterator[str]:
    """Relative paths of the files the archive writes (nothing else under the root is touched)."""
    if not raw_root.is_dir():
        return
    with os.scandir(raw_root) as top:
        for entry in top:
            if entry.is_file() and _INCOMING.match(entry.name):
                yield entry.name
            elif entry.is_dir() and re.fullmatch(r"[0-9a-f]{2}", entry.name):
                with os.scandir(entry.path) as inner:
                    for item in inner:
                        if item.is_file() and _ARCHIVE_NAME.match(item.name):
                            yield f"{entry.name}/{item.name}"


def collect_garbage(
    con: duckdb.DuckDBPyConnection,
    raw_root: Path,
    *,
    retention_days: int,
    now: datetime,
    dry_run: bool = False,
) -> GcReport:
    """Remove the bodies the retention policy lets go; see the module docstring for the policy.

    Hold the warehouse for writing while this runs (a refresh landing meanwhile would write files
    gc has not seen). Rows are marked pruned, and committed, before files go: a crash in between
    leaves orphan files, which the next gc removes, never rows pointing at nothing.
    """
    if retention_days < 0:
        raise ValueError(f"retention_days must be 0 or more, got {retention_days}")
    cutoff = now - timedelta(days=retention_days)
    found = con.execute(
        """
        select
            r.payload_path,
            coalesce(p.rows_inserted, 0) + coalesce(p.rows_closed, 0) > 0 as changed,
            coalesce(p.started_at, r.fetched_at) >= ? or coalesce(o.status = 'running', false) as recent,
            case when coalesce(p.rows_inserted, 0) + coalesce(p.rows_closed, 0) > 0
                then r.run_id || '|' || r.provider end as changed_run
        from raw.responses as r
        left join ops.provider_runs as p using (run_id, provider)
        left join ops.runs as o using (run_id)
        where r.pruned_at is null
        """,
        [cutoff],
    ).fetchall()
    changed_paths = {path for path, changed, _, _ in found if changed}
    recent_paths = {path for path, changed, recent, _ in found if recent and not changed} - changed_paths
    doomed = {path for path, changed, recent, _ in found if not changed and not recent}
    doomed -= changed_paths | recent_paths
    changed_runs = len({run for *_, run in found if run is not None})

    sizes: dict[str, int | None] = {p: _size(raw_root / p) for p in changed_paths | recent_paths | doomed}
    missing = sum(1 for s in sizes.values() if s is None)
    referenced = changed_paths | recent_paths | doomed
    orphans = [p for p in _archive_files(raw_root) if p not in referenced]
    orphan_sizes = {p: _size(raw_root / p) or 0 for p in orphans}

    # A registered frame, not a list parameter: a first gc after a year may free 100k+ paths.
    con.register(
        "_gc_doomed", pl.DataFrame({"payload_path": sorted(doomed)}, schema={"payload_path": pl.String})
    )
    try:
        where = "pruned_at is null and payload_path in (select payload_path from _gc_doomed)"
        removed_responses = con.execute(f"select count(*) from raw.responses where {where}").fetchall()[0][0]
        if not dry_run and doomed:
            with transaction(con):
                con.execute(f"update raw.responses set pruned_at = ? where {where}", [now])
    finally:
        con.unregister("_gc_doomed")
    if not dry_run:
        for relative in [*doomed, *orphans]:
            (raw_root / relative).unlink(missing_ok=True)

    def total(paths: set[str]) -> int:
        return sum(sizes[p] or 0 for p in paths)

    return GcReport(
        retention_days=retention_days,
        cutoff=cutoff,
        dry_run=dry_run,
        changed_runs=changed_runs,
        kept_changed_files=sum(1 for p in changed_paths if sizes[p] is not None),
        kept_changed_bytes=total(changed_paths),
        kept_recent_files=sum(1 for p in recent_paths if sizes[p] is not None),
        kept_recent_bytes=total(recent_paths),
        removed_files=sum(1 for p in doomed if sizes[p] is not None),
        removed_bytes=total(doomed),
        removed_responses=removed_responses,
        orphan_files=len(orphans),
        orphan_bytes=sum(orphan_sizes.values()),
        missing_files=missing,
    )


def archive_bytes(raw_root: Path) -> tuple[int, int]:
    """(files, bytes) the archive holds on disk."""
    files = size = 0
    for relative in _archive_files(raw_root):
        files += 1
        size += _size(raw_root / relative) or 0
    return files, size


__all__ = [
    "PREFILTERS",
    "ArchiveError",
    "BodyPruned",
    "GcReport",
    "Prefilter",
    "archive_bytes",
    "archived_responses",
    "collect_garbage",
    "keep_aws_offer_csv",
    "land_raw",
    "open_body",
    "read_body",
    "store_body",
]
