"""Akash Network: GPU market prices per model, from the Akash Console API.

Source: `GET https://console-api.akash.network/v1/gpu-prices`, keyless (the Akash Console's own
backend; its shape is the console's `GpuPrices` type in github.com/akash-network/console).
No documented rate limit; one request per run.

Akash is a reverse-auction market: providers bid on a deployment and the tenant picks a bid.
The console API already aggregates the providers' GPU prices per model, so this connector does
not see host offers (the raw archive keeps the answer as it came). The answer:

    {"availability": {"total", "available"},
     "models": [{"vendor", "model", "ram": "80Gi", "interface": "SXM5",
                 "availability": {"total", "available"},            # GPUs
                 "providerAvailability": {"total", "available"},    # providers
                 "price": {"currency": "USD", "min", "max", "avg", "weightedAverage", "med"} | null}]}

Prices are per GPU-hour in `price.currency` (USD). One offer per model, 1 GPU (Akash leases
GPUs one by one; a multi-GPU lease is priced per GPU), `region="global"`, `pricing_type=
"on_demand"` (a won lease is not interruptible), `price_source="market"` (providers' bids).

The statistic. The API gives min/max/avg/weightedAverage (and `med` in newer answers), not the
bid list, so the market's p10 cannot be computed. `price_per_hour` is `weightedAverage` (the mean
of the providers' prices weighted by the GPUs each offers; `provider_data["price_statistic"] =
"weighted_average"`): the price of the typical GPU on offer. `min` is one provider, often one with
no free GPU, and the markets here are thin (one to four providers per model), so a lowest-bid
price would follow a single host. `provider_data` keeps `price_min`, `price_max`, `price_avg`,
`price_median` (when given), the GPU and provider counts (`gpus_available`/`gpus_total`,
`providers_available`/`providers_total`); `available` is true when any GPU is free.

Quirks handled:
- `price: null` (a model listed with no bid price) is left out by rule: `Excluded("no_price")`.
  A `price` object without `weightedAverage`, or a wrong value there (0, negative, NaN, not a
  number), is a wrong row: flagged with `problem`, never read as "not offered". A `min` of 0 is
  kept as stated in provider_data (it does not set the price).
- `ram` is Kubernetes quantity text ("80Gi", "24Gi", "96G"); `gpu_memory_gb_raw` is its number.
- `gpu_name_raw` is the model ("h100", "rtx4090", "pro6000se"); the instance type is
  `"<model> <ram> <interface>"`, so that instance_types seeds tell the PCIe A100/H100 from SXM.
- A model row without `model` is quarantined alone as an unreadable row
  (`market.read_host_rows`); only when every row is unreadable does the parse fail.
- No `models` list, or an empty one, raises `LayoutChanged`.
- One scope for the whole market and a laxer `shrink_limit` (see `connectors.market`).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from connectors import market
from connectors.base import Excluded, Offer, RawResponse, Unchanged, child, excluded, required_list
from connectors.http import Client

name = "akash"
requires: tuple[str, ...] = ()
shrink_limit = market.SHRINK_LIMIT

API_URL = "https://console-api.akash.network/v1/gpu-prices"
PRICE_KEY = "weightedAverage"
PRICE_STATISTIC = "weighted_average"
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(Gi|G|Ti|T|Mi|M)?\s*$")
_GB_PER_UNIT = {None: 1.0, "G": 1.0, "Gi": 1.0, "T": 1000.0, "Ti": 1024.0, "M": 0.001, "Mi": 1 / 1024}


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    yield client.fetch("GET", API_URL, headers={"Accept": "application/json"})


def models(payload: Any, url: str = API_URL) -> list[Mapping[str, Any]]:
    return required_list(payload, "models", where=url, answer="the gpu-prices answer")


def memory_gb(ram: object) -> float | None:
    """GB per GPU from Akash's `ram` quantity ("80Gi" -> 80.0); None when unreadable.

    Gi is read as GB like the rest of the warehouse reads a provider's GB figures (NVIDIA's
    "80 GB" cards are 80 GiB): the canonical sizes, not the unit, decide the match.
    """
    match = _QUANTITY.match(ram) if isinstance(ram, str) else None
    if match is None:
        return float(ram) if isinstance(ram, int | float) and not isinstance(ram, bool) else None
    return round(float(match.group(1)) * _GB_PER_UNIT[match.group(2)], 3)


def model_offer(model: Mapping[str, Any]) -> Offer | Excluded:
    gpu = model.get("model")
    if not gpu:
        raise market.HostRowError("gpu-prices model without `model`")
    interface = str(model.get("interface") or "").strip()
    ram = str(model.get("ram") or "").strip()
    instance = " ".join(part for part in (str(gpu), ram, interface) if part)
    if "price" in model and model["price"] is None:
        return Excluded("no_price", instance)
    price = child(model, "price")
    value, problem = _price(model, price)
    gpus = child(model, "availability")
    providers = model.get("providerAvailability")
    providers = providers if isinstance(providers, dict) else {}
    free = _number(gpus.get("available"))
    return Offer(
        provider=name,
        instance_type=instance,
        region="global",
        pricing_type="on_demand",
        price_source="market",
        price_per_hour=value,
        currency=str(price.get("currency") or "USD"),
        gpu_name_raw=str(gpu),
        gpu_count=1.0,
        gpu_memory_gb_raw=memory_gb(model.get("ram")),
        available=None if free is None else free > 0,
        scope=market.market_scope("on_demand"),
        problem=problem,
        provider_data={
            "price_statistic": PRICE_STATISTIC,
            "price_min": _number(price.get("min")),
            "price_max": _number(price.get("max")),
            "price_avg": _number(price.get("avg")),
            "price_median": _number(price.get("med")),
            "price_weighted_average": _number(price.get(PRICE_KEY)),
            "vendor": model.get("vendor"),
            "interface": interface or None,
            "gpus_available": free,
            "gpus_total": _number(gpus.get("total")),
            "providers_available": _number(providers.get("available")),
            "providers_total": _number(providers.get("total")),
        },
    )


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    left_out: Counter[str] = Counter()
    for response in responses:
        read, unreadable = market.read_host_rows(
            name, models(response.json(), response.url), model_offer, where=response.url, id_key="model"
        )
        for item in read:
            if isinstance(item, Excluded):
                left_out[item.reason] += 1
            else:
                yield item
        yield from unreadable
    yield from excluded(left_out)


def _price(model: Mapping[str, Any], price: Mapping[str, Any]) -> tuple[float, str | None]:
    if "price" not in model:
        return math.nan, "`price` missing"
    if price.get(PRICE_KEY) is None:
        return math.nan, f"`price.{PRICE_KEY}` missing"
    value = _number(price[PRICE_KEY])
    if value is None:
        return math.nan, f"`price.{PRICE_KEY}` is not a number: {price[PRICE_KEY]!r}"
    if not market.is_valid_price(value):
        return value, f"`price.{PRICE_KEY}` is {value}"
    return value, None


_number = market.host_number
