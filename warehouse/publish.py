"""Publishing a feeds folder to object storage (S3 or any S3-compatible service): data first, manifest last.

`GPUCOST_FEEDS_URL=s3://bucket/prefix` turns it on; `GPUCOST_S3_ENDPOINT_URL` points it at an
S3-compatible service (MinIO, Cloudflare R2, Ceph, ...). Credentials are boto3's own chain: the
standard `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` variables, `AWS_PROFILE`,
or an instance role. They are never read, logged or stored here.

What a reader sees: every object is replaced whole (an S3 PUT, multipart included, is atomic), the
data files go first and `manifest.json` last, so a reader who reads the manifest finds every file it
names already uploaded; a file whose sha256 (also in the object's `x-amz-meta-sha256`) differs from
the manifest's belongs to a newer publication still on its way. A failed upload stops before the
manifest: the manifest in the bucket still describes the previous, complete publication.

Recorded sample data (`--replay`) is never published unless asked (`allow_sample`): a replay on a
machine configured for publishing must not overwrite live feeds with sample prices.

The client is boto3 (pinned `>=1.35,<2`): AWS's own SDK, the reference every S3-compatible service
tests against, with the standard credential chain, retries and multipart uploads built in. Imported
only when publishing, so commands that never publish do not pay for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict

from warehouse.db import WarehouseError
from warehouse.export import MANIFEST, SAMPLE_MARKER, read_manifest, sha256_of

_CONTENT_TYPES = {
    ".parquet": "application/vnd.apache.parquet",
    ".csv": "text/csv; charset=utf-8",
    ".json": "application/json",
    ".txt": "text/plain; charset=utf-8",
}


class PublishSettings(BaseSettings):
    """Where feeds go beyond this machine (prefix GPUCOST_, or ./.env); no secrets here."""

    model_config = SettingsConfigDict(env_prefix="GPUCOST_", env_file=".env", extra="ignore")

    feeds_url: str | None = None  # s3://bucket/prefix
    s3_endpoint_url: str | None = None  # an S3-compatible service; unset = AWS


class PublishError(WarehouseError):
    """Publishing to object storage failed or is misconfigured; the message says what to do."""


@dataclass(frozen=True)
class S3Location:
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Location:
        """`s3://bucket` or `s3://bucket/some/prefix` (a trailing slash is ignored)."""
        if not url.startswith("s3://"):
            raise PublishError(f"GPUCOST_FEEDS_URL must look like s3://bucket/prefix; got {url!r}")
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if not bucket:
            raise PublishError(f"GPUCOST_FEEDS_URL names no bucket: {url!r}; use s3://bucket/prefix")
        return cls(bucket, prefix.strip("/"))

    def key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def url(self, name: str) -> str:
        return f"s3://{self.bucket}/{self.key(name)}"


def s3_client(endpoint_url: str | None = None) -> Any:
    """A boto3 S3 client with explicit timeouts and retries; credentials from boto3's own chain."""
    import boto3
    from botocore.config import Config

    options: dict[str, Any] = {
        "connect_timeout": 10,
        "read_timeout": 120,
        "retries": {"max_attempts": 5, "mode": "standard"},
    }
    if endpoint_url:
        # S3-compatible services differ in the default integrity checksums boto3 >= 1.36 sends;
        # send them only where S3 requires one. Integrity is in x-amz-meta-sha256 and the manifest.
        options |= {
            "request_checksum_calculation": "when_required",
            "response_checksum_validation": "when_required",
            "s3": {"addressing_style": "path"},
        }
    # a session of its own: boto3's default one caches the credentials it found first, for good
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=endpoint_url or None, config=Config(**options))


def _verify(out_dir: Path, files: list[dict[str, Any]]) -> None:
    for entry in files:
        path = out_dir / entry["name"]
        if not path.exists() or sha256_of(path) != entry["sha256"]:
            raise PublishError(
                f"{path} is missing or differs from {MANIFEST} (another export is writing this folder?); "
                "write the feeds again, then publish"
            )


def _exists(client: Any, location: S3Location, name: str) -> bool:
    from botocore.exceptions import ClientError

    try:
        client.head_object(Bucket=location.bucket, Key=location.key(name))
    except ClientError as exc:
        # 403 as well: without s3:ListBucket a missing key answers 403, not 404
        if exc.response.get("Error", {}).get("Code") in ("404", "403", "NoSuchKey", "NotFound"):
            return False
        raise
    return True


def publish_feeds(
    out_dir: Path,
    url: str,
    *,
    endpoint_url: str | None = None,
    allow_sample: bool = False,
    client: Any | None = None,
) -> list[str]:
    """Upload the publication in `out_dir`, as its manifest lists it, to `url`; the URLs, manifest last."""
    from boto3.exceptions import S3UploadFailedError
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    location = S3Location.parse(url)
    try:
        manifest = read_manifest(out_dir)
    except FileNotFoundError as exc:
        raise PublishError(str(exc)) from None
    sample = manifest.get("data_mode") != "live"
    if sample and not allow_sample:
        raise PublishError(
            f"the feeds in {out_dir} are recorded sample data (replay), not live prices; they are not "
            f"published to {url}"
        )
    files = manifest["files"]
    _verify(out_dir, files)
    client = client or s3_client(endpoint_url)
    tags = {"run-id": manifest["run_id"]} if manifest.get("run_id") else {}
    uploaded: list[str] = []

    def upload(name: str, sha256: str) -> None:
        path = out_dir / name
        extra = {
            "ContentType": _CONTENT_TYPES.get(path.suffix, "application/octet-stream"),
            "Metadata": {"sha256": sha256, **tags},
        }
        client.upload_file(str(path), location.bucket, location.key(name), ExtraArgs=extra)
        uploaded.append(location.url(name))

    current = MANIFEST
    try:
        for entry in files:
            current = entry["name"]
            upload(current, entry["sha256"])
        current = SAMPLE_MARKER
        if sample:
            upload(SAMPLE_MARKER, sha256_of(out_dir / SAMPLE_MARKER))
        elif _exists(client, location, SAMPLE_MARKER):
            # a live publication over an earlier sample one must not keep its "sample data" note
            client.delete_object(Bucket=location.bucket, Key=location.key(SAMPLE_MARKER))
        current = MANIFEST
        upload(MANIFEST, sha256_of(out_dir / MANIFEST))
    except NoCredentialsError:
        raise PublishError(
            f"no AWS credentials to publish to {url}: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
            "(or AWS_PROFILE)"
        ) from None
    except (BotoCoreError, ClientError, S3UploadFailedError) as exc:
        done = "; ".join(uploaded) or "nothing"
        raise PublishError(
            f"uploading {current} to {location.url(current)} failed ({exc}); uploaded before it: {done}. "
            f"{location.url(MANIFEST)} still describes the previous publication. Check the bucket, the "
            "endpoint (GPUCOST_S3_ENDPOINT_URL) and the credentials' permissions, then run "
            "`gpucost export` again"
        ) from None
    return uploaded


def check_settings(settings: PublishSettings | None = None) -> S3Location | None:
    """The configured location, checked before any work starts; None when publishing is off."""
    settings = settings or PublishSettings()
    return S3Location.parse(settings.feeds_url) if settings.feeds_url else None


def publish_if_configured(
    out_dir: Path, settings: PublishSettings | None = None, *, client: Any | None = None
) -> str | None:
    """Publish `out_dir` when GPUCOST_FEEDS_URL is set; one line saying what happened, None when it is not.

    Sample data is skipped with a line, not an error: the replay run itself succeeded.
    """
    settings = settings or PublishSettings()
    if not settings.feeds_url:
        return None
    try:
        mode = read_manifest(out_dir).get("data_mode")
    except FileNotFoundError as exc:
        raise PublishError(str(exc)) from None
    if mode != "live":
        return f"not published to {settings.feeds_url}: these feeds are recorded sample data (replay)"
    endpoint = settings.s3_endpoint_url
    uploaded = publish_feeds(out_dir, settings.feeds_url, endpoint_url=endpoint, client=client)
    return f"published {len(uploaded)} files to {settings.feeds_url} (manifest last)"
