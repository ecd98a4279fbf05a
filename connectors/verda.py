"""Verda (formerly DataCrunch): instance prices from the products page, and from the API when set.

Sources:
- `GET https://verda.com/products` (keyless; `datacrunch.io/products` redirects there; the docs'
  "Products & Pricing" card links it, https://docs.verda.com/welcome-to-verda/pricing-and-billing).
  One `<table>` per GPU family with the columns Instance name, GPU model, GPU (count), CPU, RAM,
  VRAM (all GPUs), P2P, On demand price, Dynamic price, Spot price. Prices are per instance-hour
  ("$7.27/h" for 2x B200), in USD. Revalidated with the last run's ETag / Last-Modified.
- Optional, when `VERDA_CLIENT_ID` and `VERDA_CLIENT_SECRET` are both set: the public API
  (https://api.verda.com/v1, the base URL of Verda's SDKs; `api.datacrunch.io/v1` is the old
  host). OAuth2 client credentials: `POST /oauth2/token` with a JSON body
  `{"grant_type": "client_credentials", "client_id", "client_secret"}` answers an
  `access_token` (Bearer). Then `GET /instance-types?currency=usd` (a list of objects with
  `instance_type`, `price_per_hour`, `spot_price`, optional `dynamic_price` /
  `max_dynamic_price`, all strings of USD per instance-hour; `gpu.number_of_gpus`,
  `gpu_memory.size_in_gigabytes` for all GPUs, `cpu.number_of_cores`, `memory`, `p2p`) and
  `GET /instance-availability?isSpot=false|true` (`[{"location_code", "availabilities": [types]}]`).
  No rate limit is documented; four requests a run.

The three price tiers (what "Dynamic" is):
- On demand: a fixed pay-as-you-go rate, `on_demand`. The page's footnote: "Price and discount are
  fixed after deployment, except for dynamically-priced instances, which update daily".
- Dynamic: also on-demand and not interruptible, but Verda resets the rate every day and a running
  instance follows it (Verda's SDK deploys with `pricing="DYNAMIC_PRICE"` vs `"FIXED_PRICE"`, and
  instance types carry `dynamic_price` and a cap, `max_dynamic_price`). It is a separate offer,
  `on_demand` / `list`, with instance type `"<type> (dynamic)"` (the offer key has no tier field)
  and `provider_data["pricing"] = "dynamic"`.
- Spot: interruptible, a published per-type rate (not a bid market), `spot` / `list`.

Quirks handled:
- Verda has several locations (FIN-01, ICE-01, ...) but one price per instance type: offers are
  `region="global"`; the API's availability lists set `available` and `provider_data["locations"]`.
- The API and the page price the same instance types under the same offer keys. When the
  instance-types answer is present it wins for the types it lists (those page rows are
  `Excluded("listed_by_api")`), so one run never yields one key twice.
- A price cell that is empty, "-" or "N/A" is `Excluded("not_offered:<tier>")`; one that cannot be
  read, or is zero, negative or has no time unit, is an offer with `problem`. A missing On demand
  price column raises `LayoutChanged`; a missing Dynamic or Spot column only drops that tier
  (its scope vanishes, and the warehouse holds it as degraded).
- In the API, `price_per_hour` / `spot_price` absent from an object is a wrong row (`problem`), a
  null value "not offered"; CPU-only types are `Excluded("cpu_only")`.
- The access token is a run-time secret the HTTP client was not told about, so it must never reach
  a cassette or the raw archive: the token exchange is never yielded, it is sent only as an
  `Authorization` header (headers are not recorded), and the API path runs only in live mode (in
  record mode the recording transport would write the token answer's body to disk; in replay
  there is nothing to replay). See `_api_allowed`.

Keyless first (issue 18, 2026-12-01): without credentials, `fetch` asks
`GET https://api.verda.com/v1/instance-types?currency=usd` with no token before the page. The API
docs (https://api.verda.com/v1/docs, read 2026-12-01) say every request needs the OAuth token
"except for a few open endpoints" without listing them, and the peers that run live (gpuhunt's
`VerdaProvider`, SkyPilot's `fetch_verda`) always authenticate; so an answer of 401/403, any
fetch error, or anything but a non-empty JSON list of types falls back to the products page. Only
a live run can settle whether the endpoint answers without a token; both paths are tested.

Scopes: `instances:on_demand`, `instances:dynamic`, `instances:spot`, the same whichever source
priced them (page table columns or API keys), so a run that moves between the API and the page
fallback neither vanishes nor duplicates a scope.
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qs, urlsplit

from connectors import pages
from connectors.base import (
    ConnectorError,
    Excluded,
    FetchError,
    LayoutChanged,
    Offer,
    PricingType,
    RawResponse,
    Unchanged,
    excluded,
)
from connectors.http import Client

log = logging.getLogger(__name__)

name = "verda"
requires: tuple[str, ...] = ()
CLIENT_ID = "VERDA_CLIENT_ID"
CLIENT_SECRET = "VERDA_CLIENT_SECRET"
optional: tuple[str, ...] = (CLIENT_ID, CLIENT_SECRET)

PAGE_URL = "https://verda.com/products"
API_URL = "https://api.verda.com/v1"
TOKEN_URL = f"{API_URL}/oauth2/token"
INSTANCE_TYPES_URL = f"{API_URL}/instance-types"
AVAILABILITY_URL = f"{API_URL}/instance-availability"
REGION = "global"
WHERE = "the instance tables of verda.com/products"

# (page column label, tier, pricing type, instance-type suffix)
TIERS: tuple[tuple[str, str, PricingType, str], ...] = (
    ("On demand price", "on_demand", "on_demand", ""),
    ("Dynamic price", "dynamic", "on_demand", " (dynamic)"),
    ("Spot price", "spot", "spot", ""),
)
PAGE_SCOPES = tuple(f"instances:{tier}" for _, tier, _, _ in TIERS)
# (API price key, tier, pricing type, suffix, key required in every object)
API_PRICES: tuple[tuple[str, str, PricingType, str, bool], ...] = (
    ("price_per_hour", "on_demand", "on_demand", "", True),
    ("dynamic_price", "dynamic", "on_demand", " (dynamic)", False),
    ("spot_price", "spot", "spot", "", True),
)
_LEADING_COUNT = re.compile(r"^(\d+)")


# --- fetch --------------------------------------------------------------------------------------


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    client_id, secret = creds.get(CLIENT_ID), creds.get(CLIENT_SECRET)
    if not (client_id and secret):
        keyless = _keyless_types(client)
        if keyless is not None:
            yield keyless
            return
        yield pages.fetch_page(client, PAGE_URL, previous)  # the fallback
        return
    yield pages.fetch_page(client, PAGE_URL, previous)
    if not _api_allowed(client):
        log.info(
            "verda: API credentials set but the client is in %s mode; the token answer would be "
            "recorded, so only the products page is read",
            getattr(client, "mode", "?"),
        )
        return
    headers = {"Authorization": f"Bearer {_access_token(client, client_id, secret)}"}
    yield client.fetch("GET", INSTANCE_TYPES_URL, params={"currency": "usd"}, headers=headers)
    for is_spot in ("false", "true"):
        yield client.fetch("GET", AVAILABILITY_URL, params={"isSpot": is_spot}, headers=headers)


def _keyless_types(client: Client) -> RawResponse | None:
    """The instance-types list asked without a token, or None when it is not usable (refused,
    unreachable, not in the cassette, or not a non-empty list of types): the page is then read."""
    try:
        answer = client.fetch(
            "GET",
            INSTANCE_TYPES_URL,
            params={"currency": "usd"},
            headers={"Accept": "application/json"},
            ok_statuses=(401, 403),
        )
    except FetchError as exc:
        log.info("verda: keyless instance-types not available (%s); reading the products page", exc)
        return None
    if answer.status != 200:
        log.info(
            "verda: instance-types answered HTTP %s without a token; reading the products page", answer.status
        )
        return None
    try:
        instance_types(answer.json(), answer.url)
    except LayoutChanged as exc:
        log.info("verda: keyless instance-types answer not usable (%s); reading the products page", exc)
        return None
    return answer


def _api_allowed(client: Any) -> bool:
    """Only a live client may carry the token: record mode writes every answer body to disk."""
    return getattr(client, "mode", "live") == "live"


def _access_token(client: Client, client_id: str, secret: str) -> str:
    """The Bearer token of a client-credentials exchange; the answer itself is never yielded."""
    body = {"grant_type": "client_credentials", "client_id": client_id, "client_secret": secret}
    answer = client.fetch("POST", TOKEN_URL, json=body)
    try:
        token = answer.json().get("access_token")
    except (LayoutChanged, AttributeError):
        token = None
    if not isinstance(token, str) or not token:
        # never echo the body: it may hold a token under another key
        raise ConnectorError(
            f"{TOKEN_URL}: no `access_token` in the token answer (HTTP {answer.status}); check "
            f"{CLIENT_ID} / {CLIENT_SECRET}, or unset them to read only the products page"
        )
    return token


# --- parse --------------------------------------------------------------------------------------


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    page = [r for r in responses if _is_page(r.url)]
    types = [r for r in responses if r.url.split("?")[0] == INSTANCE_TYPES_URL]
    availability = [r for r in responses if r.url.split("?")[0] == AVAILABILITY_URL]
    locations = {is_spot: where for r in availability for is_spot, where in [availability_map(r)]}
    api_types: set[str] = set()
    for response in types:
        items = instance_types(response.json(), response.url)
        api_types |= {str(item.get("instance_type")) for item in items}
        yield from api_offers(items, locations)
    yield from pages.read_pages(page, PAGE_SCOPES, lambda r: page_offers(r, skip=frozenset(api_types)))


def _is_page(url: str) -> bool:
    parts = urlsplit(url)
    return parts.path.rstrip("/").endswith("/products") and "api." not in parts.netloc


def page_offers(response: RawResponse, skip: frozenset[str] = frozenset()) -> Iterator[Offer | Excluded]:
    """Every priced cell of every instance table on the products page."""
    root = pages.soup(response)
    found = pages.find_tables(
        root,
        required=("Instance name", "On demand price"),
        optional=("Dynamic price", "Spot price"),
        where=WHERE,
    )
    left_out: Counter[str] = Counter()
    yielded = 0
    seen: set[str] = set()
    for table in found:
        table.column("Instance name")
        table.column("On demand price")  # LayoutChanged with the label if a table lacks it
        table.check_names("Instance name")
        table.check_price_columns(*(label for label, *_ in TIERS))
        for row in table.read():
            instance = row.get("Instance name") or ""
            if instance and instance in seen:
                # instance names are unique: a repeated one is another column under that label
                raise LayoutChanged(
                    f"instance name {instance!r} appears twice in {WHERE}; has the page layout changed?"
                )
            seen.add(instance)
            if not instance:
                continue  # a spacer or sub-heading row
            if instance in skip:
                left_out["listed_by_api"] += 1
                continue
            for item in _page_row_offers(table, row, instance):
                if isinstance(item, Excluded):
                    left_out[item.reason] += item.count
                else:
                    yielded += 1
                    yield item
    if not yielded and not left_out:
        raise LayoutChanged(f"no instance rows in {WHERE}; has the page layout changed?")
    yield from excluded(left_out)


# A row is one instance type priced as a whole ("$7.27/h" for 2x B200): the page's layout, used
# where a cell and its label say nothing of the basis; a "per GPU" label or cell is read as such.
PER_INSTANCE = pages.Stated(per_gpu=False, source="one row per instance type (Instance name)", binding=False)


def _page_row_offers(table: pages.Table, row: pages.Row, instance: str) -> Iterator[Offer | Excluded]:
    model = row.get("GPU model") or ""
    stated_count = pages.parse_count(row.get("GPU"))
    named_count = _leading_count(instance)
    if stated_count is not None and named_count is not None and stated_count != named_count:
        # "2B200.60V" names 2 GPUs: a `GPU` column saying otherwise is not the GPU count
        raise LayoutChanged(
            f"row {instance!r} of {table.where}: the `GPU` column says {stated_count} GPUs, the instance "
            f"name {named_count}; has the page layout changed?"
        )
    count = stated_count if stated_count is not None else named_count
    if count == 0:
        yield Excluded("cpu_only")
        return
    label = pages.parse_gpu_label(model)
    total_vram = pages.parse_gb(row.get("VRAM"))
    per_gpu_vram = label.vram_gb or (total_vram / count if total_vram and count else None)
    for column, tier, pricing_type, suffix in TIERS:
        if table.find_column(column) is None:
            continue  # tier not on this page: its scope vanishes and is held by the warehouse
        cell = row.get(column) or ""
        if pages.is_not_available(cell):
            yield Excluded(f"not_offered:{tier}")
            continue
        if pages.is_contact(cell):
            yield Excluded("contact_sales")
            continue
        price, currency, problem, flags = hourly_price(row, column, float(count or 0))
        yield Offer(
            provider=name,
            instance_type=instance + suffix,
            region=REGION,
            pricing_type=pricing_type,
            price_source="list",
            price_per_hour=price,
            currency=currency,
            gpu_name_raw=label.name or model or None,
            gpu_count=float(count) if count else math.nan,
            gpu_memory_gb_raw=per_gpu_vram,
            vcpus=pages.parse_vcpus(row.get("CPU")),
            ram_gb=pages.parse_gb(row.get("RAM")),
            provider_data={
                "source": "products_page",
                "pricing": "dynamic" if tier == "dynamic" else "fixed",
                "base_instance_type": instance,
                "p2p": row.get("P2P"),
                "vram_total_gb": total_vram,
                "price_text": cell,
                "table": table.where,
                **flags,
            },
            scope=f"instances:{tier}",
            problem=problem if count else (problem or f"GPU count unreadable in row {instance!r}"),
        )


def hourly_price(row: pages.Row, column: str, count: float) -> tuple[float, str, str | None, dict[str, Any]]:
    """(price per instance-hour, currency, problem, provider_data flags) of one price cell
    ("$3.64/h": the cell states currency and unit; the basis is the row's, see `PER_INSTANCE`).

    A cell whose currency or unit is stated nowhere is a wrong row (its `LayoutChanged` message
    is the problem); `page_offers` refuses the page when no cell can be read at all.
    """
    cell = row.get(column) or ""
    try:
        quote = row.quote(column, stated=PER_INSTANCE, gpu_count=count or None)
    except LayoutChanged as exc:
        return math.nan, "USD", str(exc), {}
    if quote is None:
        return math.nan, "USD", f"price cell {cell!r} is not a price", {}
    amount = round(quote.instance_hour(count), 6)
    if not math.isfinite(amount) or amount <= 0:
        return amount, quote.currency, f"price {amount} is not a positive price", quote.flags()
    return amount, quote.currency, None, quote.flags()


def _leading_count(instance: str) -> int | None:
    match = _LEADING_COUNT.match(instance)
    return int(match.group(1)) if match else None


# --- API ----------------------------------------------------------------------------------------


def instance_types(payload: Any, url: str = INSTANCE_TYPES_URL) -> list[Mapping[str, Any]]:
    """The instance-types list; `LayoutChanged` when it is not a non-empty list of objects."""
    if not isinstance(payload, list) or not payload:
        raise LayoutChanged(
            f"{url}: expected a non-empty JSON list of instance types, got "
            f"{type(payload).__name__}{' (empty)' if payload == [] else ''}; has the API changed?"
        )
    if not all(isinstance(item, Mapping) and item.get("instance_type") for item in payload):
        raise LayoutChanged(f"{url}: an instance type without `instance_type`; has the API changed?")
    return payload


def availability_map(response: RawResponse) -> tuple[bool, dict[str, list[str]]]:
    """(is_spot, instance type -> locations) from one instance-availability answer."""
    flag = parse_qs(urlsplit(response.url).query).get("isSpot", ["false"])[0].lower() == "true"
    payload = response.json()
    if not isinstance(payload, list):
        raise LayoutChanged(f"{response.url}: expected a list of locations; has the API changed?")
    where: dict[str, list[str]] = {}
    for location in payload:
        if not isinstance(location, Mapping) or not isinstance(location.get("availabilities"), list):
            raise LayoutChanged(
                f"{response.url}: a location without an `availabilities` list; has the API changed?"
            )
        for instance in location["availabilities"]:
            where.setdefault(str(instance), []).append(str(location.get("location_code")))
    return flag, where


def api_offers(
    items: Sequence[Mapping[str, Any]], locations: Mapping[bool, Mapping[str, list[str]]] | None = None
) -> Iterator[Offer | Excluded]:
    """Offers of the instance-types answer: on-demand, dynamic and spot per GPU type."""
    locations = locations or {}
    left_out: Counter[str] = Counter()
    for item in items:
        instance = str(item["instance_type"])
        gpu_value = item.get("gpu")
        gpu: Mapping[str, Any] = gpu_value if isinstance(gpu_value, Mapping) else {}
        count = gpu.get("number_of_gpus")
        if not count:
            left_out["cpu_only"] += 1
            continue
        memory_value = item.get("gpu_memory")
        memory: Mapping[str, Any] = memory_value if isinstance(memory_value, Mapping) else {}
        total_vram = _number(memory.get("size_in_gigabytes"))
        label = pages.parse_gpu_label(str(gpu.get("description") or ""))
        raw_name = item.get("name") or label.name or item.get("model")
        for key, tier, pricing_type, suffix, required in API_PRICES:
            if key not in item and not required:
                continue
            if key in item and item[key] is None:
                left_out[f"not_offered:{tier}"] += 1
                continue
            price = _number(item.get(key))
            problem = None
            if key not in item:
                problem, price = f"price key `{key}` missing from the instance type", math.nan
            elif price is None or not math.isfinite(price):
                problem, price = f"`{key}` is {item.get(key)!r}, not a price", math.nan
            elif price <= 0:
                problem = f"`{key}` is {price}, not a positive price"
            where = locations.get(pricing_type == "spot")
            yield Offer(
                provider=name,
                instance_type=instance + suffix,
                region=REGION,
                pricing_type=pricing_type,
                price_source="list",
                price_per_hour=price,
                currency=str(item.get("currency") or "usd").upper(),
                gpu_name_raw=str(raw_name) if raw_name else None,
                gpu_count=float(count),
                gpu_memory_gb_raw=total_vram / count if total_vram else label.vram_gb,
                vcpus=_number((item.get("cpu") or {}).get("number_of_cores")),
                ram_gb=_number((item.get("memory") or {}).get("size_in_gigabytes")),
                available=None if where is None else instance in where,
                provider_data={
                    "source": "api",
                    "pricing": "dynamic" if tier == "dynamic" else "fixed",
                    "base_instance_type": instance,
                    "p2p": item.get("p2p"),
                    "model": item.get("model"),
                    "gpu_description": gpu.get("description"),
                    "max_dynamic_price": _number(item.get("max_dynamic_price")),
                    "locations": sorted((where or {}).get(instance, [])),
                },
                scope=f"instances:{tier}",
                problem=problem,
            )
    yield from excluded(left_out)


def _number(value: Any) -> float | None:  # any JSON value: float() decides, its TypeError is caught
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)  # the API sends prices as strings ("3.95")
    except (TypeError, ValueError):
        return None
