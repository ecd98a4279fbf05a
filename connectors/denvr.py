"""Denvr Dataworks (Denvr Cloud): hourly prices of every virtual-machine configuration.

Source: `GET https://api.cloud.denvrdata.com/api/v1/servers/virtual/GetConfigurations` with
`Authorization: ApiKey <key>`, the call Denvr's own SDKs make for "detailed information on
available configurations for virtual machines" (github.com/denvrdata/denvrpy
`denvr/api/v1/servers/virtual.py` `get_configurations`, default server `api.cloud.denvrdata.com`,
`DENVR_APIKEY` sent as `ApiKey`; github.com/denvrdata/go-denvr `ServerConfiguration`, checked
2026-12-02 at 39e8288 / 0a118af). Both SDKs always authenticate, so `DENVR_APIKEY` is required:
without it the provider is skipped (username/password bearer login, the SDKs' other mode, is not
used: its token would be a secret the raw archive must never hold). One request per run, no
paging, no documented rate limit. Shape (go-denvr's `ListResultDtoOfServerConfiguration`)::

    {"items": [{"id": 5, "name": "A100_40GB_PCIe_1x", "user_friendly_name": "A100_40GB_PCIe_1x",
                "text_name": "A100 40GB PCIe", "type": "nvidia.com/A100PCIE40GB",
                "brand_family": "NVIDIA A100", "brand": "Nvidia", "gpus": 1, "vcpus": 14,
                "memory": 112, "storage": 1700, "price": 2.05, "is_gpu_platform": true,
                "compute_network": null, "clusters": ["Hou1", "Msc1"]}, ...]}

`price` is for the whole configuration (the SDK's sample: the 1x and 2x A100 configurations at
2.05 and 4.10, GPUs, vCPUs, RAM and disk all doubling), per hour, in USD: the answer states
neither unit nor currency; Denvr's pricing page (denvr.com/pricing) quotes USD per hour, and
configurations are sold by the hour. Read as USD per instance-hour, `billing_unit` left unset (no
billing granularity is documented). `memory` and `storage` are GB. It is the on-demand list price
of the configuration: reserved pools (`rpool` "reserved-<tenant>") are contracts, not read here.

One offer per (configuration, cluster): `region` is the cluster ("Hou1", "Msc1"), all at the
configuration's price; `instance_type` is `name`; the GPU is `text_name` (the deprecated
`gpu_name`, then `brand_family`, when absent), resolved by the seeds, with the Kubernetes-style
`type` ("nvidia.com/A100PCIE40GB") kept in `provider_data`. Left out, counted: CPU-only
configurations (`is_gpu_platform` false or no GPUs: `Excluded("cpu_only")`) and configurations
in no cluster (`Excluded("no_cluster")`). A configuration whose `price` is missing, not a number,
zero or negative is yielded with `problem`. No `items` list, or an empty one, raises
`LayoutChanged`. No spot: Denvr sells no interruptible VMs. Scope: `configurations`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import Excluded, Offer, RawResponse, excluded, number, read_price, required_list
from connectors.http import Client

name = "denvr"
CREDENTIAL = "DENVR_APIKEY"
requires: tuple[str, ...] = (CREDENTIAL,)

API_URL = "https://api.cloud.denvrdata.com/api/v1/servers/virtual/GetConfigurations"
CURRENCY = "USD"  # not stated by the answer (see the module docstring)
SCOPE = "configurations"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Accept": "application/json", "Authorization": f"ApiKey {creds[CREDENTIAL]}"}
    yield client.fetch("GET", API_URL, headers=headers)


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Excluded]:
    left_out: Counter[str] = Counter()
    for response in responses:
        items = required_list(response.json(), "items", where=response.url, answer="the configurations list")
        for item in items:
            offers, reason = configuration_offers(item if isinstance(item, dict) else {})
            yield from offers
            if reason:
                left_out[reason] += 1
    yield from excluded(left_out)


def gpu_name(item: Mapping[str, Any]) -> str | None:
    """The GPU as the configuration names it for people: `text_name`, else the older fields.

    >>> gpu_name({"text_name": "A100 40GB PCIe", "gpu_name": "x"}), gpu_name({"brand_family": "NVIDIA A100"})
    ('A100 40GB PCIe', 'NVIDIA A100')
    """
    for key in ("text_name", "gpu_name", "brand_family"):
        value = item.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def configuration_offers(item: Mapping[str, Any]) -> tuple[list[Offer], str | None]:
    """One offer per cluster of a configuration, or none and the reason it is left out."""
    gpus = number(item.get("gpus"))
    if item.get("is_gpu_platform") is False or not gpus:
        return [], "cpu_only"
    clusters = [str(c) for c in item.get("clusters") or [] if c]
    if not clusters:
        return [], "no_cluster"
    label = str(item.get("name") or item.get("user_friendly_name") or item.get("id") or "?")
    price, problem = read_price(item.get("price"), "price")
    data = {
        "id": item.get("id"),
        "type": item.get("type") or item.get("gpu_type"),
        "brand": item.get("brand") or item.get("gpu_brand"),
        "storage_gb": number(item.get("storage")),
        "compute_network": item.get("compute_network"),
        "clusters": clusters,
    }
    return [
        Offer(
            provider=name,
            instance_type=label,
            region=cluster,
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=price,
            currency=CURRENCY,
            gpu_name_raw=gpu_name(item),
            gpu_count=gpus,
            vcpus=number(item.get("vcpus")),
            ram_gb=number(item.get("memory")),
            provider_data=data,
            scope=SCOPE,
            problem=problem,
        )
        for cluster in clusters
    ], None
