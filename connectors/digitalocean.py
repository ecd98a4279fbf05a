"""DigitalOcean: GPU Droplet prices from the DigitalOcean API's size list.

Source: `GET https://api.digitalocean.com/v2/sizes?per_page=200` with `Authorization: Bearer
$DIGITALOCEAN_TOKEN` (https://docs.digitalocean.com/reference/api/digitalocean/#tag/Sizes;
checked 2026-12-01, the request gpuhunt's `providers/digitalocean.py` sends). The
endpoint needs a token, so `requires = ("DIGITALOCEAN_TOKEN",)`: without one the pipeline skips
the provider cleanly. The token travels in a header only, so it never reaches a URL or the raw
archive. DigitalOcean allows 5,000 requests an hour per token; a run sends one or two.

Answer: `{"sizes": [...], "links": {"pages": {"next": URL, ...}}, "meta": {"total"}}`; `fetch`
follows `links.pages.next` (a full URL) until it is absent. A GPU size carries `gpu_info`
(`{"count", "vram": {"amount", "unit"}, "model": "nvidia_h100"}`); sizes without it are CPU
Droplets, counted as `Excluded("cpu_only")`.

What becomes an offer: one `on_demand` / `list` offer per GPU size and region in its `regions`
(DigitalOcean publishes one price for every region, but a size leaving a region must close that
offer alone), priced `price_hourly` (USD per hour for the whole Droplet). `price_monthly` is kept
in `provider_data` and is not read as a `monthly_price_cap`. DigitalOcean's "billed hourly up to a
monthly cap of 672 hours" is stated for Droplets (its per-second billing post of 2026-01-01: "the
monthly cap of 672 hours ... remains in place"), but its Droplet pricing page (validated
2026-05-28) bills CPU and GPU Droplets under separate sections and the GPU section lists hourly
rates only, stating no cap. And a GPU size's `price_monthly` is its hourly rate × 744 h (a 31-day
month: $23.92 × 744 = $17,796.48 for 8x H100), so it would never bind within a 730-hour month.
A size listed in no region is `Excluded("no_region")`; `available: false` is kept as
`available=False`. DigitalOcean has no spot or preemptible Droplets.

Quirks handled:
- `gpu_info.vram.amount` is the Droplet's total VRAM in the stated `unit` ("gib" for 640 on an
  8x H100); `gpu_memory_gb_raw` is total / count as stated (80 per H100), not converted from GiB:
  DigitalOcean's "GiB" here is the card's marketing size.
- `gpu_name_raw` is `gpu_info.model` ("nvidia_h100", "amd_mi300x"); the aliases seed maps it.
- A size without a readable `price_hourly` is a wrong row (`problem`), never "not offered"; a
  page on which no GPU size has `price_hourly` at all raises `LayoutChanged` (a renamed key).
- Per-contract GPU plans (MI325X, B300, ...) never appear in `/v2/sizes`, so they are absent here.
- Sizes whose slug ends in `-spot` (e.g. `gpu-h100x1-80gb-spot`) are
  `Excluded("spot_size_terms_undocumented")`. Read as on-demand, one would be published as the
  cheapest on-demand H100; read as spot, it would claim terms (interruptible? market or list
  price?) nobody has stated. DigitalOcean's Droplet pricing page
  (docs.digitalocean.com/products/droplets/details/pricing, validated 2026-05-28, read 2026-12-01)
  lists GPU Droplets on demand and per contract only, and the Sizes API reference says nothing of
  `-spot` slugs; gpuhunt (`providers/digitalocean.py`, 2026-08) publishes every size as
  `spot=False`. So they are left out, counted, until DigitalOcean documents them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors.base import (
    Excluded,
    LayoutChanged,
    Offer,
    RawResponse,
    Unchanged,
    child,
    excluded,
    number,
    paginate,
    read_price,
)
from connectors.http import Client

name = "digitalocean"
CREDENTIAL = "DIGITALOCEAN_TOKEN"
requires: tuple[str, ...] = (CREDENTIAL,)

SIZES_URL = "https://api.digitalocean.com/v2/sizes"
PER_PAGE = 200  # the documented maximum
MAX_PAGES = 50
CURRENCY = "USD"
SCOPE = "sizes:on_demand"
SPOT_SLUG_SUFFIX = "-spot"


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    headers = {"Authorization": f"Bearer {creds[CREDENTIAL]}"}

    def page(link: str | None, number: int) -> RawResponse:
        if link is None:
            return client.fetch("GET", SIZES_URL, params={"per_page": str(PER_PAGE)}, headers=headers)
        return client.fetch("GET", link, headers=headers)  # `links.pages.next` is a full URL

    yield from paginate(
        page, lambda response, _: next_page(response.json()), max_pages=MAX_PAGES, what=f"{SIZES_URL} sizes"
    )


def next_page(payload: Any) -> str | None:
    """The `links.pages.next` URL of a page; None on the last page."""
    links = payload.get("links") if isinstance(payload, dict) else None
    pages = links.get("pages") if isinstance(links, dict) else None
    link = pages.get("next") if isinstance(pages, dict) else None
    return str(link) if link else None


def size_offers(size: Mapping[str, Any]) -> list[Offer] | Excluded:
    """The offers of one size (one per region), or why it has none."""
    slug = size.get("slug")
    if not slug:
        raise LayoutChanged(f"size without `slug` ({sorted(size)}); has the Sizes API changed?")
    gpu = size.get("gpu_info")
    if not isinstance(gpu, dict):
        return Excluded("cpu_only", str(slug))
    if str(slug).endswith(SPOT_SLUG_SUFFIX):
        return Excluded("spot_size_terms_undocumented", str(slug))  # see the module docstring
    regions = [str(region) for region in size.get("regions") or [] if region]
    if not regions:
        return Excluded("no_region", str(slug))
    count = number(gpu.get("count"))
    vram = child(gpu, "vram")
    total_vram = number(vram.get("amount"))
    price, problem = _price(size)
    memory_mb = number(size.get("memory"))
    available = size.get("available")
    data = {
        "description": size.get("description"),
        "price_monthly": size.get("price_monthly"),
        "gpu_vram_total": total_vram,
        "gpu_vram_unit": vram.get("unit"),
        "disk_gb": size.get("disk"),
        "disk_info": size.get("disk_info"),
        "transfer_tb": size.get("transfer"),
        "networking_throughput_mbps": size.get("networking_throughput"),
    }
    return [
        Offer(
            provider=name,
            instance_type=str(slug),
            region=region,
            pricing_type="on_demand",
            price_source="list",
            price_per_hour=price,
            currency=CURRENCY,
            gpu_name_raw=str(gpu["model"]) if gpu.get("model") else None,
            gpu_count=count or 0.0,
            gpu_memory_gb_raw=total_vram / count if total_vram and count else None,
            vcpus=number(size.get("vcpus")),
            ram_gb=memory_mb / 1024 if memory_mb else None,
            available=available if isinstance(available, bool) else None,
            provider_data=data,
            scope=SCOPE,
            problem=problem,
        )
        for region in regions
    ]


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    offers: list[Offer] = []
    counts: Counter[str] = Counter()
    for response in responses:
        payload = response.json()
        if not isinstance(payload, dict) or not isinstance(payload.get("sizes"), list):
            keys = sorted(payload) if isinstance(payload, dict) else type(payload).__name__
            raise LayoutChanged(
                f"{response.url}: `sizes` list missing (got {keys}); has the Sizes API changed?"
            )
        gpu_sizes = [
            s for s in payload["sizes"] if isinstance(s, dict) and isinstance(s.get("gpu_info"), dict)
        ]
        if gpu_sizes and not any("price_hourly" in size for size in gpu_sizes):
            # One size without a price is a wrong row; every size without one is a renamed key.
            raise LayoutChanged(
                f"{response.url}: `price_hourly` missing from all {len(gpu_sizes)} GPU sizes; "
                "has the Sizes API renamed its price field?"
            )
        for size in payload["sizes"]:
            result = size_offers(size) if isinstance(size, dict) else Excluded("not_an_object")
            if isinstance(result, Excluded):
                counts[result.reason] += 1
            else:
                offers.extend(result)
    if not offers and not counts["no_region"]:
        raise LayoutChanged(
            f"no size with `gpu_info` among {sum(counts.values())} sizes from {SIZES_URL}; "
            "has the field been renamed, or does the token's team lack GPU Droplet access?"
        )
    yield from offers
    yield from excluded(counts)


def _price(size: Mapping[str, Any]) -> tuple[float, str | None]:
    return read_price(size.get("price_hourly"), "price_hourly")
