"""Benchmark: the AWS connector against a full-scale offer file, side by side with DuckDB and gpuhunt.

    uv run --group bench python benchmarks/aws_offer_file.py [--size-gb 1.0] [--workdir /tmp/awsbench]

What it does, in one run:

1. Generates an AmazonEC2 offer file of at least `--size-gb` under `--workdir` (never the repo),
   shaped like the real bulk files (the shapes are those of the opencost samples in
   ../shared/data/raw/aws): `products` first, then `terms.OnDemand`, then a large `terms.Reserved`
   section; Jackson-style pretty printing (`"key" : value`) as AWS serves it; ~100 products per
   instance type and region (OS x pre-installed software x tenancy x capacity status), ~5% of
   instance types GPU, Capacity Block products and a few $0 preview rows as traps. The same data is
   also written as the Price List CSV (`index.csv`: five preamble rows, AWS's 2025 header of 97
   columns, one row per sku x term x rate, the same prices). Files are reused when already there
   (delete --workdir to regenerate).
2. Serves both from `http.server` on 127.0.0.1 in a thread, with ETag / If-None-Match.
3. Measures each contender in its own subprocess, so that peak RSS (ru_maxrss of the child) is
   that contender's alone:
   a. our connector end to end: `aws.fetch` (region index + the CSV offer file through
      `make_client`, spooled to disk) + `aws.parse`;
   b. `aws.parse` alone on the local CSV; c. `aws.parse` alone on the local JSON (the previous path);
   d. DuckDB `read_csv` on the CSV and `read_json` on the JSON, extracting the same GPU on-demand
      prices;
   e. gpuhunt's AWS CSV parser (`AWSProvider.get` minus its boto3 calls) on the same CSV;
   f. our connector again with `previous` from (a): bytes transferred and offers parsed must be 0.
4. Prints a table: input MB, seconds, MB/s, speed against DuckDB on the same format and against
   gpuhunt (their seconds / ours, for the same prices out of the same price list), peak RSS, offers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VERSION = "20261129000000"
PUBLICATION_DATE = "2026-11-29T00:00:00Z"
OFFER_PATH = f"/offers/v1.0/aws/AmazonEC2/{VERSION}/us-east-1/index.json"
OFFER_CSV_PATH = OFFER_PATH.removesuffix(".json") + ".csv"
INDEX_PATH = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"

# --- generating the offer file ---------------------------------------------------------------------

REGIONS = {
    "us-east-1": ("US East (N. Virginia)", "USE1"),
    "us-east-2": ("US East (Ohio)", "USE2"),
    "us-west-2": ("US West (Oregon)", "USW2"),
    "eu-west-1": ("EU (Ireland)", "EU"),
    "eu-central-1": ("EU (Frankfurt)", "EUC1"),
    "eu-north-1": ("EU (Stockholm)", "EUN1"),
    "ap-northeast-1": ("Asia Pacific (Tokyo)", "APN1"),
    "ap-southeast-1": ("Asia Pacific (Singapore)", "APS1"),
    "ap-southeast-2": ("Asia Pacific (Sydney)", "APS2"),
    "ap-south-1": ("Asia Pacific (Mumbai)", "APS3"),
    "ca-central-1": ("Canada (Central)", "CAN1"),
    "sa-east-1": ("South America (Sao Paulo)", "SAE1"),
}
# (instance type, vcpu, memory GiB, gpu count, gpu memory attribute, network, base $/h)
GPU_TYPES = [
    ("p3.2xlarge", 8, 61, "1", "NA", "Up to 10 Gigabit", 3.06),
    ("p3.16xlarge", 64, 488, "8", "NA", "25 Gigabit", 24.48),
    ("p4d.24xlarge", 96, 1152, "8", "NA", "400 Gigabit", 32.7726),
    ("p4de.24xlarge", 96, 1152, "8", "NA", "400 Gigabit", 40.9657),
    ("p5.48xlarge", 192, 2048, "8", "NA", "3200 Gigabit", 98.32),
    ("p5e.48xlarge", 192, 2048, "8", "NA", "3200 Gigabit", 108.0),
    ("p5en.48xlarge", 192, 2048, "8", "NA", "3200 Gigabit", 84.8),
    ("g4dn.xlarge", 4, 16, "1", "NA", "Up to 25 Gigabit", 0.526),
    ("g4dn.12xlarge", 48, 192, "4", "NA", "50 Gigabit", 3.912),
    ("g5.xlarge", 4, 16, "1", "NA", "Up to 10 Gigabit", 1.006),
    ("g5.48xlarge", 192, 768, "8", "NA", "100 Gigabit", 16.288),
    ("g6.xlarge", 4, 16, "1", "NA", "Up to 10 Gigabit", 0.8048),
    ("g6e.12xlarge", 48, 384, "4", "NA", "100 Gigabit", 10.493),
    ("g6f.large", 2, 8, "0.125", "NA", "Up to 10 Gigabit", 0.2),
    ("dl1.24xlarge", 96, 768, "8", "NA", "400 Gigabit", 13.109),
]
_NON_GPU_FAMILIES = [
    "m5", "m6i", "m6a", "m7i", "m7g", "c5", "c6i", "c6g", "c7i", "c7g", "r5", "r6i", "r7g", "r7i",
    "t3", "t4g", "i3", "i4i", "x2idn", "z1d", "m5d", "c5n", "r5b", "m8g", "c8g",
]  # fmt: skip
_SIZES = [("large", 2, 8), ("xlarge", 4, 16), ("2xlarge", 8, 32), ("4xlarge", 16, 64), ("8xlarge", 32, 128)]
NON_GPU_TYPES = [
    (f"{fam}.{size}", vcpu, mem, "", "NA", "Up to 12500 Megabit", 0.02 * vcpu * (1 + i % 5 / 10))
    for i, fam in enumerate(_NON_GPU_FAMILIES)
    for size, vcpu, mem in _SIZES
]
# The product variants AWS publishes for every instance type (only one is Linux/Shared/NA/Used).
_OS_SW = [("Linux", "NA"), ("Linux", "SQL Std"), ("Linux", "SQL Web"), ("Linux", "SQL Ent"),
          ("RHEL", "NA"), ("SUSE", "NA"), ("Ubuntu Pro", "NA"), ("RHEL with HA", "NA"),
          ("Windows", "NA"), ("Windows", "SQL Std"), ("Windows", "SQL Web"),
          ("Windows", "SQL Ent")]  # fmt: skip
_TENANCY = ["Shared", "Dedicated", "Host"]
_CAPACITY = ["Used", "UnusedCapacityReservation", "AllocatedCapacityReservation"]
_RESERVED_TERMS = [
    (code, length, cls, option)
    for code, (length, cls, option) in zip(
        ["4NA7Y494T4", "6QCMYABX3D", "HU7G6KETJZ", "38NPMPTW36", "R5XV2EPZQZ", "MZU6U2429S",
         "7NE97W5U4E", "BPH4J8HBKS", "CUZHX8X6JH", "Z2E3P23VKM", "VJWZNREJX2", "NQ3QZPMQV9"],
        [(length, cls, option)
         for length in ("1yr", "3yr") for cls in ("standard", "convertible")
         for option in ("No Upfront", "Partial Upfront", "All Upfront")],
        strict=True,
    )
]  # fmt: skip

PRODUCT_TMPL = """    "{sku}" : {{
      "sku" : "{sku}",
      "productFamily" : "Compute Instance",
      "attributes" : {{
        "servicecode" : "AmazonEC2",
        "location" : "{location}",
        "locationType" : "AWS Region",
        "instanceType" : "{itype}",
        "currentGeneration" : "Yes",
        "instanceFamily" : "{ifamily}",
        "vcpu" : "{vcpu}",
        "physicalProcessor" : "Intel Xeon Platinum 8275L",
        "clockSpeed" : "3 GHz",
        "memory" : "{memory} GiB",
        "storage" : "EBS only",
        "networkPerformance" : "{network}",
        "processorArchitecture" : "64-bit",
        "tenancy" : "{tenancy}",
        "operatingSystem" : "{os}",
        "licenseModel" : "{license}",
        "usagetype" : "{prefix}-BoxUsage:{itype}",
        "operation" : "{operation}",
        "availabilityzone" : "NA",
        "capacitystatus" : "{capacity}",
        "classicnetworkingsupport" : "false",
        "dedicatedEbsThroughput" : "19000 Mbps",
        "ecu" : "345",
        "enhancedNetworkingSupported" : "No",{gpu}
        "gpuMemory" : "{gpu_memory}",
        "intelAvxAvailable" : "Yes",
        "intelAvx2Available" : "Yes",
        "intelTurboAvailable" : "Yes",
        "marketoption" : "{market}",
        "normalizationSizeFactor" : "192",
        "preInstalledSw" : "{sw}",
        "processorFeatures" : "Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo",
        "regionCode" : "{region}",
        "servicename" : "Amazon Elastic Compute Cloud",
        "vpcnetworkingsupport" : "true"
      }}
    }}"""
DIM_TMPL = """          "{sku}.{term}.{rate}" : {{
            "rateCode" : "{sku}.{term}.{rate}",
            "description" : "{description}",
            "beginRange" : "0",
            "endRange" : "Inf",
            "unit" : "{unit}",
            "pricePerUnit" : {{
              "USD" : "{price}"
            }},
            "appliesTo" : [ ]
          }}"""
TERM_TMPL = """    "{sku}" : {{
      "{sku}.{term}" : {{
        "offerTermCode" : "{term}",
        "sku" : "{sku}",
        "effectiveDate" : "2026-11-01T00:00:00Z",
        "priceDimensions" : {{
{dims}
        }},
        "termAttributes" : {{{attrs}}}
      }}
    }}"""
RESERVED_TERM_TMPL = """      "{sku}.{term}" : {{
        "offerTermCode" : "{term}",
        "sku" : "{sku}",
        "effectiveDate" : "2026-11-01T00:00:00Z",
        "priceDimensions" : {{
{dims}
        }},
        "termAttributes" : {{
          "LeaseContractLength" : "{length}",
          "OfferingClass" : "{cls}",
          "PurchaseOption" : "{option}"
        }}
      }}"""

# The EC2 Price List CSV header as AWS published it in 2025 (row 6 of index.csv, after the five
# preamble rows); the twin writes every column, mostly empty, as AWS does.
CSV_COLUMNS = [
    "SKU", "OfferTermCode", "RateCode", "TermType", "PriceDescription", "EffectiveDate",
    "StartingRange", "EndingRange", "Unit", "PricePerUnit", "Currency", "RelatedTo",
    "LeaseContractLength", "PurchaseOption", "OfferingClass", "Product Family", "serviceCode",
    "Location", "Location Type", "Instance Type", "Current Generation", "Instance Family", "vCPU",
    "Physical Processor", "Clock Speed", "Memory", "Storage", "Network Performance",
    "Processor Architecture", "Storage Media", "Volume Type", "Max Volume Size", "Max IOPS/volume",
    "Max IOPS Burst Performance", "Max throughput/volume", "Provisioned", "Tenancy", "EBS Optimized",
    "Operating System", "License Model", "Group", "Group Description", "Transfer Type",
    "From Location", "From Location Type", "To Location", "To Location Type", "usageType",
    "operation", "AvailabilityZone", "CapacityStatus", "ClassicNetworkingSupport",
    "Dedicated EBS Throughput", "ECU", "Elastic Graphics Type", "Enhanced Networking Supported",
    "From Region Code", "GPU", "GPU Memory", "Instance", "Instance Capacity - 10xlarge",
    "Instance Capacity - 12xlarge", "Instance Capacity - 16xlarge", "Instance Capacity - 18xlarge",
    "Instance Capacity - 24xlarge", "Instance Capacity - 2xlarge", "Instance Capacity - 32xlarge",
    "Instance Capacity - 4xlarge", "Instance Capacity - 8xlarge", "Instance Capacity - 9xlarge",
    "Instance Capacity - large", "Instance Capacity - medium", "Instance Capacity - metal",
    "Instance Capacity - xlarge", "instanceSKU", "Intel AVX2 Available", "Intel AVX Available",
    "Intel Turbo Available", "MarketOption", "Normalization Size Factor", "Physical Cores",
    "Pre Installed S/W", "Processor Features", "Product Type", "Region Code", "Resource Type",
    "serviceName", "SnapshotArchiveFeeType", "To Region Code", "Volume API Name",
    "VPCNetworkingSupport",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Product:
    sku: str
    itype: str
    region: str
    os: str
    sw: str
    tenancy: str
    capacity: str
    market: str
    vcpu: int
    memory: float
    gpu: str
    gpu_memory: str
    network: str
    price: float
    reserved: bool


def _sku(n: int) -> str:
    return hashlib.blake2b(n.to_bytes(8, "little"), digest_size=10).hexdigest().upper()[:16]


def _products(target_bytes: int) -> Iterator[Product]:
    """Products, round-robin over regions and instance types, until about target_bytes of JSON."""
    types = [(t, True) for t in GPU_TYPES] + [(t, False) for t in NON_GPU_TYPES]
    n = 0
    emitted = 0
    while emitted < target_bytes:
        for region in REGIONS:
            for (itype, vcpu, mem, gpu, gpu_mem, net, base), is_gpu in types:
                factor = 1 + (sum(map(ord, region)) % 17) / 100
                variants = [
                    (os_, sw, ten, cap, "OnDemand")
                    for os_, sw in _OS_SW
                    for ten in _TENANCY
                    for cap in _CAPACITY
                ]
                if is_gpu:
                    variants.append(("Linux", "NA", "Shared", "Used", "CapacityBlock"))
                for os_, sw, ten, cap, market in variants:
                    n += 1
                    extra = 0.0 if os_ == "Linux" and sw == "NA" else 0.1 * vcpu
                    price = 0.0 if market == "CapacityBlock" else round(base * factor + extra, 4)
                    yield Product(
                        _sku(n), itype, region, os_, sw, ten, cap, market, vcpu, mem, gpu, gpu_mem,
                        net, price, reserved=cap == "Used" and ten != "Host" and market == "OnDemand",
                    )  # fmt: skip
                    emitted += 2300 + (14000 if cap == "Used" and ten != "Host" else 0)
            if emitted >= target_bytes:
                return


def _product_json(p: Product) -> str:
    location, prefix = REGIONS[p.region]
    return PRODUCT_TMPL.format(
        sku=p.sku, location=location, itype=p.itype, vcpu=p.vcpu, memory=p.memory,
        ifamily="GPU instance" if p.gpu else "General purpose", network=p.network,
        tenancy=p.tenancy, os=p.os, license="No License required", prefix=prefix,
        operation="RunInstances:CB" if p.market == "CapacityBlock" else "RunInstances",
        capacity=p.capacity, gpu=f'\n        "gpu" : "{p.gpu}",' if p.gpu else "",
        gpu_memory=p.gpu_memory, market=p.market, sw=p.sw, region=p.region,
    )  # fmt: skip


def _dim(sku: str, term: str, rate: str, description: str, unit: str, price: float) -> str:
    return DIM_TMPL.format(
        sku=sku, term=term, rate=rate, description=description, unit=unit, price=f"{price:.10f}"
    )


def _ondemand_json(p: Product) -> str:
    what = "Capacity Block" if p.market == "CapacityBlock" else "On Demand"
    desc = f"${p.price:.4f} per {what} {p.os} {p.itype} Instance Hour"
    dims = _dim(p.sku, "JRTCKXETXF", "6YS6EN2CT7", desc, "Hrs", p.price)
    return TERM_TMPL.format(sku=p.sku, term="JRTCKXETXF", dims=dims, attrs="")


def _reserved_json(p: Product) -> str:
    terms = []
    for code, length, cls, option in _RESERVED_TERMS:
        years = 1 if length == "1yr" else 3
        hourly = p.price * (0.6 if years == 1 else 0.4)
        dims = []
        if option != "All Upfront":
            rate = hourly if option == "No Upfront" else hourly / 2
            dims.append(_dim(p.sku, code, "6YS6EN2CT7", f"{p.os} reserved instance applied", "Hrs", rate))
        if option != "No Upfront":
            upfront = hourly * 8760 * years * (1 if option == "All Upfront" else 0.5)
            dims.append(_dim(p.sku, code, "2TG2D8R56U", "Upfront Fee", "Quantity", round(upfront)))
        terms.append(
            RESERVED_TERM_TMPL.format(
                sku=p.sku, term=code, dims=",\n".join(dims), length=length, cls=cls, option=option
            )
        )
    return f'    "{p.sku}" : {{\n' + ",\n".join(terms) + "\n    }"


def _csv_row(
    p: Product,
    term_type: str,
    term: str,
    rate: str,
    unit: str,
    price: float,
    description: str,
    lease: tuple[str, str, str] = ("", "", ""),
) -> str:
    """One CSV row (one sku x term x rate), in the header's order; empty fields unquoted, as AWS."""
    location, prefix = REGIONS[p.region]
    values = {
        "SKU": p.sku, "OfferTermCode": term, "RateCode": f"{p.sku}.{term}.{rate}",
        "TermType": term_type, "PriceDescription": description, "EffectiveDate": "2026-11-01",
        "StartingRange": "0" if unit == "Hrs" else "", "EndingRange": "Inf" if unit == "Hrs" else "",
        "Unit": unit, "PricePerUnit": f"{price:.10f}", "Currency": "USD",
        "LeaseContractLength": lease[0], "PurchaseOption": lease[1], "OfferingClass": lease[2],
        "Product Family": "Compute Instance", "serviceCode": "AmazonEC2", "Location": location,
        "Location Type": "AWS Region", "Instance Type": p.itype, "Current Generation": "Yes",
        "Instance Family": "GPU instance" if p.gpu else "General purpose", "vCPU": str(p.vcpu),
        "Physical Processor": "Intel Xeon Platinum 8275L", "Clock Speed": "3 GHz",
        "Memory": f"{p.memory} GiB", "Storage": "EBS only", "Network Performance": p.network,
        "Processor Architecture": "64-bit", "Tenancy": p.tenancy, "Operating System": p.os,
        "License Model": "No License required", "usageType": f"{prefix}-BoxUsage:{p.itype}",
        "operation": "RunInstances:CB" if p.market == "CapacityBlock" else "RunInstances",
        "AvailabilityZone": "NA", "CapacityStatus": p.capacity, "ClassicNetworkingSupport": "false",
        "Dedicated EBS Throughput": "19000 Mbps", "ECU": "345", "Enhanced Networking Supported": "No",
        "GPU": p.gpu, "GPU Memory": p.gpu_memory, "Intel AVX2 Available": "Yes",
        "Intel AVX Available": "Yes", "Intel Turbo Available": "Yes", "MarketOption": p.market,
        "Normalization Size Factor": "192", "Pre Installed S/W": p.sw,
        "Processor Features": "Intel AVX; Intel AVX2; Intel AVX512; Intel Turbo",
        "Region Code": p.region, "serviceName": "Amazon Elastic Compute Cloud",
        "VPCNetworkingSupport": "true",
    }  # fmt: skip
    return ",".join(f'"{values[c]}"' if values.get(c) else "" for c in CSV_COLUMNS) + "\n"


def _csv_rows(p: Product) -> Iterator[str]:
    """The same prices as the JSON's terms: one on-demand row, then the reserved rows (if any)."""
    what = "Capacity Block" if p.market == "CapacityBlock" else "On Demand"
    yield _csv_row(p, "OnDemand", "JRTCKXETXF", "6YS6EN2CT7", "Hrs", p.price,
                   f"${p.price:.4f} per {what} {p.os} {p.itype} Instance Hour")  # fmt: skip
    if not p.reserved:
        return
    for code, length, cls, option in _RESERVED_TERMS:
        years = 1 if length == "1yr" else 3
        hourly = p.price * (0.6 if years == 1 else 0.4)
        lease = (length, option, cls)
        if option != "All Upfront":
            rate = hourly if option == "No Upfront" else hourly / 2
            yield _csv_row(p, "Reserved", code, "6YS6EN2CT7", "Hrs", rate,
                           f"{p.os} (Amazon VPC), {p.itype} reserved instance applied", lease)  # fmt: skip
        if option != "No Upfront":
            upfront = hourly * 8760 * years * (1 if option == "All Upfront" else 0.5)
            yield _csv_row(
                p, "Reserved", code, "2TG2D8R56U", "Quantity", round(upfront), "Upfront Fee", lease
            )


def generate(workdir: Path, size_bytes: int) -> tuple[Path, Path]:
    """Write offer.json (and its CSV twin offer.csv) of about size_bytes; reuse them if present."""
    json_path, csv_path = workdir / "offer.json", workdir / "offer.csv"
    # The byte estimate is rough (1 GiB asked, ~1.0 GB written): reuse by the size asked, recorded.
    made_for = workdir / "generated-for-bytes"
    if (
        json_path.exists()
        and csv_path.exists()
        and made_for.exists()
        and made_for.read_text() == str(size_bytes)
    ):
        return json_path, csv_path
    workdir.mkdir(parents=True, exist_ok=True)
    products = list(_products(int(size_bytes * 1.05)))  # the byte estimate per product is rough
    with json_path.open("w") as out:
        out.write(
            '{\n  "formatVersion" : "v1.0",\n  "disclaimer" : "Generated for a benchmark, shaped like '
            'the AWS Price List bulk offer file.",\n  "offerCode" : "AmazonEC2",\n'
            f'  "version" : "{VERSION}",\n  "publicationDate" : "{PUBLICATION_DATE}",\n'
            '  "products" : {\n'
        )
        out.write(",\n".join(map(_product_json, products)))
        out.write('\n  },\n  "terms" : {\n    "OnDemand" : {\n')
        out.write(",\n".join(map(_ondemand_json, products)))
        out.write('\n    },\n    "Reserved" : {\n')
        out.write(",\n".join(_reserved_json(p) for p in products if p.reserved))
        out.write('\n    }\n  },\n  "attributesList" : { }\n}\n')
    with csv_path.open("w") as out:
        out.write('"FormatVersion","v1.0"\n"Disclaimer","generated"\n"Publication Date",'
                  f'"{PUBLICATION_DATE}"\n"Version","{VERSION}"\n"OfferCode","AmazonEC2"\n')  # fmt: skip
        out.write(",".join(f'"{c}"' for c in CSV_COLUMNS) + "\n")
        for p in products:
            out.writelines(_csv_rows(p))
    made_for.write_text(str(size_bytes))
    return json_path, csv_path


# --- the loopback server ------------------------------------------------------------------------------


def serve(routes: dict[str, Path]) -> tuple[ThreadingHTTPServer, int]:
    """Serve `routes` (URL path -> file) on 127.0.0.1 with ETag / If-None-Match, in a thread."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = routes.get(self.path)
            if path is None:
                self.send_error(404)
                return
            stat = path.stat()
            etag = f'"{stat.st_size:x}-{int(stat.st_mtime):x}"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/csv" if path.suffix == ".csv" else "application/json")
            self.send_header("Content-Length", str(stat.st_size))
            self.send_header("ETag", etag)
            self.end_headers()
            with path.open("rb") as fh:
                while chunk := fh.read(4 * 1024 * 1024):
                    self.wfile.write(chunk)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


# --- contenders, each run in its own child process ------------------------------------------------------


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_connector(port: int, previous_path: Path | None, spool: Path) -> dict:
    import httpx

    from connectors import aws
    from connectors.base import Offer
    from connectors.http import make_client, remove_spooled

    class ToLoopback(httpx.BaseTransport):
        """Sends every request to the loopback server, keeping its path (the URLs stay AWS's)."""

        def __init__(self) -> None:
            self._inner = httpx.HTTPTransport()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
            return self._inner.handle_request(request)

    previous = json.loads(previous_path.read_text()) if previous_path else None
    start = time.perf_counter()
    with make_client(transport=ToLoopback(), spool_dir=spool) as client:
        responses = list(aws.fetch(client, {}, previous))
    fetched = time.perf_counter()
    items = list(aws.parse(responses))
    seconds = time.perf_counter() - start
    offer_bytes = sum(r.size_bytes for r in responses if "/index." in r.url)
    result = {
        "seconds": seconds,
        "fetch_seconds": fetched - start,
        "bytes_total": sum(r.size_bytes for r in responses),
        "offer_file_bytes": offer_bytes,
        "on_demand_offers": sum(isinstance(i, Offer) and i.pricing_type == "on_demand" for i in items),
        "spot_offers": sum(isinstance(i, Offer) and i.pricing_type == "spot" for i in items),
        "unchanged": [dict(i.scope) for i in items if not isinstance(i, Offer)],
        "previous": {r.url: dict(r.headers) for r in responses},
        "peak_rss_mb": _peak_rss_mb(),
    }
    for response in responses:
        remove_spooled(response)
    return result


def child_parse(path: Path) -> dict:
    from datetime import UTC, datetime

    from connectors import aws
    from connectors.base import Offer, RawResponse

    response = RawResponse(
        url=aws.PRICING_HOST + (OFFER_CSV_PATH if path.suffix == ".csv" else OFFER_PATH), method="GET",
        status=200, fetched_at=datetime.now(UTC), body_path=path,
    )  # fmt: skip
    start = time.perf_counter()
    offers = [i for i in aws.parse([response]) if isinstance(i, Offer)]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "on_demand_offers": len(offers), "peak_rss_mb": _peak_rss_mb()}


GPU_FAMILY_SQL = ", ".join(f"'{t[0].split('.')[0]}'" for t in GPU_TYPES)


def child_duckdb(json_path: Path) -> dict:
    import duckdb

    columns = {
        "products": "MAP(VARCHAR, STRUCT(sku VARCHAR, attributes MAP(VARCHAR, VARCHAR)))",
        "terms": 'STRUCT("OnDemand" MAP(VARCHAR, MAP(VARCHAR, STRUCT("priceDimensions" '
        'MAP(VARCHAR, STRUCT(unit VARCHAR, "pricePerUnit" MAP(VARCHAR, VARCHAR)))))))',
    }
    # Explicit columns: inferring a schema from a map keyed by sku would make a struct with one
    # field per sku; "terms.Reserved" is not declared, so DuckDB does not materialize it.
    query = f"""
        with f as (
            select * from read_json('{json_path}', columns = {columns!r}, format = 'unstructured',
                                    maximum_object_size = {json_path.stat().st_size + 1})
        ),
        products as (select unnest(map_entries(products)) as e from f),
        kept as (
            select e.key as sku, e.value.attributes as a from products
            where a['operatingSystem'] = 'Linux' and a['tenancy'] = 'Shared'
              and a['preInstalledSw'] = 'NA' and a['capacitystatus'] = 'Used'
              and a['licenseModel'] = 'No License required' and a['marketoption'] = 'OnDemand'
              and split_part(a['instanceType'], '.', 1) in ({GPU_FAMILY_SQL})
        ),
        od as (select unnest(map_entries(terms."OnDemand")) as e from f),
        od_terms as (select e.key as sku, unnest(map_values(e.value)) as term from od),
        dims as (select sku, unnest(map_values(term."priceDimensions")) as d from od_terms)
        select kept.a['instanceType'], kept.a['regionCode'], cast(d."pricePerUnit"['USD'] as double)
        from kept join dims using (sku)
        where d.unit = 'Hrs' and cast(d."pricePerUnit"['USD'] as double) > 0
    """
    start = time.perf_counter()
    rows = duckdb.connect().execute(query).fetchall()
    return {
        "seconds": time.perf_counter() - start,
        "on_demand_offers": len(rows),
        "peak_rss_mb": _peak_rss_mb(),
    }


def child_duckdb_csv(csv_path: Path) -> dict:
    import duckdb

    # The header is row 6, after the five preamble rows; every column read as text, as AWS wrote it.
    query = f"""
        select "Instance Type", "Region Code", cast("PricePerUnit" as double)
        from read_csv('{csv_path}', skip = 5, header = true, all_varchar = true, delim = ',',
                      quote = '"', escape = '"')
        where "TermType" = 'OnDemand' and "Unit" = 'Hrs' and "LeaseContractLength" is null
          and "Operating System" = 'Linux' and "Tenancy" = 'Shared' and "Pre Installed S/W" = 'NA'
          and "CapacityStatus" = 'Used' and "License Model" = 'No License required'
          and "MarketOption" = 'OnDemand'
          and split_part("Instance Type", '.', 1) in ({GPU_FAMILY_SQL})
          and cast("PricePerUnit" as double) > 0
    """
    start = time.perf_counter()
    rows = duckdb.connect().execute(query).fetchall()
    return {
        "seconds": time.perf_counter() - start,
        "on_demand_offers": len(rows),
        "peak_rss_mb": _peak_rss_mb(),
    }


def child_gpuhunt(csv_path: Path) -> dict:
    import types

    # gpuhunt imports boto3/botocore at module level for the EC2 calls skipped below; the bench
    # group does not install them, and the parser never touches them, so empty stand-ins suffice.
    for module in ("boto3", "botocore", "botocore.config", "botocore.exceptions"):
        sys.modules.setdefault(module, types.ModuleType(module))
    sys.modules["botocore.config"].Config = lambda **kw: None  # type: ignore[attr-defined]
    for error in ("ClientError", "ConnectTimeoutError", "EndpointConnectionError"):
        setattr(sys.modules["botocore.exceptions"], error, type(error, (Exception,), {}))
    from gpuhunt.providers.aws import AWSProvider

    # Offline: skip __init__ (boto3 region list) and the boto3 calls that fill GPU details and spot
    # prices; what is left is gpuhunt's own pricing-file parser (prefilter + csv.DictReader + _skip).
    provider = AWSProvider.__new__(AWSProvider)
    provider.cache_path = str(csv_path)
    provider._fill_gpu_details = lambda offers: None  # type: ignore[method-assign]
    provider._with_spot_offers = lambda offers: offers  # type: ignore[method-assign]
    start = time.perf_counter()
    offers = provider.get()
    gpu = [o for o in offers if o.gpu_count]
    return {
        "seconds": time.perf_counter() - start,
        "on_demand_offers": len(gpu),
        "all_offers": len(offers),
        "peak_rss_mb": _peak_rss_mb(),
    }


def _run_child(workdir: Path, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--workdir", str(workdir), "--child", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"}
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the run ----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/awsbench"))
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "connector":
            prev = Path(rest[1]) if len(rest) > 1 and rest[1] != "-" else None
            out = child_connector(int(rest[0]), prev, args.workdir / "spool")
        elif kind == "generate":
            json_path, csv_path = generate(Path(rest[0]), int(rest[1]))
            out = {"json": str(json_path), "csv": str(csv_path)}
        elif kind == "parse":
            out = child_parse(Path(rest[0]))
        elif kind == "duckdb":
            out = child_duckdb(Path(rest[0]))
        elif kind == "duckdb-csv":
            out = child_duckdb_csv(Path(rest[0]))
        else:
            out = child_gpuhunt(Path(rest[0]))
        print(json.dumps(out))
        return

    workdir: Path = args.workdir
    if workdir.resolve().is_relative_to(REPO):
        sys.exit("--workdir must be outside the repository")
    t0 = time.perf_counter()
    # Generated in a child: Linux carries a parent's peak RSS into its children (ru_maxrss survives
    # fork and exec), so the parent must stay small for the children's peaks to be their own.
    made = _run_child(workdir, "generate", str(workdir), str(int(args.size_gb * 1024**3)))
    if "error" in made:
        sys.exit(f"generating the offer file failed: {made['error']}")
    json_path, csv_path = Path(made["json"]), Path(made["csv"])
    size_mb = json_path.stat().st_size / 1e6
    print(f"offer file {json_path} {size_mb:,.0f} MB, CSV twin {csv_path.stat().st_size / 1e6:,.0f} MB "
          f"(generated/reused in {time.perf_counter() - t0:.0f} s)")  # fmt: skip
    index_path = workdir / "region_index.json"
    index_path.write_text(
        json.dumps({"regions": {"us-east-1": {"regionCode": "us-east-1", "currentVersionUrl": OFFER_PATH}}})
    )
    fixtures = REPO / "tests" / "fixtures" / "aws"
    server, port = serve({
        INDEX_PATH: index_path,
        OFFER_PATH: json_path,
        OFFER_CSV_PATH: csv_path,
        "/spot.js": fixtures / "spot-js__2026-11-29.js",
        "/spot-advisor-data.json": fixtures / "spot-advisor-data__2026-11-29.json",
    })  # fmt: skip
    try:
        first = _run_child(workdir, "connector", str(port), "-")
        prev_path = workdir / "previous.json"
        prev_path.write_text(json.dumps(first.get("previous", {})))
        second = _run_child(workdir, "connector", str(port), str(prev_path))
    finally:
        server.shutdown()
    csv_parse = _run_child(workdir, "parse", str(csv_path))
    json_parse = _run_child(workdir, "parse", str(json_path))
    duck_csv = _run_child(workdir, "duckdb-csv", str(csv_path))
    duck_json = _run_child(workdir, "duckdb", str(json_path))
    hunt = _run_child(workdir, "gpuhunt", str(csv_path))
    csv_mb, json_mb = csv_path.stat().st_size / 1e6, size_mb

    def row(label: str, result: dict, fmt: str, duck: dict) -> str:
        if "error" in result:
            return f"| {label} | {fmt} | error: {result['error']} |"
        secs = result["seconds"]
        input_mb = csv_mb if fmt == "CSV" else json_mb
        vs_duck = duck.get("seconds", float("nan")) / secs
        vs_hunt = hunt.get("seconds", float("nan")) / secs
        return (
            f"| {label} | {fmt} | {input_mb:,.0f} | {secs:.1f} | {input_mb / secs:,.0f} | {vs_duck:.2f} | "
            f"{vs_hunt:.2f} | {result['peak_rss_mb']:,.0f} | {result.get('on_demand_offers')} |"
        )

    print()
    print("| contender | input | input MB | seconds | MB/s | speed vs DuckDB, same format | "
          "speed vs gpuhunt | peak RSS MB | GPU on-demand offers |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    print(row("gpucost aws connector (fetch over loopback HTTP + parse)", first, "CSV", duck_csv))
    print(row("gpucost aws.parse alone, local", csv_parse, "CSV", duck_csv))
    print(row("gpucost aws.parse alone, local (the previous path)", json_parse, "JSON", duck_json))
    print(row("DuckDB read_csv, local", duck_csv, "CSV", duck_csv))
    print(row("DuckDB read_json, local", duck_json, "JSON", duck_json))
    print(row("gpuhunt AWS parser, local", hunt, "CSV", duck_csv))
    print()
    print("speed vs X = X's seconds / this row's seconds, for the same prices out of the same price list")
    if "error" not in first:
        print(f"first run: fetch {first['fetch_seconds']:.1f} s of {first['seconds']:.1f} s; "
              f"{first['spot_offers']} spot offers from the fixture spot.js")  # fmt: skip
    if "error" not in second:
        print(f"second run, previous from the first: offer-file bytes {second['offer_file_bytes']:,}, "
              f"on-demand offers {second['on_demand_offers']}, total bytes {second['bytes_total']:,} "
              f"(index + revalidated spot.js + advisor), {second['seconds']:.2f} s, "
              f"unchanged scopes {second['unchanged']}")  # fmt: skip
    print(f"benchmark total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
