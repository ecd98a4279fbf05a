"""What a run costs: billing granularity, minimum charges, spot interruptions, the whole bill (pure).

Money in USD (`_usd`), time in hours (`_hours`), sizes in GB (1e9 bytes). Cost = time rounded up to
the provider's billing unit × price per instance-hour × instances; on spot the time is first
stretched by the work lost to interruptions (`expected_spot_hours`).

`itemized_bill` is the whole bill of an experiment (N runs of one job with idle time between
them), item by item, under a provider's storage, network and billing facts (`ProviderFacts`,
from warehouse/seeds/provider_storage.csv). It is the oracle: warehouse/finetune_marts.py's
cost SQL writes the same formulas over columns in the same order of operations. Every item is a
number, or None where a fact it needs is unpublished (`Bill.missing_facts` names them); an item
whose quantity is zero is 0 whatever the facts. The total adds the known items only.

* compute: runs × billed(useful hours) × price × nodes (billing unit and minimum per run);
* spot_rework: runs × (billed(spot wall hours) − billed(useful hours)) × price × nodes: the work
  since the last checkpoint plus the restart, per `expected_spot_hours` (0 on demand);
* setup: each run is a session on a freshly started instance: boot, then the base model download
  and the dataset upload at the provider's internet rate, billed as GPU time (not rounded to the
  billing unit). Where data survives between sessions (a priced volume, or storage that persists
  on stop) it moves once, else every session;
* storage: the volume price × (dataset + base model + the latest checkpoint) × the experiment's
  duration (runs × wall hours + idle), or 0 where nothing persists (then re-upload, in setup);
* checkpoint: runs × ⌊useful hours / interval⌋ writes of the checkpoint at the disk write rate,
  billed as GPU time;
* egress: the results (runs × the download) beyond the monthly free allowance × the egress
  price; an unpublished allowance counts as none. The experiment is taken to fit in one month;
* ingress: every GB moved in (model and dataset, each session they move) × the ingress price;
* idle: (runs − 1) × idle hours × price × nodes where a stopped instance still bills, else 0
  (a stopped instance costs its storage only, in storage); 0 on a serverless offer (nothing runs,
  nothing bills between runs);
* fees: the offer's one-time set-up fee × nodes, once per experiment (a dedicated server's set-up
  fee, Hetzner's GEX line); 0 where none is stated.

Two billing rules change how the time is billed, not what is billed:

* a month-billed offer (granularity "month": a rental you hold and pay by the month) is held for
  the whole experiment, runs and the gaps between them: compute bills billed(runs × hours + gaps)
  once, rounded up to whole months, spot_rework the same for the spot wall time, and idle is 0
  (the gaps are inside the rented months). A 5-hour job on it costs a whole month;
* a serverless offer has no instance to hold: per-second GPU time while a run runs, idle 0, and
  its boot_minutes is the cold start (setup: cold start + model download + dataset upload);
* an hourly rate capped at a monthly price (`monthly_cap_usd`: Hetzner's dedicated servers, "you
  will never pay more than the monthly price"; Linode) is held for the whole experiment like a
  month-billed rental (idle 0, the gaps inside the months), and each 730-hour month of it bills
  min(price × billed hours in that month, cap): whole months at min(730 h × price, cap), the
  last part month at min(billed(rest) × price, cap) (`capped_cost`). Set-up and checkpoint time
  stay at the hourly price, as on a month-billed rental. One run's cost (`run_cost` with the
  cap; the mart's cost_usd) is capped the same way over that run's wall hours, so a run longer
  than the hours that reach the cap never costs more than the cap for each month it spans.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

from finetune.architecture import ModelSpec
from finetune.job import FinetuneJob
from finetune.memory import GB, _frozen_weight_bytes, model_states, trainable_params

Granularity = Literal["second", "minute", "hour", "month"]

# --- Cost --------------------------------------------------------------------------------------

# Hours in an average month (8760 / 12): providers quote volumes per GB-month and bill them
# prorated by the hour (e.g. AWS EBS "provisioned storage ... prorated by the hour"), and a
# month-billed rental is billed in months of this length (connectors.base.HOURS_PER_UNIT's month).
HOURS_PER_MONTH = 730.0
# A billing unit as (units per hour, hours per unit), one of them 1, so that both a second
# (3600, 1) and a month (1, 730) are whole numbers and the rounding below stays exact.
_UNIT: dict[str, tuple[int, int]] = {
    "second": (3600, 1),
    "minute": (60, 1),
    "hour": (1, 1),
    "month": (1, int(HOURS_PER_MONTH)),
}


def billed_hours(hours: float, granularity: Granularity, minimum_hours: float = 0.0) -> float:
    """`hours` rounded up to whole billing units, and at least `minimum_hours`; never below `hours`."""
    if hours < 0 or math.isnan(hours):
        raise ValueError(f"hours must be ≥ 0, got {hours}")
    if math.isinf(hours):
        return hours
    units, unit_hours = _UNIT[granularity]
    q = hours * units / unit_hours
    # tolerate float noise (0.1 h · 3600 = 360.00000000000006) without ever billing under `hours`
    n = math.ceil(q - 1e-9 * max(1.0, q))
    billed = n * unit_hours / units
    if billed < hours:
        billed = (n + 1) * unit_hours / units
    return max(billed, minimum_hours)


def run_cost(
    hours: float,
    price_per_hour: float,
    granularity: Granularity = "second",
    nodes: int = 1,
    minimum_hours: float = 0.0,
    monthly_cap: float | None = None,
) -> float:
    """On-demand USD: billed hours × price per instance-hour × instances (nodes).

    With `monthly_cap` (an hourly rate capped per month: `applicable_cap`), a run is held as one
    rental and each 730-hour month of it bills at most the cap (`capped_cost`), as the whole
    bill's compute does, so one run never costs more than the months it spans at the cap."""
    if monthly_cap is not None:
        return capped_cost(hours, price_per_hour, monthly_cap, granularity, minimum_hours, nodes)
    return billed_hours(hours, granularity, minimum_hours) * price_per_hour * nodes


def applicable_cap(
    monthly_cap_usd: float | None, granularity: Granularity, serverless: bool = False
) -> float | None:
    """The monthly cap that bills an offer: none on a serverless offer (no instance is held to
    reach it) or a month-billed rental (the month is already the price)."""
    return None if serverless or granularity == "month" else monthly_cap_usd


def capped_cost(
    hours: float,
    price_per_hour: float,
    monthly_cap: float,
    granularity: Granularity,
    minimum_hours: float = 0.0,
    nodes: int = 1,
) -> float:
    """USD of `hours` held on an hourly rate capped at `monthly_cap` per instance and month.

    The hours fill 730-hour months in turn: each whole month bills min(730 × price, cap), the
    part month left min(billed(rest) × price, cap), the minimum charge only when there is no
    whole month; × instances (nodes)."""
    months = math.floor(hours / HOURS_PER_MONTH)
    rest = max(0.0, hours - months * HOURS_PER_MONTH)  # never below 0 where the division rounded up
    whole = min(HOURS_PER_MONTH * price_per_hour, monthly_cap)
    last = min(
        billed_hours(rest, granularity, minimum_hours if months == 0 else 0.0) * price_per_hour, monthly_cap
    )
    return (months * whole + last) * nodes


def expected_spot_hours(
    hours: float,
    interruptions_per_hour: float,
    checkpoint_interval_hours: float,
    restart_overhead_hours: float,
) -> float:
    """Expected wall-clock hours on spot for `hours` of useful work.

    Interruptions arrive as a Poisson process (rate λ per wall-clock hour). Each one loses on
    average half a checkpoint interval of work (uniform arrival within the interval) plus the restart
    overhead R (new instance, reload, resume). Wall time W then solves W = H + λ·W·(c/2 + R), so
    W = H / (1 − λ·(c/2 + R)); when λ·(c/2 + R) ≥ 1 the job never finishes (inf).
    """
    loss_per_interruption = checkpoint_interval_hours / 2 + restart_overhead_hours
    waste = interruptions_per_hour * loss_per_interruption
    if waste >= 1:
        return math.inf
    return hours / (1 - waste)


def expected_spot_cost(
    hours: float,
    price_per_hour: float,
    interruptions_per_hour: float,
    checkpoint_interval_hours: float,
    restart_overhead_hours: float,
    granularity: Granularity = "second",
    nodes: int = 1,
) -> float:
    """Expected spot USD: expected_spot_hours rounded to the billing unit × price × nodes."""
    wall = expected_spot_hours(
        hours, interruptions_per_hour, checkpoint_interval_hours, restart_overhead_hours
    )
    return run_cost(wall, price_per_hour, granularity, nodes)


def cost_per_million_tokens(cost_usd: float, tokens: float) -> float:
    return cost_usd / tokens * 1e6


# --- The whole bill ----------------------------------------------------------------------------

BITS_PER_BYTE = 8
# Weights as downloaded: the seeded models publish bf16 safetensors (config.json torch_dtype
# "bfloat16" for Llama 3.x, Qwen2.5/3, Mistral, Gemma 2), 2 bytes per parameter; a merged model is
# saved the same way (PEFT merge_and_unload into the bf16 base).
STORED_BYTES_PER_PARAM = 2.0
# Bill items in the order the total adds them; the mart's columns are `<item>_usd`.
BILL_ITEMS = (
    "compute",
    "spot_rework",
    "setup",
    "storage",
    "checkpoint",
    "egress",
    "ingress",
    "idle",
    "fees",
)
# a bill as columns (marts.finetune_costs, finetune_costs.v3, estimate's detail): the items in USD,
# the total of the known ones, and which items (and facts) are unknown
BILL_TOTAL_COLUMNS = (
    *(f"{item}_usd" for item in BILL_ITEMS),
    "total_usd",
    "bill_unknown_items",
    "bill_missing_facts",
)
# what the bill was computed from, per job × offer, before its items
BILL_INPUT_COLUMNS = (
    "checkpoint_interval_hours",
    "dataset_gb",
    "model_download_gb",
    "checkpoint_gb",
    "result_gb",
    "runs",
    "idle_hours",
)
# Provider facts a bill reads (provider_storage.csv's columns), in the order `missing_facts` lists them.
FACTS = (
    "storage_persists_on_stop",
    "volume_price_per_gb_month",
    "egress_price_per_gb",
    "ingress_price_per_gb",
    "stopped_instance_bills",
    "boot_minutes",
    "internet_gbits_per_s",
    "disk_write_gbytes_per_s",
)


@dataclass(frozen=True)
class ProviderFacts:
    """A provider's storage, network and billing facts, prices converted to USD; None = unpublished."""

    storage_persists_on_stop: bool | None = None
    volume_usd_per_gb_month: float | None = None
    egress_usd_per_gb: float | None = None
    egress_free_gb_per_month: float | None = None
    ingress_usd_per_gb: float | None = None
    stopped_instance_bills: bool | None = None
    boot_minutes: float | None = None
    internet_gbits_per_s: float | None = None
    disk_write_gbytes_per_s: float | None = None


@dataclass(frozen=True)
class JobData:
    """What an experiment moves and keeps (GB), and its shape."""

    dataset_gb: float
    model_download_gb: float
    checkpoint_gb: float
    result_gb: float
    runs: int = 1
    idle_hours: float = 0.0


def checkpoint_gb(model: ModelSpec, fjob: FinetuneJob) -> float:
    """A resumable checkpoint: the trained weights and their optimizer state, as the memory model
    counts them unsharded (gradients are not saved).

    Full fine-tuning: every weight and the optimizer (its fp32 master copy included under
    bf16-mixed: 2 + 12 B/param with AdamW). LoRA/QLoRA: the adapters (and trained embedding /
    head copies) with their optimizer state; the frozen base is not saved.
    """
    job = replace(fjob.job, sharding="none", offload=False)
    states = model_states(model, job, 1)
    weights = states.weights if job.method == "full" else states.weights - _frozen_weight_bytes(model, job)
    return (weights + states.optimizer) / GB


def model_download_gb(model: ModelSpec) -> float:
    """The base model's published weights (bf16 safetensors)."""
    return model.params * STORED_BYTES_PER_PARAM / GB


def result_gb(model: ModelSpec, fjob: FinetuneJob) -> float:
    """What a run downloads at its end: the merged model (bf16), the adapter in its training dtype
    (fp32 under bf16-mixed, as the memory model keeps it; bf16 under bf16-pure), or nothing."""
    if fjob.download == "none":
        return 0.0
    if fjob.download == "merged":
        return model_download_gb(model)
    per_param = 4.0 if fjob.job.precision == "bf16-mixed" else 2.0
    return trainable_params(model, fjob.job) * per_param / GB


def job_data(model: ModelSpec, fjob: FinetuneJob) -> JobData:
    """The sizes and shape `itemized_bill` reads, from the job, its model and its experiment."""
    return JobData(
        dataset_gb=fjob.dataset_gb,
        model_download_gb=model_download_gb(model),
        checkpoint_gb=checkpoint_gb(model, fjob),
        result_gb=result_gb(model, fjob),
        runs=fjob.experiment.runs,
        idle_hours=fjob.experiment.idle_hours,
    )


def tokens_per_gpu_step(fjob: FinetuneJob) -> float:
    """Real tokens one GPU trains on per optimizer step (micro-batch × length × accumulation ×
    padding efficiency)."""
    job = fjob.job
    return job.micro_batch * job.seq_len * job.grad_accumulation * job.padding_efficiency


def checkpoint_interval_hours(
    every_hours: float | None,
    every_steps: int | None,
    hours: float,
    train_tokens: float,
    tokens_per_gpu_step: float,
    gpus: int,
) -> float:
    """Training hours between checkpoints: as stated, or `every_steps` of the run's
    train_tokens / (tokens per GPU-step × GPUs) steps over `hours`."""
    if every_hours is not None:
        return every_hours
    assert every_steps is not None
    return every_steps * hours / (train_tokens / (tokens_per_gpu_step * gpus))


@dataclass(frozen=True)
class Bill:
    """Each item's USD (None: unpublished), the total of the known ones, and what is missing."""

    items: dict[str, float | None]
    total_usd: float
    missing_facts: tuple[str, ...]

    @property
    def unknown_items(self) -> tuple[str, ...]:
        return tuple(name for name in BILL_ITEMS if self.items[name] is None)


def held_for_experiment(granularity: Granularity, monthly_cap_usd: float | None = None) -> bool:
    """Whether the instance is rented for the whole experiment rather than per run: a month-billed
    rental is not given back between runs (each new one would bill another month, and set-up),
    nor is a monthly-capped one (the gaps cost nothing once a month reaches its cap)."""
    return granularity == "month" or monthly_cap_usd is not None


def keeps_data(facts: ProviderFacts) -> bool | None:
    """Whether dataset, model and checkpoints survive between sessions: on a priced volume, or on
    storage that persists on stop; None where neither is published."""
    if facts.volume_usd_per_gb_month is not None or facts.storage_persists_on_stop is True:
        return True
    return facts.storage_persists_on_stop


def itemized_bill(
    *,
    hours: float,
    wall_hours: float,
    price_per_hour: float,
    granularity: Granularity,
    minimum_hours: float,
    nodes: int,
    interval_hours: float,
    data: JobData,
    facts: ProviderFacts,
    setup_fee_usd: float | None = None,
    serverless: bool = False,
    monthly_cap_usd: float | None = None,
) -> Bill:
    """The experiment's bill: `hours` of useful work per run, `wall_hours` with spot rework (=
    `hours` on demand), at `price_per_hour` per instance over `nodes` instances.

    `setup_fee_usd` is the offer's one-time fee per instance (None: none stated); `serverless`
    an offer with no instance to hold; `monthly_cap_usd` the most an instance bills in a month
    (None: no cap; ignored on a serverless or month-billed offer). The module docstring gives
    the rules."""
    runs = data.runs
    missing: set[str] = set()
    gap_hours = (runs - 1) * data.idle_hours
    cap = applicable_cap(monthly_cap_usd, granularity, serverless)
    if cap is not None:
        # one rental over the whole experiment, each month of it at most the cap
        held_h = runs * hours + gap_hours
        held_w = runs * wall_hours + gap_hours
        compute = capped_cost(held_h, price_per_hour, cap, granularity, minimum_hours, nodes)
        rework = capped_cost(held_w, price_per_hour, cap, granularity, minimum_hours, nodes) - compute
    elif held_for_experiment(granularity):
        # one rental over the whole experiment: the runs and the gaps between them, rounded once
        billed_h = billed_hours(runs * hours + gap_hours, granularity, minimum_hours)
        billed_w = billed_hours(runs * wall_hours + gap_hours, granularity, minimum_hours)
        compute = billed_h * price_per_hour * nodes
        rework = (billed_w - billed_h) * price_per_hour * nodes
    else:
        billed_h = billed_hours(hours, granularity, minimum_hours)
        billed_w = billed_hours(wall_hours, granularity, minimum_hours)
        compute = runs * billed_h * price_per_hour * nodes
        rework = runs * (billed_w - billed_h) * price_per_hour * nodes

    keeps = keeps_data(facts)
    session_gb = data.model_download_gb + data.dataset_gb
    moved_gb: float | None
    if runs == 1 or keeps is True:
        moved_gb = session_gb
    elif keeps is False:
        moved_gb = runs * session_gb
    else:
        moved_gb = None
        missing.add("storage_persists_on_stop")

    setup: float | None = None
    if facts.boot_minutes is None:
        missing.add("boot_minutes")
    if facts.internet_gbits_per_s is None:
        missing.add("internet_gbits_per_s")
    if facts.boot_minutes is not None and facts.internet_gbits_per_s is not None and moved_gb is not None:
        setup_hours = (
            runs * facts.boot_minutes / 60 + moved_gb * BITS_PER_BYTE / facts.internet_gbits_per_s / 3600
        )
        setup = setup_hours * price_per_hour * nodes

    experiment_hours = runs * wall_hours + (runs - 1) * data.idle_hours
    stored_gb = data.dataset_gb + data.model_download_gb + data.checkpoint_gb
    storage: float | None
    if facts.volume_usd_per_gb_month is not None:
        storage = facts.volume_usd_per_gb_month * stored_gb * experiment_hours / HOURS_PER_MONTH
    elif facts.storage_persists_on_stop is False:
        storage = 0.0
    else:
        storage = None
        missing.add("volume_price_per_gb_month")
        if facts.storage_persists_on_stop is None:
            missing.add("storage_persists_on_stop")

    writes = runs * math.floor(hours / interval_hours)
    checkpoint: float | None
    if writes == 0:
        checkpoint = 0.0
    elif facts.disk_write_gbytes_per_s is None:
        checkpoint = None
        missing.add("disk_write_gbytes_per_s")
    else:
        checkpoint = (
            writes * data.checkpoint_gb / facts.disk_write_gbytes_per_s / 3600 * price_per_hour * nodes
        )

    out_gb = runs * data.result_gb
    egress: float | None
    if out_gb == 0:
        egress = 0.0
    elif facts.egress_usd_per_gb is None:
        egress = None
        missing.add("egress_price_per_gb")
    else:
        free = facts.egress_free_gb_per_month if facts.egress_free_gb_per_month is not None else 0.0
        egress = max(0.0, out_gb - free) * facts.egress_usd_per_gb

    ingress: float | None
    if moved_gb == 0:
        ingress = 0.0
    elif facts.ingress_usd_per_gb is None or moved_gb is None:
        ingress = None
        if facts.ingress_usd_per_gb is None:
            missing.add("ingress_price_per_gb")
    else:
        ingress = moved_gb * facts.ingress_usd_per_gb

    idle: float | None
    nothing_idles = serverless or held_for_experiment(granularity, cap)  # no instance, or one held in compute
    if gap_hours == 0 or nothing_idles or facts.stopped_instance_bills is False:
        idle = 0.0
    elif facts.stopped_instance_bills is True:
        idle = gap_hours * price_per_hour * nodes
    else:
        idle = None
        missing.add("stopped_instance_bills")

    items = {
        "compute": compute,
        "spot_rework": rework,
        "setup": setup,
        "storage": storage,
        "checkpoint": checkpoint,
        "egress": egress,
        "ingress": ingress,
        "idle": idle,
        "fees": (setup_fee_usd if setup_fee_usd is not None else 0.0) * nodes,
    }
    total = compute
    for name in BILL_ITEMS[1:]:
        value = items[name]
        total = total + (value if value is not None else 0.0)
    return Bill(items, total, tuple(f for f in FACTS if f in missing))
