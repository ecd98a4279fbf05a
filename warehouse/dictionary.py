"""The data dictionary: name, type, unit and meaning of every mart and feed column, in one place.

Everything that describes a column is generated from `COLUMNS`: the DuckDB comments on the marts
(`comment_marts`, run at the end of every `build_marts`), the Parquet key/value metadata of the v2
feeds and the data dictionary `docs/feeds.md` (`warehouse.feeds_doc`; regenerate it with
`uv run python -m warehouse.feeds_doc`). This module imports no other project module: `export` and
`feeds_doc` build on it, and the doc renderer, which needs both the columns and the feed list, lives
above both (an import circle dictionary <-> export is refused by the `no-circles` import contract).
tests/test_feeds.py fails when a mart or feed column has no entry here, when an entry's type differs
from what DuckDB builds, and when docs/feeds.md is stale or names a column that no feed has.

Mart columns keep the names other code relies on (DESIGN.md), some of which hide their unit
(`intra_node_gbps` is gigabytes per second, `inter_node_gbps` gigabits). Feeds v2 rename those so a
name carries its unit: `..._gbytes_per_s` vs `..._gbits_per_s`, `..._usd_per_hour`, `..._at` (UTC). A
v2 column that is not a mart column of the same name says where it comes from in `source`, a SQL
expression over the feed's relation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import duckdb

# Units, spelled one way everywhere. GB is 10^9 bytes (finetune/memory.py); VRAM is as vendors state it.
USD_HOUR = "USD per hour"
GB = "GB (10^9 bytes)"
VRAM_GB = "GB, as vendors state VRAM"
GBYTES_S = "GB/s (gigabytes per second)"
GBITS_S = "Gb/s (gigabits per second)"
UTC = "timestamp, UTC"
HOURS = "hours"


@dataclass(frozen=True)
class Column:
    """One column: `type` as DuckDB's DESCRIBE shows it, `unit` empty for labels, flags and ids."""

    name: str
    type: str
    unit: str
    meaning: str
    # SQL over the feed's relation when the value is not the mart column of this name
    source: str | None = None

    @property
    def comment(self) -> str:
        return f"{self.meaning} [{self.unit}]" if self.unit else self.meaning


def _c(name: str, type_: str, unit: str, meaning: str, source: str | None = None) -> Column:
    return Column(name, type_, unit, meaning, source)


_COLUMNS: tuple[Column, ...] = (
    # --- offer identity -------------------------------------------------------------------------
    _c("provider", "VARCHAR", "", "Provider slug (connectors/<provider>.py): aws, azure, runpod, ..."),
    _c(
        "instance_type",
        "VARCHAR",
        "",
        "What the provider rents, as it names it (an instance type, a plan, a marketplace segment).",
    ),
    _c("region", "VARCHAR", "", "Provider region (or country for marketplaces; `global` when it has none)."),
    _c("zone", "VARCHAR", "", "Availability zone when the price is per zone (AWS spot); null otherwise."),
    _c("pricing_type", "VARCHAR", "", "`on_demand` or `spot` (interruptible, preemptible, bid)."),
    _c("is_spot", "BOOLEAN", "", "True when pricing_type is `spot`: the instance can be taken back."),
    _c(
        "price_source",
        "VARCHAR",
        "",
        "Where the price comes from: `list` (a published rate), `market` (a live spot or bid market) or "
        "`estimated` (derived by a rule, e.g. OCI preemptible = 50 % of list).",
    ),
    # --- prices ---------------------------------------------------------------------------------
    _c(
        "price_usd_per_hour",
        "DOUBLE",
        USD_HOUR,
        "Price of the whole instance (all its GPUs) per hour, in USD (converted once, at fx_usd_per_unit).",
    ),
    _c(
        "price_per_hour",
        "DOUBLE",
        "`currency` per hour",
        "Price of the whole instance per hour as published, in its own currency.",
    ),
    _c(
        "published_price_per_hour",
        "DOUBLE",
        "`currency` per hour",
        "Price of the whole instance per hour as published, in its own currency.",
        source="price_per_hour",
    ),
    _c("currency", "VARCHAR", "", "ISO 4217 currency the provider publishes the price in (USD, EUR)."),
    _c(
        "fx_usd_per_unit",
        "DOUBLE",
        "USD per unit of `currency`",
        "Reference rate used to convert a non-USD price (ECB, via core.fx_rates); null for USD prices.",
    ),
    _c("fx_rate_date", "DATE", "date", "Day of the reference rate used; null for USD prices."),
    _c("fx_source", "VARCHAR", "", "Who published the reference rate (ECB); null for USD prices."),
    _c(
        "fx_rate_stale",
        "BOOLEAN",
        "",
        "True when the rate used is older than GPUCOST_FX_STALE_AFTER_DAYS (7): the price may be off "
        "by the currency's move since; false for USD prices.",
    ),
    _c(
        "price_is_from",
        "BOOLEAN",
        "",
        'True when the page states a "from $X" price: a lower bound, not an exact price.',
    ),
    _c(
        "price_statistic",
        "VARCHAR",
        "",
        "For a marketplace aggregate, which statistic of its host offers the price is (`p10`); null "
        "for a provider's own price.",
    ),
    _c(
        "price_usd_per_gpu_hour",
        "DOUBLE",
        "USD per GPU-hour",
        "price_usd_per_hour / gpu_count: what one GPU costs per hour. Compare offers by this.",
    ),
    _c(
        "price_usd_per_vram_gb_hour",
        "DOUBLE",
        "USD per GB of VRAM per hour",
        "price_usd_per_hour / total_vram_gb.",
    ),
    # --- GPU ------------------------------------------------------------------------------------
    _c(
        "gpu_name",
        "VARCHAR",
        "",
        "Canonical GPU name (warehouse/seeds/gpus.csv): H100-SXM, A100-80GB-PCIe, L40S, RTX4090, ...",
    ),
    _c("gpu_model", "VARCHAR", "", "The GPU's model as the vendor names it (gpus.csv `model`)."),
    _c("gpu_variant", "VARCHAR", "", "Form factor of the GPU (SXM, PCIe, NVL; gpus.csv `form_factor`)."),
    _c("gpu_name_raw", "VARCHAR", "", "The GPU as the provider names it, before mapping."),
    _c(
        "gpu_memory_gb_raw",
        "DOUBLE",
        GB,
        "GPU memory as the provider reports it, before snapping to a known size; null when not stated.",
    ),
    _c(
        "gpu_count",
        "DOUBLE",
        "GPUs",
        "GPUs per instance; fractional for a share of one GPU (0.5 = half a GPU).",
    ),
    _c(
        "vram_gb",
        "DOUBLE",
        VRAM_GB,
        "VRAM per GPU (or per GPU share), as vendors state it: 80 for an H100. Named vram_gb_per_gpu "
        "in feeds v2.",
    ),
    _c(
        "vram_gb_per_gpu",
        "DOUBLE",
        VRAM_GB,
        "VRAM per GPU (or per GPU share), as vendors state it: 80 for an H100.",
        source="vram_gb",
    ),
    _c("total_vram_gb", "DOUBLE", VRAM_GB, "VRAM of the whole instance: vram_gb × gpu_count."),
    _c("memory_type", "VARCHAR", "", "GPU memory technology (HBM3, HBM2e, GDDR6X, ...)."),
    _c(
        "memory_bandwidth_gbps",
        "BIGINT",
        GBYTES_S,
        "GPU memory bandwidth per GPU, in gigabytes per second despite the name "
        "(memory_bandwidth_gbytes_per_s in feeds v2).",
    ),
    _c(
        "memory_bandwidth_gbytes_per_s",
        "BIGINT",
        GBYTES_S,
        "GPU memory bandwidth per GPU.",
        source="memory_bandwidth_gbps",
    ),
    _c(
        "bf16_tflops",
        "DOUBLE",
        "TFLOP/s (10^12 FLOP per second)",
        "Dense BF16 tensor throughput per GPU (no sparsity); null for GPUs without BF16.",
    ),
    _c(
        "bf16_dense_tflops",
        "DOUBLE",
        "TFLOP/s (10^12 FLOP per second)",
        "Dense BF16 tensor throughput per GPU (no sparsity); null for GPUs without BF16.",
        source="bf16_tflops",
    ),
    _c(
        "fp8_tflops",
        "DOUBLE",
        "TFLOP/s (10^12 FLOP per second)",
        "Dense FP8 tensor throughput per GPU (no sparsity); null for GPUs without FP8.",
    ),
    _c(
        "fp8_dense_tflops",
        "DOUBLE",
        "TFLOP/s (10^12 FLOP per second)",
        "Dense FP8 tensor throughput per GPU (no sparsity); null for GPUs without FP8.",
        source="fp8_tflops",
    ),
    # --- interconnect ---------------------------------------------------------------------------
    _c(
        "intra_node_interconnect",
        "VARCHAR",
        "",
        "How the GPUs of one instance talk: NVSwitch, NVLink bridge, NVLink mesh, Infinity Fabric, "
        "PCIe (peer-to-peer), PCIe, no P2P (staged through host memory), or none (1 GPU).",
    ),
    _c(
        "intra_node_gbps",
        "DOUBLE",
        GBYTES_S,
        "GPU-to-GPU bandwidth inside the instance, per GPU, both directions together, in gigabytes per "
        "second despite the name (intra_node_gbytes_per_s in feeds v2); 0 for one GPU, null when unknown.",
    ),
    _c(
        "intra_node_gbytes_per_s",
        "DOUBLE",
        GBYTES_S,
        "GPU-to-GPU bandwidth inside the instance, per GPU, both directions together (NVLink 4 on an "
        "H100: 900); 0 for one GPU, null when unknown.",
        source="intra_node_gbps",
    ),
    _c(
        "interconnect_source",
        "VARCHAR",
        "",
        "Why intra_node_interconnect is what it is: `instance_type` (seed row), `single_gpu`, "
        "`sxm_form_factor` (SXM boards sit on NVSwitch), `gpu_has_no_nvlink` (PCIe).",
    ),
    _c(
        "inter_node_fabric",
        "VARCHAR",
        "",
        "Network between instances for multi-node jobs (EFA, InfiniBand, RoCE, ethernet); null when unknown.",
    ),
    _c(
        "inter_node_gbps",
        "DOUBLE",
        GBITS_S,
        "Network bandwidth per instance between instances, in gigabits per second "
        "(inter_node_gbits_per_s in feeds v2); null when unknown.",
    ),
    _c(
        "inter_node_gbits_per_s",
        "DOUBLE",
        GBITS_S,
        "Network bandwidth per instance between instances (EFA on a p5: 3200); null when unknown.",
        source="inter_node_gbps",
    ),
    _c("gpudirect_rdma", "BOOLEAN", "", "True when GPUs reach the network directly (GPUDirect RDMA)."),
    # --- instance and billing -------------------------------------------------------------------
    _c(
        "billing_granularity",
        "VARCHAR",
        "",
        "Unit the provider bills in: per_second, per_minute, per_hour or per_month (a rental paid "
        "by the month, held for the whole experiment) (seeds/providers.csv).",
    ),
    _c(
        "serverless",
        "BOOLEAN",
        "",
        "True for a serverless provider (seeds/providers.csv): no instance to hold, GPU time billed "
        "only while a run runs, no idle billing, a cold start instead of a boot, one machine per job.",
    ),
    _c(
        "setup_fee",
        "DOUBLE",
        "`currency` per instance",
        "One-time set-up fee per instance on top of the price, as published (a dedicated server's); "
        "null when the source states none.",
    ),
    _c(
        "setup_fee_usd",
        "DOUBLE",
        "USD per instance",
        "setup_fee converted with the price's own rate; null when none is stated.",
    ),
    _c(
        "monthly_price_cap",
        "DOUBLE",
        "`currency` per instance-month",
        "The most one instance bills in a month where the provider caps its hourly rate at a "
        "monthly price, as published (Hetzner's dedicated servers, Linode); null when none is stated.",
    ),
    _c(
        "monthly_price_cap_usd",
        "DOUBLE",
        "USD per instance-month",
        "monthly_price_cap converted with the price's own rate; null when none is stated.",
    ),
    _c(
        "minimum_charge_seconds",
        "BIGINT",
        "seconds",
        "Shortest time the provider bills for; null when it states none.",
    ),
    _c(
        "spot_kind",
        "VARCHAR",
        "",
        "How the provider's spot capacity is priced: market, bid, fixed_discount or none.",
    ),
    _c("vcpus", "DOUBLE", "vCPUs", "Virtual CPUs of the instance; null when not stated."),
    _c("ram_gb", "DOUBLE", GB, "System memory of the instance; null when not stated."),
    _c(
        "available",
        "BOOLEAN",
        "",
        "Whether the provider says there is capacity now; null when it does not say.",
    ),
    _c(
        "vram_gb_stated",
        "DOUBLE",
        GB,
        "VRAM per GPU as the provider states it (MiB converted); null when the source does not state it.",
    ),
    _c("vram_gb_seed", "DOUBLE", GB, "VRAM per GPU the hardware seeds give the matched GPU."),
    _c(
        "vram_source",
        "VARCHAR",
        "",
        "Which figure vram_gb publishes: source, seed, seed:snapped (a MiB report short of the seed by "
        "driver-reserved memory), source:below_seed or seed:below_source (conflicts; warehouse/hardware.py).",
    ),
    _c(
        "spec_conflict",
        "BOOLEAN",
        "",
        "True when the provider's stated VRAM and the hardware seed's disagree beyond rounding.",
    ),
    _c(
        "variant_source",
        "VARCHAR",
        "",
        "How the GPU's form factor was known: name, vram, instance_type, provider_doc, only_variant, or "
        "seed_default (the source does not say; gpu_variant is then null).",
    ),
    _c(
        "price_covers",
        "VARCHAR",
        "",
        "What the price pays for: gpu, gpu_cpu_ram or gpu_cpu_ram_disk; null when not published "
        "(providers.csv, with its source).",
    ),
    _c(
        "match_rule",
        "VARCHAR",
        "",
        "Which hardware seed rule named the GPU (instance_type, alias, alias+vram, ...).",
    ),
    _c("provider_data", "JSON", "", "Provider extras as JSON (Spot Advisor band, marketplace statistics)."),
    # --- freshness ------------------------------------------------------------------------------
    _c(
        "provider_state",
        "VARCHAR",
        "",
        "active, or stale: the provider has failed every run since its last good one for longer than "
        "GPUCOST_STALE_AFTER_HOURS (warehouse/lifecycle.py).",
    ),
    _c(
        "provider_failing_since",
        "TIMESTAMP WITH TIME ZONE",
        UTC,
        "The provider's first failed run after its last good one; null while it is healthy.",
    ),
    _c(
        "is_stale",
        "BOOLEAN",
        "",
        "provider_state = 'stale': left out of prices, estimate, the page and the feeds unless "
        "--include-stale.",
    ),
    _c("price_since", "TIMESTAMP WITH TIME ZONE", UTC, "When the offer was first seen at this price."),
    _c(
        "price_since_at",
        "TIMESTAMP WITH TIME ZONE",
        UTC,
        "When the offer was first seen at this price.",
        source="price_since",
    ),
    _c(
        "last_seen_at",
        "TIMESTAMP WITH TIME ZONE",
        UTC,
        "When a successful run last saw the offer at this price.",
    ),
    _c(
        "first_seen_at",
        "TIMESTAMP WITH TIME ZONE",
        UTC,
        "When the first of these offers was first seen.",
    ),
    # --- guards (issue 19): a held price and a dropped offer say so ---------------------------
    _c(
        "price_held_reason",
        "VARCHAR",
        "",
        "Why the newest price read for this offer was held (price_jump, unit_change, thin_market, "
        "spot_above_on_demand, ...; ops.quarantine has the row): the price shown is the last good "
        "one, as of last_seen_at. Null when the last run published what it read.",
    ),
    _c(
        "price_held_since",
        "TIMESTAMP WITH TIME ZONE",
        UTC,
        "When the first run that held this offer's newer price ran; null when nothing is held.",
    ),
    _c(
        "drop_reason",
        "VARCHAR",
        "",
        "Why marts.gpu_offers leaves this current offer out: absurd_price (its converted price per "
        "GPU-hour, price_usd_per_gpu_hour, is over GPUCOST_MAX_USD_PER_GPU_HOUR); left_out otherwise.",
    ),
    _c(
        "price_age_hours",
        "DOUBLE",
        HOURS,
        "Hours from last_seen_at to the feed's generated_at (manifest.json, Parquet metadata): how old "
        "the price was when the feed was written.",
        source="(epoch(getvariable('feeds_generated_at')) - epoch(last_seen_at)) / 3600",
    ),
    # --- unmapped GPUs --------------------------------------------------------------------------
    _c("offers", "BIGINT", "offers", "Current offers with this raw GPU name (offer_count in feeds v2)."),
    _c("offer_count", "BIGINT", "offers", "Current offers with this raw GPU name.", source="offers"),
    _c(
        "example_instance_types",
        "VARCHAR[]",
        "",
        "Up to five instance types that carry this raw GPU name.",
    ),
    _c(
        "example_instance_type_list",
        "VARCHAR",
        "",
        "Up to five instance types that carry this raw GPU name, separated by `; `.",
        source="array_to_string(example_instance_types, '; ')",
    ),
    # --- fine-tuning jobs -----------------------------------------------------------------------
    _c(
        "job_id",
        "VARCHAR",
        "",
        "Fine-tuning job of the grid in warehouse/seeds/finetune_jobs.csv: <model>__<method>__s<seq_len>.",
    ),
    _c("model_id", "VARCHAR", "", "Hugging Face id of the model being fine-tuned."),
    _c("method", "VARCHAR", "", "`full`, `lora` or `qlora` (LoRA on a 4-bit quantized base)."),
    _c("precision", "VARCHAR", "", "Training precision (bf16-mixed: bf16 compute, fp32 master weights)."),
    _c("optimizer", "VARCHAR", "", "Optimizer (adamw, paged-adamw8bit, ...)."),
    _c("seq_len", "BIGINT", "tokens", "Sequence length of one training sample."),
    _c(
        "seq_len_tokens",
        "BIGINT",
        "tokens",
        "Sequence length of one training sample.",
        source="seq_len",
    ),
    _c("micro_batch", "BIGINT", "sequences", "Sequences per GPU per step."),
    _c(
        "micro_batch_sequences",
        "BIGINT",
        "sequences",
        "Sequences per GPU per step.",
        source="micro_batch",
    ),
    _c("grad_checkpointing", "BOOLEAN", "", "Whether activations are recomputed in the backward pass."),
    _c("attention", "VARCHAR", "", "Attention kernel assumed (flash, sdpa, eager)."),
    _c("lora_rank", "BIGINT", "", "LoRA rank r (the seed states one for full jobs too, where it is unused)."),
    _c(
        "lora_rank_used",
        "BIGINT",
        "",
        "LoRA rank r; null for full fine-tuning.",
        source="case when method <> 'full' then lora_rank end",
    ),
    _c("lora_targets", "VARCHAR", "", "Which layers get LoRA adapters (all-linear, attention)."),
    _c("chunked_ce", "BOOLEAN", "", "Whether the loss is computed in chunks (smaller logits memory)."),
    _c("offload", "BOOLEAN", "", "Whether optimizer state is offloaded to CPU memory (needs ZeRO)."),
    _c("loss", "VARCHAR", "", "Loss implementation: standard, chunked or fused (sets logits memory)."),
    _c("quant", "VARCHAR", "", "What QLoRA quantizes the base model to (nf4, nf4-dq, gptq); null otherwise."),
    _c(
        "train_tokens",
        "DOUBLE",
        "tokens",
        "Tokens the job trains on: dataset tokens × epochs.",
    ),
    _c("trainable_params", "BIGINT", "parameters", "Parameters that receive gradients."),
    _c("flops_per_token", "DOUBLE", "FLOP per token", "Training FLOPs per token (forward and backward)."),
    _c("total_flops", "DOUBLE", "FLOP", "Training FLOPs of the whole job."),
    _c("n_gpus", "BIGINT", "GPUs", "Data-parallel GPUs the memory row assumes."),
    _c(
        "sharding",
        "VARCHAR",
        "",
        "How model states are split over GPUs: none (DDP), zero2 (optimizer and gradients), zero3 "
        "(everything, FSDP).",
    ),
    # --- memory per GPU (finetune/memory.py) ----------------------------------------------------
    _c("weights_gb", "DOUBLE", GB, "Model weights per GPU."),
    _c("gradients_gb", "DOUBLE", GB, "Gradients per GPU."),
    _c("optimizer_gb", "DOUBLE", GB, "Optimizer state per GPU."),
    _c("activations_gb", "DOUBLE", GB, "Activations saved for the backward pass, per GPU."),
    _c("logits_gb", "DOUBLE", GB, "Logits and loss buffers per GPU."),
    _c("overhead_gb", "DOUBLE", GB, "Runtime overhead per GPU (allocator fragmentation, CUDA context)."),
    _c(
        "total_gb",
        "DOUBLE",
        GB,
        "Peak memory per GPU, device total (what nvidia-smi shows); fit decisions use it. In "
        "finetune_costs: at the placement chosen (memory_per_gpu_gb in feeds v2).",
    ),
    _c(
        "memory_per_gpu_gb",
        "DOUBLE",
        GB,
        "Peak memory the job needs per GPU at this placement, device total (what nvidia-smi shows).",
        source="total_gb",
    ),
    _c("allocated_gb", "DOUBLE", GB, "Peak tensor memory per GPU (torch.cuda.max_memory_allocated)."),
    _c(
        "reserved_gb",
        "DOUBLE",
        GB,
        "Peak memory the caching allocator holds per GPU (torch.cuda.max_memory_reserved).",
    ),
    _c("peak_phase", "VARCHAR", "", "Phase that sets the peak: load, step or optimizer."),
    # --- placement, time and cost (finetune/placement.py, finetune/cost.py) ---------------------
    _c(
        "hardware_key",
        "BIGINT",
        "",
        "Stable 64-bit key of an offer's hardware and node limit: offers with the same key share a "
        "fine-tuning plan (warehouse.finetune_marts.hardware_key).",
    ),
    _c(
        "job_key",
        "VARCHAR",
        "",
        "Key of a job, its model and the code that planned it: a stored plan is reused while it matches.",
    ),
    _c(
        "minimum_billed_hours",
        "DOUBLE",
        HOURS,
        "The provider's minimum charge: minimum_charge_seconds / 3600 (0 when it states none).",
    ),
    _c("fits", "BOOLEAN", "", "Whether the job fits in memory on this offer (with up to 64 GPUs)."),
    _c(
        "usable_vram_gb",
        "DOUBLE",
        VRAM_GB,
        "VRAM per GPU the job may use: vram_gb × 0.95 (finetune.placement.USABLE_VRAM_FRACTION).",
    ),
    _c(
        "usable_vram_per_gpu_gb",
        "DOUBLE",
        VRAM_GB,
        "VRAM per GPU the job may use: vram_gb_per_gpu × 0.95 (finetune.placement.USABLE_VRAM_FRACTION).",
        source="usable_vram_gb",
    ),
    _c("gpus_used", "BIGINT", "GPUs", "GPUs the job runs on: nodes_used × gpus_per_node."),
    _c("nodes_used", "BIGINT", "instances", "Instances the job runs on (fewest that fit)."),
    _c("gpus_per_node", "BIGINT", "GPUs", "GPUs used on each instance."),
    _c("multi_node", "BOOLEAN", "", "True when the job spans more than one instance."),
    _c(
        "fabric_warning",
        "VARCHAR",
        "",
        "Why a multi-node placement is not priced (no fast fabric between instances); null otherwise.",
    ),
    _c(
        "estimated_hours",
        "DOUBLE",
        HOURS,
        "Wall-clock hours of the run without interruptions (finetune.estimate_time roofline).",
    ),
    _c("compute_hours", "DOUBLE", HOURS, "Hours the GPUs spend computing."),
    _c(
        "comm_hours",
        "DOUBLE",
        HOURS,
        "Hours of data-parallel communication that compute does not hide.",
    ),
    _c(
        "interruptions_per_hour",
        "DOUBLE",
        "interruptions per hour",
        "Expected spot interruptions of the whole job per hour (nodes × per-instance rate); null on demand.",
    ),
    _c(
        "interruption_source",
        "VARCHAR",
        "",
        "Where the interruption rate comes from: spot_advisor_band (AWS), default_market, "
        "default_fixed_discount; null on demand.",
    ),
    _c(
        "expected_spot_hours",
        "DOUBLE",
        HOURS,
        "Wall-clock hours on spot with the work lost to interruptions (30-minute checkpoints); null "
        "on demand.",
    ),
    _c(
        "billed_hours",
        "DOUBLE",
        HOURS,
        "Hours billed per instance: the run's hours rounded up to billing_granularity, at least the "
        "minimum charge.",
    ),
    _c("priced", "BOOLEAN", "", "Whether a cost could be computed (see unpriced_reason)."),
    _c("unpriced_reason", "VARCHAR", "", "Why there is no cost (does not fit, no fast fabric, ...)."),
    _c(
        "on_demand_cost_usd",
        "DOUBLE",
        "USD",
        "Cost of the run on this on-demand offer: billed_hours × price_usd_per_hour × nodes_used, "
        "each 730-hour month of the run at most monthly_price_cap_usd × nodes_used where the "
        "hourly rate is capped; null on spot.",
    ),
    _c(
        "expected_spot_cost_usd",
        "DOUBLE",
        "USD",
        "Expected cost of the run on this spot offer, lost work included; null on demand.",
    ),
    _c("cost_usd", "DOUBLE", "USD", "The run's cost on this offer: the on-demand or the expected spot cost."),
    _c(
        "usd_per_million_tokens",
        "DOUBLE",
        "USD per 10^6 training tokens",
        "cost_usd / train_tokens × 10^6 (cost_usd_per_million_tokens in feeds v2).",
    ),
    _c(
        "cost_usd_per_million_tokens",
        "DOUBLE",
        "USD per 10^6 training tokens",
        "cost_usd / train_tokens × 10^6.",
        source="usd_per_million_tokens",
    ),
    # --- the whole bill (finetune/cost.py itemized_bill; issue 21) ------------------------------
    _c(
        "storage_persists_on_stop",
        "BOOLEAN",
        "",
        "Whether the instance's storage survives a stop (provider_storage.csv); null: unpublished.",
    ),
    _c(
        "volume_usd_per_gb_month",
        "DOUBLE",
        "USD per GB-month",
        "Persistent volume price, converted "
        "from the seed's currency at the latest core.fx_rates rate; null: unpublished.",
    ),
    _c("egress_usd_per_gb", "DOUBLE", "USD per GB", "Price of data out to the internet; null: unpublished."),
    _c(
        "egress_free_gb_per_month",
        "DOUBLE",
        "GB per month",
        "Egress free each month before the price applies; null: none published (counted as none).",
    ),
    _c(
        "ingress_usd_per_gb", "DOUBLE", "USD per GB", "Price of data in from the internet; null: unpublished."
    ),
    _c(
        "stopped_instance_bills",
        "BOOLEAN",
        "",
        "Whether a stopped instance still bills at its price; null: unpublished.",
    ),
    _c(
        "boot_minutes",
        "DOUBLE",
        "minutes",
        "Typical start-to-ready time the provider documents; null: unpublished.",
    ),
    _c(
        "internet_gbits_per_s",
        "DOUBLE",
        GBITS_S,
        "The instance's internet rate for downloads and uploads; null: unpublished.",
    ),
    _c(
        "disk_write_gbytes_per_s",
        "DOUBLE",
        GBYTES_S,
        "Write rate of the disk checkpoints go to; null: unpublished.",
    ),
    _c(
        "checkpoint_every_hours",
        "DOUBLE",
        HOURS,
        "The job's checkpoint interval in training hours; null when stated in steps.",
    ),
    _c(
        "checkpoint_every_steps",
        "BIGINT",
        "optimizer steps",
        "The job's checkpoint interval in steps; null when stated in hours.",
    ),
    _c(
        "tokens_per_gpu_step",
        "DOUBLE",
        "tokens",
        "Real tokens one GPU trains on per optimizer step "
        "(micro-batch × length × accumulation × padding efficiency).",
    ),
    _c(
        "checkpoint_interval_hours",
        "DOUBLE",
        HOURS,
        "Training hours between checkpoints on this offer "
        "(a step interval converted at the offer's speed and GPU count).",
    ),
    _c(
        "dataset_gb",
        "DOUBLE",
        GB,
        "The dataset uploaded to the instance: as stated, else dataset tokens × 4 bytes.",
    ),
    _c(
        "model_download_gb",
        "DOUBLE",
        GB,
        "The base model's weights as downloaded (bf16, 2 bytes per parameter).",
    ),
    _c(
        "checkpoint_gb",
        "DOUBLE",
        GB,
        "One resumable checkpoint: the trained weights and their "
        "optimizer state (adapters only for LoRA/QLoRA).",
    ),
    _c(
        "result_gb",
        "DOUBLE",
        GB,
        "What each run downloads at its end: merged weights, the adapter, or nothing.",
    ),
    _c("runs", "BIGINT", "runs", "Training runs in the experiment."),
    _c("idle_hours", "DOUBLE", HOURS, "Inspection time between consecutive runs."),
    _c(
        "compute_usd",
        "DOUBLE",
        "USD",
        "runs × billed useful hours × price × nodes; month-billed: the whole months that hold the "
        "runs and the gaps between them × price × nodes.",
    ),
    _c(
        "spot_rework_usd",
        "DOUBLE",
        "USD",
        "runs × (billed expected spot hours − billed useful hours) × "
        "price × nodes: work since the last checkpoint plus restarts; 0 on demand.",
    ),
    _c(
        "setup_usd",
        "DOUBLE",
        "USD",
        "Boot, model download and dataset upload per session at the "
        "internet rate, billed as GPU time; null where a fact it needs is unpublished.",
    ),
    _c(
        "storage_usd",
        "DOUBLE",
        "USD",
        "Volume price × (dataset + model + latest checkpoint) × the "
        "experiment's duration; 0 where nothing persists (re-upload in setup); null: unpublished.",
    ),
    _c(
        "checkpoint_usd",
        "DOUBLE",
        "USD",
        "Checkpoint writes at the disk write rate, billed as GPU time; null: the rate is unpublished.",
    ),
    _c(
        "egress_usd",
        "DOUBLE",
        "USD",
        "The runs' downloads beyond the monthly free allowance × the egress price; null: unpublished.",
    ),
    _c(
        "ingress_usd",
        "DOUBLE",
        "USD",
        "GB moved in (model and dataset, each session they move) × the ingress price; null: unpublished.",
    ),
    _c(
        "idle_usd",
        "DOUBLE",
        "USD",
        "Idle time between runs at the instance price where a stopped "
        "instance still bills, else 0 (always 0 serverless, and month-billed or monthly-capped where "
        "compute holds the gaps); null: unpublished.",
    ),
    _c(
        "fees_usd",
        "DOUBLE",
        "USD",
        "One-time fees: the offer's set-up fee × instances, once per experiment; 0 where none is stated.",
    ),
    _c(
        "total_usd",
        "DOUBLE",
        "USD",
        "The experiment's whole bill: the sum of the known items; offers rank by it.",
    ),
    _c(
        "bill_unknown_items",
        "VARCHAR",
        "",
        "The bill items left out of total_usd because a fact is "
        "unpublished (comma-separated); null: the bill is complete.",
    ),
    _c(
        "bill_missing_facts",
        "VARCHAR",
        "",
        "The provider_storage.csv facts those items need and the "
        "provider does not publish (comma-separated); null: none.",
    ),
)


def _registry(columns: Iterable[Column]) -> dict[str, Column]:
    registry: dict[str, Column] = {}
    for column in columns:
        if column.name in registry:
            raise ValueError(f"column {column.name!r} is defined twice in warehouse/dictionary.py")
        registry[column.name] = column
    return registry


COLUMNS: dict[str, Column] = _registry(_COLUMNS)

# What one row of each mart is; the table comment in DuckDB.
MARTS: dict[str, str] = {
    "gpu_offers": "One row per current GPU offer: price, canonical GPU and its specs, interconnect, billing.",
    "unmapped_gpus": "One row per raw GPU name among current offers that no hardware seed can map.",
    "spec_conflicts": "One row per provider GPU whose stated VRAM disagrees with the hardware seed's.",
    "dropped_offers": "One row per current offer with a canonical GPU that gpu_offers leaves out, "
    "with the reason.",
    "finetune_requirements": "One row per fine-tuning job × GPU count × sharding: memory per GPU, FLOPs.",
    "finetune_offers": "One row per current offer: the inputs of the fine-tuning cost model (hardware "
    "key, billing, spot interruption rate).",
    "finetune_plans": "One row per fine-tuning job × distinct hardware: placement, memory, hours; kept "
    "across refreshes while job, model, code and hardware are unchanged.",
    "finetune_costs": "One row per fine-tuning job × current offer, fitting or not: placement, hours, cost.",
}


class UndocumentedColumn(KeyError):
    """A feed or mart column with no entry in warehouse/dictionary.py."""


def column(name: str) -> Column:
    """The entry for `name`; the error says where to add a missing one."""
    try:
        return COLUMNS[name]
    except KeyError:
        raise UndocumentedColumn(
            f"column {name!r} has no entry in warehouse/dictionary.py COLUMNS; add its type, unit and "
            "meaning there, then run `uv run python -m warehouse.feeds_doc`"
        ) from None


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def comment_marts(con: duckdb.DuckDBPyConnection) -> int:
    """`COMMENT ON` every mart and every documented mart column; the number of comments set.

    `create or replace` drops comments, so `build_marts` calls this after every rebuild. A column
    missing from the dictionary stays uncommented here; tests/test_feeds.py fails on it.
    """
    relations = con.execute(
        "select table_name, 'table' from duckdb_tables() where schema_name = 'marts' "
        "union all "
        "select view_name, 'view' from duckdb_views() where schema_name = 'marts' and not internal"
    ).fetchall()
    columns = con.execute(
        "select table_name, column_name from duckdb_columns() where schema_name = 'marts'"
    ).fetchall()
    done = 0
    for name, kind in relations:
        if name in MARTS:
            con.execute(f"comment on {kind} marts.{name} is {_quote(MARTS[name])}")
            done += 1
    for table, name in columns:
        if name in COLUMNS:
            con.execute(f"comment on column marts.{table}.{name} is {_quote(COLUMNS[name].comment)}")
            done += 1
    return done


def undocumented(names: Iterable[str]) -> list[str]:
    """The names among `names` that have no dictionary entry."""
    return [name for name in names if name not in COLUMNS]
