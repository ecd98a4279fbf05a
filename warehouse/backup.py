"""Back up a home's raw archive and warehouse to a folder or `s3://bucket/prefix`; restore them.

Layout at the destination::

    raw/<sha[:2]>/<name>          the archive's files (warehouse/archive.py), content-addressed:
                                  uploaded once, then only listed by later backups
    warehouse/<sha256>.duckdb     the warehouse as one backup saw it
    backup-manifest.json          every file with its sha256 and size, written last

Consistency. DuckDB lets one process write or several read, never both, and a refresh holds the
warehouse read-write for its whole run. A backup opens it read-write too: while a refresh runs that
fails at once, and the backup refuses in one line; once open, no refresh can start until the backup
has checkpointed (the write-ahead log folded into the file), copied the file and listed the archive,
so the copy and the list describe one state. Copying the file under a live writer was measured
(2026-12-02: 228 plain copies taken during 25 s of inserts, deletes and checkpoints by another
process): every copy opened, since DuckDB writes a checkpoint's blocks before the header that points
at them, but a copy holds only what the last checkpoint held, not the commits in the write-ahead log
since, and one taken mid-refresh holds a run half landed. So a backup never copies under a writer.

The manifest is written last, and a backup's warehouse copy is named by its sha256, so until the new
manifest lands the previous one still describes files that are all there: an interrupted backup
leaves the last complete one readable. Restore downloads every file into a staging folder beside the
home, checks each against the manifest, and only then swaps the warehouse and the archive in; any
missing or differing file stops it before anything local changed.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from warehouse.db import connect
from warehouse.errors import WarehouseError
from warehouse.publish import PublishError, PublishSettings, S3Location, s3_client

MANIFEST = "backup-manifest.json"
FORMAT = "gpucost-backup"
VERSION = 1
_CHUNK = 1024 * 1024


class BackupError(WarehouseError):
    """A backup or restore cannot go on; the message says what to do."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


# --- where backups live ------------------------------------------------------------------------------


class Store(Protocol):
    """A place backups are written to: a folder or an S3 prefix. Names are `/`-separated."""

    def read(self, name: str) -> bytes | None: ...
    def download(self, name: str, path: Path) -> None: ...
    def upload(self, path: Path, name: str) -> None: ...
    def write(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...
    def url(self, name: str = "") -> str: ...


class FolderStore:
    """A local or mounted folder. Every file is written beside its name, then renamed onto it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def url(self, name: str = "") -> str:
        return str(self.root / name) if name else str(self.root)

    def read(self, name: str) -> bytes | None:
        path = self.root / name
        return path.read_bytes() if path.is_file() else None

    def download(self, name: str, path: Path) -> None:
        source = self.root / name
        if not source.is_file():
            raise BackupError(f"{source} is listed in {MANIFEST} but missing; the backup is damaged")
        shutil.copyfile(source, path)

    def _place(self, name: str) -> tuple[Path, Path]:
        target = self.root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        return target, target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")

    def upload(self, path: Path, name: str) -> None:
        target, part = self._place(name)
        shutil.copyfile(path, part)
        part.replace(target)

    def write(self, name: str, data: bytes) -> None:
        target, part = self._place(name)
        part.write_bytes(data)
        part.replace(target)

    def delete(self, name: str) -> None:
        (self.root / name).unlink(missing_ok=True)


class S3Store:
    """An S3 prefix (AWS or an S3-compatible service at GPUCOST_S3_ENDPOINT_URL), through boto3."""

    def __init__(self, location: S3Location, client: Any) -> None:
        self.location = location
        self.client = client

    @contextmanager
    def _errors(self, name: str) -> Iterator[None]:
        """boto3's failures as one line that says what to do; the last complete backup stays."""
        from boto3.exceptions import S3UploadFailedError
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

        try:
            yield
        except NoCredentialsError:
            raise BackupError(
                f"no AWS credentials for {self.url()}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(or AWS_PROFILE)"
            ) from None
        except (BotoCoreError, ClientError, S3UploadFailedError) as exc:
            raise BackupError(
                f"{self.url(name)}: {exc}; check the bucket, the credentials' rights on it and "
                "GPUCOST_S3_ENDPOINT_URL, then run the command again"
            ) from None

    def url(self, name: str = "") -> str:
        return self.location.url(name) if name else f"s3://{self.location.bucket}/{self.location.prefix}"

    def _missing(self, exc: Exception) -> bool:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code")
        return code in ("404", "NoSuchKey", "NotFound")

    def read(self, name: str) -> bytes | None:
        from botocore.exceptions import ClientError

        with self._errors(name):
            try:
                answer = self.client.get_object(Bucket=self.location.bucket, Key=self.location.key(name))
            except ClientError as exc:
                if self._missing(exc):
                    return None
                raise
            return bytes(answer["Body"].read())

    def download(self, name: str, path: Path) -> None:
        from botocore.exceptions import ClientError

        with self._errors(name):
            try:
                self.client.download_file(self.location.bucket, self.location.key(name), str(path))
            except ClientError as exc:
                if self._missing(exc):
                    raise BackupError(
                        f"{self.url(name)} is listed in {MANIFEST} but missing; the backup is damaged"
                    ) from None
                raise

    def upload(self, path: Path, name: str) -> None:
        with self._errors(name):
            self.client.upload_file(str(path), self.location.bucket, self.location.key(name))

    def write(self, name: str, data: bytes) -> None:
        with self._errors(name):
            self.client.put_object(Bucket=self.location.bucket, Key=self.location.key(name), Body=data)

    def delete(self, name: str) -> None:
        with self._errors(name):
            self.client.delete_object(Bucket=self.location.bucket, Key=self.location.key(name))


def open_store(target: str, *, client: Any = None) -> Store:
    """`s3://bucket/prefix` (credentials from boto3's chain, GPUCOST_S3_ENDPOINT_URL) or a folder."""
    if target.startswith("s3://"):
        try:
            location = S3Location.parse(target)
        except PublishError:
            raise BackupError(f"{target!r} names no bucket; use s3://bucket/prefix") from None
        return S3Store(location, client or s3_client(PublishSettings().s3_endpoint_url))
    if "://" in target:
        raise BackupError(f"cannot back up to {target!r}: give s3://bucket/prefix or a folder")
    return FolderStore(Path(target).expanduser())


# --- backup --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BackupReport:
    url: str
    files: int  # in the manifest, the warehouse included
    uploaded: int  # of them, sent this time
    uploaded_bytes: int
    total_bytes: int


def _archive_files(raw_dir: Path) -> Iterator[Path]:
    """The archive's finished bodies: `<2 hex>/<name>`, never a `.part` still being written."""
    if not raw_dir.is_dir():
        return
    for folder in sorted(raw_dir.iterdir()):
        if folder.is_dir() and len(folder.name) == 2:
            for path in sorted(folder.iterdir()):
                if path.is_file() and not path.name.endswith(".part"):
                    yield path


def _manifest(store: Store) -> dict[str, Any] | None:
    data = store.read(MANIFEST)
    if data is None:
        return None
    try:
        manifest = json.loads(data)
    except ValueError:
        raise BackupError(f"{store.url(MANIFEST)} is not JSON; the backup is damaged") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BackupError(f"{store.url(MANIFEST)} is not a gpucost backup manifest")
    if manifest.get("version") != VERSION:
        raise BackupError(
            f"{store.url(MANIFEST)} is backup format version {manifest.get('version')}; this gpucost "
            f"reads version {VERSION}: restore it with the gpucost that wrote it"
        )
    return manifest


def backup(warehouse_path: Path, raw_dir: Path, store: Store, *, now: datetime | None = None) -> BackupReport:
    """Copy the warehouse (checkpointed, under its write lock) and the raw archive to `store`."""
    if not warehouse_path.is_file():
        raise BackupError(f"no warehouse at {warehouse_path}; nothing to back up")
    previous = _manifest(store)
    known = {e["name"]: e for e in previous["files"]} if previous else {}
    staged = warehouse_path.with_name(f".backup-{uuid.uuid4().hex}.duckdb")
    # WarehouseBusy here, in one line, while a refresh holds the file
    con = connect(warehouse_path)
    try:
        con.execute("checkpoint")
        shutil.copyfile(warehouse_path, staged)
        raw = [(f"raw/{p.parent.name}/{p.name}", p) for p in _archive_files(raw_dir)]
    finally:
        con.close()
    try:
        wal = staged.with_name(staged.name + ".wal")
        if wal.exists():  # a checkpoint folds the log in; a copy must never need one
            raise BackupError(f"{warehouse_path} kept a write-ahead log after a checkpoint; try again")
        digest = sha256_file(staged)
        entries: list[dict[str, Any]] = []
        uploaded = uploaded_bytes = 0
        for name, path in raw:
            sha, size = sha256_file(path), path.stat().st_size
            old = known.get(name)
            if old is None or (old["sha256"], old["bytes"]) != (sha, size):
                store.upload(path, name)
                uploaded, uploaded_bytes = uploaded + 1, uploaded_bytes + size
            entries.append({"name": name, "sha256": sha, "bytes": size})
        warehouse_name = f"warehouse/{digest}.duckdb"
        size = staged.stat().st_size
        if warehouse_name not in known:
            store.upload(staged, warehouse_name)
            uploaded, uploaded_bytes = uploaded + 1, uploaded_bytes + size
        entries.append({"name": warehouse_name, "sha256": digest, "bytes": size})
    finally:
        staged.unlink(missing_ok=True)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "created_at": (now or datetime.now(UTC)).isoformat(),
        "warehouse": warehouse_name,
        "files": entries,
    }
    store.write(MANIFEST, json.dumps(manifest, indent=1).encode())
    # only now is the last backup's warehouse copy, and archive files gc removed since, unreferenced
    listed = {e["name"] for e in entries}
    for name in known.keys() - listed:
        store.delete(name)
    return BackupReport(store.url(), len(entries), uploaded, uploaded_bytes, sum(e["bytes"] for e in entries))


# --- restore -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RestoreReport:
    url: str
    created_at: str
    files: int
    total_bytes: int


def _checked_name(name: str) -> str:
    parts = name.split("/")
    if (
        name.startswith("/")
        or any(p in ("", ".", "..") for p in parts)
        or parts[0] not in ("raw", "warehouse")
    ):
        raise BackupError(f"{MANIFEST} lists {name!r}, outside the backup's layout; the backup is damaged")
    return name


def restore(warehouse_path: Path, raw_dir: Path, store: Store, *, replace: bool = False) -> RestoreReport:
    """Fetch a backup, check every file against its manifest, then swap it in whole."""
    manifest = _manifest(store)
    if manifest is None:
        raise BackupError(f"no backup at {store.url()} (no {MANIFEST}); back up with `gpucost backup`")
    exists = warehouse_path.exists() or (raw_dir.is_dir() and any(raw_dir.iterdir()))
    if exists and not replace:
        raise BackupError(
            f"{warehouse_path.parent} holds a warehouse or raw archive already; restore replaces "
            "them: pass --replace, or point GPUCOST_HOME at an empty folder"
        )
    # WarehouseBusy while a refresh or a reader holds it; held through the swap, so a refresh that
    # starts meanwhile waits for the restored file instead of writing into the one moved aside
    guard = connect(warehouse_path) if warehouse_path.exists() else None
    home = warehouse_path.parent
    home.mkdir(parents=True, exist_ok=True)
    staging = home / f".restore-{uuid.uuid4().hex}"
    try:
        for entry in manifest["files"]:
            target = staging / _checked_name(entry["name"])
            target.parent.mkdir(parents=True, exist_ok=True)
            store.download(entry["name"], target)
            if target.stat().st_size != entry["bytes"] or sha256_file(target) != entry["sha256"]:
                raise BackupError(
                    f"{store.url(entry['name'])} differs from {MANIFEST} (a backup still being written, "
                    "or damaged); nothing was restored"
                )
        staged_warehouse = staging / _checked_name(manifest["warehouse"])
        if not staged_warehouse.is_file():
            raise BackupError(f"{MANIFEST} names a warehouse it does not list; nothing was restored")
        connect(staged_warehouse, read_only=True).close()  # a DuckDB file this DuckDB reads
        _swap(staging, staged_warehouse, warehouse_path, raw_dir)
    finally:
        if guard is not None:
            guard.close()
        shutil.rmtree(staging, ignore_errors=True)
    return RestoreReport(
        store.url(),
        manifest["created_at"],
        len(manifest["files"]),
        sum(e["bytes"] for e in manifest["files"]),
    )


def _swap(staging: Path, staged_warehouse: Path, warehouse_path: Path, raw_dir: Path) -> None:
    """Move the current warehouse and archive aside, the staged ones in; on failure, undo."""
    aside = staging / "previous"
    aside.mkdir()
    wal = warehouse_path.with_name(warehouse_path.name + ".wal")
    moves = [(p, aside / p.name) for p in (warehouse_path, wal, raw_dir) if p.exists()]
    done: list[tuple[Path, Path]] = []
    try:
        for source, target in moves:
            source.replace(target)
            done.append((source, target))
        staged_raw = staging / "raw"
        if staged_raw.is_dir():
            staged_raw.replace(raw_dir)
            done.append((staged_raw, raw_dir))
        staged_warehouse.replace(warehouse_path)
    except OSError as exc:
        for source, target in reversed(done):
            target.replace(source)
        raise BackupError(f"could not move the restored files into {warehouse_path.parent} ({exc})") from None
