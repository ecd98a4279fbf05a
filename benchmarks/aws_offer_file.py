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
2. Serves both from `http.server` on 127.0.0.1 in threads, with ETag / If-None-Match: one server as
   fast as loopback goes, one behind a shared `--link-mb-s` cap (100 MB/s: a realistic link), one
   that serves the CSV's rows `--repeat` times (a body of any size from one file), one whose region
   index lists four regions (the same CSV under each region's URL).
3. Measures each contender in its own subprocess, so that peak RSS (ru_maxrss of the child) is
   that contender's alone; loopback contenders run `--rounds` times and the fastest counts (the
   machine is shared):
   a. our connector end to end: `aws.fetch` (region index + the CSV offer file through
      `make_client`'s network layer: hashed, prefiltered, parsed and the kept rows spooled as it
      streams) + `aws.parse` (which yields what
      streamed). For a client that does not hash while streaming (`RawResponse.sha256` missing:
      the code before parse-while-streaming), the re-read of the spooled file to hash it, which
      landing did, is timed as part of its end to end;
   b. gpuhunt end to end: its own download (requests, to a file) + its parser, same link;
   c. the pure download: the socket read into one reused buffer, nothing else (the link's floor);
   d. (a)-(c) again over the capped link; (a) on the repeated body and on four regions at once;
   e. `aws.parse` alone on the local CSV (a re-parse from the archive) and the local JSON;
   f. DuckDB `read_csv` on the CSV and `read_json` on the JSON, extracting the same GPU on-demand
      prices; gpuhunt's parser alone (`AWSProvider.get` minus its boto3 calls) on the local CSV;
   g. our connector again with `previous` from (a): bytes transferred and offers parsed must be 0.
4. Prints one table: input MB, seconds, MB/s, speed against gpuhunt end to end on the same link
   (its seconds / ours), seconds as a multiple of the pure download on the same link, peak RSS,
   offers.

To measure the code before a change, run this file from a copy of that code (`git archive REV |
tar -x -C DIR`, copy this file into DIR/benchmarks, run it there): the children import the copy.
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
from typing import BinaryIO

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


class Link:
    """A shared pace for every response of one server: at most `rate` bytes per second in all."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate
        self._lock = threading.Lock()
        self._free_at = 0.0

    def send(self, wfile: BinaryIO, chunk: bytes) -> None:
        if self.rate is None:
            wfile.write(chunk)
            return
        with self._lock:  # reserve the chunk's slot on the link, then wait for it
            start = max(time.perf_counter(), self._free_at)
            self._free_at = start + len(chunk) / self.rate
        if (wait := start - time.perf_counter()) > 0:
            time.sleep(wait)
        wfile.write(chunk)


def _csv_body_parts(path: Path) -> tuple[bytes, int]:
    """(preamble + header row, where the data rows start): a repeated body repeats only the rows."""
    with path.open("rb") as fh:
        head = b"".join(fh.readline() for _ in range(6))
    return head, len(head)


def serve(
    routes: dict[str, Path], *, rate: float | None = None, repeat: int = 1
) -> tuple[ThreadingHTTPServer, int]:
    """Serve `routes` (URL path -> file) on 127.0.0.1 with ETag / If-None-Match, in a thread.

    `rate` caps the bytes per second of the whole server (a link); `repeat` serves a CSV file's data
    rows that many times after its header (a body of any size from one generated file).
    """
    link = Link(rate)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a CDN answers

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            path = routes.get(self.path)
            if path is None:
                self.send_error(404)
                return
            stat = path.stat()
            etag = f'"{stat.st_size:x}-{int(stat.st_mtime):x}-{repeat}"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            times = repeat if path.suffix == ".csv" else 1
            head, start = _csv_body_parts(path) if times > 1 else (b"", 0)
            self.send_response(200)
            self.send_header("Content-Type", "text/csv" if path.suffix == ".csv" else "application/json")
            self.send_header("Content-Length", str(len(head) + (stat.st_size - start) * times))
            self.send_header("ETag", etag)
            self.end_headers()
            if head:
                link.send(self.wfile, head)
            for _ in range(times):
                with path.open("rb") as fh:
                    fh.seek(start)
                    while chunk := fh.read(256 * 1024 if rate else 4 * 1024 * 1024):
                        link.send(self.wfile, chunk)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, server.server_address[1]


# --- contenders, each run in its own child process ------------------------------------------------------


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_connector(port: int, previous_path: Path | None, spool: Path) -> dict:
    import httpx

    from connectors import aws, http
    from connectors.base import Offer, Unchanged

    make_client, remove_spooled = http.make_client, http.remove_spooled

    class ToLoopback(httpx.BaseTransport):
        """Sends every request to the loopback server, keeping its path (the URLs stay AWS's), over
        the network layer `make_client` uses (code from before it had one: httpx's own)."""

        def __init__(self) -> None:
            factory = getattr(http, "network_transport", None)
            self._inner = factory() if factory is not None else httpx.HTTPTransport()

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=port)
            return self._inner.handle_request(request)

    previous = json.loads(previous_path.read_text()) if previous_path else None
    start = time.perf_counter()
    with make_client(transport=ToLoopback(), spool_dir=spool) as client:
        responses = list(aws.fetch(client, {}, previous))
    fetched = time.perf_counter()
    items = list(aws.parse(responses))
    parsed = time.perf_counter()
    # The archive addresses every body by its sha256. The client now computes it while the body
    # streams; an older client did not (no `sha256`), and landing read each spooled file again to
    # hash it: that pass is part of its end to end.
    for response in responses:
        if getattr(response, "sha256", None) is None and response.body_path is not None:
            digest = hashlib.sha256()
            with response.body_path.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
    seconds = time.perf_counter() - start
    offer_bytes = sum(r.size_bytes for r in responses if "/index." in r.url)
    result = {
        "seconds": seconds,
        "fetch_seconds": fetched - start,
        "parse_seconds": parsed - fetched,
        "hash_seconds": seconds - (parsed - start),
        "streamed": sum(getattr(r, "parsed", None) is not None for r in responses),
        "bytes_total": sum(r.size_bytes for r in responses),
        "offer_file_bytes": offer_bytes,
        "on_demand_offers": sum(isinstance(i, Offer) and i.pricing_type == "on_demand" for i in items),
        "spot_offers": sum(isinstance(i, Offer) and i.pricing_type == "spot" for i in items),
        "unchanged": [dict(i.scope) for i in items if isinstance(i, Unchanged)],
        "previous": {r.url: dict(r.headers) for r in responses},
        "peak_rss_mb": _peak_rss_mb(),
    }
    for response in responses:
        remove_spooled(response)
    return result


def child_download(port: int) -> dict:
    """The floor: the offer file read off the socket into one reused buffer, nothing else done."""
    import http.client

    start = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("GET", OFFER_CSV_PATH)
    response = connection.getresponse()
    buffer = bytearray(1 << 20)
    size = 0
    while n := response.readinto(buffer):
        size += n
    connection.close()
    return {"seconds": time.perf_counter() - start, "bytes": size, "peak_rss_mb": _peak_rss_mb()}


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


def child_gpuhunt(csv_path: Path, port: int | None = None) -> dict:
    """gpuhunt's AWS parser on the local CSV; with `port`, end to end: its own download first."""
    import types

    # gpuhunt imports boto3/botocore at module level for the EC2 calls skipped below; the bench
    # group does not install them, and the parser never touches them, so empty stand-ins suffice.
    for module in ("boto3", "botocore", "botocore.config", "botocore.exceptions"):
        sys.modules.setdefault(module, types.ModuleType(module))
    if not hasattr(sys.modules["botocore.config"], "Config"):
        sys.modules["botocore.config"].Config = lambda **kw: None  # type: ignore[attr-defined]
    for error in ("ClientError", "ConnectTimeoutError", "EndpointConnectionError"):
        if not hasattr(sys.modules["botocore.exceptions"], error):
            setattr(sys.modules["botocore.exceptions"], error, type(error, (Exception,), {}))
    from gpuhunt.providers import aws as gpuhunt_aws
    from gpuhunt.providers.aws import AWSProvider

    # Offline: skip __init__ (boto3 region list) and the boto3 calls that fill GPU details and spot
    # prices; what is left is gpuhunt's own pricing-file download (requests, 1 MiB chunks to a
    # file) and parser (prefilter + csv.DictReader + _skip).
    provider = AWSProvider.__new__(AWSProvider)
    provider._fill_gpu_details = lambda offers: None  # type: ignore[method-assign]
    provider._with_spot_offers = lambda offers: offers  # type: ignore[method-assign]
    download = csv_path.with_name("gpuhunt-download.csv")
    if port is None:
        provider.cache_path = str(csv_path)
    else:
        download.unlink(missing_ok=True)
        provider.cache_path = str(download)  # absent: get() downloads it first
        gpuhunt_aws.EC2_PRICING_URL = f"http://127.0.0.1:{port}{OFFER_CSV_PATH}"
    start = time.perf_counter()
    try:
        offers = provider.get()
    finally:
        download.unlink(missing_ok=True)
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


def _best(workdir: Path, rounds: int, *args: str) -> dict:
    """The fastest of `rounds` runs (the machine is shared: the minimum is the least disturbed)."""
    results = [_run_child(workdir, *args) for _ in range(rounds)]
    good = [r for r in results if "error" not in r]
    if not good:
        return results[0]
    best = min(good, key=lambda r: r["seconds"])
    return {**best, "peak_rss_mb": max(r["peak_rss_mb"] for r in good), "rounds": len(good)}


# --- the run ----------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/awsbench"))
    parser.add_argument(
        "--rounds", type=int, default=3, help="runs per loopback contender; the fastest counts"
    )
    parser.add_argument("--link-mb-s", type=float, default=100.0, help="the capped link, MB/s")
    parser.add_argument(
        "--repeat", type=int, default=4, help="the large body: the CSV's rows this many times"
    )
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, str(REPO))  # the code under test is this checkout's, whatever is installed
        kind, *rest = args.child
        if kind == "connector":
            prev = Path(rest[1]) if len(rest) > 1 and rest[1] != "-" else None
            out = child_connector(int(rest[0]), prev, args.workdir / "spool")
        elif kind == "generate":
            json_path, csv_path = generate(Path(rest[0]), int(rest[1]))
            out = {"json": str(json_path), "csv": str(csv_path)}
        elif kind == "download":
            out = child_download(int(rest[0]))
        elif kind == "parse":
            out = child_parse(Path(rest[0]))
        elif kind == "duckdb":
            out = child_duckdb(Path(rest[0]))
        elif kind == "duckdb-csv":
            out = child_duckdb_csv(Path(rest[0]))
        else:
            out = child_gpuhunt(Path(rest[0]), int(rest[1]) if len(rest) > 1 else None)
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
          f"(generated/reused in {time.perf_counter() - t0:.0f} s); code under test: {REPO}")  # fmt: skip
    index_path = workdir / "region_index.json"
    index_path.write_text(
        json.dumps({"regions": {"us-east-1": {"regionCode": "us-east-1", "currentVersionUrl": OFFER_PATH}}})
    )
    fixtures = REPO / "tests" / "fixtures" / "aws"
    routes = {
        INDEX_PATH: index_path,
        OFFER_PATH: json_path,
        OFFER_CSV_PATH: csv_path,
        "/spot.json": fixtures / "spot-json__2026-11-29.json",
        "/spot-advisor-data.json": fixtures / "spot-advisor-data__2026-11-29.json",
    }
    rounds = args.rounds
    fast, port = serve(routes)
    capped, capped_port = serve(routes, rate=args.link_mb_s * 1e6)
    large, large_port = serve(routes, repeat=args.repeat)
    # Several regions' files at once (the same CSV under each region's URL): the per-host bound
    # lets four download and parse together; memory must stay flat all the same.
    regions = [*REGIONS][:4]
    index4_path = workdir / "region_index_4.json"
    urls = {r: OFFER_PATH.replace("/us-east-1/", f"/{r}/") for r in regions}
    index4 = {"regions": {r: {"regionCode": r, "currentVersionUrl": url} for r, url in urls.items()}}
    index4_path.write_text(json.dumps(index4))
    routes4 = {**routes, INDEX_PATH: index4_path}
    routes4.update({OFFER_CSV_PATH.replace("/us-east-1/", f"/{r}/"): csv_path for r in regions})
    several, several_port = serve(routes4)
    try:
        download = _best(workdir, rounds, "download", str(port))
        first = _best(workdir, rounds, "connector", str(port), "-")
        hunt_e2e = _best(workdir, rounds, "gpuhunt", str(csv_path), str(port))
        capped_download = _run_child(workdir, "download", str(capped_port))
        capped_first = _run_child(workdir, "connector", str(capped_port), "-")
        capped_hunt = _run_child(workdir, "gpuhunt", str(csv_path), str(capped_port))
        large_first = _run_child(workdir, "connector", str(large_port), "-")
        several_first = _run_child(workdir, "connector", str(several_port), "-")
        prev_path = workdir / "previous.json"
        prev_path.write_text(json.dumps(first.get("previous", {})))
        second = _run_child(workdir, "connector", str(port), str(prev_path))
    finally:
        for server in (fast, capped, large, several):
            server.shutdown()
    csv_parse = _best(workdir, rounds, "parse", str(csv_path))
    json_parse = _run_child(workdir, "parse", str(json_path))
    duck_csv = _best(workdir, rounds, "duckdb-csv", str(csv_path))
    duck_json = _run_child(workdir, "duckdb", str(json_path))
    hunt = _best(workdir, rounds, "gpuhunt", str(csv_path))
    csv_mb, json_mb = csv_path.stat().st_size / 1e6, size_mb
    large_mb = large_first.get("offer_file_bytes", 0) / 1e6
    several_mb = several_first.get("offer_file_bytes", 0) / 1e6

    def ratio(x: dict, y: dict) -> str:
        if "error" in x or "error" in y:
            return "-"
        return f"{x['seconds'] / y['seconds']:.2f}"

    def row(label: str, link: str, result: dict, fmt: str, *, mb: float | None = None,
            hunt_ref: dict | None = None, download_ref: dict | None = None) -> str:  # fmt: skip
        if "error" in result:
            return f"| {label} | {link} | {fmt} | error: {result['error']} |"
        secs = result["seconds"]
        input_mb = mb if mb is not None else csv_mb if fmt == "CSV" else json_mb
        vs_hunt = ratio(hunt_ref, result) if hunt_ref is not None else ""
        vs_download = ratio(result, download_ref) if download_ref is not None else ""
        offers = result.get("on_demand_offers", "")
        return (
            f"| {label} | {link} | {fmt} | {input_mb:,.0f} | {secs:.2f} | {input_mb / secs:,.0f} | "
            f"{vs_hunt} | {vs_download} | {result['peak_rss_mb']:,.0f} | {offers} |"
        )

    loop, cap = "loopback", f"{args.link_mb_s:.0f} MB/s"
    print()
    print("| contender | link | input | input MB | seconds | MB/s | speed vs gpuhunt end to end "
          "(its s / ours) | × pure download | peak RSS MB | GPU on-demand offers |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(row("gpucost aws connector end to end (fetch + parse + sha256)", loop, first, "CSV",
              hunt_ref=hunt_e2e, download_ref=download))  # fmt: skip
    print(row("gpuhunt end to end (its download + its parser)", loop, hunt_e2e, "CSV",
              hunt_ref=hunt_e2e, download_ref=download))  # fmt: skip
    print(row("pure download (socket to a reused buffer)", loop, download, "CSV", download_ref=download))
    print(row("gpucost aws connector end to end", cap, capped_first, "CSV",
              hunt_ref=capped_hunt, download_ref=capped_download))  # fmt: skip
    print(
        row("gpuhunt end to end", cap, capped_hunt, "CSV", hunt_ref=capped_hunt, download_ref=capped_download)
    )
    print(row("pure download", cap, capped_download, "CSV", download_ref=capped_download))
    print(row(f"gpucost aws connector end to end, the CSV's rows × {args.repeat}", loop, large_first,
              "CSV", mb=large_mb))  # fmt: skip
    print(row(f"gpucost aws connector end to end, {len(regions)} regions' files at once", loop, several_first,
              "CSV", mb=several_mb))  # fmt: skip
    print(row("gpucost aws.parse alone, local (re-parse from the archive)", "-", csv_parse, "CSV"))
    print(row("gpucost aws.parse alone, local (the JSON path)", "-", json_parse, "JSON"))
    print(row("DuckDB read_csv, local", "-", duck_csv, "CSV"))
    print(row("DuckDB read_json, local", "-", duck_json, "JSON"))
    print(row("gpuhunt AWS parser alone, local", "-", hunt, "CSV"))
    print()
    print(f"loopback rows: fastest of {rounds} runs each; capped and large-body rows: one run. speed vs "
          "gpuhunt = gpuhunt's end-to-end seconds on the same link / the row's; × pure download = the "
          "row's seconds / the pure download's on the same link")  # fmt: skip
    runs = (
        ("loopback", first),
        ("capped", capped_first),
        ("large body", large_first),
        ("4 regions", several_first),
    )
    for label, result in runs:
        if "error" not in result:
            print(f"connector {label}: fetch {result['fetch_seconds']:.2f} s (streamed parse inside it: "
                  f"{result['streamed']} offer file(s)), parse {result['parse_seconds']:.2f} s, hash "
                  f"re-read {result['hash_seconds']:.2f} s; {result['spot_offers']} spot offers")  # fmt: skip
    if "error" not in second:
        print(f"second run, previous from the first: offer-file bytes {second['offer_file_bytes']:,}, "
              f"on-demand offers {second['on_demand_offers']}, total bytes {second['bytes_total']:,} "
              f"(index + revalidated spot.json + advisor), {second['seconds']:.2f} s, "
              f"unchanged scopes {second['unchanged']}")  # fmt: skip
    print(f"benchmark total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
