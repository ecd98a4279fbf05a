"""warehouse.hardware and the hardware seeds: integrity, known quirks, real captures, SkyPilot."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable
from pathlib import Path

import pytest

from finetune.offer import HOST_STAGED, tensor_rate
from warehouse.hardware import (
    SEEDS_DIR,
    VRAM_TOLERANCE,
    HardwareCatalog,
    normalize_gpu_name,
    normalize_instance_type,
)

DISAGREEMENTS = Path(__file__).parent / "data" / "skypilot_disagreements.csv"
MIB = 1 / 1024


@pytest.fixture(scope="module")
def hw() -> HardwareCatalog:
    return HardwareCatalog.load()


def _rows(name: str) -> list[dict[str, str]]:
    with (SEEDS_DIR / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


# --- seed integrity -------------------------------------------------------------------------

SEEDS = ["gpus.csv", "gpu_aliases.csv", "instance_types.csv", "providers.csv"]


@pytest.mark.parametrize("name", SEEDS)
def test_every_seed_row_has_a_source(name: str) -> None:
    missing = [r for r in _rows(name) if not r["source"].strip()]
    assert not missing, f"{name}: rows without a source: {missing}"


@pytest.mark.parametrize("name", SEEDS)
def test_seed_headers_are_snake_case_and_rectangular(name: str) -> None:
    with (SEEDS_DIR / name).open(newline="", encoding="utf-8") as handle:
        table = list(csv.reader(handle))
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", h) for h in table[0]), table[0]
    assert {len(r) for r in table} == {len(table[0])}


def test_canonical_names_are_unique() -> None:
    names = [r["gpu_name"] for r in _rows("gpus.csv")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_aliases_are_unique_after_normalization() -> None:
    keys = [(r["provider"], normalize_gpu_name(r["raw_name"])) for r in _rows("gpu_aliases.csv")]
    dupes = sorted({k for k in keys if keys.count(k) > 1})
    assert not dupes, f"aliases that normalize to the same key: {dupes}"


def test_instance_types_are_unique() -> None:
    keys = [
        (r["provider"], normalize_instance_type(r["provider"], r["instance_type"]))
        for r in _rows("instance_types.csv")
    ]
    assert not sorted({k for k in keys if keys.count(k) > 1})


def test_every_reference_points_at_a_canonical_gpu(hw: HardwareCatalog) -> None:
    targets = {a.gpu_name for a in hw.aliases} | {c for a in hw.aliases for c in a.candidates}
    targets |= {row.gpu_name for row in hw.instance_types}
    assert targets - set(hw.gpus) == set()


def test_alias_default_is_one_of_its_candidates(hw: HardwareCatalog) -> None:
    bad = [a.raw_name for a in hw.aliases if a.candidates and a.gpu_name not in a.candidates]
    assert not bad


def test_seed_values_are_in_range(hw: HardwareCatalog) -> None:
    for spec in hw.gpus.values():
        assert 3 <= spec.vram_gb <= 300, spec  # Tesla M2050 (cg1, 2010) has 3 GB
        for tflops in (spec.bf16_tflops, spec.fp16_tflops, spec.fp8_tflops):
            assert tflops is None or 1 <= tflops <= 5000, spec
        # a precision with a TFLOPS figure must be flagged as supported
        assert spec.bf16_tflops is None or spec.supports_bf16, spec
        assert spec.fp8_tflops is None or spec.supports_fp8, spec
    fabrics = {"NVSwitch", "NVLink mesh", "NVLink bridge", "Infinity Fabric", "PCIe", HOST_STAGED, "none"}
    for row in hw.instance_types:
        assert row.intra_node_interconnect in fabrics | {None}, row
        assert row.inter_node_fabric in {"EFA", "InfiniBand", "RoCE", "ethernet", "none", None}
        assert row.gpu_count is None or 0 < row.gpu_count <= 16, row
        if row.gpu_count is not None and row.gpu_count < 1:
            assert row.intra_node_interconnect == "none", row
        if row.gpu_count is not None and row.gpu_count > 1:
            # None = not known (stated in the row's notes); "none" would be a contradiction
            assert row.intra_node_interconnect != "none", row


def test_every_sm_count_has_its_own_source_and_a_plausible_value(hw: HardwareCatalog) -> None:
    """`sm_count` feeds the GEMM wave model (finetune.time.tile_efficiency): each count cites its
    own datasheet or whitepaper, and a GPU without one keeps the flat GEMM efficiency."""
    counted = [g for g in hw.gpus.values() if g.sm_count is not None]
    assert counted, "no GPU has an sm_count"
    for g in counted:
        assert g.sm_count_source, g.gpu_name
        assert g.vendor == "NVIDIA", g.gpu_name  # the GEMM tile model describes NVIDIA's kernels
        assert g.sm_count is not None and 20 <= g.sm_count <= 200, g.gpu_name
    # a source without a count would cite nothing
    assert all(not g.sm_count_source for g in hw.gpus.values() if g.sm_count is None)


def test_the_calibration_gpus_carry_their_whitepaper_sm_counts(hw: HardwareCatalog) -> None:
    # A100 and H100 architecture whitepapers, Ada whitepaper; L40S: 142 RT cores, one per SM
    expected = {"A100-80GB-SXM": 108, "H100-SXM": 132, "H100-PCIe": 114, "L40S": 142, "RTX4090": 128}
    assert {name: hw.gpus[name].sm_count for name in expected} == expected


def test_the_h200_counts_the_sms_of_the_h100_sxm_it_shares_its_die_with(hw: HardwareCatalog) -> None:
    # same GH100 at the same dense rate; a device query on an H200 reports 132 as well
    assert hw.gpus["H200-SXM"].sm_count == hw.gpus["H100-SXM"].sm_count == 132
    # Blackwell's tensor cores accumulate in tensor memory, not the registers GEMM_TILES_PER_SM
    # is argued from: the B200 keeps the flat GEMM efficiency until that is sourced
    assert hw.gpus["B200"].sm_count is None


def test_multi_gpu_training_nodes_record_their_fabric(hw: HardwareCatalog) -> None:
    """The 8-GPU nodes the issue names must carry intra- and inter-node figures."""
    cases = {
        ("aws", "p4d.24xlarge"): ("NVSwitch", 600, "EFA", 400),
        ("aws", "p5.48xlarge"): ("NVSwitch", 900, "EFA", 3200),
        ("aws", "p5e.48xlarge"): ("NVSwitch", 900, "EFA", 3200),
        ("aws", "g6e.48xlarge"): ("PCIe", None, "EFA", 400),
        ("azure", "Standard_ND96asr_v4"): ("NVSwitch", 600, "InfiniBand", 1600),
        ("azure", "Standard_ND96amsr_A100_v4"): ("NVSwitch", 600, "InfiniBand", 1600),
        ("azure", "Standard_ND96isr_H100_v5"): ("NVSwitch", 900, "InfiniBand", 3200),
        ("azure", "Standard_ND96isr_MI300X_v5"): ("Infinity Fabric", 896, "InfiniBand", 3200),
        ("gcp", "a3-megagpu-8g"): ("NVSwitch", 900, "ethernet", 1600),
        ("gcp", "a3-ultragpu-8g"): ("NVSwitch", 900, "RoCE", 3200),
        ("gcp", "a4-highgpu-8g"): ("NVSwitch", 1800, "RoCE", 3200),
        ("oci", "BM.GPU.H100.8"): ("NVSwitch", 900, "RoCE", 3200),
    }
    for (provider, instance_type), (intra, intra_gbps, fabric, gbps) in cases.items():
        m = hw.resolve(provider, instance_type, None, None)
        assert m is not None, instance_type
        got = (m.intra_node_interconnect, m.intra_node_gbps, m.inter_node_fabric)
        assert got == (intra, intra_gbps, fabric), instance_type
        assert m.inter_node_gbps == gbps, instance_type
        assert m.gpu_count == 8


# --- normalization --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("nvidia-tesla-a100", "a100"),
        ("Nvidia Tesla A100 80GB GPU", "a10080gb"),
        ("A100-80GB", "a10080gb"),
        ("AMD Instinct MI300X OAM", "mi300xoam"),
        ("amd_mi300x", "mi300x"),
    ],
)
def test_normalize_gpu_name(raw: str, key: str) -> None:
    assert normalize_gpu_name(raw) == key


def test_azure_spellings_of_one_size_share_a_key() -> None:
    spellings = ["Standard_NC40ads_H100_v5", "NC40adsH100v5", "NC40adsH100v5 Spot"]
    spellings += ["Standard_NC40ads_H100_v5_Low_Priority"]
    assert {normalize_instance_type("azure", s) for s in spellings} == {"nc40adsh100v5"}


# --- known quirks ---------------------------------------------------------------------------


def test_aws_l4_reported_as_22888_mib_is_24_gb(hw: HardwareCatalog) -> None:
    m = hw.resolve("aws", "g6.xlarge", None, 22888 * MIB)
    assert (m.gpu_name, m.vram_gb, m.gpu_count) == ("L4", 24, 1)
    assert hw.snap_vram("L4", 22888 * MIB) == 24


def test_aws_l40s_reported_as_45776_mib_is_48_gb(hw: HardwareCatalog) -> None:
    m = hw.resolve("aws", "g6e.xlarge", None, 45776 * MIB)
    assert (m.gpu_name, m.vram_gb) == ("L40S", 48)
    assert hw.snap_vram("L40S", 45776 * MIB) == 48


def test_tolerance_is_the_documented_seven_percent() -> None:
    assert VRAM_TOLERANCE == 0.07


def test_h100_nvl_is_94_gb_and_vram_picks_it(hw: HardwareCatalog) -> None:
    assert hw.gpus["H100-NVL"].vram_gb == 94
    assert hw.resolve("vast", "1x-H100_NVL", "H100", 95830 * MIB).gpu_name == "H100-NVL"
    assert hw.resolve("vast", "1x-H100_SXM", "H100", 81559 * MIB).gpu_name == "H100-SXM"
    assert hw.resolve("runpod", "", "NVIDIA H100 NVL", 94).gpu_name == "H100-NVL"
    assert hw.resolve("azure", "Standard_NC40ads_H100_v5", None, None).gpu_name == "H100-NVL"


def test_h100_variants_stay_apart(hw: HardwareCatalog) -> None:
    names = {
        raw: hw.resolve("runpod", "", raw, None).gpu_name
        for raw in ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe", "NVIDIA H100 NVL"]
    }
    assert names == {
        "NVIDIA H100 80GB HBM3": "H100-SXM",
        "NVIDIA H100 PCIe": "H100-PCIe",
        "NVIDIA H100 NVL": "H100-NVL",
    }
    assert hw.gpus["H100-SXM"].nvlink_gbps == 900
    assert hw.gpus["H100-PCIe"].bf16_tflops == 756


def test_rtx_blackwell_is_named_apart_from_datacenter_blackwell(hw: HardwareCatalog) -> None:
    # sm120 (GeForce RTX 50, RTX PRO Blackwell) has no tcgen05 or wgmma, unlike sm100 (B200,
    # GB200) and sm103 (B300, GB300): NVIDIA's own name for it is "RTX Blackwell", and the time
    # model prices attention by that name
    for name, gpu in hw.gpus.items():
        if "Blackwell" not in gpu.architecture:
            continue
        rtx = gpu.model.startswith(("GeForce RTX", "RTX PRO"))
        assert (gpu.architecture == "RTX Blackwell") == rtx, name
    assert hw.gpus["RTX5090"].architecture == "RTX Blackwell"
    assert hw.gpus["B200"].architecture == "Blackwell"
    assert hw.gpus["B300"].architecture == "Blackwell Ultra"


def test_rtx_6000_ada_is_not_rtx_a6000_nor_quadro(hw: HardwareCatalog) -> None:
    ada = hw.resolve("runpod", "", "NVIDIA RTX 6000 Ada Generation", 48)
    ampere = hw.resolve("runpod", "", "NVIDIA RTX A6000", 48)
    turing = hw.resolve("lambdalabs", "", "RTX6000", 24576 * MIB)
    assert (ada.gpu_name, ampere.gpu_name, turing.gpu_name) == (
        "RTX6000-Ada",
        "RTXA6000",
        "Quadro-RTX6000",
    )
    assert hw.gpus["RTX6000-Ada"].architecture != hw.gpus["RTXA6000"].architecture
    assert hw.resolve("lambdalabs", "gpu_1x_rtx6000", None, None).gpu_name == "Quadro-RTX6000"
    assert hw.resolve("vast", "", "RTX6000-Ada", None).gpu_name == "RTX6000-Ada"


def test_a100_40_vs_80(hw: HardwareCatalog) -> None:
    assert hw.resolve("gcp", "", "nvidia-tesla-a100", None).gpu_name == "A100-40GB-SXM"
    assert hw.resolve("gcp", "", "nvidia-a100-80gb", None).gpu_name == "A100-80GB-SXM"
    assert hw.resolve("vast", "", "A100", 81920 * MIB).gpu_name == "A100-80GB-SXM"
    assert hw.resolve("vast", "", "A100 PCIE", 40).gpu_name == "A100-40GB-PCIe"
    assert hw.resolve("aws", "p4d.24xlarge", None, None).gpu_name == "A100-40GB-SXM"
    assert hw.resolve("aws", "p4de.24xlarge", None, None).gpu_name == "A100-80GB-SXM"
    assert hw.resolve("azure", "Standard_NC24ads_A100_v4", None, None).gpu_name == "A100-80GB-PCIe"
    assert hw.resolve("azure", "Standard_ND96asr_v4", None, None).gpu_name == "A100-40GB-SXM"


def test_b200_uses_the_hgx_180_gb_figure(hw: HardwareCatalog) -> None:
    """HGX B200 is 1,440 GB per 8 GPUs = 180 GB: the usable figure (nvidia-smi, Lambda's 184320
    MiB, RunPod's memoryInGb 180). 192 GB is the raw HBM3e on the package, not rentable memory."""
    b200 = hw.gpus["B200"]
    assert b200.vram_gb == 180
    assert "HGX" in b200.source or "blackwell-datasheet" in b200.source
    assert hw.resolve("lambdalabs", "", "B200", 184320 * MIB).vram_gb == 180
    assert hw.resolve("runpod", "", "NVIDIA B200", 192).vram_gb == 180  # 192 snaps to 180


def test_fractional_gpus(hw: HardwareCatalog) -> None:
    nv6 = hw.resolve("azure", "Standard_NV6ads_A10_v5", None, None)
    assert (nv6.gpu_name, nv6.gpu_count, nv6.vram_gb) == ("A10", 0.167, 4)
    assert hw.resolve("azure", "NV18ads A10 v5", None, None).gpu_count == 0.5
    g6f = hw.resolve("aws", "g6f.large", None, None)
    assert (g6f.gpu_name, g6f.gpu_count, g6f.vram_gb) == ("L4", 0.125, 3)
    mi25 = hw.resolve("azure", "Standard_NV4as_v4", None, None)
    assert (mi25.gpu_name, mi25.gpu_count, mi25.vram_gb) == ("MI25", 0.125, 2)
    vultr = hw.resolve("vultr", "vcg-a100-1c-6g-4vram", "NVIDIA_A100", 4)
    assert (vultr.gpu_name, vultr.vram_gb, vultr.gpu_count) == ("A100-80GB-PCIe", 4, 0.05)
    assert vultr.rule == "alias+vram_share"


def test_ambiguous_alias_falls_back_to_documented_default(hw: HardwareCatalog) -> None:
    m = hw.resolve("jarvislabs", "", "H100", None)
    assert (m.gpu_name, m.rule) == ("H100-SXM", "alias_default")
    # both H200 variants are 141 GB: a tie goes to the default, not to alphabetical order
    assert hw.resolve("runpod", "", "NVIDIA H200", 141).gpu_name == "H200-SXM"


def test_unknown_names_are_unmapped_not_errors(hw: HardwareCatalog) -> None:
    assert hw.resolve("runpod", "", "Voodoo 5 6000", 0.064) is None
    assert hw.resolve("aws", "m5.large", None, None) is None
    assert hw.resolve("aws", "m5.large", "", None) is None


def test_instance_type_beats_the_raw_name(hw: HardwareCatalog) -> None:
    """AWS product attributes are unreliable (ec2instances listed p6e-gb200 as B200)."""
    m = hw.resolve("aws", "g5.12xlarge", "NVIDIA A10", 24)
    assert (m.gpu_name, m.gpu_count, m.rule) == ("A10G", 4, "instance_type")


# --- real captures: zero unmapped -----------------------------------------------------------

AWS_GPU_FAMILY = re.compile(r"^(p\d+[a-z]*|g\d+[a-z]*|gr\d+[a-z]*|dl1)(-[a-z0-9]+)?\.")
# Inferentia/Trainium chips, FPGAs and video transcoders are accelerators but not GPUs.
AWS_NOT_GPU = re.compile(r"^(inf\d|trn\d|f\d|vt\d)")
AZURE_GPU_SERIES = re.compile(r"^(standard_)?n[cdgv]", re.IGNORECASE)
# NP = Xilinx FPGAs, NM = AMD MA35D media accelerators.
AZURE_NOT_GPU = re.compile(r"^(standard_)?n[pm]\d", re.IGNORECASE)


def _assert_all_mapped(hw: HardwareCatalog, source: str, offers: Iterable[tuple]) -> int:
    offers = set(offers)
    unmapped = sorted(o for o in offers if hw.resolve(*o) is None)
    assert offers, f"{source}: extracted no GPU offers; has the capture's layout changed?"
    assert not unmapped, f"{source}: {len(unmapped)} unmapped GPU offers: {unmapped}"
    return len(offers)


def _aws_types(path: Path) -> set[str]:
    with path.open(newline="") as handle:
        return {r["instance_type"] for r in csv.DictReader(handle)}


@pytest.mark.parametrize("suffix", ["aws", "aws_cn", "aws_us_gov"])
def test_aws_karpenter_prices_all_map(hw: HardwareCatalog, shared_raw: Path, suffix: str) -> None:
    types = _aws_types(shared_raw / "aws" / f"karpenter-initial-ondemand-prices-{suffix}.csv")
    gpu = {t for t in types if AWS_GPU_FAMILY.match(t)}
    _assert_all_mapped(hw, suffix, (("aws", t, None, None) for t in gpu))


def test_aws_ec2instances_catalog_all_maps(hw: HardwareCatalog, shared_raw: Path) -> None:
    path = shared_raw / "aws" / "ec2instances-info-opszero-ondemand-spotavg-2024-04.json"
    types = {r["instance-type"] for r in json.loads(path.read_text())["data"]}
    gpu = {t for t in types if AWS_GPU_FAMILY.match(t) and not AWS_NOT_GPU.match(t)}
    assert {"p5.48xlarge", "g5.48xlarge", "p4de.24xlarge"} <= gpu
    _assert_all_mapped(hw, "ec2instances", (("aws", t, None, None) for t in gpu))


def test_aws_bulk_offer_samples_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    offers = set()
    for path in sorted((shared_raw / "aws").glob("bulk-offer-*.json")):
        for product in json.loads(path.read_text()).get("products", {}).values():
            attrs = product.get("attributes", {})
            if attrs.get("gpu", "0") not in ("0", "NA", ""):
                offers.add(("aws", attrs["instanceType"], None, None))
    assert _assert_all_mapped(hw, "aws bulk", offers) == 2  # p4d.24xlarge, p3.8xlarge


def test_azure_karpenter_prices_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    with (shared_raw / "azure" / "karpenter-azure-initial-ondemand-prices.csv").open() as f:
        skus = {r["sku"].strip() for r in csv.DictReader(f)}
    gpu = {s for s in skus if AZURE_GPU_SERIES.match(s) and not AZURE_NOT_GPU.match(s)}
    _assert_all_mapped(hw, "azure karpenter", (("azure", s, None, None) for s in gpu))


def _azure_vm_size(sku_name: str, product_name: str = "") -> str:
    """What the Azure connector passes: 'Standard_' + skuName, spaces to underscores.

    Some dedicated-host meters have the bare skuName 'Type 1'; the series is then only in the
    productName ('NVadsA10v5 DedicatedHost'), so it is prefixed back on."""
    base = re.sub(r" (Spot|Low Priority)$", "", sku_name)
    if re.fullmatch(r"Type \d+", base):
        base = product_name.split()[0] + "_" + base.replace(" ", "")
    base = base if base.startswith("Standard_") else "Standard_" + base
    return base.replace(" ", "_")


def test_azure_retail_eastus_all_maps(hw: HardwareCatalog, shared_raw: Path) -> None:
    path = shared_raw / "azure" / "retail-prices-gpu-normalized-eastus-2025-06-21.json"
    skus = {_azure_vm_size(i["skuName"]) for i in json.loads(path.read_text())}
    _assert_all_mapped(hw, "azure eastus", (("azure", s, None, None) for s in skus))


def test_azure_retail_northeurope_all_maps(hw: HardwareCatalog, shared_raw: Path) -> None:
    path = shared_raw / "azure" / "retail-prices-vm-northeurope-reduced-2026-08.json"
    meters = json.loads(path.read_text()).values()
    # GPU series from the product name: "Virtual Machines NCSv3 Series", "NVasv4 Series ..."
    gpu_product = re.compile(r"(^| )N[CDGV][A-Za-z0-9]* ")
    skus = {
        _azure_vm_size(m["skuName"], m["productName"])
        for m in meters
        if gpu_product.search(m["productName"]) and not AZURE_NOT_GPU.match(m["skuName"])
    }
    assert len(skus) > 50
    _assert_all_mapped(hw, "azure northeurope", (("azure", s, None, None) for s in skus))


def _gcp_gpu_phrase(description: str) -> str | None:
    """'Commitment v1: Nvidia Tesla A100 GPU running in Americas' -> 'Nvidia Tesla A100 GPU'."""
    if "Licensing Fee" in description:
        return None
    phrase = re.sub(r"^(Commitment v1: |Reserved )", "", description)
    phrase = re.sub(r" (attached to|running in|in) .*$", "", phrase)
    return phrase if phrase.endswith("GPU") else None


def test_gcp_billing_skus_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    skus = json.loads((shared_raw / "gcp" / "cloudbilling-skus-gpu-filtered-2025-06-17.json").read_text())
    phrases = {p for s in skus if (p := _gcp_gpu_phrase(s["description"]))}
    assert "Nvidia H100 80GB Mega GPU" in phrases
    _assert_all_mapped(hw, "gcp billing", (("gcp", "", p, None) for p in phrases))
    sample = json.loads((shared_raw / "gcp" / "cloudbilling-skus-compute-A100-sample.json").read_text())
    a100 = {p for s in sample["skus"] if (p := _gcp_gpu_phrase(s["description"]))}
    _assert_all_mapped(hw, "gcp A100 sample", (("gcp", "", p, None) for p in a100))
    assert hw.resolve("gcp", "", "Nvidia Tesla A100 GPU", None).gpu_name == "A100-40GB-SXM"
    assert hw.resolve("gcp", "", "H200 141GB GPU", None).gpu_name == "H200-SXM"


def test_runpod_gpu_types_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    offers = set()
    for path in sorted((shared_raw / "runpod").glob("graphql-gpuTypes-*.json")):
        for g in json.loads(path.read_text()):
            if g["id"] == "unknown":  # RunPod's placeholder row, memoryInGb 0
                continue
            offers.add(("runpod", "", g["id"], float(g["memoryInGb"])))
            offers.add(("runpod", "", g["displayName"], float(g["memoryInGb"])))
    _assert_all_mapped(hw, "runpod", offers)
    # every id and its displayName agree on the canonical GPU
    for path in sorted((shared_raw / "runpod").glob("graphql-gpuTypes-*.json")):
        for g in json.loads(path.read_text()):
            if g["id"] != "unknown":
                by_id = hw.resolve("runpod", "", g["id"], g["memoryInGb"])
                by_display = hw.resolve("runpod", "", g["displayName"], g["memoryInGb"])
                assert by_id.gpu_name == by_display.gpu_name, g["id"]
                assert by_id.vram_gb == pytest.approx(g["memoryInGb"], rel=VRAM_TOLERANCE)


def _oci_gpu_token(display_name: str) -> str:
    """'Compute - Bare Metal GPU Standard - X7' -> 'X7'; 'Compute - GPU - A100 - v2' -> 'A100 - v2'."""
    tail = display_name.split("GPU", 1)[1]
    return re.sub(r"^\s*(Standard)?\s*-\s*", "", tail).strip()


def test_oci_price_list_all_maps(hw: HardwareCatalog, shared_raw: Path) -> None:
    items = json.loads((shared_raw / "oci" / "cetools-products-prices_usd.json").read_text())["items"]
    tokens = {_oci_gpu_token(i["displayName"]) for i in items if i.get("serviceCategory") == "Compute - GPU"}
    assert len(tokens) == 6
    _assert_all_mapped(hw, "oci", (("oci", "", t, None) for t in tokens))
    assert hw.resolve("oci", "", "E3", None).gpu_name == "A100-40GB-SXM"
    shapes = json.loads((shared_raw / "oci" / "cost-estimator-shapes-trimmed.json").read_text())
    # the trimmed shapes excerpt holds no GPU shape today; check any that a refresh brings
    for shape in (s["name"] for s in shapes["items"] if s.get("gpuQty")):
        assert hw.resolve("oci", shape, None, None) is not None, shape


def test_vultr_plans_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    vcg = json.loads((shared_raw / "vultr" / "plans-vcg-gpu-sample.json").read_text())["plans"]
    offers = {("vultr", p["id"], p["gpu_type"], float(p["gpu_vram_gb"])) for p in vcg}
    metal = json.loads((shared_raw / "vultr" / "plans-metal-gpu-sample.json").read_text())
    offers |= {("vultr", p["id"], None, None) for p in metal["plans_metal"]}
    _assert_all_mapped(hw, "vultr", offers)
    assert hw.resolve("vultr", "vbm-112c-2048gb-8-h100-gpu", None, None).gpu_count == 8


def test_verda_instance_types_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    types = json.loads((shared_raw / "datacrunch" / "verda-instance-types-sample.json").read_text())
    gpus = [t for t in types if t["gpu"]["number_of_gpus"] > 0]
    offers = set()
    for t in gpus:
        per_gpu = t["gpu_memory"]["size_in_gigabytes"] / t["gpu"]["number_of_gpus"]
        count = float(t["gpu"]["number_of_gpus"])
        offers.add(("verda", t["instance_type"], t["name"], per_gpu, count))
        offers.add(("verda", "", t["name"], per_gpu, count))
        offers.add(("verda", "", t["model"], per_gpu, count))
    _assert_all_mapped(hw, "verda", offers)
    m = hw.resolve("verda", "2A6000.20V", "RTX A6000 48GB", 48, 2)
    assert (m.gpu_name, m.gpu_count) == ("RTXA6000", 2)


def test_digitalocean_sizes_all_map(hw: HardwareCatalog, shared_raw: Path) -> None:
    sizes = json.loads((shared_raw / "digitalocean" / "sizes-sample.json").read_text())["sizes"]
    gpus = [s for s in sizes if s.get("gpu_info")]
    offers = {
        (
            "digitalocean",
            s["slug"],
            s["gpu_info"]["model"],
            s["gpu_info"]["vram"]["amount"] / s["gpu_info"]["count"],
        )
        for s in gpus
    }
    offers |= {("digitalocean", "", model, vram) for _, _, model, vram in offers}
    _assert_all_mapped(hw, "digitalocean", offers)


def test_jarvislabs_server_meta_all_maps(hw: HardwareCatalog, shared_raw: Path) -> None:
    meta = json.loads((shared_raw / "jarvislabs" / "server-meta-sample.json").read_text())
    offers = {("jarvislabs", "", m["gpu_type"], float(m["vram"])) for m in meta["server_meta"]}
    _assert_all_mapped(hw, "jarvislabs", offers)
    assert hw.resolve("jarvislabs", "", "RTX-PRO6000", 96).gpu_name == "RTX-PRO-6000"


def _skypilot_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    # TPUs are Google's own accelerators, not GPUs; they are out of this catalog's scope.
    return [r for r in rows if r.get("AcceleratorName") and not r["AcceleratorName"].startswith("tpu-")]


def _skypilot_vram_per_gpu(row: dict[str, str], provider: str) -> float | None:
    sizes = re.findall(r"'SizeInMiB': (\d+)", row.get("GpuInfo", ""))
    if not sizes or not int(sizes[0]):
        return None
    # Vast's GpuInfo MemoryInfo is the total over the offer's GPUs; everyone else's is per GPU.
    per = int(sizes[0]) / (float(row["AcceleratorCount"]) if provider == "vast" else 1)
    return per * MIB


SKYPILOT_FILES = {
    "azure": "skypilot-format/anycloud-azure-vms-2026-05-20.csv",
    "gcp": "skypilot-format/anycloud-gcp-vms-2026-05-20.csv",
    "lambdalabs": "skypilot-format/anycloud-lambda-vms-2026-05-20.csv",
    "vast": "skypilot-catalog/v9/vast-vms.csv",
    "nebius": "skypilot-catalog/v9/nebius-vms.csv",
    "fluidstack": "skypilot-catalog/v9/fluidstack-vms.csv",
}


@pytest.mark.parametrize("provider", sorted(SKYPILOT_FILES))
def test_skypilot_catalogs_all_map(hw: HardwareCatalog, shared_raw: Path, provider: str) -> None:
    rows = _skypilot_rows(shared_raw / SKYPILOT_FILES[provider])
    offers = {
        (provider, r["InstanceType"], r["AcceleratorName"], _skypilot_vram_per_gpu(r, provider)) for r in rows
    }
    # the accelerator name alone (no instance type) must map too
    offers |= {(provider, "", name, vram) for _, _, name, vram in offers}
    if provider == "vast":
        # Vast's own GPU name is inside the instance type: "2x-A100_PCIE-32-65536"
        offers |= {
            (provider, "", it.split("-")[1].replace("_", " "), vram) for _, it, _, vram in offers if it
        }
    _assert_all_mapped(hw, f"skypilot {provider}", offers)


def test_vast_names_pick_the_right_variant(hw: HardwareCatalog) -> None:
    assert hw.resolve("vast", "", "RTX3060", 8192 * MIB).gpu_name == "RTX3060-Ti"
    assert hw.resolve("vast", "", "RTX3060", 12288 * MIB).gpu_name == "RTX3060"
    assert hw.resolve("vast", "", "RTX4070", 16376 * MIB).gpu_name == "RTX4070-Ti-SUPER"
    assert hw.resolve("vast", "", "RTX 4070S Ti", 16376 * MIB).gpu_name == "RTX4070-Ti-SUPER"
    assert hw.resolve("vast", "", "RTXPRO6000WS", 97887 * MIB).gpu_name == "RTX-PRO-6000"


# --- SkyPilot cross-check -------------------------------------------------------------------


def _disagreements() -> dict[tuple[str, str], dict[str, str]]:
    with DISAGREEMENTS.open(newline="", encoding="utf-8") as handle:
        return {(r["provider"], r["instance_type"]): r for r in csv.DictReader(handle)}


def _same_model(hw: HardwareCatalog, ours: str, skypilot_name: str) -> bool:
    """SkyPilot names the model (A100, A100-80GB, H100); ours adds size and form factor."""
    alias = hw.alias("", skypilot_name)
    family = {alias.gpu_name, *alias.candidates} if alias else set()
    return ours in family or hw.gpus[ours].model == hw.gpus[alias.gpu_name].model


def test_skypilot_disagreements_file_is_documented() -> None:
    for row in _disagreements().values():
        assert row["reason"].strip() and row["source"].strip(), row


@pytest.mark.parametrize("provider", sorted(SKYPILOT_FILES))
def test_skypilot_instance_types_agree_with_ours(
    hw: HardwareCatalog, shared_raw: Path, provider: str
) -> None:
    known = _disagreements()
    seen: dict[str, tuple[str, float]] = {}
    for r in _skypilot_rows(shared_raw / SKYPILOT_FILES[provider]):
        if r["InstanceType"]:
            seen[r["InstanceType"]] = (r["AcceleratorName"], float(r["AcceleratorCount"]))
    problems = []
    compared = 0
    for instance_type, (sky_name, sky_count) in sorted(seen.items()):
        row = hw.instance_type(provider, instance_type)
        if row is None:
            continue
        compared += 1
        agrees = _same_model(hw, row.gpu_name, sky_name) and (
            row.gpu_count is None or row.gpu_count == pytest.approx(sky_count, abs=0.001)
        )
        listed = (provider, instance_type) in known
        if not agrees and not listed:
            problems.append(
                f"{instance_type}: skypilot {sky_name} x{sky_count}, ours {row.gpu_name} x{row.gpu_count}"
            )
        if agrees and listed:
            problems.append(f"{instance_type}: listed as a disagreement but agrees; remove it")
    assert not problems, f"{provider}: " + "; ".join(problems)
    if provider in ("azure", "lambdalabs", "nebius", "fluidstack"):
        assert compared > 0, f"{provider}: no instance type in both catalogs"


# --- stated vs seed VRAM (issue 18 item 3) ------------------------------------------------------


def _stated(hw: HardwareCatalog, provider: str, instance_type: str, raw: str | None, gb: float | None):
    match = hw.resolve(provider, instance_type, raw, gb, 8)
    assert match is not None
    return hw.stated_vram(match, gb)


def test_a_page_stating_more_than_the_seed_is_a_conflict_published_at_the_seed(hw: HardwareCatalog) -> None:
    # Hyperstack's page states 288 GB for B300; HGX B300 exposes 270 (gpu-specs.md corrections)
    assert _stated(hw, "hyperstack", "8x NVIDIA B300", "NVIDIA B300", 288) == (270, "seed:below_source", True)
    # a 192 GB B200 (the die's HBM, not the 180 usable)
    assert _stated(hw, "runpod", "8x B200", "B200", 192) == (180, "seed:below_source", True)


def test_a_whole_gb_figure_below_the_seed_is_a_conflict_published_as_stated(hw: HardwareCatalog) -> None:
    # 76 GB for an 80 GB H100 is within the 7 % snap, but a page's whole number is no MiB report
    assert _stated(hw, "runpod", "8x H100 SXM", "H100 SXM", 76) == (76, "source:below_seed", True)


def test_an_aws_mib_report_snaps_without_a_conflict(hw: HardwareCatalog) -> None:
    # 22888 MiB = 22.35 GB: the L4's 24 GB less driver-reserved memory
    assert _stated(hw, "aws", "g6.xlarge", None, 22888 * MIB) == (24, "seed:snapped", False)


def test_agreeing_unstated_and_sliced_figures_are_no_conflict(hw: HardwareCatalog) -> None:
    assert _stated(hw, "vast", "x", "H100 SXM", 81559 * MIB) == (80, "source", False)  # 0.4 % rounding
    assert _stated(hw, "daytona", "1x B300", "B300", 270) == (270, "source", False)
    assert _stated(hw, "oci", "BM.GPU.MI300X.8", None, None) == (192, "seed", False)
    vultr = hw.resolve("vultr", "x", "A100", 4, None)
    assert vultr is not None and hw.stated_vram(vultr, 4) == (4, "source", False)  # a slice is as stated


def test_gpu_specs_corrections_of_2026_12_are_in_the_seeds(hw: HardwareCatalog) -> None:
    # ../shared/reference/gpu-specs.md "Corrections found 2026-12"
    b300, gb200 = hw.gpus["B300"], hw.gpus["GB200"]
    assert (b300.vram_gb, b300.memory_bandwidth_gbps, b300.fp8_tflops, b300.nvlink_gbps) == (
        270,
        7700,
        4500,
        1800,
    )
    assert (gb200.bf16_tflops, gb200.fp16_tflops, gb200.fp8_tflops, gb200.memory_bandwidth_gbps) == (
        2450, 2450, 4900, 8000
    )  # fmt: skip
    assert hw.gpus["A100-40GB-SXM"].memory_type == hw.gpus["A100-40GB-PCIe"].memory_type == "HBM2"
    assert hw.gpus["A100-80GB-SXM"].memory_type == "HBM2e"
    assert hw.gpus["RTX-PRO-6000-SE"].memory_bandwidth_gbps == 1597
    fabric = {
        (r.provider, r.instance_type): r.inter_node_gbps
        for r in hw.instance_types
        if r.instance_type
        in ("p6-b200.48xlarge", "Standard_ND96isr_H200_v5", "a3-highgpu-8g", "a3-megagpu-8g")
    }
    # one basis: GPU NICs only (a3-high 4 x 200, a3-mega 8 x 200)
    assert fabric == {
        ("aws", "p6-b200.48xlarge"): 3200, ("azure", "Standard_ND96isr_H200_v5"): 3200,
        ("gcp", "a3-highgpu-8g"): 800, ("gcp", "a3-megagpu-8g"): 1600,
    }  # fmt: skip


def test_rtx_pro_6000_workstation_figures_are_the_whitepapers_dense_full_rate_ones(
    hw: HardwareCatalog,
) -> None:
    pro, geforce = hw.gpus["RTX-PRO-6000"], hw.gpus["RTX5090"]
    # dense, FP32 accumulate (NVIDIA's RTX Blackwell PRO whitepaper via cudnn-frontend PR #597)
    assert (pro.bf16_tflops, pro.fp16_tflops, pro.fp8_tflops, pro.memory_bandwidth_gbps) == (
        503.8, 503.8, 1007.6, 1792
    )  # fmt: skip
    # FP8 is twice BF16 (cudnn-frontend's 8192 vs 4096 FMA/clock/SM)
    assert pro.fp8_tflops == 2 * pro.bf16_tflops
    # the datasheet's 4000 AI TOPS is sparse FP4, 8 x dense BF16 rounded down to a round number
    assert 4000 <= 8 * pro.bf16_tflops < 4100
    # full-rate FP32 accumulate: the same GB202 with 188 SMs against the 5090's 170 at half rate
    # is well over twice the GeForce figure, not 188/170 of it
    assert geforce.bf16_tflops is not None and pro.bf16_tflops > 2 * geforce.bf16_tflops
    assert pro.memory_bandwidth_gbps == geforce.memory_bandwidth_gbps  # both 512-bit GDDR7 at 28 Gbps


def test_rtx_pro_6000_max_q_is_derived_from_its_ai_tops_by_the_workstation_editions_ratio(
    hw: HardwareCatalog,
) -> None:
    maxq, pro = hw.gpus["RTX-PRO-6000-MaxQ"], hw.gpus["RTX-PRO-6000"]
    assert maxq.bf16_tflops is not None and pro.bf16_tflops is not None
    # its datasheet's 3511 AI TOPS (sparse FP4) / 8, the sparse-FP4 : dense-BF16 ratio of the
    # Workstation Edition's two NVIDIA figures (4000 and 503.8), the same die and tensor cores
    assert maxq.bf16_tflops == maxq.fp16_tflops == round(3511 / 8, 1)
    assert maxq.fp8_tflops == 2 * maxq.bf16_tflops
    # cross-check: 4 x its datasheet's 110 FP32 TFLOPS, the Workstation Edition's tensor:FP32 ratio
    assert abs(maxq.bf16_tflops - 4 * 110) / (4 * 110) < 0.01
    # the 300 W card is slower than the 600 W one, on the same memory
    assert maxq.bf16_tflops < pro.bf16_tflops
    assert maxq.memory_bandwidth_gbps == pro.memory_bandwidth_gbps == 1792


# --- consumer and workstation tensor rates -------------------------------------------------------

# The dense BF16 (Turing: FP16) tensor rate with FP32 accumulate is SMs x boost clock x a per-SM
# rate: 512 FLOP/clock on GeForce (half rate), 1024 on workstation parts. NVIDIA's rated boost
# clocks of the cards of each generation span these ranges (MHz; TechPowerUp GPU database): a
# sparse or FP16-accumulate figure entered by mistake doubles the clock it implies, out of range.
BOOST_MHZ = {
    "Turing": (1545, 1815),  # Quadro RTX 4000 .. Quadro RTX 5000 (RTX 2060-2080: 1620-1710)
    "Ampere": (1200, 1860),  # RTX A2000 .. RTX 3090 Ti
    "Ada Lovelace": (2130, 2610),  # RTX 2000 Ada .. RTX 4070 Ti
    "RTX Blackwell": (2407, 2617),  # RTX 5090 .. RTX 5080
}
WORKSTATION_OR_CONSUMER = ("GeForce RTX", "Quadro RTX", "RTX ")  # "RTX " : RTX A, RTX PRO, RTX … Ada


def _implied_boost_mhz(gpu_name: str, hw: HardwareCatalog) -> float:
    gpu = hw.gpus[gpu_name]
    tflops, _ = tensor_rate(gpu.bf16_tflops, gpu.fp16_tflops, gpu.supports_bf16)
    assert tflops is not None and gpu.sm_count is not None, gpu_name
    per_sm = 512 if gpu.half_rate_accumulate else 1024
    return tflops * 1e12 / (gpu.sm_count * per_sm) / 1e6


def test_consumer_and_workstation_tensor_rates_are_sms_times_boost_times_the_per_sm_rate(
    hw: HardwareCatalog,
) -> None:
    rated = [
        name
        for name, g in hw.gpus.items()
        if g.model.startswith(WORKSTATION_OR_CONSUMER)
        and g.sm_count is not None
        and tensor_rate(g.bf16_tflops, g.fp16_tflops, g.supports_bf16)[0] is not None
    ]
    # the 25 filled from SM counts and boost clocks in December 2026, and the eight rows rated
    # from NVIDIA's own figures before
    assert len(rated) == 33, rated
    assert {"RTX4090", "RTX3090", "RTX5090", "RTX6000-Ada", "RTX-PRO-6000", "RTXA6000"} <= set(rated)
    for name in rated:
        low, high = BOOST_MHZ[hw.gpus[name].architecture]
        assert 0.99 * low <= _implied_boost_mhz(name, hw) <= 1.01 * high, name
    # the figures NVIDIA states itself come out of the same product (whitepapers, datasheets)
    stated = {"RTX3080": 59.5, "RTX4070-Ti": 80.2, "RTX4080": 97.5, "RTXA2000": 63.9 / 2}
    stated |= {"Quadro-RTX4000": 57.0, "Quadro-RTX5000": 89.2, "Quadro-RTX6000": 130.5}
    for name, tflops in stated.items():
        gpu = hw.gpus[name]
        assert tensor_rate(gpu.bf16_tflops, gpu.fp16_tflops, gpu.supports_bf16)[0] == pytest.approx(
            tflops, abs=0.06
        )
    # RTX 50: NVIDIA's "AI TOPS" is sparse FP4, 16 x dense BF16 with FP32 accumulate at half rate
    assert {name: round(16 * (hw.gpus[name].bf16_tflops or 0)) for name in ("RTX5070", "RTX5080")} == {
        "RTX5070": 987,  # NVIDIA: 988
        "RTX5080": 1802,  # NVIDIA: 1801
    }
    # Turing has no bf16: its rate is the fp16 one, and the estimate trains in fp16
    turing = [f"Quadro-RTX{n}" for n in (4000, 5000, 6000)] + [f"RTX{n}" for n in (2060, 2070, 2080)]
    assert all(hw.gpus[n].bf16_tflops is None and hw.gpus[n].fp16_tflops for n in turing)
    # GeForce Turing at half rate: the RTX 2080 at its 1710 MHz reference boost
    assert hw.gpus["RTX2080"].fp16_tflops == round(46 * 1710e6 * 512 / 1e12, 1) == 40.3


# Boost clocks (MHz) of the parts that carry `tensor_flops_per_sm_clock`, by generation: Ampere from
# the RTX A2000 (1,200) to the RTX 3090 Ti (1,860), the A100 (1,410) and A30 (1,440) between;
# Ada from the L4 (2,040) to the RTX 4070 Ti (2,610); RTX Blackwell from the RTX PRO 6000 Max-Q
# (2,280) to the RTX PRO 6000 (2,617). A per-SM rate off by 2× in either direction implies a clock
# outside its generation's range.
TENSOR_RATE_BOOST_MHZ = {"Ampere": (1200, 1860), "Ada Lovelace": (2040, 2610), "RTX Blackwell": (2280, 2617)}


def test_the_generations_priced_from_the_a100s_attention_state_their_tensor_rate_per_sm(
    hw: HardwareCatalog,
) -> None:
    """`tensor_flops_per_sm_clock` carries FlashAttention's measured A100 share to the other parts
    of Ampere, Ada and RTX Blackwell (finetune.time.narrow_tensor_attention_share): every such part
    with a tensor rate states it, with its own source, and no other part does."""
    stated = {name: g for name, g in hw.gpus.items() if g.tensor_flops_per_sm_clock is not None}
    expected = {
        name
        for name, g in hw.gpus.items()
        if g.architecture in ("Ampere", "Ada Lovelace", "RTX Blackwell") and g.bf16_tflops is not None
    }
    assert set(stated) == expected
    assert len(stated) == 39, sorted(stated)
    for name, g in hw.gpus.items():
        assert bool(g.tensor_flops_per_sm_clock_source) is (name in stated), name
    for name, g in stated.items():
        # the A100 whitepaper's GA100; the GA102 whitepaper's GA10x, which Ada and RTX Blackwell keep
        ga100 = g.model in ("A100", "A30")
        full = 2048 if ga100 else 1024
        assert g.tensor_flops_per_sm_clock == (full // 2 if g.half_rate_accumulate else full), name
        assert ("A100 Tensor Core GPU Architecture whitepaper" in g.tensor_flops_per_sm_clock_source) is ga100
        if g.sm_count is not None:
            # the rated figure is SMs × boost × the per-SM rate, at a boost clock of its generation
            mhz = g.bf16_tflops * 1e12 / (g.sm_count * g.tensor_flops_per_sm_clock) / 1e6
            low, high = TENSOR_RATE_BOOST_MHZ[g.architecture]
            assert 0.99 * low <= mhz <= 1.01 * high, (name, mhz)
    # the A100 itself: 108 SMs × 1,410 MHz × 2,048 = 311.9 TFLOPS
    a100 = hw.gpus["A100-80GB-SXM"]
    assert a100.sm_count is not None and a100.tensor_flops_per_sm_clock is not None
    assert a100.sm_count * 1410e6 * a100.tensor_flops_per_sm_clock / 1e12 == pytest.approx(312, abs=0.2)
    # the Ada workstation boards without a stated bf16 rate state no per-SM rate either: whether
    # they accumulate in FP32 at full or half rate is what their datasheets leave open
    assert hw.gpus["RTX4000-Ada"].tensor_flops_per_sm_clock is None


# Large square bf16 torch.mm, the best of 1024² to 10240² per run (zzc0721/torch-performance-test-
# data database.md @9d82827, 2026-01-12), stock GeForce cards of gpus.csv (laptops, 48 GB
# conversions, the China-only 4090D and overclocked runs left out): TFLOPS per run.
GEFORCE_MEASURED_BF16 = {
    "RTX3060-Ti": (36.50,),
    "RTX3070": (41.44,),
    "RTX3080": (64.68, 24.94),
    "RTX3080-Ti": (78.34, 76.47),
    "RTX3090": (76.34, 76.68, 76.58),
    "RTX4060": (31.21,),
    "RTX4060-Ti-16GB": (42.65,),
    "RTX4070-Ti-SUPER": (89.36, 92.74),
    "RTX4090": (170.06, 173.31, 163.09, 165.71, 164.81, 162.39),
    "RTX5070": (67.19,),
    "RTX5080": (102.89,),
    "RTX5090": (236.03, 242.18, 221.65, 240.05),
}


def test_geforce_rated_figures_are_what_measured_large_gemms_reach(hw: HardwareCatalog) -> None:
    # GEMM_EFFICIENCY_HALF_RATE prices GeForce GEMMs at the rated figure itself: measured runs
    # land on it (GPU Boost clocks past the rated boost clock, a few percent either way)
    ratios = sorted(
        t / (hw.gpus[name].bf16_tflops or float("nan"))
        for name, runs in GEFORCE_MEASURED_BF16.items()
        for t in runs
    )
    assert len(ratios) == 25
    assert 0.98 <= ratios[len(ratios) // 2] <= 1.12
    # one run is far below: a 3080 at 24.94, under half its sibling's 64.68, its setup unstated
    assert ratios[0] < 0.5 and all(0.85 <= r <= 1.2 for r in ratios[1:])


# --- variants the source does not state ---------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "instance_type", "raw", "gb", "gpu", "source"),
    [
        # RunPod's id is the nvidia-smi name; its displayName, the instance type, says SXM
        ("runpod", "1x H100 SXM", "NVIDIA H100 80GB HBM3", 80, "H100-SXM", "name"),
        # Nebius' bare "H100": 80 GB only confirms the default, it does not say SXM
        ("nebius", "1x H100", "H100", 80, "H100-SXM", "seed_default"),
        ("azure", "x", "H100", 94, "H100-NVL", "vram"),  # 94 GB is the NVL, whatever the name
        ("hyperstack", "x", "H100", 80, "H100-PCIe", "provider_doc"),  # Hyperstack's flavor docs
        ("aws", "p5.48xlarge", None, None, "H100-SXM", "instance_type"),
        ("runpod", "1x RTX 4090", "RTX 4090", 24, "RTX4090", "only_variant"),
        # Paperspace's page does not state the form factor: the seeds' default, not a statement
        ("paperspace", "A100-80G", "A100-80G", 80, "A100-80GB-SXM", "seed_default"),
        # an instance type row listed in variants_unstated.csv: JarvisLabs names 'A100-80GB' only
        ("jarvislabs", "2x A100-80GB india-noida-01", "A100-80GB", 80, "A100-80GB-SXM", "seed_default"),
    ],
)
def test_variant_source_says_how_the_form_factor_was_known(
    hw: HardwareCatalog,
    provider: str,
    instance_type: str,
    raw: str | None,
    gb: float | None,
    gpu: str,
    source: str,
) -> None:
    match = hw.resolve(provider, instance_type, raw, gb, 1)
    assert match is not None and (match.gpu_name, match.variant_source) == (gpu, source)
