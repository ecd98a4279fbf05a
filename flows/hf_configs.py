"""A model's config.json by Hugging Face id: from the local Hub cache, else from the Hub.

Cache layout (huggingface_hub): `$HF_HUB_CACHE`, else `$HF_HOME/hub`, else
`~/.cache/huggingface/hub`; a model lives in `models--{org}--{name}/`, `refs/main` names the
snapshot and `snapshots/<commit>/config.json` is the file. The Hub serves
`{endpoint}/{id}/resolve/main/config.json`, the endpoint `https://huggingface.co` or, as
huggingface_hub reads it, `$HF_ENDPOINT` (a mirror or a private Hub; gated models need
`HF_TOKEN`, sent as `Authorization: Bearer`). With `HF_HUB_OFFLINE=1`, or when the Hub cannot be
reached in HUB_TIMEOUT_SECONDS, resolution fails with one line that says what to do. Only that
configured endpoint is ever asked, and only for a model id (`MODEL_ID` in flows/job_options.py:
no scheme, host or path of a user's choosing). The HTTP client is `connectors.http.make_client`,
the project's one client factory.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

HUB_URL = "https://huggingface.co"
# a config.json is a few KB: a Hub that has not answered in this long is not going to (the
# planner's request would otherwise wait the client's 30 s default)
HUB_TIMEOUT_SECONDS = 10.0
# Limits on a config.json read from a file, the cache, the Hub or pasted into `gpucost serve`. Real
# ones are 1-10 KB (meta-llama/Llama-3.1-405B's is under 1 KB); 256 KB leaves room for long
# auto_map / quantization blocks and still refuses a document that is not a config.
MAX_CONFIG_BYTES = 256 * 1024
# no architecture number has more digits than this (a 10e12-parameter model has 14): a longer
# integer is a typo or an attack on int parsing, which is quadratic in the digits
MAX_INT_DIGITS = 15


class ConfigNotFound(Exception):
    """No config.json for a model id; the message says what to do next."""


def hub_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    return Path.home() / ".cache" / "huggingface" / "hub"


def cached_config(model_id: str, cache_dir: Path) -> dict[str, object] | None:
    """config.json of `model_id` from a huggingface_hub cache, or None if it is not there."""
    repo = cache_dir / f"models--{model_id.replace('/', '--')}"
    snapshots = repo / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = repo / "refs" / "main"
    candidates = []
    if ref.is_file():
        candidates.append(snapshots / ref.read_text(encoding="utf-8").strip() / "config.json")
    candidates += sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in candidates:
        if path.is_file():
            return parse_config(path.read_bytes(), str(path))
    return None


class _Refused(ValueError):
    """A JSON value a config.json never holds (raised inside json.loads)."""


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(f"an integer of {len(text)} digits ({text[:20]}...)")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 parses to inf
        raise _Refused(f"the number {text[:40]} (beyond a finite float)")
    return value


def _constant(text: str) -> float:
    raise _Refused(f"{text} (not JSON: NaN and Infinity are no numbers a config states)")


def parse_config(body: bytes | str, where: str) -> dict[str, object]:
    """A config.json's text as a dict, within the limits above; ConfigNotFound (one line) otherwise."""
    size = len(body.encode("utf-8") if isinstance(body, str) else body)
    if size > MAX_CONFIG_BYTES:
        raise ConfigNotFound(
            f"{where} is {size:,} bytes, more than a config.json's {MAX_CONFIG_BYTES:,}-byte limit"
        )
    try:
        data = json.loads(body, parse_int=_int, parse_float=_float, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise ConfigNotFound(f"{where} is not valid JSON ({exc.msg})") from None
    except _Refused as exc:
        raise ConfigNotFound(f"{where} holds {exc}") from None
    except (RecursionError, UnicodeDecodeError) as exc:
        raise ConfigNotFound(f"{where} is not a config.json ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise ConfigNotFound(f"{where} is not a JSON object (a Hugging Face config.json)")
    return data


def hub_endpoint(environ: Mapping[str, str] | None = None) -> str:
    """The Hub's base URL: `$HF_ENDPOINT` (huggingface_hub's variable), else HUB_URL."""
    env = os.environ if environ is None else environ
    endpoint = (env.get("HF_ENDPOINT") or HUB_URL).strip().rstrip("/")
    if not endpoint.startswith(("https://", "http://")):
        raise ConfigNotFound(f"HF_ENDPOINT={endpoint!r} is not an http(s) URL; unset it to use {HUB_URL}")
    return endpoint


def fetch_config(
    model_id: str, client: httpx.Client, token: str | None = None, endpoint: str = HUB_URL
) -> dict[str, object]:
    """config.json of `model_id` from the Hub at `endpoint`."""
    import httpx  # here, not above: `--help` and seeded models never load the HTTP stack

    url = f"{endpoint}/{model_id}/resolve/main/config.json"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = client.get(url, headers=headers)
    except httpx.HTTPError as exc:
        raise ConfigNotFound(
            f"cannot reach the Hugging Face Hub for {model_id} ({type(exc).__name__}); offline? "
            "download its config.json into the HF cache or pass it with --config"
        ) from None
    if response.status_code in (401, 403):
        raise ConfigNotFound(
            f"{model_id} is gated on the Hub: set HF_TOKEN, or pass its config.json with --config"
        )
    if response.status_code == 404:
        raise ConfigNotFound(f"no model {model_id!r} on the Hugging Face Hub (or it has no config.json)")
    if response.status_code != 200:
        raise ConfigNotFound(f"the Hub answered HTTP {response.status_code} for {model_id}'s config.json")
    return parse_config(response.content, url)


def resolve_config(
    model_id: str,
    *,
    environ: Mapping[str, str] | None = None,
    client: httpx.Client | None = None,
) -> dict[str, object]:
    """config.json of a Hub model id: the local cache first, then the Hub unless offline."""
    env = os.environ if environ is None else environ
    found = cached_config(model_id, hub_cache_dir(env))
    if found is not None:
        return found
    if env.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        raise ConfigNotFound(
            f"{model_id} is not in the HF cache ({hub_cache_dir(env)}) and HF_HUB_OFFLINE is set; "
            "pass its config.json with --config"
        )
    endpoint = hub_endpoint(env)
    import httpx

    from connectors.http import make_client

    own = client is None
    client = client or make_client(
        retries=1, timeout=httpx.Timeout(HUB_TIMEOUT_SECONDS), request_deadline=2 * HUB_TIMEOUT_SECONDS
    )
    try:
        return fetch_config(model_id, client, env.get("HF_TOKEN"), endpoint)
    finally:
        if own:
            client.close()
