"""answers/estimate.py and finetune/offer.py: stated hardware is priced as the mart prices an offer.

The mart side of each comparison is a `marts.gpu_offers` row per box, written here in SQL from
`core.gpus` the way instance_types.csv describes such a box (NVSwitch / Infinity Fabric on SXM, OAM
and Superchip boards with NVLink, PCIe otherwise, nothing for one GPU), read by the mart's
`read_offers` (its join of core.gpus) and priced by `cost_frame` (the mart's SQL); the stated
side is `answers.estimate.on_hardware` from the same GPU name.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from answers import AnswerError
from answers.estimate import StatedHardware, find_gpu, on_hardware, stated_offer
from finetune import FinetuneJob, Job
from finetune.offer import (
    gbits_per_s,
    intra_node_gbytes_per_s,
    stated_links,
    tensor_rate,
)
from warehouse.db import connect, load_seeds, migrate
from warehouse.finetune_marts import cost_frame, read_offers
from warehouse.hardware import HardwareCatalog
from warehouse.seed_models import load_models

MODELS = load_models()
CATALOG = HardwareCatalog.load()
GPU_COUNTS = (1, 2, 4, 8)
PRICE_PER_GPU_HOUR = 2.0
# a handful of jobs: the issue's full fine-tune, a LoRA and a QLoRA of a larger model, a small full
JOBS = (
    FinetuneJob("full-8b", "meta-llama/Llama-3.1-8B", Job(method="full"), 100_000_000, 1.0),
    FinetuneJob("lora-8b", "meta-llama/Llama-3.1-8B", Job(method="lora"), 50_000_000, 1.0),
    FinetuneJob(
        "qlora-70b",
        "meta-llama/Llama-3.1-70B",
        Job(method="qlora", optimizer="paged-adamw8bit", seq_len=4096),
        20_000_000,
        1.0,
    ),
)

# One box per GPU × count, as the mart would hold it.
_BOXES_SQL = f"""
create schema if not exists marts;
create or replace table marts.gpu_offers as
select
    'box' as provider,
    gpus.gpu_name || ' x' || counts.n as instance_type,
    'here' as region,
    null::varchar as zone,
    'on_demand' as pricing_type,
    false as is_spot,
    'list' as price_source,
    gpus.gpu_name,
    counts.n::double as gpu_count,
    gpus.vram_gb::double as vram_gb,
    {PRICE_PER_GPU_HOUR} * counts.n as price_usd_per_hour,
    gpus.bf16_tflops::double as bf16_tflops,
    case
        when counts.n = 1 then 'none'
        when gpus.form_factor in ('SXM', 'Superchip') and coalesce(gpus.nvlink_gbps, 0) > 0 then 'NVSwitch'
        when gpus.form_factor = 'OAM' and coalesce(gpus.nvlink_gbps, 0) > 0 then 'Infinity Fabric'
        else 'PCIe'
    end as intra_node_interconnect,
    case
        when counts.n > 1 and gpus.form_factor in ('SXM', 'Superchip', 'OAM')
            and coalesce(gpus.nvlink_gbps, 0) > 0 then gpus.nvlink_gbps::double
    end as intra_node_gbps,
    null::double as inter_node_gbps,
    'per_second' as billing_granularity,
    null::bigint as minimum_charge_seconds,
    null::varchar as spot_kind,
    null::json as provider_data,
    false as is_stale,
    null::double as setup_fee_usd,  -- no one-time fee: the bill is compute alone
    false as serverless,
    null::double as monthly_price_cap_usd  -- no monthly cap: every hour bills
from core.gpus as gpus
cross join (values {", ".join(f"({n})" for n in GPU_COUNTS)}) as counts (n)
where gpus.vram_gb > 0
"""


@pytest.fixture(scope="module")
def mart() -> Iterator[dict[tuple[str, str], dict[str, Any]]]:
    con = connect(":memory:")
    migrate(con)
    load_seeds(con)
    con.execute(_BOXES_SQL)
    # the mart's read of its offers and its cost SQL, at `estimate`'s one node per job (the
    # built mart spans up to MART_MAX_GPUS, where the stated size is exact)
    rows = cost_frame(con, list(JOBS), MODELS, read_offers(con), max_nodes=1, max_gpus=None).to_dicts()
    con.close()
    yield {(r["job_id"], r["instance_type"]): r for r in rows}


def _stated(fjob: FinetuneJob, gpu: str, n: int, **kw: Any) -> Any:
    hw = StatedHardware(gpu=gpu, gpus_per_node=n, price_usd_per_gpu_hour=PRICE_PER_GPU_HOUR, **kw)
    return on_hardware(fjob, MODELS[fjob.model_id], hw, CATALOG)


@pytest.mark.parametrize("gpu", sorted(name for name, spec in CATALOG.gpus.items() if spec.vram_gb > 0))
def test_stated_hardware_and_the_mart_give_the_same_hours_and_cost(
    mart: dict[tuple[str, str], dict[str, Any]], gpu: str
) -> None:
    """Every seeded GPU × 1/2/4/8 × the jobs: `estimate --gpu` is the mart's answer, to the bit."""
    for n in GPU_COUNTS:
        for fjob in JOBS:
            box = mart[(fjob.job_id, f"{gpu} x{n}")]
            stated = _stated(fjob, gpu, n).row
            for column in ("fits", "sharding", "gpus_used", "total_gb", "estimated_hours", "billed_hours"):
                assert stated[column] == box[column], (gpu, n, fjob.job_id, column)
            assert stated["cost_usd"] == box["cost_usd"], (gpu, n, fjob.job_id)
            assert stated["priced"] == box["priced"]
            if not stated["fits"]:
                assert stated["cost_usd"] is None  # a job that does not fit has no cost


def test_the_issue_case_8x_h100_pcie_is_the_plain_pcie_box(
    mart: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """8× H100-PCIe, Llama-3.1-8B full, 100M tokens: 0.99 h like the mart, not the 0.62 h of
    treating a two-card NVLink bridge as linking all eight."""
    full = JOBS[0]
    pcie = _stated(full, "H100-PCIe", 8)
    bridged = _stated(full, "H100-PCIe", 8, interconnect="nvlink")
    assert pcie.row["intra_node_interconnect"] == "PCIe"
    assert bridged.row["intra_node_interconnect"] == "NVLink bridge"
    assert pcie.hours == bridged.hours == mart[("full-8b", "H100-PCIe x8")]["estimated_hours"]
    assert pcie.hours == pytest.approx(0.99, abs=0.01)
    # a bridged pair is the one place the bridge helps: faster than two cards over PCIe
    lora = JOBS[1]
    pair_bridged, pair_pcie = (
        _stated(lora, "H100-PCIe", 2, interconnect="nvlink"),
        _stated(lora, "H100-PCIe", 2),
    )
    assert pair_bridged.hours is not None and pair_pcie.hours is not None
    assert pair_bridged.row["comm_hours"] < pair_pcie.row["comm_hours"]  # the bridge moves bytes faster
    assert pair_bridged.hours <= pair_pcie.hours  # (LoRA's small all-reduce hides under compute)


def test_sharding_option_and_exact_nodes() -> None:
    full = JOBS[0]
    chosen = _stated(full, "H100-SXM", 8)
    forced = _stated(full, "H100-SXM", 8, sharding="zero3")
    assert chosen.row["sharding"] == "zero2" and forced.row["sharding"] == "zero3"
    assert forced.hours > chosen.hours  # zero3 gathers parameters: more traffic, same compute
    two = _stated(full, "H100-SXM", 8, nodes=2)
    assert two.row["nodes_used"] == 2 and two.row["gpus_used"] == 16  # the stated size, not fewer
    with pytest.raises(AnswerError, match="--sharding none"):
        _stated(full, "H100-SXM", 8, nodes=2, sharding="none")


def test_gpus_without_bf16_train_in_fp16_and_say_so() -> None:
    lora = JOBS[1]
    v100 = _stated(lora, "V100-32GB-SXM", 8)
    assert v100.row["train_precision"] == "fp16-mixed"
    assert v100.cost_usd is not None and v100.hours is not None
    assert _stated(lora, "H100-SXM", 1).row["train_precision"] == "bf16-mixed"
    t4 = _stated(lora, "T4", 1)
    assert t4.row["train_precision"] == "fp16-mixed"
    assert not t4.row["fits"] and t4.cost_usd is None and t4.hours is None


def test_unknown_gpu_and_nvlink_on_a_card_without_it_are_answer_errors() -> None:
    with pytest.raises(AnswerError, match="did you mean H100"):
        find_gpu("H100-SMX", CATALOG)
    with pytest.raises(AnswerError, match="--interconnect pcie"):
        stated_offer(find_gpu("L4", CATALOG), StatedHardware("L4", gpus_per_node=4, interconnect="nvlink"))


def test_a_bare_model_name_is_answered_with_its_variants_first() -> None:
    # "H100" names four parts: they come before P100, which is only spelled alike
    with pytest.raises(AnswerError) as raised:
        find_gpu("h100", CATALOG)
    named = str(raised.value).split("did you mean ")[1].split("?")[0].split(", ")
    assert named[:4] == ["H100-SXM", "H100-PCIe", "H100-NVL", "H100-96GB-SXM"]
    assert len(named) == 5 and "P100" in named


# --- finetune/offer.py: units ------------------------------------------------------------------


def test_link_bandwidth_units() -> None:
    # NVLink 4 is quoted 900 GB/s bidirectional per H100: 450 GB/s each way, 3600 Gb/s
    assert intra_node_gbytes_per_s(900.0, 8, "NVSwitch", 5) == 450.0
    assert gbits_per_s(450.0) == 3600.0
    assert gbits_per_s(None) is None
    # PCIe with no stated rate: x16 per direction of the generation (Gen5: 64 GB/s)
    assert intra_node_gbytes_per_s(None, 8, "PCIe", 5) == 64.0
    assert intra_node_gbytes_per_s(None, 8, None, 4) == 32.0
    # a bridge links a pair: 300 GB/s each way for two, the PCIe hop for more
    assert intra_node_gbytes_per_s(600.0, 2, "NVLink bridge", 5) == 300.0
    assert intra_node_gbytes_per_s(600.0, 8, "NVLink bridge", 5) == 64.0
    # one GPU has no link to rate
    assert intra_node_gbytes_per_s(0.0, 1, "none", 5) == 0.0


def test_stated_links() -> None:
    assert stated_links("SXM", 900.0, 8, None) == ("NVSwitch", 900.0)
    assert stated_links("OAM", 896.0, 8, None) == ("Infinity Fabric", 896.0)
    assert stated_links("PCIe", 600.0, 8, None) == ("PCIe", None)  # a bridge is asked for, not assumed
    assert stated_links("PCIe", 600.0, 2, "nvlink") == ("NVLink bridge", 600.0)
    assert stated_links("SXM", 900.0, 8, "pcie") == ("PCIe", None)
    assert stated_links("SXM", 900.0, 1, None) == ("none", None)
    with pytest.raises(ValueError, match="no NVLink"):
        stated_links("PCIe", 0.0, 2, "nvlink")


def test_tensor_rate_falls_back_to_fp16_without_bf16() -> None:
    assert tensor_rate(989.0, 989.0, True) == (989.0, "bf16")
    assert tensor_rate(None, 65.0, False) == (65.0, "fp16")
    assert tensor_rate(100.0, 65.0, False) == (65.0, "fp16")  # the seed says no bf16: not its rate
    assert tensor_rate(None, None, None) == (None, "fp16")


def test_a_bf16_part_whose_rate_the_seed_lacks_trains_in_bf16_untimed() -> None:
    # RTX PRO 6000 Server Edition, MI250, Gaudi: bf16 parts whose rate gpus.csv does not give. They
    # were said to have no bf16 and to train in fp16; they train in bf16 at an unknown rate
    assert tensor_rate(None, None, True) == (None, "bf16")
    assert tensor_rate(None, 65.0, True) == (None, "bf16")  # an fp16 figure is not its bf16 rate


def test_the_estimate_does_not_say_a_bf16_part_lacks_bf16() -> None:
    from typer.testing import CliRunner

    from flows.cli import app

    # the roomiest such part, so that the job fits and the estimate reaches its timing
    gpu = max(
        (g for g in CATALOG.gpus.values() if g.supports_bf16 and g.bf16_tflops is None),
        key=lambda g: g.vram_gb,
    )
    result = CliRunner().invoke(app, ["estimate", "--model", "Llama-3.1-8B", "--gpu", gpu.gpu_name])
    assert result.exit_code == 0, result.output
    assert "has no bf16" not in result.output
    assert f"no dense bf16 or fp16 TFLOPS for {gpu.gpu_name}" in " ".join(result.output.split())
    payload = CliRunner().invoke(
        app, ["estimate", "--model", "Llama-3.1-8B", "--gpu", gpu.gpu_name, "--json"]
    )
    assert json.loads(payload.output)["train_precision"] == "bf16-mixed"


def test_stated_offer_is_an_instance_types_row() -> None:
    """A stated 8× H100-SXM is what instance_types.csv says of p5.48xlarge: NVSwitch, 900 GB/s."""
    offer = stated_offer(find_gpu("H100-SXM", CATALOG), StatedHardware("H100-SXM", gpus_per_node=8))
    assert (offer["intra_node_interconnect"], offer["intra_node_gbps"]) == ("NVSwitch", 900.0)
    assert offer["price_usd_per_hour"] is None and offer["billing_granularity"] == "per_second"


def test_shrink_hints_name_more_gpus_only_on_stated_hardware() -> None:
    from answers.estimate import shrink_hints

    job = Job(method="lora", precision="bf16-mixed", seq_len=4096, micro_batch=1, sharding="none")
    ranked = shrink_hints(job)  # the offers' answer says --max-nodes itself
    assert "more GPUs (--gpus, --nodes)" not in ranked and "--sharding zero3" not in ranked
    assert shrink_hints(job, stated_gpus=1)[-1] == "more GPUs (--gpus, --nodes)"  # one GPU: nothing to shard
    assert shrink_hints(job, stated_gpus=8)[-1] == "--sharding zero3"
    sharded = Job(method="lora", precision="bf16-mixed", seq_len=4096, micro_batch=1, sharding="zero3")
    assert "--sharding zero3" not in shrink_hints(sharded, stated_gpus=8)
