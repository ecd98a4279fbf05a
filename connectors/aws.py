"""AWS EC2: on-demand list prices from the Price List bulk files, spot prices and interruption bands.

Sources (all public, no credentials, no documented rate limit; all three sit behind CDNs):

- Region index: https://pricing.us-east-1.amazonaws.com/offers/v1.0/aws/AmazonEC2/current/region_index.json
  `{"regions": {code: {"regionCode", "currentVersionUrl"}}}`; `currentVersionUrl` is a path such as
  `/offers/v1.0/aws/AmazonEC2/20240528203522/us-east-1/index.json` that embeds the file's version.
- Per-region offer files (hundreds of MB to GB each), fetched as CSV: AWS publishes every offer file
  also as CSV at the same path, `.../index.csv` beside `.../index.json`; the fetched URL is
  `currentVersionUrl` with its trailing `index.json` replaced by `index.csv` (`csv_offer_url`). CSV
  because it parses several times faster: one row per sku x term x rate, every non-empty field
  quoted, so a plain Linux on-demand row is recognisable in the raw bytes (`"Linux"`, `"Shared"`,
  `"Used"`, `"No License required"`, TermType `"OnDemand"` found by counting the commas before it)
  and only those few rows are parsed as CSV. Layout: five `"Key","value"` preamble rows
  (FormatVersion, Disclaimer, Publication Date, Version, OfferCode), then the header row (SKU,
  OfferTermCode, RateCode, TermType, PriceDescription, ..., Unit, PricePerUnit, Currency, ...,
  Instance Type, vCPU, Memory, Network Performance, Tenancy, Operating System, License Model,
  operation, CapacityStatus, GPU, GPU Memory, MarketOption, Pre Installed S/W, Region Code, ...).
  Columns are located by header name; a missing one is a LayoutChanged naming it.
- The JSON offer file is still parsed (`parse` dispatches on the URL's `.json` / `.csv`): the real
  captures are JSON. `{"formatVersion", "offerCode", "version", "publicationDate", "products":
  {sku: {sku, productFamily, attributes}}, "terms": {"OnDemand": {sku: {term: {priceDimensions:
  {rate: {unit, pricePerUnit: {USD}}}}}}, "Reserved": ...}}`. Both formats give the same offers.
- Spot prices: https://website.spot.ec2.aws.a2z.com/spot.json, the plain-JSON feed behind AWS's
  spot pricing page (https://aws.amazon.com/ec2/spot/pricing/): `{"vers", "config": {"rate":
  "perhr", "valueColumns": ["linux", "mswin"], "currencies": ["USD"], "regions": [{"region":
  "us-east-1", "footnotes", "instanceTypes": [{"type": "gpuCurrentGen", "sizes": [{"size",
  "valueColumns": [{"name": "linux", "prices": {"USD": "0.1234"}}]}]}]}]}}`. One price per region
  and instance type (no zones); region codes, not aliases. Checked 2026-12-01 against the peers
  that read it daily: alexei-led/spotinfo (Makefile `SPOT_PRICE_URL` and docs/data-sources.md,
  whose committed copy of the feed was fetched 2026-08-10: 40 regions, no `me-*` region, prices as
  strings such as "9.0E-4") and an ec2 pricing collector documenting the same shape; spotinfo
  notes that the JSONP `spot.js` on the same host is a byte-identical copy of the legacy
  `spot-price.s3.amazonaws.com/spot.js`, frozen since 2024-05-13 and missing every newer family,
  which is why this connector moved off it. gpuhunt and SkyPilot read spot prices from the EC2
  `DescribeSpotPriceHistory` API instead, which needs IAM credentials. The feed is undocumented
  (no AWS reference page): only a live run can show it still answers in this shape.
  The JSONP form (`callback({...})`, both generations below) is still parsed, for archived bodies
  and the 2013/2014 captures: `parse` reads whichever form a body is in (`parse_spot_feed`).
- Interruption frequency: https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json, the
  Spot Instance Advisor's data: `{"ranges": [{"index", "label": "<5%", "max"}], "spot_advisor":
  {region: {"Linux": {instance_type: {"s": savings %, "r": range index}}}}}`. AWS defines the
  frequency of interruption as the rate at which Spot reclaimed capacity for that region and
  instance type during the trailing month; savings are against on-demand over the last 30 days.

Scope and quirks handled:

- Commercial regions only: `cn-*` (separate partition, CNY prices), `us-gov-*`, `us-iso*` and
  `eusc-*` (sovereign partitions) are not fetched. Linux, shared tenancy, no pre-installed software,
  `capacitystatus` Used, "No License required": the one product per instance type that is the
  plain on-demand rate (other operating systems and tenancies are outside the selection: the CSV
  prefilter never parses their rows, so they are not counted).
- Which instance types are GPUs. The rule is written so that a family nobody knows lands instead
  of vanishing; what is left out is left out by a stated rule and counted as `Excluded`:
  1. a family in `GPU_FAMILIES` is a GPU;
  2. a family of a non-GPU accelerator series (`NON_GPU_ACCELERATOR_SERIES`: Trainium, Inferentia,
     FPGA, video transcoding; matched by series prefix, so "trn3" is one too) is excluded as
     `not_gpu_accelerator`;
  3. a family of a GPU series (`GPU_SERIES`: p, g, gr, dl, cg) is a GPU, so a new "p7" or "g8e"
     lands before anyone adds it to `GPU_FAMILIES`;
  4. on-demand: otherwise the offer file decides, as AWS states a GPU count for every GPU
     instance: a positive `gpu` attribute is a GPU (a new "zeta9" family with GPUs lands), and no
     GPU stated is `cpu_only`;
  5. the spot feed states no hardware, so: a size listed under a GPU group of the feed (`type`
     "gpuCurrentGen", "gpuPreviousGen", ...) is a GPU; a family of a known CPU series
     (`CPU_SERIES`: m, c, r, t, x, i, ... "m7i", "c7gn", "x2iedn") is `cpu_only`; any other family
     is unknown and lands as a spot offer under its raw name (unmapped until the seeds know it),
     never dropped by an allow-list.
  The series of a family is its leading letters ("p5en" -> "p", "im4gn" -> "im", "zeta9" ->
  "zeta").
- Offer files are parsed while they download (connectors/base.py, "Large bodies"): the HTTP client
  spools each to disk byte for byte and hashes it, and pushes the same blocks to a
  `CsvOfferParser`, whose items `parse` then yields; a body it did not stream (one read back from
  the archive) goes through the same parser from its file. The regions' files download several
  at once, within the client's per-host bound (`fetch_concurrently`), and are yielded in region
  order. Memory does not grow with a file. CSV: blocks cut at line ends (`CandidateScanner`),
  prefiltered with `bytes.find` (`candidate_lines`), survivors parsed with `csv` and put through
  the same product rules as JSON. JSON (parsed from the file only): pass 1 keeps
  the few hundred GPU products out of `products`, pass 2 picks their rates out of `terms.OnDemand`;
  each pass stops at the end of its section (`_SectionReader`), so the Reserved section, most of
  the file, is never tokenized.
- A region whose offer-file URL (which embeds the version) was fetched by the last successful run is
  not downloaded again (a run after the switch to CSV fetches every region once: the kept URLs were
  `.json`); `parse` yields `Unchanged(region, on_demand)` for it. The spot feed is fetched with
  If-None-Match / If-Modified-Since when the last run kept validators; a 304 yields
  `Unchanged(spot)`. The region index and the advisor are small and always fetched: the index says
  which regions exist, and the advisor's bands belong with whichever spot prices are emitted.
- Excluded, never published, yielded by `parse` as `Excluded`: Capacity Block products
  (`marketoption` CapacityBlock or operation `RunInstances:CB`; their bulk rows are $0 placeholders,
  the real price is dynamic; from CSV only those passing the Linux/Shared/Used prefilter, which is
  all AWS sells, and only products that have an OnDemand row), products without an hourly
  on-demand rate (`no_hourly_rate`: reservation-only), the hardware rules above (`cpu_only`,
  `not_gpu_accelerator`), and spot cells that the spot feed uses to say "not available here" ("N/A",
  "N/A*", "" and "-1": `spot_not_available`).
- Wrong, never excluded: an hourly on-demand rate of $0, negative, NaN or unreadable, an hourly
  price dimension without `pricePerUnit` (a renamed key), and a spot cell that is not one of the
  markers above and not a positive number (0, "abc", NaN), or a Linux column without `prices`,
  yield the offer with `problem` set (price NaN when unreadable), so the warehouse quarantines it
  and keeps its last good price.
- Scopes: the default `"<pricing_type>:<region>"`. On-demand: one scope per region's offer file
  (its Local Zone offers included, they carry the file's region), which is one body that arrives
  or fails whole. Spot: one scope per region of the spot feed rather than one for the feed, so that a
  region that vanishes from the feed, or comes back thinned out, is held on its own while the rest
  of the feed loads; `Unchanged({"pricing_type": "spot"})` after a 304 still covers every spot
  scope, because it matches offers by their fields.
- Products of a Local Zone inside a region's file (`regionCode` us-west-2-lax-1 in us-west-2's file)
  are emitted with `region` = the file's region and `zone` = the Local Zone, so that a region's
  `Unchanged` scope covers them.
- The JSONP spot.js (archives) has two generations: region aliases (us-east, us-west, eu-ireland,
  apac-sin, apac-syd, apac-tokyo; sa-east-1 and us-west-2 already codes) and region codes; sizes
  named "g2.2xlarge" (2014 on) or legacy type/size pairs (2013: "clusterGPUI"/"xxxxl" =
  cg1.4xlarge). Only GPU pairs are mapped; the legacy non-GPU pairs are irrelevant here. The 2013
  feed has trailing commas, so the JSONP body is read leniently.
- The bulk file names no GPU model (`physicalProcessor` is the CPU), so `gpu_name_raw` is None and
  normalization resolves the GPU from the instance type. `gpuMemory` is "NA" for most types; where
  it is stated it is read as the instance's total and divided by the GPU count (the convention of
  AWS's instance-type tables; the raw text is kept in provider_data). The spot feed states no hardware:
  spot offers carry gpu_count 0.0 ("not stated") and vCPUs/RAM from the advisor's instance table.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, BinaryIO
from urllib.parse import urlsplit

import ijson

from connectors.base import Excluded, LayoutChanged, Offer, RawResponse, Unchanged
from connectors.http import Client, fetch_concurrently

name = "aws"
requires: tuple[str, ...] = ()

PRICING_HOST = "https://pricing.us-east-1.amazonaws.com"
REGION_INDEX_URL = f"{PRICING_HOST}/offers/v1.0/aws/AmazonEC2/current/region_index.json"
SPOT_URL = "https://website.spot.ec2.aws.a2z.com/spot.json"
# The JSONP feed fetched until 2026-12 (frozen since 2024-05): archived bodies of it still parse.
LEGACY_SPOT_JS_URL = "https://website.spot.ec2.aws.a2z.com/spot.js"
ADVISOR_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
# us-east-1's file passed 5 GB in 2024 and grows with every instance type and OS variant.
OFFER_MAX_BYTES = 16 * 1024**3

NON_COMMERCIAL_PREFIXES = ("cn-", "us-gov-", "us-iso", "eusc-")
GPU_FAMILIES = frozenset({
    "cg1", "g2", "g3", "g3s", "g4ad", "g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f", "g7e",
    "p2", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300", "p6e-gb200",
    "p6e-gb300", "dl1", "dl2q",
})  # fmt: skip
NON_GPU_ACCELERATOR_FAMILIES = frozenset(
    {"inf1", "inf2", "trn1", "trn1n", "trn2", "trn2u", "f1", "f2", "vt1"}
)
# Series (a family's leading letters) of accelerators that are not GPUs: Inferentia, Trainium,
# FPGA, video transcoding (https://aws.amazon.com/ec2/instance-types/, accelerated computing).
NON_GPU_ACCELERATOR_SERIES = frozenset({"inf", "trn", "f", "vt"})
# Series whose families carry GPUs: P and G (NVIDIA, AMD), Gr (graphics), DL (Gaudi), CG (2010's
# cluster GPU). A new family of one of them is a GPU before GPU_FAMILIES lists it.
GPU_SERIES = frozenset({"p", "g", "gr", "dl", "cg"})
# Series of CPU-only families, current and previous generation (general purpose m/t/a/mac,
# compute c/cc, memory r/x/z/u/cr, storage i/im/is/d/h/hi/hs, HPC hpc). Only the spot feed needs it: it
# states no hardware, and a family of none of these series is unknown and lands.
CPU_SERIES = frozenset(
    {"a", "c", "cc", "cr", "d", "h", "hi", "hpc", "hs", "i", "im", "is", "m", "mac", "r", "t", "u", "x", "z"}
)
# The product attributes that make a row the plain Linux on-demand rate.
PLAIN_LINUX = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}
SPOT_REGION_ALIASES = {
    "us-east": "us-east-1",
    "us-west": "us-west-1",
    "eu-ireland": "eu-west-1",
    "apac-sin": "ap-southeast-1",
    "apac-syd": "ap-southeast-2",
    "apac-tokyo": "ap-northeast-1",
}
# 2013-format spot.js names types by (type, size) pairs; only the GPU ones matter here.
LEGACY_SPOT_TYPES = {("clusterGPUI", "xxxxl"): "cg1.4xlarge"}
# What the spot feed puts in a price cell for "not available here"; anything else must be a price.
NOT_A_PRICE = frozenset({"N/A", "N/A*", "", "-1"})

_OFFER_PATH = re.compile(
    r"/offers/v1\.0/aws/AmazonEC2/(?P<version>[^/]+)/(?P<region>[^/]+)/index\.(?P<format>json|csv)$"
)
_REGION_CODE = re.compile(r"^[a-z]{2}(-[a-z]+)+-\d+$")
_CHUNK = 1024 * 1024
# CSV offer files are scanned in blocks this large: big enough that the per-block Python work
# vanishes, small enough to keep memory flat.
_CSV_BLOCK = 8 * 1024 * 1024
# CSV column -> the JSON attribute name that the product rules (`product_exclusion`) read.
CSV_ATTRIBUTES = {
    "Instance Type": "instanceType",
    "GPU": "gpu",
    "GPU Memory": "gpuMemory",
    "vCPU": "vcpu",
    "Memory": "memory",
    "Network Performance": "networkPerformance",
    "Operating System": "operatingSystem",
    "Tenancy": "tenancy",
    "Pre Installed S/W": "preInstalledSw",
    "CapacityStatus": "capacitystatus",
    "License Model": "licenseModel",
    "MarketOption": "marketoption",
    "operation": "operation",
    "Region Code": "regionCode",
}
CSV_TERM_COLUMNS = ("SKU", "TermType", "LeaseContractLength", "Unit", "PricePerUnit", "Currency")
# A section is over once this many chunks pass without one of its items ending. Products and
# on-demand terms are a few KB each, so a run of 8 MiB without one is past the section's end.
_IDLE_CHUNKS = 8


# --- fetch ------------------------------------------------------------------------------------------


def fetch(
    client: Client,
    creds: Mapping[str, str],
    previous: Mapping[str, Mapping[str, str]] | None = None,
) -> Iterator[RawResponse]:
    """Region index, the changed regions' offer files (spooled and parsed as they stream, several
    at once within the client's per-host bound), the spot feed (spot.json), the spot advisor."""
    previous = previous or {}
    index = client.fetch("GET", REGION_INDEX_URL)
    yield index
    offer_files = [
        partial(
            client.fetch,
            "GET",
            url,
            headers=conditional_headers(previous.get(url)),
            spool=True,
            max_bytes=OFFER_MAX_BYTES,
            stream=partial(CsvOfferParser, url),
            # spool only what parsing reads (and the archive keeps): a hundredth of the file
            keep=partial(OfferCsvFilter, url),
        )
        for _region, url in commercial_offer_urls(index.json())
        # the URL embeds the version: the last run already has this exact file
        if url not in previous
    ]
    yield from fetch_concurrently(offer_files, workers=getattr(client, "per_host", 1))
    yield client.fetch("GET", SPOT_URL, headers=conditional_headers(previous.get(SPOT_URL)))
    yield client.fetch("GET", ADVISOR_URL)


def conditional_headers(kept: Mapping[str, str] | None) -> dict[str, str]:
    """If-None-Match / If-Modified-Since from the headers kept with a previous response."""
    headers: dict[str, str] = {}
    if kept and kept.get("etag"):
        headers["If-None-Match"] = kept["etag"]
    if kept and kept.get("last-modified"):
        headers["If-Modified-Since"] = kept["last-modified"]
    return headers


def is_commercial_region(code: str) -> bool:
    return not code.startswith(NON_COMMERCIAL_PREFIXES)


def commercial_offer_urls(region_index: Any) -> list[tuple[str, str]]:
    """(region code, absolute CSV offer-file URL) for every commercial region, sorted by region."""
    regions = region_index.get("regions") if isinstance(region_index, dict) else None
    if not isinstance(regions, dict) or not regions:
        raise LayoutChanged(
            "region_index.json: `regions` missing or empty; has the Price List index changed shape?"
        )
    urls = []
    for code, entry in sorted(regions.items()):
        path = entry.get("currentVersionUrl") if isinstance(entry, dict) else None
        if not path:
            raise LayoutChanged(f"region_index.json: region {code!r} has no `currentVersionUrl`")
        if is_commercial_region(code):
            urls.append((code, csv_offer_url(path if path.startswith("http") else PRICING_HOST + path)))
    return urls


def csv_offer_url(json_url: str) -> str:
    """The CSV twin AWS publishes beside every offer file: `.../index.json` -> `.../index.csv`."""
    if not json_url.endswith("/index.json"):
        raise LayoutChanged(
            f"region_index.json: currentVersionUrl {json_url!r} does not end in /index.json; "
            "cannot derive the CSV offer file's URL from it"
        )
    return json_url.removesuffix(".json") + ".csv"


# --- parse ------------------------------------------------------------------------------------------


def parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    """On-demand offers per offer file, `Unchanged` for skipped regions, spot offers with bands,
    and an `Excluded` for each product or cell left out (Capacity Blocks, $0 rates, "N/A*")."""
    return _parse(responses)


def _parse(responses: Sequence[RawResponse]) -> Iterator[Offer | Unchanged | Excluded]:
    index = next((r for r in responses if _kind(r.url) == "index"), None)
    offer_files = [r for r in responses if _kind(r.url) == "offer"]
    # A region listed by the index but with no fresh offer file was skipped as unchanged.
    fresh = {r.url for r in offer_files if r.status == 200}
    if index is not None:
        for region, url in commercial_offer_urls(index.json()):
            if url not in fresh:
                yield Unchanged({"region": region, "pricing_type": "on_demand"})
    for response in offer_files:
        if response.status != 200:
            continue
        if response.parsed is not None:  # parsed while it downloaded, from exactly these bytes
            yield from response.parsed
            continue
        scan = scan_offer_csv if response.url.endswith(".csv") else scan_offer_file
        with response.open() as fh:
            yield from scan(fh, source=response.url)

    advisor = next((r for r in responses if _kind(r.url) == "advisor" and r.status == 200), None)
    bands = parse_advisor(advisor.json()) if advisor is not None else SpotAdvisor({}, {})
    for response in (r for r in responses if _kind(r.url) == "spot"):
        if response.status == 304:
            yield Unchanged({"pricing_type": "spot"}, reason="spot feed not modified (HTTP 304)")
        else:
            yield from spot_offers(parse_spot_feed(response.read(), source=response.url), bands)


def _kind(url: str) -> str:
    parts = urlsplit(url)
    if parts.path.endswith("/region_index.json"):
        return "index"
    if _OFFER_PATH.search(parts.path):
        return "offer"
    if parts.path.endswith(("/spot.json", "spot.js")):  # the feed, or an archived JSONP body
        return "spot"
    if parts.path.endswith("spot-advisor-data.json"):
        return "advisor"
    return "other"


# --- offer files ------------------------------------------------------------------------------------


class _SectionDone(Exception):
    """Raised through ijson by `_SectionReader` once the section being read is over."""


class _SectionReader:
    """A file wrapper that ends a streaming pass once its section's items stop coming.

    ijson reads a chunk, then yields the items completed in it. The caller calls `item()` for each;
    after the first item, `_IDLE_CHUNKS` reads in a row with no item in between mean the section has
    ended, and the next read raises `_SectionDone` instead of tokenizing the rest of the file.
    """

    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh
        self._armed = False
        self._idle = 0
        self.bytes_read = 0

    def item(self) -> None:
        self._armed = True
        self._idle = 0

    def read(self, size: int = -1) -> bytes:
        if self._armed and size != 0:
            self._idle += 1
            if self._idle > _IDLE_CHUNKS:
                raise _SectionDone
        chunk = self._fh.read(size)
        self.bytes_read += len(chunk)
        return chunk


@dataclass(frozen=True, slots=True)
class OfferFileHeader:
    offer_code: str | None = None
    version: str | None = None
    publication_date: str | None = None
    has_products: bool = False


def read_header(fh: BinaryIO) -> OfferFileHeader:
    """The top-level scalars before `products` (a few hundred bytes of events, then stops)."""
    values: dict[str, str] = {}
    for prefix, event, value in ijson.parse(fh, buf_size=64 * 1024):
        if prefix == "products" and event == "start_map":
            return OfferFileHeader(
                values.get("offerCode"), values.get("version"), values.get("publicationDate"), True
            )
        if "." not in prefix and event == "string":
            values[prefix] = value
        if prefix == "terms" and event == "start_map":
            break  # AWS writes products before terms; reading terms first would need them all held
    return OfferFileHeader(values.get("offerCode"), values.get("version"), values.get("publicationDate"))


def gpu_family(instance_type: str) -> str:
    """ "p5en.48xlarge" -> "p5en"; "p6-b200.48xlarge" -> "p6-b200"."""
    return instance_type.split(".", 1)[0]


def instance_series(instance_type: str) -> str:
    """The leading letters of the family: "p5en.48xlarge" -> "p"; "im4gn.large" -> "im"."""
    match = re.match(r"[a-z]+", gpu_family(instance_type).lower())
    return match.group(0) if match else ""


def hardware_exclusion(
    instance_type: str, gpu_attribute: str | None = None, *, spot_group: str | None = None
) -> str | None:
    """None when the instance type is (or may be) a GPU; else the rule that leaves it out.

    On-demand (`spot_group` None): the offer file's `gpu` attribute decides families the lists do
    not know. Spot (`spot_group` = the spot feed's `type`): no hardware is stated, so only a known CPU
    series is left out and an unknown family lands. See the module docstring for the order.
    """
    family, series = gpu_family(instance_type), instance_series(instance_type)
    if family in GPU_FAMILIES:
        return None
    if family in NON_GPU_ACCELERATOR_FAMILIES or series in NON_GPU_ACCELERATOR_SERIES:
        return "not_gpu_accelerator"
    if series in GPU_SERIES:
        return None
    if spot_group is None:
        count = parse_number(gpu_attribute)
        return None if count is not None and count > 0 else "cpu_only"
    if "gpu" in spot_group.lower():
        return None
    return "cpu_only" if series in CPU_SERIES else None


def is_gpu_instance(instance_type: str, gpu_attribute: str | None = None) -> bool:
    """Whether an on-demand product is kept as a GPU offer (see `hardware_exclusion`)."""
    return hardware_exclusion(instance_type, gpu_attribute) is None


# Exclusions of plain Linux products that parse counts (the others are outside the selection).
COUNTED_PRODUCT_EXCLUSIONS = frozenset({"capacity_block", "cpu_only", "not_gpu_accelerator"})


def product_exclusion(attributes: Mapping[str, str]) -> str | None:
    """None for a plain Linux on-demand GPU product; else why not ("not_plain_linux",
    "capacity_block", "cpu_only", "not_gpu_accelerator", "no_instance_type")."""
    instance_type = attributes.get("instanceType")
    if not instance_type:
        return "no_instance_type"
    # Plain Linux first: what is outside the selection is not counted, so JSON and CSV (whose
    # prefilter never parses those rows) count the same exclusions.
    for key, wanted in PLAIN_LINUX.items():
        if attributes.get(key) != wanted:
            return "not_plain_linux"
    if attributes.get("marketoption") == "CapacityBlock" or attributes.get("operation", "").endswith(":CB"):
        return "capacity_block"
    return hardware_exclusion(instance_type, attributes.get("gpu"))


def parse_number(text: str | None) -> float | None:
    """The leading number of "1152 GiB", "8", "0.125"; None for "NA", "" or None."""
    if not text:
        return None
    match = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)", text.replace(",", ""))
    return float(match.group(1)) if match else None


def parse_memory_gb(text: str | None) -> float | None:
    """ "1152 GiB" -> 1152.0; "22888 MiB" -> 22.35; "NA" -> None (GiB and GB as AWS states them)."""
    value = parse_number(text)
    if value is None or text is None:
        return None
    unit = re.sub(r"[\d.,\s]", "", text).lower()
    return value / 1024 if unit.startswith(("mib", "mb")) else value


def gpu_memory_per_gpu_gb(text: str | None, gpu_count: float) -> float | None:
    total = parse_memory_gb(text)
    if total is None or gpu_count <= 0:
        return None
    return total / gpu_count


def hourly_rate(terms: Mapping[str, Any]) -> tuple[str, str] | None:
    """(price text, currency) of the hourly price dimension of a sku's on-demand terms.

    None when no term has an hourly dimension (not offered hourly); ("", "USD") when the hourly
    dimension, or the term, has no price at all: a renamed key, flagged by the caller.
    """
    for term in terms.values():
        if not isinstance(term, dict) or term.get("termAttributes"):
            continue  # a term with a lease length is a reservation, whatever section it sits in
        dimensions = term.get("priceDimensions")
        if not isinstance(dimensions, dict):
            return "", "USD"
        for dimension in dimensions.values():
            if not isinstance(dimension, dict) or dimension.get("unit") not in ("Hrs", "Hours"):
                continue
            prices = dimension.get("pricePerUnit")
            if not isinstance(prices, dict) or not prices:
                return "", "USD"
            if "USD" in prices:
                return str(prices["USD"]), "USD"
            for currency, price in prices.items():
                return str(price), currency
    return None


def valid_price(text: str) -> float | None:
    """A positive finite price, or None ($0 placeholders, negatives, NaN, unreadable)."""
    price, problem = read_price(text)
    return None if problem else price


def read_price(text: str, what: str = "price") -> tuple[float, str | None]:
    """(price, what is wrong with it or None): NaN when unreadable, the number when <= 0."""
    try:
        price = float(text)
    except (TypeError, ValueError):
        return math.nan, f"{what} is missing or not a number: {text!r}"
    if not math.isfinite(price):
        return math.nan, f"{what} is not a finite number: {text!r}"
    if price <= 0:
        return price, f"{what} is zero or negative: {text!r}"
    return price, None


def scan_offer_file(fh: BinaryIO, *, source: str = "offer file") -> Iterator[Offer | Excluded]:
    """Stream one offer file: keep GPU products, then read only their on-demand terms."""
    match = _OFFER_PATH.search(urlsplit(source).path)
    file_region = match.group("region") if match else None
    try:
        header = read_header(fh)
        if not header.has_products:
            raise LayoutChanged(
                f"{source}: no `products` object before `terms`; is this an AWS Price List offer file?"
            )
        fh.seek(0)
        kept: dict[str, Mapping[str, str]] = {}
        reader = _SectionReader(fh)
        try:
            for sku, product in ijson.kvitems(reader, "products", buf_size=_CHUNK):
                reader.item()
                attributes = product.get("attributes") if isinstance(product, dict) else None
                if not isinstance(attributes, dict):
                    continue  # products without attributes (none seen so far) cannot be GPUs
                reason = product_exclusion(attributes)
                if reason is None:
                    kept[sku] = attributes
                elif reason in COUNTED_PRODUCT_EXCLUSIONS:
                    yield Excluded(reason)
        except _SectionDone:
            pass
        if not kept:
            return
        fh.seek(0)
        rates: dict[str, tuple[str, str] | None] = {}
        reader = _SectionReader(fh)
        try:
            for sku, terms in ijson.kvitems(reader, "terms.OnDemand", buf_size=_CHUNK):
                reader.item()
                if sku in kept:
                    rates[sku] = hourly_rate(terms) if isinstance(terms, dict) else None
                    if len(rates) == len(kept):
                        break
        except _SectionDone:
            pass
    except ijson.JSONError as exc:
        raise LayoutChanged(f"{source}: not valid JSON ({exc}); truncated download or new format?") from exc
    if not rates:
        raise LayoutChanged(
            f"{source}: `terms.OnDemand` has none of the {len(kept)} GPU products' skus; "
            "has the offer file's terms layout changed?"
        )
    yield from _priced_offers(kept, rates, header, file_region)


def _priced_offers(
    kept: Mapping[str, Mapping[str, str]],
    rates: Mapping[str, tuple[str, str] | None],
    header: OfferFileHeader,
    file_region: str | None,
) -> Iterator[Offer | Excluded]:
    """An offer per kept product with an hourly rate, flagged when the rate is wrong; products
    without an hourly rate (reservation-only) are counted as exclusions."""
    for sku, attributes in kept.items():
        rate = rates.get(sku)
        if rate is None:
            yield Excluded("no_hourly_rate")
            continue
        price, problem = read_price(rate[0], "on-demand hourly pricePerUnit")
        yield _offer_from_product(sku, attributes, price, rate[1], header, file_region, problem)


# --- CSV offer files --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CsvLayout:
    """Where the columns the parser reads sit in one CSV offer file's header row."""

    width: int
    attributes: tuple[tuple[str, int], ...]  # (JSON attribute name, column index)
    sku: int
    term_type: int
    lease: int
    unit: int
    price: int
    currency: int


def csv_layout(header: Sequence[str], *, source: str = "offer file") -> CsvLayout:
    """Locate the columns by name; LayoutChanged naming every one that is missing."""
    index = {column: i for i, column in enumerate(header)}
    missing = [c for c in (*CSV_TERM_COLUMNS, *CSV_ATTRIBUTES) if c not in index]
    if missing:
        raise LayoutChanged(
            f"{source}: CSV header lacks column(s) {', '.join(map(repr, missing))}; "
            "has AWS renamed Price List CSV columns? Update CSV_ATTRIBUTES / CSV_TERM_COLUMNS."
        )
    sku, term_type, lease, unit, price, currency = (index[c] for c in CSV_TERM_COLUMNS)
    attributes = tuple((key, index[column]) for column, key in CSV_ATTRIBUTES.items())
    return CsvLayout(len(header), attributes, sku, term_type, lease, unit, price, currency)


def read_csv_preamble(fh: BinaryIO, *, source: str = "offer file") -> tuple[OfferFileHeader, list[str]]:
    """The five `"Key","value"` rows (FormatVersion ... OfferCode), then the header row."""
    values: dict[str, str] = {}
    for _ in range(8):  # five preamble rows today; a little slack for one more
        line = fh.readline()
        row = next(csv.reader([line.decode("utf-8", "replace")]), [])
        if row and row[0] == "SKU":
            if not line.startswith(b'"'):
                # The prefilter matches quoted values ('"Linux"'); unquoted rows would all miss.
                raise LayoutChanged(
                    f"{source}: the CSV header is not quoted; has AWS changed its CSV quoting?"
                )
            header = OfferFileHeader(
                values.get("OfferCode"), values.get("Version"), values.get("Publication Date"), True
            )
            return header, row
        if len(row) >= 2:
            values[row[0]] = row[1]
    raise LayoutChanged(
        f'{source}: no header row starting with "SKU" after the preamble; '
        "is this an AWS Price List CSV offer file?"
    )


# What a plain Linux on-demand row contains, quoted: AWS quotes every non-empty field, so these
# whole-field values can be looked for in the raw bytes before any CSV parsing. The anchor is the
# rarest of them (one row in three to eight); the others are checked on the anchor's line only.
_CSV_ANCHOR = f'"{PLAIN_LINUX["operatingSystem"]}"'.encode()
_CSV_NEEDLES = tuple(
    f'"{PLAIN_LINUX[key]}"'.encode() for key in ("tenancy", "capacitystatus", "licenseModel")
)
_CSV_ON_DEMAND = b'"OnDemand"'
# Columns that never hold a comma or a quote (AWS codes); when only these precede TermType, its
# field is told by counting commas, which rejects the Reserved rows of a product before parsing.
_CSV_CODE_COLUMNS = frozenset({"SKU", "OfferTermCode", "RateCode"})


def term_type_field(header: Sequence[str]) -> int | None:
    """TermType's index when every column before it is a code column; else None (not positional)."""
    index = header.index("TermType")
    return index if set(header[:index]) <= _CSV_CODE_COLUMNS else None


def csv_anchor(header: Sequence[str]) -> bytes:
    """The needle `candidate_lines` scans for: `"Linux","No License required"` when the header puts
    License Model right after Operating System (AWS's does), else `"Linux"` alone.

    Both values are in every plain row, so the longer needle rejects no candidate; it is found as
    often but scanned for about twice as fast (a long needle lets `bytes.find` skip further).
    """
    os_column = header.index("Operating System") if "Operating System" in header else -1
    if 0 <= os_column < len(header) - 1 and header[os_column + 1] == "License Model":
        return _CSV_ANCHOR + b"," + f'"{PLAIN_LINUX["licenseModel"]}"'.encode()
    return _CSV_ANCHOR


def candidate_lines(
    block: bytes, end: int, term_type: int | None, begin: int = 0, anchor: bytes = _CSV_ANCHOR
) -> Iterator[bytes]:
    """The lines of `block[begin:end]` that may be plain Linux on-demand rows (a superset), unparsed.

    `block[begin:end]` holds whole lines. `bytes.find` does the scanning at memory speed; Python
    runs once per line holding the anchor (`csv_anchor`), and only a few percent of lines survive
    to be parsed as CSV.
    """
    find, rfind, count = block.find, block.rfind, block.count
    step = len(anchor)
    pos = find(anchor, begin, end)
    while pos >= 0:
        newline = rfind(b"\n", begin, pos)
        start = begin if newline < 0 else newline + 1
        # TermType first: most lines holding the anchor are a product's Reserved rows, and with
        # TermType among the first fields it is told without looking for the line's end. Only code
        # columns precede a positional TermType, so its field lies before the anchor's (the anchor
        # is no code): one `find` there, then the commas before a hit say whether it is TermType's.
        # Inlined: this runs once per anchor (a third of all lines), and a call costs a fifth of it.
        if term_type is not None:
            at = find(_CSV_ON_DEMAND, start, pos)
            on_demand = at >= 0 and count(b",", start, at) == term_type
        else:
            on_demand = _on_demand_anywhere(block, start, pos, end)
        if on_demand:
            stop = find(b"\n", pos, end)
            stop = end if stop < 0 else stop
            if _has_all(block, start, stop):
                yield block[start:stop]
            pos = find(anchor, stop, end)
        else:
            pos = find(anchor, pos + step, end)


def _has_all(block: bytes, start: int, stop: int) -> bool:
    # A plain loop: `all(<generator>)` costs a generator per line, a third of this function's time.
    for needle in _CSV_NEEDLES:  # noqa: SIM110
        if block.find(needle, start, stop) < 0:
            return False
    return True


def _on_demand_anywhere(block: bytes, start: int, anchor_at: int, end: int) -> bool:
    """TermType not positional: "OnDemand" anywhere on the line (a superset; the CSV stage decides)."""
    stop = block.find(b"\n", anchor_at, end)
    return block.find(_CSV_ON_DEMAND, start, end if stop < 0 else stop) >= 0


class CandidateScanner:
    """`candidate_lines` over a body pushed in pieces of any size, cut at line ends.

    Only the partial line at the end of a piece is carried to the next, so a large piece is
    scanned where it lies, never copied whole.
    """

    def __init__(self, term_type: int | None, anchor: bytes = _CSV_ANCHOR) -> None:
        self._term_type = term_type
        self._anchor = anchor
        self._tail = b""

    def feed(self, piece: bytes) -> list[bytes]:
        """The candidate lines completed by `piece` (a list: the carried tail moves eagerly)."""
        found: list[bytes] = []
        begin = 0
        if self._tail:
            first = piece.find(b"\n")
            if first < 0:
                self._tail += piece
                return found
            joined = self._tail + piece[: first + 1]  # the one line split across pieces
            found.extend(candidate_lines(joined, len(joined), self._term_type, 0, self._anchor))
            begin = first + 1
        cut = piece.rfind(b"\n") + 1
        if cut > begin:
            found.extend(candidate_lines(piece, cut, self._term_type, begin, self._anchor))
        self._tail = piece[max(cut, begin) :]
        return found

    def flush(self) -> list[bytes]:
        """The candidate in the last, unterminated line, if any."""
        tail, self._tail = self._tail, b""
        return list(candidate_lines(tail, len(tail), self._term_type, 0, self._anchor)) if tail else []


# The preamble is read once this many lines have arrived (`read_csv_preamble` reads at most 8);
# a body whose first MiB holds fewer is not a Price List CSV (the stream parser gives up on it,
# and parse reads the archived body to say why).
_PREAMBLE_LINES = 8
_PREAMBLE_MAX_BYTES = 1024 * 1024


class OfferCsvFilter:
    """The byte-level prefilter of one CSV offer file, pushed in pieces: what parsing reads of it.

    `feed(piece)` returns the kept bytes that `piece` completes: first the preamble and header row
    exactly as they came, then each candidate line (`candidate_lines`) with its newline; `close()`
    the rest. Which lines are kept depends on each line and the header alone, so the kept bytes
    parse (`CsvOfferParser`) to the same offers and exclusions as the whole file. The HTTP client
    spools only these while the file downloads (a `BodyFilter`, connectors/base.py "Large
    bodies"), and the raw archive stores them under this `name` (warehouse/archive.py).

    Only reading the preamble can raise (`LayoutChanged`: not a Price List CSV), and it happens
    before the first kept byte is returned; after that a filter never fails.
    """

    name = "aws-offer-csv"

    def __init__(self, source: str = "offer file") -> None:
        self.source = source
        self.header: OfferFileHeader | None = None
        self.columns: list[str] | None = None
        self._head = b""  # the body until the preamble and header row have arrived
        self._scanner: CandidateScanner | None = None

    def lines(self, piece: bytes) -> tuple[bytes, list[bytes]]:
        """(the preamble's bytes when this piece completed it, else b"", the candidate lines)."""
        if self._scanner is None:
            self._head += piece
            if self._head.count(b"\n") < _PREAMBLE_LINES and len(self._head) < _PREAMBLE_MAX_BYTES:
                return b"", []
            preamble, piece = self._start()
            assert self._scanner is not None
            return preamble, self._scanner.feed(piece)
        return b"", self._scanner.feed(piece)

    def rest(self) -> tuple[bytes, list[bytes]]:
        """`lines` for the end of the body: the unterminated last line, or a body shorter than
        the preamble wait."""
        preamble = b""
        found: list[bytes] = []
        if self._scanner is None:
            preamble, piece = self._start()
            assert self._scanner is not None
            found = self._scanner.feed(piece)
        return preamble, found + self._scanner.flush()

    def feed(self, piece: bytes) -> bytes:
        return _kept_bytes(*self.lines(piece))

    def close(self) -> bytes:
        return _kept_bytes(*self.rest())

    def _start(self) -> tuple[bytes, bytes]:
        """Read the preamble and header out of the head: (their bytes, the rest of the head)."""
        head = io.BytesIO(self._head)
        self.header, self.columns = read_csv_preamble(head, source=self.source)
        self._scanner = CandidateScanner(term_type_field(self.columns), csv_anchor(self.columns))
        cut = head.tell()
        preamble, rest = self._head[:cut], self._head[cut:]
        self._head = b""
        return preamble, rest


def _kept_bytes(preamble: bytes, lines: list[bytes]) -> bytes:
    if not lines:
        return preamble
    return preamble + b"\n".join(lines) + b"\n"


class CsvOfferParser:
    """One CSV offer file pushed in pieces (`feed`), then `close()` -> its offers and exclusions.

    The `BodyParser` the HTTP client runs while the file downloads (see connectors/base.py,
    "Large bodies"), and the parser of an archived file (`scan_offer_csv` feeds it the file), so
    both paths give the same items by construction. Prefilter raw lines (`OfferCsvFilter`), parse
    the survivors as CSV, apply the JSON file's product rules. Fed what the filter kept of a file,
    it gives what it gives for the whole file (the filter keeps all of its own output).
    """

    def __init__(self, source: str = "offer file") -> None:
        self._source = source
        match = _OFFER_PATH.search(urlsplit(source).path)
        self._file_region = match.group("region") if match else None
        self._filter = OfferCsvFilter(source)
        self._layout: CsvLayout | None = None
        self._kept: dict[str, Mapping[str, str]] = {}
        self._rates: dict[str, tuple[str, str] | None] = {}
        self._left_out: dict[str, str] = {}  # sku -> counted exclusion (one per product, not per row)

    def feed(self, piece: bytes) -> None:
        self._rows(*self._filter.lines(piece))

    def close(self) -> Iterator[Offer | Excluded]:
        self._rows(*self._filter.rest())
        header = self._filter.header
        assert header is not None
        # Capacity Blocks: AWS sells them for Linux, so all are seen
        items: list[Offer | Excluded] = [Excluded(reason) for reason in self._left_out.values()]
        if self._kept and not self._rates:
            raise LayoutChanged(
                f"{self._source}: none of the {len(self._kept)} GPU products has an OnDemand hourly "
                "row (TermType OnDemand, Unit Hrs); has the CSV layout changed?"
            )
        items.extend(_priced_offers(self._kept, self._rates, header, self._file_region))
        return iter(items)

    def _rows(self, preamble: bytes, candidates: list[bytes]) -> None:
        if preamble:  # the header row has just been read: check it has every column parsing reads
            assert self._filter.columns is not None
            self._layout = csv_layout(self._filter.columns, source=self._source)
        if not candidates:
            return
        layout = self._layout
        assert layout is not None
        kept, rates, left_out = self._kept, self._rates, self._left_out
        lines = (line.decode("utf-8", "replace").rstrip("\r") for line in candidates)
        for row in csv.reader(lines):
            if len(row) != layout.width:
                raise LayoutChanged(
                    f"{self._source}: a row has {len(row)} fields, the header {layout.width}; "
                    "truncated download, or a quoted line break the line prefilter cannot follow?"
                )
            sku = row[layout.sku]
            # Empty CSV fields are attributes the JSON file leaves out: keep them out here too.
            attributes = {key: row[i] for key, i in layout.attributes if row[i]}
            reason = product_exclusion(attributes)
            if reason is not None and reason in COUNTED_PRODUCT_EXCLUSIONS:
                left_out[sku] = reason
            if reason is not None:
                continue
            kept.setdefault(sku, attributes)
            # One row per sku x term x rate; the plain hourly rate has no lease (as `hourly_rate`).
            if (
                row[layout.term_type] != "OnDemand"
                or row[layout.lease]
                or row[layout.unit] not in ("Hrs", "Hours")
            ):
                continue
            rate = (row[layout.price], row[layout.currency])
            known = rates.get(sku)
            if known is None or (rate[1] == "USD" and known[1] != "USD"):
                rates[sku] = rate


def scan_offer_csv(fh: BinaryIO, *, source: str = "offer file") -> Iterator[Offer | Excluded]:
    """Parse one archived CSV offer file: the file fed through `CsvOfferParser` in large blocks."""
    parser = CsvOfferParser(source)
    while block := fh.read(_CSV_BLOCK):
        parser.feed(block)
    yield from parser.close()


def offer_location(stated_region: str, file_region: str | None) -> tuple[str, str | None]:
    """(region, zone): a Local Zone ("us-west-2-lax-1" in us-west-2's file) becomes a zone of it."""
    if file_region and stated_region.startswith(file_region + "-"):
        return file_region, stated_region
    return stated_region or file_region or "", None


def _offer_from_product(
    sku: str,
    attributes: Mapping[str, str],
    price: float,
    currency: str,
    header: OfferFileHeader,
    file_region: str | None,
    problem: str | None = None,
) -> Offer:
    stated_region = attributes.get("regionCode") or file_region or ""
    region, zone = offer_location(stated_region, file_region)
    gpu_count = parse_number(attributes.get("gpu")) or 0.0
    provider_data: dict[str, Any] = {
        "sku": sku,
        "network_performance": attributes.get("networkPerformance"),
        "offer_version": header.version,
        "publication_date": header.publication_date,
    }
    if attributes.get("gpuMemory") not in (None, "", "NA"):
        provider_data["gpu_memory_raw"] = attributes["gpuMemory"]
    return Offer(
        provider=name,
        instance_type=attributes["instanceType"],
        region=region,
        zone=zone,
        pricing_type="on_demand",
        price_source="list",
        price_per_hour=price,
        currency=currency,
        gpu_name_raw=None,
        gpu_count=gpu_count,
        gpu_memory_gb_raw=gpu_memory_per_gpu_gb(attributes.get("gpuMemory"), gpu_count),
        vcpus=parse_number(attributes.get("vcpu")),
        ram_gb=parse_memory_gb(attributes.get("memory")),
        provider_data=provider_data,
        problem=problem,
    )


# --- spot -------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpotPrice:
    region: str
    instance_type: str
    price: str | None  # as stated: "0.0666", "N/A*", "-1"; None when the column has no `prices`
    currency: str
    group: str = ""  # the spot feed's `type` the size is listed under ("gpuCurrentGen")


@dataclass(frozen=True, slots=True)
class Band:
    label: str
    rate_min: float  # fraction of instances interrupted over the trailing month
    rate_max: float


@dataclass(frozen=True, slots=True)
class SpotAdvisor:
    """Per (region, instance type): (savings %, band); per instance type: (vCPUs, RAM GiB)."""

    advice: Mapping[tuple[str, str], tuple[int | None, Band | None]]
    specs: Mapping[str, tuple[float | None, float | None]] = field(default_factory=dict)


def jsonp_body(text: str, *, source: str = "spot.js") -> Any:
    """The object inside `callback(...)`, tolerating the trailing commas of the 2013 feed."""
    start, end = text.find("("), text.rfind(")")
    if start < 0 or end <= start:
        raise LayoutChanged(f"{source}: no `callback(...)` wrapper; has the spot feed changed format?")
    body = re.sub(r",(\s*[\]}])", r"\1", text[start + 1 : end])
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise LayoutChanged(f"{source}: JSONP body is not JSON ({exc.msg} at {exc.pos})") from exc


def spot_region_code(name: str) -> str | None:
    """ "us-east" -> "us-east-1"; "us-west-2" -> itself; unknown aliases -> None."""
    if name in SPOT_REGION_ALIASES:
        return SPOT_REGION_ALIASES[name]
    return name if _REGION_CODE.match(name) else None


def spot_instance_type(type_name: str, size: str) -> str | None:
    """ "g2.2xlarge" as is; a 2013 (type, size) pair through LEGACY_SPOT_TYPES; else None."""
    if "." in size:
        return size
    return LEGACY_SPOT_TYPES.get((type_name, size))


def spot_feed_body(text: str, *, source: str = "spot.json") -> Any:
    """The feed's object: plain JSON (spot.json) as is, JSONP (`callback({...})`, spot.js) unwrapped."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise LayoutChanged(f"{source}: spot feed is not JSON ({exc.msg} at {exc.pos})") from exc
    return jsonp_body(text, source=source)


def parse_spot_feed(body: bytes, *, source: str = "spot.json") -> list[SpotPrice]:
    """Every Linux price cell of the spot feed (spot.json, or spot.js of either generation), as
    stated (not yet filtered)."""
    data = spot_feed_body(body.decode("utf-8", "replace"), source=source)
    regions = (data.get("config") or {}).get("regions") if isinstance(data, dict) else None
    if not isinstance(regions, list):
        raise LayoutChanged(f"{source}: `config.regions` missing; has the spot feed changed format?")
    prices = []
    for region_entry in regions:
        region = spot_region_code(str(region_entry.get("region", "")))
        if region is None:
            continue
        for type_entry in region_entry.get("instanceTypes") or []:
            for size_entry in type_entry.get("sizes") or []:
                instance_type = spot_instance_type(
                    str(type_entry.get("type", "")), str(size_entry.get("size", ""))
                )
                if instance_type is None:
                    continue
                group = str(type_entry.get("type", ""))
                for column in size_entry.get("valueColumns") or []:
                    if str(column.get("name", "")).lower() != "linux":
                        continue
                    cells = column.get("prices")
                    if not isinstance(cells, dict) or not cells:
                        # a Linux column without prices is a renamed key, not "not offered"
                        prices.append(SpotPrice(region, instance_type, None, "USD", group))
                        continue
                    for currency, price in cells.items():
                        prices.append(SpotPrice(region, instance_type, str(price), currency, group))
    return prices


def band_bounds(label: str, index: int, ranges: Sequence[Mapping[str, Any]]) -> tuple[float, float]:
    """Fractions per month from a label ("<5%", "5-10%", ">20%"); falls back to `max` fields."""
    numbers = [float(n) / 100 for n in re.findall(r"\d+(?:\.\d+)?", label)]
    if label.startswith("<") and numbers:
        return 0.0, numbers[0]
    if label.startswith(">") and numbers:
        return numbers[0], 1.0
    if len(numbers) == 2:
        return numbers[0], numbers[1]
    low = float(ranges[index - 1]["max"]) / 100 if index > 0 else 0.0
    return low, float(ranges[index]["max"]) / 100


def parse_advisor(data: Any) -> SpotAdvisor:
    """Savings and interruption band per (region, instance type), Linux only."""
    if not isinstance(data, dict) or "spot_advisor" not in data or "ranges" not in data:
        raise LayoutChanged(
            "spot-advisor-data.json: `spot_advisor` or `ranges` missing; has the advisor changed shape?"
        )
    ranges = sorted(data["ranges"], key=lambda r: int(r["index"]))
    bands = {
        int(r["index"]): Band(str(r["label"]), *band_bounds(str(r["label"]), i, ranges))
        for i, r in enumerate(ranges)
    }
    advice: dict[tuple[str, str], tuple[int | None, Band | None]] = {}
    for region, by_os in data["spot_advisor"].items():
        for instance_type, cell in (by_os.get("Linux") or {}).items():
            band = bands.get(int(cell["r"])) if "r" in cell else None
            advice[(region, instance_type)] = (cell.get("s"), band)
    specs = {
        instance_type: (_float(spec.get("cores")), _float(spec.get("ram_gb")))
        for instance_type, spec in (data.get("instance_types") or {}).items()
        if isinstance(spec, dict)
    }
    return SpotAdvisor(advice, specs)


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def spot_offers(prices: Sequence[SpotPrice], advisor: SpotAdvisor) -> Iterator[Offer | Excluded]:
    """GPU (and unknown-family) spot offers with the advisor's band; advisor rows without a price
    make no offer; wrong price cells make flagged offers."""
    for cell in prices:
        reason = hardware_exclusion(cell.instance_type, spot_group=cell.group)
        if reason is not None:
            yield Excluded(reason)
            continue
        if cell.price in NOT_A_PRICE:
            yield Excluded("spot_not_available")
            continue
        problem: str | None
        if cell.price is None:
            price, problem = math.nan, "spot feed Linux column has no `prices` (renamed key?)"
        else:
            price, problem = read_price(cell.price, "spot feed Linux price")
        savings, band = advisor.advice.get((cell.region, cell.instance_type), (None, None))
        vcpus, ram_gb = advisor.specs.get(cell.instance_type, (None, None))
        provider_data: dict[str, Any] = {"savings_pct": savings}
        if band is not None:
            provider_data.update(
                interruption_band=band.label,
                interruption_rate_min=band.rate_min,
                interruption_rate_max=band.rate_max,
            )
        yield Offer(
            provider=name,
            instance_type=cell.instance_type,
            region=cell.region,
            pricing_type="spot",
            price_source="market",
            price_per_hour=price,
            currency=cell.currency,
            gpu_name_raw=None,
            gpu_count=0.0,  # the spot feed states no hardware; normalization resolves by instance type
            vcpus=vcpus,
            ram_gb=ram_gb,
            provider_data=provider_data,
            problem=problem,
        )
