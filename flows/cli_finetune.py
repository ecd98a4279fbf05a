"""`gpucost memory`, `gpucost estimate` and `gpucost models`: one fine-tuning job, by hand.

    gpucost memory --model Llama-3.1-8B --method qlora [--gpus 8 --sharding zero3] [--json]
    gpucost memory --model Qwen/Qwen3-8B --method lora      # any Hugging Face id
    gpucost memory --config path/to/config.json --method full --sharding zero3 --gpus 8
    gpucost memory --model Llama-3.1-8B --mean-len 210 --max-len 768 --micro-batch 4  # padded data
    gpucost memory --model Qwen/Qwen2.5-7B --gpus 8 --sharding zero3 --zero3-impl deepspeed
    gpucost memory --model Llama-3.2-1B --method lora --train-embeddings head
    gpucost estimate --model Llama-3.1-70B --method lora --tokens 50M [--spot] [--max-nodes 2]
    gpucost estimate --model Llama-3.1-8B --offer-gpu H100 --provider runpod,aws --spot-only [--all]
    gpucost estimate --model Llama-3.1-8B --gpu H100-SXM --gpus 8 [--nodes 2] [--price-per-gpu-hour 2.5]
    gpucost estimate --model Llama-3.1-8B --gpu H100-PCIe --gpus 2 --interconnect nvlink --sharding zero2
    gpucost models

Options, printing and nothing else: the job options are declared once (flows/job_options.py), the
answers come from `answers.estimate` (which prices through `warehouse.finetune_marts.cost_frame`,
the code that builds marts.finetune_costs) and the model itself (`finetune`).

`memory` and `estimate --gpu` need no warehouse: `--gpu` is a one-row offer priced by the same
cost SQL as the mart. Plain `estimate` reads marts.gpu_offers read-only. By default it ranks
on-demand offers; `--spot` adds spot offers (their expected cost includes the work lost to
interruptions), ranked together by cost. The filters of
`gpucost prices` (flows/cli_prices.py; `--offer-gpu` for its `--gpu`) narrow the offers, and
`answers.prices.frontier` folds those neither faster nor cheaper than another of the same
provider, GPU and pricing type (`--all` shows them).

`--model` takes a seeded model (llm_models.csv, by id or unique suffix; Instruct / chat / -it
variants resolve to their base) or any Hugging Face id, whose config.json comes from the local HF
cache or the Hub (flows/hf_configs.py).

Registered on the app in flows/cli.py: `app.command()(cli_finetune.memory)`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.measure import Measurement
from rich.table import Table

from answers import AnswerError
from finetune import FinetuneJob, Job, ModelSpec, Sharding
from finetune.job import PaddedShape
from finetune.offer import Interconnect, has_p2p
from finetune.placement import candidate_shardings
from finetune.tensor_parallel import group_refusal
from flows.cli_prices import (
    FILTERS,
    GPU_ONLY_MARK,
    UNAVAILABLE_MARK,
    GpuFilterHelp,
    IncludeStaleOpt,
    IncludeUnavailableOpt,
    MaxPriceOpt,
    MinVramOpt,
    ProviderOpt,
    RegionOpt,
    fetched_line,
    format_age,
    make_filters,
    source_text,
)
from flows.job_options import (
    BILL,
    DEFAULT_SHARDING,
    CompileOpt,
    JobOptions,
    JsonOpt,
    ShardingChoice,
    _choice_of,
    _choices,
    _fail,
    _padding,
    _usage,
    knob_warning,
    parse_tokens,
    warn,
    with_job_options,
)
from flows.output import console, err
from warehouse.errors import WarehouseError
from warehouse.seed_models import load_models

# answers.estimate (polars, DuckDB, the marts' cost SQL) is imported by the commands that run it:
# `gpucost --help` and `models` never load it (issue 22).
if TYPE_CHECKING:
    import duckdb
    import polars as pl

    from answers.estimate import OfferBook, OfferRanking, StatedEstimate, StatedHardware
    from answers.prices import OfferFilters

__all__ = [
    "EstimateAsk",
    "MemoryAsk",
    "estimate",
    "estimate_ask",
    "interruption_band",
    "json_ready",
    "memory",
    "memory_ask",
    "models",
    "parse_tokens",
]

InterconnectChoice = _choices("InterconnectChoice", Interconnect)


def _print_json(payload: object) -> None:
    console.out(json.dumps(payload, indent=2, default=str), highlight=False)


def _shape_text(job: Job, shape: PaddedShape | None) -> str:
    if shape is None:
        return f"seq {job.seq_len} × micro-batch {job.micro_batch}"
    return (
        f"padded: mean {shape.mean_len:g}, max {shape.max_len} tokens × micro-batch {job.micro_batch} "
        f"(memory at {shape.max_len}, time at ~{shape.expected_len:,.0f}, "
        f"{shape.padding_efficiency:.0%} real tokens)"
    )


def _unplaceable_note(rows: pl.DataFrame, job: Job) -> str:
    """How many offers have nodes a tensor-parallel group does not fit (no memory figure: NaN)."""
    unplaceable = int(rows["total_gb"].is_nan().sum())
    if not unplaceable:
        return ""
    return (
        f"{unplaceable} offer(s) have nodes that cannot hold a tensor-parallel group of "
        f"{job.tensor_parallel} GPUs: left out"
    )


def _tensor_parallel_text(job: Job) -> str:
    return f" at tensor-parallel {job.tensor_parallel}" if job.tensor_parallel > 1 else ""


def _sharding_text(job: Job) -> str:
    text = f"{job.sharding} ({job.zero3_impl})" if job.sharding == "zero3" else job.sharding
    if job.tensor_parallel > 1:
        # data parallelism runs over the tensor-parallel groups
        text += f" over tensor-parallel groups of {job.tensor_parallel}"
    return text


def json_ready(payload: Any) -> Any:
    """`payload` as `--json` prints it (datetimes and other values by str): the values `gpucost
    serve` answers with too, so the two cannot differ."""
    return json.loads(json.dumps(payload, default=str))


@dataclass(frozen=True)
class MemoryAsk:
    """`gpucost memory`'s question, validated: the model, the job and its padded shape, the GPUs."""

    spec: ModelSpec
    job: Job
    shape: PaddedShape | None
    gpus: int

    def knob_warning(self) -> str | None:
        """The options that change nothing for this job on these GPUs (`knob_warning`)."""
        return knob_warning([(self.job, self.gpus)])

    def payload(self) -> dict[str, Any]:
        """The --json answer (answers.estimate.job_memory)."""
        from answers.estimate import job_memory

        answer = job_memory(self.spec, self.job, self.gpus)
        return {
            "model_id": self.spec.model_id,
            "params": self.spec.params,
            "trainable_params": answer.trainable_params,
            "n_gpus": self.gpus,
            "job": asdict(self.job),
            "padding": _padding(self.shape),
            "memory_gb": answer.breakdown.as_dict(),
            "totals_gb": memory_totals(answer.breakdown),
        }


def memory_ask(job: JobOptions, *, gpus: int, sharding: str, spec: ModelSpec | None = None) -> MemoryAsk:
    """`memory`'s options as one question (OptionError names a bad flag); `spec` when the model is
    already known (a config pasted into `gpucost serve`)."""
    if sharding == "hybrid":
        # hybrid shards inside a node: its memory is zero3's over one node's GPUs
        raise _usage(
            "--sharding hybrid holds what zero3 over one node's GPUs holds: ask --sharding zero3 "
            "--gpus <GPUs per node>, or gpucost estimate --gpu … --nodes N --sharding hybrid"
        )
    spec = spec or job.model_spec()
    model_job, shape = job.job(sharding=sharding, model=spec)
    refusal = group_refusal(model_job.tensor_parallel, gpus, gpus)
    if refusal:
        raise _usage(f"--gpus {gpus}: {refusal}")
    return MemoryAsk(spec, model_job, shape, gpus)


@with_job_options
def memory(
    job: JobOptions,
    gpus: Annotated[int, typer.Option(min=1, help="GPUs (data-parallel, times --tensor-parallel).")] = 1,
    sharding: Annotated[
        ShardingChoice,
        typer.Option(
            help="none: DDP; zero2: DeepSpeed ZeRO-2; zero3: FSDP or DeepSpeed (--zero3-impl); "
            "hybrid: HSDP (estimate --nodes)."
        ),
    ] = DEFAULT_SHARDING,
    as_json: JsonOpt = False,
) -> None:
    """Peak memory per GPU (GB = 1e9 bytes) of one fine-tuning configuration. Needs no warehouse."""
    from answers.estimate import job_memory

    ask = memory_ask(job, gpus=gpus, sharding=sharding.value)
    warn(ask.knob_warning())
    if as_json:
        _print_json(ask.payload())
        return
    spec, model_job, shape = ask.spec, ask.job, ask.shape
    answer = job_memory(spec, model_job, gpus)
    breakdown = answer.breakdown
    console.print(
        f"[bold]{spec.model_id}[/] {model_job.method}: {spec.params / 1e9:.2f}B params, "
        f"{answer.trainable_params / 1e6:,.1f}M trainable; {_shape_text(model_job, shape)}, "
        f"{model_job.precision}, {model_job.optimizer}; {gpus} GPU(s), sharding {_sharding_text(model_job)}",
        highlight=False,
    )
    table = Table(title="peak memory per GPU")
    table.add_column("component")
    table.add_column("GB", justify="right")
    for name, value in breakdown.as_dict().items():
        label = name.removesuffix("_gb")
        table.add_row(f"[bold]{label}[/]" if label == "total" else label, f"{value:,.2f}")
    console.print(table)
    console.print(
        f"allocated {breakdown.allocated_gb:.2f} GB, reserved {breakdown.reserved_gb:.2f} GB, device "
        f"{breakdown.device_gb:.2f} GB (total = device: reserved + CUDA context, what nvidia-smi "
        f"shows); peak in the {breakdown.peak_phase} phase",
        highlight=False,
    )
    if breakdown.ddp_bucket_gb:
        console.print(
            f"gradients include {breakdown.ddp_bucket_gb:.2f} GB of DDP's all-reduce buckets, a second "
            "copy of the trained gradients (torch's default); --ddp-bucket-view if the run sets "
            "gradient_as_bucket_view=True or uses FSDP NO_SHARD",
            highlight=False,
        )


def memory_totals(breakdown: Any) -> dict[str, Any]:
    """The three readings of a job's per-GPU memory in `--json` (and the API's `totals_gb`)."""
    return {
        "allocated_gb": breakdown.allocated_gb,
        "reserved_gb": breakdown.reserved_gb,
        "device_gb": breakdown.device_gb,
        "total_is": "device_gb",
        "peak_phase": breakdown.peak_phase,
        "phases_gb": dict(breakdown.phases_gb),
        # the part of gradients_gb that is DDP's bucket copy (0 when sharded or on one GPU)
        "ddp_bucket_gb": breakdown.ddp_bucket_gb,
    }


# `gpucost models` on a narrow terminal: the room an id needs to read whole in one or two lines
# ("meta-llama/Llama-3.1-8B" is 23 characters), and the columns left out first to keep it, the
# architecture details a fine-tuner reads least first (params is always shown)
MODEL_ID_ROOM = 24
MODEL_COLUMNS_DROPPED_FIRST = ("hidden", "heads/kv", "layers", "vocab", "active", "context")


def models() -> None:
    """The seeded models (warehouse/seeds/llm_models.csv) with their parameter counts."""
    cells: dict[str, list[str]] = {
        column: []
        for column in ("model_id", "params", "active", "layers", "hidden", "heads/kv", "vocab", "context")
    }
    for spec in sorted(load_models().values(), key=lambda m: m.model_id.lower()):
        row = (
            spec.model_id,
            f"{spec.params / 1e9:,.2f}B",
            f"{spec.active_params / 1e9:,.2f}B" if spec.is_moe else "",
            str(spec.layers),
            str(spec.hidden_size),
            f"{spec.attention_heads}/{spec.kv_heads}",
            f"{spec.vocab_size:,}",
            f"{spec.max_context:,}",
        )
        for column, value in zip(cells, row, strict=True):
            cells[column].append(value)

    # rich cuts every column short ("131,0…") once the no-wrap ones leave the id no room, and at 60
    # columns dropped the ids altogether: leave out whole columns instead, and say which. The
    # table is measured as rich lays it out (edges, padding, dividers) with an id MODEL_ID_ROOM wide.
    shown = [column for column in cells if column != "model_id"]
    room = {**cells, "model_id": ["x" * MODEL_ID_ROOM] * len(cells["model_id"])}
    for column in MODEL_COLUMNS_DROPPED_FIRST:
        if _fits_terminal(_models_table(room, shown, [])):
            break
        shown.remove(column)
    left_out = [column for column in cells if column != "model_id" and column not in shown]
    console.print(_models_table(cells, shown, left_out))


def _models_table(cells: dict[str, list[str]], shown: list[str], left_out: list[str]) -> Table:
    caption = f"{', '.join(left_out)} left out to fit the terminal; widen it to see them"
    # one space between columns: the ids get the room
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        padding=(0, 1, 0, 0),
        title="seeded models (any Hugging Face id works too)",
        caption=caption if left_out else None,
    )
    # the id wraps on a narrower terminal rather than being cut ("deepseek-…")
    table.add_column("model_id", overflow="fold")
    for column in shown:
        table.add_column(column, justify="right", no_wrap=True)
    for i, model_id in enumerate(cells["model_id"]):
        table.add_row(model_id, *(cells[column][i] for column in shown))
    return table


STATED = "Stated hardware (--gpu)"


@with_job_options
def estimate(
    job: JobOptions,
    tokens: Annotated[str, typer.Option(help="Dataset tokens: 50M, 1.5B, 2000000.")] = "100M",
    epochs: Annotated[float, typer.Option(min=0.001, help="Passes over the dataset.")] = 1.0,
    spot: Annotated[
        bool, typer.Option("--spot", help="Include spot offers (default: on-demand only).")
    ] = False,
    max_nodes: Annotated[int, typer.Option(min=1, help="Most instances one job may span.")] = 1,
    top: Annotated[int, typer.Option(min=1, help="Rows to show.")] = 10,
    padding_efficiency: Annotated[
        float | None,
        typer.Option(
            min=0.01, max=1.0, help="Real tokens / computed tokens: 1 packed (default), < 1 padded."
        ),
    ] = None,
    compiled: CompileOpt = False,
    gpu: Annotated[
        str | None,
        typer.Option(
            "--gpu",
            rich_help_panel=STATED,
            help="Estimate on this GPU (gpus.csv name, e.g. H100-SXM), no offer.",
        ),
    ] = None,
    gpus: Annotated[int, typer.Option(min=1, rich_help_panel=STATED, help="With --gpu: GPUs per node.")] = 1,
    nodes: Annotated[int, typer.Option(min=1, rich_help_panel=STATED, help="With --gpu: nodes.")] = 1,
    interconnect: Annotated[
        InterconnectChoice | None,
        typer.Option(
            rich_help_panel=STATED,
            help="With --gpu: GPU links in a node. Default: nvlink on SXM/OAM boards (NVSwitch), "
            "pcie otherwise; nvlink on a PCIe card is its bridge, which links pairs only; host: PCIe "
            "without peer-to-peer (VMs with IOMMU, GeForce), every transfer staged through host memory.",
        ),
    ] = None,
    sharding: Annotated[
        ShardingChoice | None,
        typer.Option(
            rich_help_panel=STATED, help="With --gpu: this sharding (default: the fastest that fits)."
        ),
    ] = None,
    inter_node_gbps: Annotated[
        float | None,
        typer.Option(
            min=0.0,
            rich_help_panel=STATED,
            help="With --gpu and --nodes > 1: network Gb/s per node (default 3200: 8 × 400 Gb/s "
            "InfiniBand NDR / EFA, answers.estimate.DEFAULT_INTER_NODE_GBITS_PER_S).",
        ),
    ] = None,
    price_per_gpu_hour: Annotated[
        float | None,
        typer.Option(min=0.0, rich_help_panel=STATED, help="With --gpu: USD per GPU-hour, for a cost."),
    ] = None,
    offer_gpu: Annotated[
        str | None,
        typer.Option(
            "--offer-gpu",
            metavar="NAMES",
            rich_help_panel=FILTERS,
            help=GpuFilterHelp,
        ),
    ] = None,
    provider: ProviderOpt = None,
    region: RegionOpt = None,
    min_vram: MinVramOpt = None,
    max_price: MaxPriceOpt = None,
    include_unavailable: IncludeUnavailableOpt = False,
    spot_only: Annotated[
        bool, typer.Option("--spot-only", rich_help_panel=FILTERS, help="Only spot offers.")
    ] = False,
    show_all: Annotated[
        bool,
        typer.Option(
            "--all", rich_help_panel=FILTERS, help="Also show offers folded off the time/cost frontier."
        ),
    ] = False,
    include_stale: IncludeStaleOpt = False,
    bill: Annotated[
        bool,
        typer.Option(
            "--bill",
            rich_help_panel=BILL,
            help="Show each offer's bill item by item (compute, spot rework, set-up, storage, "
            "checkpoints, egress, ingress, idle) instead of the ranking table.",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Rank current offers by the whole bill of this fine-tuning experiment, or estimate on stated hardware.

    The bill adds to the GPU time set-up, storage, checkpoint writes, spot rework, egress, ingress
    and idle time under each provider's published facts; an unpublished item is left out of the
    total and named. Per provider, GPU and pricing type, an offer neither faster nor cheaper than
    another is folded.
    """
    ask = estimate_ask(
        job,
        tokens=tokens,
        epochs=epochs,
        spot=spot,
        max_nodes=max_nodes,
        top=top,
        padding_efficiency=padding_efficiency,
        compiled=compiled,
        gpu=gpu,
        gpus=gpus,
        nodes=nodes,
        interconnect=None if interconnect is None else interconnect.value,
        sharding=None if sharding is None else sharding.value,
        inter_node_gbps=inter_node_gbps,
        price_per_gpu_hour=price_per_gpu_hour,
        offer_gpu=offer_gpu,
        provider=provider,
        region=region,
        min_vram=min_vram,
        max_price=max_price,
        include_unavailable=include_unavailable,
        spot_only=spot_only,
        show_all=show_all,
        include_stale=include_stale,
    )
    if ask.hardware is None:
        warn(ask.knob_warning())
        _rank(ask, as_json=as_json, bill=bill)
        return
    try:
        answer = ask.on_hardware()
    except AnswerError as exc:
        raise _fail(str(exc)) from None
    warn(ask.knob_warning(answer))
    _print_stated(answer, ask.fjob, ask.shape, as_json)


@dataclass(frozen=True)
class EstimateAsk:
    """`gpucost estimate`'s question, validated: the experiment, and either the offer filters of
    a ranking or the stated hardware (`hardware`, with `--gpu`)."""

    spec: ModelSpec
    fjob: FinetuneJob
    shape: PaddedShape | None
    filters: OfferFilters
    hardware: StatedHardware | None
    spot: bool
    max_nodes: int
    top: int
    show_all: bool

    def rank(
        self, con: duckdb.DuckDBPyConnection, now: datetime, book: OfferBook | None = None
    ) -> OfferRanking:
        """The job on every current offer passing the filters (answers.estimate.rank_offers);
        `book` what a server keeps of this warehouse between questions."""
        from answers.estimate import rank_offers

        return rank_offers(
            con, self.fjob, self.spec, self.filters, now, spot=self.spot, max_nodes=self.max_nodes, book=book
        )

    def ranked_payload(self, ranking: OfferRanking) -> list[dict[str, Any]]:
        """The ranking's --json answer: the shown rows (top, frontier unless --all)."""
        return json_ready(ranking.shown(self.top, self.show_all).to_dicts())

    def knob_warning(self, answer: StatedEstimate | None = None) -> str | None:
        """The options that change nothing here (`knob_warning`): on the stated hardware, for the
        job as `answer` placed it; in a ranking, under every sharding an offer may get."""
        if answer is not None:
            return knob_warning([(answer.job, answer.hardware.nodes * answer.hardware.gpus_per_node)])
        job = self.fjob.job
        return knob_warning([(replace(job, sharding=s), n) for s in candidate_shardings(job) for n in (1, 2)])

    def on_hardware(self) -> StatedEstimate:
        from answers.estimate import on_hardware

        assert self.hardware is not None
        return on_hardware(self.fjob, self.spec, self.hardware)


def estimate_ask(
    job: JobOptions,
    *,
    tokens: str = "100M",
    epochs: float = 1.0,
    spot: bool = False,
    max_nodes: int = 1,
    top: int = 10,
    padding_efficiency: float | None = None,
    compiled: bool = False,
    gpu: str | None = None,
    gpus: int = 1,
    nodes: int = 1,
    interconnect: str | None = None,
    sharding: str | None = None,
    inter_node_gbps: float | None = None,
    price_per_gpu_hour: float | None = None,
    offer_gpu: str | None = None,
    provider: str | None = None,
    region: str | None = None,
    min_vram: float | None = None,
    max_price: float | None = None,
    include_unavailable: bool = False,
    spot_only: bool = False,
    show_all: bool = False,
    include_stale: bool = False,
    spec: ModelSpec | None = None,
) -> EstimateAsk:
    """`estimate`'s options as one question; OptionError (one line naming the flag) for a value the
    rules refuse. `spec` when the model is already known (a config pasted into `gpucost serve`)."""
    from answers.estimate import DEFAULT_INTER_NODE_GBITS_PER_S, StatedHardware
    from answers.prices import OfferFilters

    spec = spec or job.model_spec()
    # sharding is chosen per offer (none → zero2 → zero3); offload rules out `none`
    model_job, shape = job.job(
        sharding="zero3" if job.offload else "none",
        padding_efficiency=padding_efficiency,
        compiled=compiled,
        model=spec,
    )
    fjob = FinetuneJob("adhoc", spec.model_id, model_job, int(parse_tokens(tokens)), epochs, job.experiment())
    filters = make_filters(
        offer_gpu,
        provider,
        region,
        min_vram,
        True if spot_only else None,
        max_price,
        include_stale,
        include_unavailable,
        gpu_option="--offer-gpu",
    )
    ranking = partial(
        EstimateAsk, spec, fjob, shape, filters, spot=spot or spot_only, max_nodes=max_nodes, top=top
    )
    if gpu is None:
        # the stated-hardware options describe the --gpu machine; without it they would be ignored
        stated = {
            "--gpus": gpus != 1,
            "--nodes": nodes != 1,
            "--interconnect": interconnect is not None,
            "--sharding": sharding is not None,
            "--inter-node-gbps": inter_node_gbps is not None,
            "--price-per-gpu-hour": price_per_gpu_hour is not None,
        }
        given = [flag for flag, set_ in stated.items() if set_]
        if given:
            raise _fail(
                f"{', '.join(given)} describe(s) the hardware of --gpu; add --gpu NAME to estimate on "
                "it, or drop them to rank current offers (each offer states its own)",
                code=2,
            )
        return ranking(hardware=None, show_all=show_all)
    if filters != OfferFilters():
        raise _fail(
            f"{filters.describe()} filter current offers, and --gpu estimates on stated hardware "
            "without any; drop one (--offer-gpu is the GPU filter)"
        )
    hardware = StatedHardware(
        gpu=gpu,
        gpus_per_node=gpus,
        nodes=nodes,
        interconnect=None
        if interconnect is None
        else _choice_of(interconnect, Interconnect, "--interconnect"),
        inter_node_gbits_per_s=DEFAULT_INTER_NODE_GBITS_PER_S if inter_node_gbps is None else inter_node_gbps,
        price_usd_per_gpu_hour=price_per_gpu_hour,
        sharding=None if sharding is None else _choice_of(sharding, Sharding, "--sharding"),
    )
    return ranking(hardware=hardware, show_all=show_all)


def _rank(ask: EstimateAsk, *, as_json: bool, bill: bool = False) -> None:
    """The ranking of current offers, as a table (the ranking or, with `bill`, the bills) or JSON."""
    from warehouse.db import open_reader

    try:
        con, banner = open_reader()
    except WarehouseError as exc:
        raise _fail(str(exc)) from None
    if banner:  # stderr, so --json output stays parseable
        err.print(f"[yellow]{banner}[/]")
    now = datetime.now(UTC)
    try:
        ranking = ask.rank(con, now)
    except WarehouseError as exc:  # AnswerError is one
        raise _fail(str(exc)) from None
    finally:
        con.close()
    if as_json:
        _print_json(ask.ranked_payload(ranking))
        return
    ranked = ranking.shown(ask.top, ask.show_all)
    fjob = ask.fjob
    table = (
        _bill_table(ranked, fjob) if bill else _ranking_table(ranking, ranked, fjob, ask.spot, ask.show_all)
    )
    console.print(table)
    console.print(fetched_line(ranked, banner, now), highlight=False)


# a console this wide shows price source, age and spot band as columns
WIDE_TABLE = 140


def _folded_note(folded: int, show_all: bool) -> str:
    if not folded:
        return ""
    what = "shown, marked (folded)" if show_all else "folded (--all shows them)"
    return (
        f"{folded} offer(s) neither faster nor cheaper than another of the same provider, GPU and "
        f"pricing type: {what}"
    )


def interruption_band(row: dict[str, Any]) -> str:
    """The spot interruption rate an estimate assumed: AWS' Spot Advisor band ("5–10%/mo") where the
    offer has one, else the default for its spot kind ("~0.05/h"); empty for on-demand."""
    if not row["is_spot"]:
        return ""
    low, high = row.get("interruption_rate_min"), row.get("interruption_rate_max")
    if row.get("interruption_source") == "spot_advisor_band" and low is not None and high is not None:
        # the top band is "> 20%", stored as 0.2–1.0
        return f">{low:.0%}/mo" if high >= 1 else f"{low:.0%}–{high:.0%}/mo"
    rate = row.get("interruptions_per_hour")
    return "" if rate is None else f"~{rate / max(row['nodes_used'] or 1, 1):.2g}/h"


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}"


def _ranking_table(
    ranking: OfferRanking, ranked: pl.DataFrame, fjob: FinetuneJob, spot: bool, show_all: bool
) -> Table:
    priced = ranking.marked
    rows = ranking.rows
    wide = console.width >= WIDE_TABLE
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        # narrow terminals: two spaces between columns, not three, leave the offer room to read
        padding=(0, 1) if wide else (0, 1, 0, 0),
        show_edge=wide,
        title=(
            f"{fjob.model_id} {fjob.job.method}{_tensor_parallel_text(fjob.job)}, "
            f"{fjob.train_tokens / 1e6:,.0f}M tokens: "
            f"{priced.height} priced of {rows.height} {'' if spot else 'on-demand '}offers"
        ),
        caption="\n".join(
            note
            for note in (
                _folded_note(ranking.folded, show_all),
                _unplaceable_note(rows, fjob.job),
                f"{ranking.fitting - priced.height} more fit but are not priced (no bf16 or fp16 TFLOPS, "
                "or multi-node without fast fabric); see marts.finetune_costs.unpriced_reason"
                if ranking.fitting > priced.height
                else "",
                f"{GPU_ONLY_MARK}: the price is for the GPU alone (CPU, RAM, disk billed on top)"
                if (ranked["price_covers"] == "gpu").any()
                else "",
                f"{UNAVAILABLE_MARK}: the provider marks the offer unavailable now"
                if ranked["available"].eq(False).any()
                else "",
                "interrupt.: the spot interruption rate assumed (AWS Spot Advisor band per month, "
                "or ~ a default per spot kind per hour)"
                if ranked["is_spot"].any()
                else "",
                _fp16_note(ranked),
                _bill_note(ranked, fjob),
            )
            if note
        )
        or None,
    )
    table.add_column("offer (region)", overflow="fold")
    table.add_column("GPUs", overflow="fold")
    for column in ("sharding", "GB/GPU", "hours", "on-dem. $", "spot $", "$/M tok", "bill $"):
        table.add_column(column, justify="left" if column == "sharding" else "right", no_wrap=True)
    # price source, age and the spot band get columns of their own where the terminal is wide
    # enough, else a dim second line under the offer
    with_spot = bool(ranked["is_spot"].any())
    if wide:
        table.add_column("price", no_wrap=True)
        if with_spot:
            table.add_column("interrupt.", no_wrap=True)
    for r in ranked.iter_rows(named=True):
        nodes = f"{r['nodes_used']}×{r['gpus_per_node']}" if r["multi_node"] else str(r["gpus_used"])
        price = source_text(r["price_source"], r["price_statistic"])
        price += f"{' from' if r['price_is_from'] else ''} {format_age(r['price_age_hours'])}"
        band = interruption_band(r)
        offer = f"{r['provider']} {r['instance_type']} ({r['region']})"
        offer += f" {UNAVAILABLE_MARK}" if r["available"] is False else ""
        offer += f" {GPU_ONLY_MARK}" if r["price_covers"] == "gpu" else ""
        offer += "" if r["on_frontier"] else " (folded)"
        if r.get("billing_rule"):  # a month, a cap, a fee, serverless: never read as an hourly rate
            offer += f"\n[dim]{r['billing_rule']}[/]"
        if not wide:
            offer += f"\n[dim]{price}{', interrupt. ' + band if band else ''}[/]"
        gpus = f"{nodes}× {r['gpu_name']}" + (" (fp16)" if r["train_precision"] == FP16 else "")
        cells = [
            offer,
            gpus,
            r["sharding"],
            f"{r['total_gb']:.1f}",
            f"{r['estimated_hours']:,.2f}",
            _money(r["on_demand_cost_usd"]),
            _money(r["expected_spot_cost_usd"]),
            f"{r['usd_per_million_tokens']:,.3f}",
            _bill_total(r),
        ]
        if wide:
            cells += [price, *([band] if with_spot else [])]
        table.add_row(*cells, style=None if r["on_frontier"] else "dim")
    return table


FP16 = "fp16-mixed"
# marks a bill with unpublished items: its total adds the known ones only
UNKNOWN_MARK = "*"
_BILL_CELLS = (
    ("compute", "compute_usd"),
    ("rework", "spot_rework_usd"),
    ("set-up", "setup_usd"),
    ("storage", "storage_usd"),
    ("ckpt", "checkpoint_usd"),
    ("egress", "egress_usd"),
    ("ingress", "ingress_usd"),
    ("idle", "idle_usd"),
    ("fees", "fees_usd"),
)


def _bill_total(row: dict[str, Any]) -> str:
    mark = UNKNOWN_MARK if row["bill_unknown_items"] else ""
    return f"{row['total_usd']:,.2f}{mark}"


def experiment_text(fjob: FinetuneJob) -> str:
    """The experiment a bill is for, in the options' words."""
    exp = fjob.experiment
    every = (
        f"{exp.every_hours * 60:g} min"
        if exp.every_hours is not None
        else f"{exp.checkpoint_every_steps} steps"
    )
    idle = f", {exp.idle_hours * 60:g} min idle between" if exp.runs > 1 else ""
    return (
        f"{exp.runs} run(s){idle}, {fjob.dataset_gb:,.1f} GB dataset, checkpoint every {every}, "
        f"{fjob.download} download"
    )


def _bill_note(rows: pl.DataFrame, fjob: FinetuneJob) -> str:
    """What the bill column is, and which facts the shown offers' providers leave unpublished."""
    note = f"bill $: the whole bill of {experiment_text(fjob)}; ranked by it (--bill itemizes)"
    unknown = rows.filter(rows["bill_unknown_items"].is_not_null())
    if unknown.is_empty():
        return note
    missing = sorted(
        {f for text in unknown["bill_missing_facts"].drop_nulls().to_list() for f in text.split(", ")}
    )
    providers = ", ".join(sorted(set(unknown["provider"].to_list())))
    return (
        f"{note}\n{UNKNOWN_MARK}: {providers} leave(s) {', '.join(missing)} unpublished "
        "(warehouse/seeds/provider_storage.csv): those items are left out of the total"
    )


def _missing_by_provider(rows: pl.DataFrame) -> list[str]:
    """One line per provider shown with unpublished facts: which."""
    missing = rows.filter(rows["bill_missing_facts"].is_not_null()).unique("provider", keep="first")
    return [
        f"{r['provider']}: {r['bill_missing_facts']} unpublished"
        for r in missing.sort("provider").iter_rows(named=True)
    ]


def _bill_table(ranked: pl.DataFrame, fjob: FinetuneJob) -> Table:
    """`estimate --bill`: each shown offer's bill item by item; "?" where a fact is unpublished.

    One column per item needs about 120 characters. Where the terminal is narrower than the
    table's narrowest layout (rich's own measure: each column at its longest word, amounts whole),
    the items share one wrapping cell ("compute 4.41 · rework 0.00 · …") instead: rich would
    otherwise cut every amount short and squeeze the offer's name out.
    """
    table = _bill_table_of(ranked, fjob, itemized=True)
    if not _fits_terminal(table):
        table = _bill_table_of(ranked, fjob, itemized=False)
    return table


def _fits_terminal(table: Table) -> bool:
    """Whether `table`'s narrowest layout (each column at its longest word, no-wrap cells whole)
    fits the console. Measured unconstrained: measured at the console's width, rich reports the
    widths it would cut to."""
    return Measurement.get(console, console.options.update_width(10_000), table).minimum <= console.width


def _bill_table_of(ranked: pl.DataFrame, fjob: FinetuneJob, *, itemized: bool) -> Table:
    table = Table(
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        title=f"{fjob.model_id} {fjob.job.method}: the bill of {experiment_text(fjob)} (USD)",
        caption="\n".join(
            [
                f"?: unpublished ({UNKNOWN_MARK} on the total, which adds the known items only); "
                "see `gpucost providers` for the facts and their sources",
                *_missing_by_provider(ranked),
            ]
        ),
    )
    table.add_column("offer (region)", overflow="fold")
    if itemized:
        for label, _ in _BILL_CELLS:
            table.add_column(label, justify="right", no_wrap=True)
    else:
        table.add_column("items", overflow="fold")
    table.add_column("total", justify="right", no_wrap=True)
    if itemized:
        table.add_column("unpublished", overflow="fold")
    for r in ranked.iter_rows(named=True):
        offer = f"{r['provider']} {r['instance_type']} ({r['region']})"
        cells = [offer + (f"\n[dim]{r['billing_rule']}[/]" if r.get("billing_rule") else "")]
        amounts = ["?" if r[column] is None else f"{r[column]:,.2f}" for _, column in _BILL_CELLS]
        if itemized:
            table.add_row(*cells, *amounts, _bill_total(r), r["bill_unknown_items"] or "")
        else:
            labels = [label for label, _ in _BILL_CELLS]
            items = " · ".join(f"{label} {amount}" for label, amount in zip(labels, amounts, strict=True))
            table.add_row(*cells, items, _bill_total(r))
    return table


def _fp16_note(rows: pl.DataFrame) -> str:
    """Which shown GPUs lack bf16, and what that means for the estimate."""
    names = sorted(set(rows.filter(rows["train_precision"] == FP16)["gpu_name"].to_list()))
    if not names:
        return ""
    return (
        f"(fp16): {', '.join(names)} have no bf16; the job trains in fp16 mixed precision with loss "
        "scaling (same bytes per value) at the fp16 rate"
    )


def stated_payload(answer: StatedEstimate, fjob: FinetuneJob, shape: PaddedShape | None) -> dict[str, Any]:
    """`estimate --gpu … --json`: the job on stated hardware, its memory and padding."""
    breakdown = answer.breakdown
    return json_ready(
        {
            "model_id": fjob.model_id,
            "method": answer.job.method,
            **answer.as_dict(),
            "memory_gb": breakdown.as_dict(),
            "totals_gb": memory_totals(breakdown),
            "padding": _padding(shape),
        }
    )


def _print_stated(
    answer: StatedEstimate, fjob: FinetuneJob, shape: PaddedShape | None, as_json: bool
) -> None:
    """The job on stated hardware: fits or not, hours, and a cost only for a job that fits."""
    row, job, gpu, hw = answer.row, answer.job, answer.gpu, answer.hardware
    breakdown = answer.breakdown
    if as_json:
        _print_json(stated_payload(answer, fjob, shape))
        return
    verdict = "fits" if row["fits"] else "does NOT fit"
    console.print(
        f"[bold]{fjob.model_id}[/] {job.method} on {hw.nodes}×{hw.gpus_per_node} {gpu.gpu_name} "
        f"({row['intra_node_interconnect']}): {verdict} "
        f"({breakdown.total_gb:.1f} GB device total of {row['usable_vram_gb']:.1f} GB usable per GPU, "
        f"{_sharding_text(job)}; {_shape_text(job, shape)})",
        highlight=False,
    )
    if row["train_precision"] == FP16:
        console.print(
            f"{gpu.gpu_name} has no bf16: the job trains in fp16 mixed precision with loss scaling "
            f"(same bytes per value), timed at its fp16 rate",
            highlight=False,
        )
    if not row["fits"]:
        from answers.estimate import shrink_hints

        hints = shrink_hints(job, stated_gpus=hw.gpus_per_node * hw.nodes)
        console.print(f"no time or cost: the job does not fit (try {', '.join(hints)})", highlight=False)
        return
    hours = answer.hours
    if hours is None or answer.tokens_per_s is None:
        console.print(f"[yellow]not timed:[/] {row['unpriced_reason']}", highlight=False)
        return
    line = f"{answer.tokens_per_s:,.0f} tokens/s, {hours:,.2f} h for {fjob.train_tokens / 1e6:,.1f}M tokens"
    if answer.mfu is not None:
        line += f", MFU {answer.mfu:.0%}"
    if answer.cost_usd is not None:
        line += f"; ${answer.cost_usd:,.2f} at ${hw.price_usd_per_gpu_hour:g}/GPU-hour"
    console.print(line, highlight=False)
    if row["intra_node_interconnect"] == "PCIe" and has_p2p(gpu.model) and hw.gpus_per_node > 1:
        # whether a rented box's GPUs reach each other over PCIe is not stated anywhere
        console.print(
            "timed with peer-to-peer over PCIe; where the GPUs have none (VMs whose IOMMU redirects "
            "it), --interconnect host times the collectives staged through host memory",
            highlight=False,
        )
    bill = answer.bill
    if bill["total_usd"] is not None:
        # stated hardware has no provider: only the GPU time of the experiment is known
        console.print(
            f"bill of {experiment_text(fjob)}: ${bill['total_usd']:,.2f} known (compute and spot rework); "
            f"{bill['bill_unknown_items']} need a provider's facts (rank offers without --gpu)",
            highlight=False,
        )
    if answer.warning:
        console.print(f"[yellow]warning:[/] {answer.warning}", highlight=False)
