"""ZeRO-3 under DeepSpeed (`Job.zero3_impl="deepspeed"`): what its parameter coordinator keeps
gathered, against a replay of the coordinator's own fetch / prefetch / release rules."""

from __future__ import annotations

import csv
import json
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchmarks.memory_accuracy import QWEN_CSV as QWEN_MEMORY_CSV
from benchmarks.memory_accuracy import row_to_case
from benchmarks.throughput_accuracy import EXTRA_CSV, load_gpus
from benchmarks.throughput_accuracy import row_to_case as throughput_case
from finetune import Job, ModelSpec, memory_per_gpu
from finetune.memory import (
    DS_MAX_LIVE_PARAMETERS,
    DS_SUB_GROUP_SIZE,
    _largest_param_bytes,
    deepspeed_live_bytes,
    deepspeed_sub_group_elements,
    ds_reduce_buffer_bytes,
    ds_reduce_elements,
    model_states,
)
from flows.cli import app
from warehouse.seed_models import load_models

MODELS = load_models()
runner = CliRunner()
PREFETCH_BUCKET = 5e7  # DeepSpeedZeroConfig.prefetch_bucket_size default
MAX_REUSE_DISTANCE = 1e9  # DeepSpeedZeroConfig.max_reuse_distance default


def _trace(m: ModelSpec) -> list[tuple[str, int]]:
    """(parameter, elements) in the order a checkpointed full fine-tuning step uses them.

    Forward: embedding, each layer's seven linears, the head; backward: the head, then per layer
    from the last the recomputed forward and the backward; the embedding's gradient last. Norms
    are below the persistence threshold and never gathered.
    """
    h, inter, d = m.hidden_size, m.intermediate_size, m.head_dim_
    shapes = [
        ("q", h * m.attention_heads * d),
        ("k", h * m.kv_heads * d),
        ("v", h * m.kv_heads * d),
        ("o", m.attention_heads * d * h),
        ("gate", h * inter),
        ("up", h * inter),
        ("down", inter * h),
    ]
    vh = m.vocab_size * h

    def layer(i: int) -> list[tuple[str, int]]:
        return [(f"{name}{i}", size) for name, size in shapes]

    order = [("embed", vh)] + [p for i in range(m.layers) for p in layer(i)] + [("head", vh), ("head", vh)]
    for i in reversed(range(m.layers)):
        order += layer(i) + layer(i)[::-1]
    return [*order, ("embed", vh)]


def _replay_peak(order: list[tuple[str, int]]) -> int:
    """Most elements gathered at once under PartitionedParameterCoordinator's rules
    (deepspeed/runtime/zero/partitioned_param_coordinator.py): fetch the module's parameters,
    prefetch upcoming ones while min(max_live − available, bucket) > 0 (a whole parameter per
    iteration, tested after it is taken), release after use unless the parameter reappears
    within max_reuse_distance elements of the trace."""
    available: set[str] = set()
    n_available = peak = 0
    queue = 0
    for step, (name, size) in enumerate(order):
        if name not in available:
            available.add(name)
            n_available += size
        queue = max(queue, step + 1)
        budget = min(DS_MAX_LIVE_PARAMETERS - n_available, PREFETCH_BUCKET)
        taken = 0
        while queue < len(order) and taken < budget:
            ahead, ahead_size = order[queue]
            queue += 1
            if ahead not in available:
                available.add(ahead)
                n_available += ahead_size
                taken += ahead_size
        peak = max(peak, n_available)
        traversed, reused = 0, False
        for later, later_size in order[step + 1 :]:
            if traversed >= MAX_REUSE_DISTANCE:
                break
            if later == name:
                reused = True
                break
            traversed += later_size
        if not reused:
            available.discard(name)
            n_available -= size
    return peak


@pytest.mark.parametrize(
    "model_id",
    ["meta-llama/Llama-3.1-8B", "meta-llama/Llama-2-7b-hf", "Qwen/Qwen-1_8B", "meta-llama/Llama-3.1-70B"],
)
def test_live_set_matches_a_replay_of_the_coordinator(model_id: str) -> None:
    m = MODELS[model_id]
    replayed = _replay_peak(_trace(m))
    # in elements, bf16: 2 bytes each; persisted norms are not in the replay
    modelled = deepspeed_live_bytes(2.0 * m.params, _largest_param_bytes(m, 2.0, 2.0), 0.0) / 2
    assert modelled == pytest.approx(replayed, rel=0.10)
    # far more than FSDP's two decoder layers on the small models, about as many on 70B
    assert modelled > DS_MAX_LIVE_PARAMETERS


def test_a_model_below_the_budget_is_gathered_whole() -> None:
    m = MODELS["Qwen/Qwen2.5-0.5B"]
    job = Job(method="lora", sharding="zero3", zero3_impl="deepspeed")
    # 0.49B parameters < 1e9: every GPU ends up holding the whole frozen base gathered, as
    # without sharding, and its own 1/8 partition beside it (ds_tensor stays)
    sharded = model_states(m, job, 8).weights
    unsharded = model_states(m, replace(job, sharding="none"), 8).weights
    frozen_bf16 = 2.0 * m.params  # no adapters count in the frozen part: lora keeps the base in bf16
    assert sharded == pytest.approx(unsharded + frozen_bf16 / 8, rel=1e-3)
    assert sharded > model_states(m, replace(job, zero3_impl="fsdp"), 8).weights


def test_one_rank_gathers_nothing() -> None:
    # all_gather_coalesced returns _no_gather_coalesced when num_partitions == 1
    m = MODELS["meta-llama/Llama-3.1-8B"]
    for method in ("lora", "qlora"):
        ds = Job(method=method, sharding="zero3", zero3_impl="deepspeed")  # type: ignore[arg-type]
        assert model_states(m, ds, 1).weights == pytest.approx(
            model_states(m, replace(ds, sharding="none"), 1).weights
        )
    full = Job(method="full", sharding="zero3")
    fsdp, ds = model_states(m, full, 1), model_states(m, replace(full, zero3_impl="deepspeed"), 1)
    # the estimator's gathered layer is gone; its bf16 gradient stays, and DeepSpeed's gradient
    # partition is bf16 where FSDP's is fp32
    assert fsdp.weights - ds.weights == pytest.approx(2 * 128_256 * 4096)
    assert fsdp.gradients - ds.gradients == pytest.approx(2 * m.params)


def test_deepspeed_holds_the_budget_beyond_the_shard() -> None:
    m = MODELS["meta-llama/Llama-3.1-70B"]
    job = Job(method="lora", sharding="zero3", zero3_impl="deepspeed")
    n = 8
    shard = model_states(m, replace(job, offload=True), n)  # offload: only the live set on GPU
    vh_bf16 = 2.0 * m.vocab_size * m.hidden_size
    persisted = 2.0 * (2 * m.layers + 1) * m.hidden_size
    adapters = shard.weights - (2.0 * DS_MAX_LIVE_PARAMETERS + vh_bf16 + persisted)
    assert adapters == pytest.approx(4.0 * 207_093_760, rel=1e-9)  # fp32 LoRA r16 all-linear


@given(
    st.sampled_from(list(MODELS)),
    st.sampled_from(["full", "lora", "qlora"]),
    st.booleans(),
    st.integers(1, 5),
    st.integers(1, 4),
)
def test_from_two_gpus_on_more_gpus_never_increase_deepspeed_model_states(
    model_id: str, method: str, offload: bool, log_n: int, more: int
) -> None:
    """From two ranks on the partitions shrink and the live set stays. One rank gathers nothing,
    so a model below the live budget needs more on two GPUs than on one (tested above)."""
    job = Job(method=method, sharding="zero3", zero3_impl="deepspeed", offload=offload)  # type: ignore[arg-type]
    m = MODELS[model_id]
    n = 2**log_n
    assert model_states(m, job, n * 2**more).total <= model_states(m, job, n).total + 1e-6


def test_cli_takes_zero3_impl() -> None:
    args = [
        "memory",
        "--model",
        "Qwen/Qwen2.5-0.5B",
        "--method",
        "lora",
        "--gpus",
        "8",
        "--sharding",
        "zero3",
    ]
    fsdp = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    ds = json.loads(runner.invoke(app, [*args, "--zero3-impl", "deepspeed", "--json"]).stdout)
    assert (fsdp["job"]["zero3_impl"], ds["job"]["zero3_impl"]) == ("fsdp", "deepspeed")
    assert ds["memory_gb"]["weights_gb"] > fsdp["memory_gb"]["weights_gb"]
    text = runner.invoke(app, [*args, "--zero3-impl", "deepspeed"]).output
    assert "zero3 (deepspeed)" in text
    estimate = ["estimate", "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "H100-SXM", "--gpus", "8"]
    hardware = json.loads(runner.invoke(app, [*estimate, "--zero3-impl", "deepspeed", "--json"]).stdout)
    assert hardware["job"]["zero3_impl"] == "deepspeed"


def test_calibration_rows_that_name_deepspeed_read_as_deepspeed() -> None:
    row = {
        "model": "Qwen-1.8B", "params_b": "1.84", "method": "full (DeepSpeed ZeRO-3, 1 GPU)",
        "precision": "bf16", "seq_len": "256", "micro_batch": "1", "grad_checkpointing": "yes",
        "optimizer": "AdamW", "measured_peak_gb": "43.5", "hardware": "1x A100 80GB SXM",
        "source": "QwenLM/Qwen README.md; GB",
    }  # fmt: skip
    case = row_to_case(row, MODELS)
    assert case.job is not None and (case.job.sharding, case.job.zero3_impl) == ("zero3", "deepspeed")
    # Qwen's ds_config_zero3.json names DeepSpeed's AdamW: FusedAdam, no foreach temporaries
    assert case.job.optimizer_impl == "fused"
    # a row whose method says FSDP stays FSDP even when its source cites both frameworks' docs
    fsdp = row_to_case({**row, "method": "qlora + FSDP", "source": "peft {deepspeed,fsdp}.md"}, MODELS)
    assert fsdp.job is not None and fsdp.job.zero3_impl == "fsdp"
    # the step phase of that DeepSpeed row is below FSDP's: one rank gathers nothing and the
    # gradient partition is bf16; its peak is the optimizer step, whose fp32 sub-group FSDP lacks
    ds = memory_per_gpu(case.model, case.job)  # type: ignore[arg-type]
    fsdp_b = memory_per_gpu(case.model, replace(case.job, zero3_impl="fsdp"))  # type: ignore[arg-type]
    assert dict(ds.phases_gb)["step"] < dict(fsdp_b.phases_gb)["step"]
    assert ds.peak_phase == "optimizer"


# --- The gradient: a bf16 partition, fp32 one sub-group at a time in the step ----------------------


def _sub_groups(m: ModelSpec, n: int) -> list[float]:
    """Per-rank sub-group sizes by DeepSpeed's rule (`_create_fp16_sub_groups`), one weight at a
    time over HF's weight-decay group: the embedding, each layer's seven weights, the untied head;
    a sub-group closes at the weight that brings it to sub_group_size elements."""
    weights = [size for name, size in _trace(m)[: 1 + 7 * m.layers]]
    if not m.tied_embeddings:
        weights.append(m.vocab_size * m.hidden_size)
    groups, current = [], 0.0
    for size in weights:
        current += size / n
        if current >= DS_SUB_GROUP_SIZE:
            groups, current = [*groups, current], 0.0
    return groups + ([current] if current else [])


SUB_GROUP_MODELS = ["Qwen/Qwen2.5-0.5B", "meta-llama/Llama-3.1-8B", "meta-llama/Llama-3.1-70B"]


@pytest.mark.parametrize("model_id", SUB_GROUP_MODELS)
@pytest.mark.parametrize("n", [1, 2, 8])
def test_largest_sub_group_follows_deepspeeds_rule(model_id: str, n: int) -> None:
    m = MODELS[model_id]
    assert deepspeed_sub_group_elements(m, n) == pytest.approx(max(_sub_groups(m, n)), rel=1e-12)
    # never more than the rank's whole partition, nor more than the size plus one weight
    assert deepspeed_sub_group_elements(m, n) <= m.params / n
    assert deepspeed_sub_group_elements(m, n) < DS_SUB_GROUP_SIZE + m.vocab_size * m.hidden_size / n


def test_llama_8b_on_one_gpu_closes_its_first_sub_group_at_the_third_layers_o_proj() -> None:
    """By hand: embedding 128,256·4,096 = 525.3M, a layer's seven weights 218.1M, so two layers
    bring the sub-group to 961.5M; the third layer's q (16.8M), k, v (4.2M each) and o (16.8M)
    bring it to 1,003.5M, past the 1e9 size, and it closes there."""
    m = MODELS["meta-llama/Llama-3.1-8B"]
    attention = 2 * 4096 * 4096 + 2 * 4096 * 1024
    layer = attention + 3 * 4096 * 14336
    groups = _sub_groups(m, 1)
    assert groups[0] == 128_256 * 4096 + 2 * layer + attention == 1_003_487_232
    assert sum(groups) == pytest.approx(m.params - (2 * m.layers + 1) * m.hidden_size, rel=1e-9)


def test_deepspeed_keeps_a_bf16_gradient_partition_and_casts_one_sub_group_to_fp32() -> None:
    m = MODELS["meta-llama/Llama-3.1-70B"]
    n = 8
    ds = Job(method="full", sharding="zero3", zero3_impl="deepspeed", seq_len=512, optimizer_impl="fused")
    fsdp = replace(ds, zero3_impl="fsdp")
    gathered = 2.0 * max(m.vocab_size * m.hidden_size, m.params // m.layers)
    assert model_states(m, ds, n).gradients == pytest.approx(2.0 * m.params / n + gathered, rel=1e-2)
    assert model_states(m, fsdp, n).gradients == pytest.approx(4.0 * m.params / n + gathered, rel=1e-2)
    # the optimizer phase: the states, one sub-group's fp32 gradient and the bf16 copy it is cast
    # from (FusedAdam updates in place), beside the IPG buffer held since the optimizer's setup
    b = memory_per_gpu(m, ds, n)
    sub_group = deepspeed_sub_group_elements(m, n)
    phases = dict(b.phases_gb)
    states = model_states(m, ds, n).total
    ipg = ds_reduce_buffer_bytes(m, ds)
    assert phases["optimizer"] * 1e9 == pytest.approx(states + 6.0 * sub_group + ipg + 0.5e9, rel=1e-6)
    assert b.gradients_gb * 1e9 == pytest.approx(
        model_states(m, ds, n).gradients + 4.0 * sub_group + ipg, rel=1e-6
    )
    # foreach AdamW's sqrt(v) of that sub-group (4 B) outweighs the freed bf16 copy (2 B)
    foreach = dict(memory_per_gpu(m, replace(ds, optimizer_impl="foreach"), n).phases_gb)["optimizer"]
    assert (foreach - phases["optimizer"]) * 1e9 == pytest.approx(2.0 * sub_group, rel=1e-6)


@pytest.mark.parametrize(
    "change",
    [
        {"zero3_impl": "fsdp"},  # FSDP keeps an fp32 sharded gradient
        {"offload": True},  # the partitions and the step live on the CPU
        {"precision": "bf16-pure"},  # the gradient is already the master's dtype
        {"method": "lora"},  # adapters: counted in fp32 like their master copy
    ],
)
def test_only_deepspeeds_gpu_step_over_full_bf16_mixed_casts_a_sub_group(change: dict[str, object]) -> None:
    m = MODELS["Qwen/Qwen2.5-0.5B"]
    base = Job(method="full", sharding="zero3", zero3_impl="deepspeed", seq_len=256, optimizer_impl="fused")
    job = replace(base, **change)  # type: ignore[arg-type]
    b = memory_per_gpu(m, job, 2)
    states = model_states(m, job, 2)
    # nothing but the states and, under DeepSpeed, its IPG buffer (`ds_reduce_buffer_bytes`)
    held = ds_reduce_buffer_bytes(m, job)
    assert dict(b.phases_gb)["optimizer"] * 1e9 == pytest.approx(states.total + held + 0.5e9, rel=1e-6)


def test_deepspeed_full_fine_tuning_needs_less_than_fsdp_once_the_partition_passes_a_sub_group() -> None:
    """70B on 8 GPUs: 2 B/param less (17.6 GB) against one 1e9-element sub-group's 6 GB."""
    m = MODELS["meta-llama/Llama-3.1-70B"]
    ds = Job(method="full", sharding="zero3", zero3_impl="deepspeed", seq_len=4096, optimizer_impl="fused")
    saved = memory_per_gpu(m, replace(ds, zero3_impl="fsdp"), 8).total_gb - memory_per_gpu(m, ds, 8).total_gb
    assert saved > 10.0


@pytest.mark.parametrize("impl", ["fused", "foreach"])
def test_zero2_keeps_its_bf16_partition_and_makes_the_fp32_gradient_in_the_step(impl: str) -> None:
    """stage_1_and_2.py: `grads_in_partition` is allocated in the 16-bit dtype; `step` casts one
    param group's flattened partition to fp32, steps that group alone, and drops it."""
    m = MODELS["meta-llama/Llama-3.1-8B"]
    n = 8
    job = Job(method="full", sharding="zero2", seq_len=4096, optimizer_impl=impl)  # type: ignore[arg-type]
    states = model_states(m, job, n)
    assert states.gradients == pytest.approx(2.0 * m.params / n)
    b = memory_per_gpu(m, job, n)
    phases = dict(b.phases_gb)
    # fp32 gradient (4 B) plus the larger of the bf16 copy (2 B) and foreach's sqrt(v) (4 B)
    transient = (4.0 + (4.0 if impl == "foreach" else 2.0)) * m.params / n
    assert phases["optimizer"] * 1e9 == pytest.approx(states.total + transient + 0.5e9, rel=1e-9)
    # never below DeepSpeed's closed form for the states, which counts both gradients
    assert phases["optimizer"] * 1e9 - 0.5e9 >= 2 * m.params + 18 * m.params / n - 1


def test_zero2_step_phase_is_four_bytes_per_param_share_below_the_estimator() -> None:
    """Where activations set the peak, ZeRO-2's drop is the fp32 gradient it no longer carries."""
    m = MODELS["meta-llama/Llama-3.1-8B"]
    job = Job(method="full", sharding="zero2", seq_len=8192, micro_batch=4, grad_checkpointing=False)
    kept = model_states(m, job, 8)
    estimator = 2 * m.params + 18 * m.params / 8
    assert estimator - kept.total == pytest.approx(4 * m.params / 8)
    b = memory_per_gpu(m, job, 8)
    assert b.peak_phase == "step"
    # the training step holds the bf16 partition only, and backward's reduce buffers beside it
    assert b.gradients_gb * 1e9 == pytest.approx(2 * m.params / 8 + ds_reduce_buffer_bytes(m, job))


def test_memory_help_says_which_framework_each_sharding_is() -> None:
    # zero2 is DeepSpeed's stage 2 (its bf16 gradient partition above), zero3 either framework
    text = runner.invoke(app, ["memory", "--help"], env={"COLUMNS": "200"}).output
    assert "zero2: DeepSpeed ZeRO-2" in text
    assert "zero3: FSDP or DeepSpeed (--zero3-impl)" in text


def test_throughput_rows_whose_stack_names_deepspeed_read_as_deepspeed() -> None:
    # X43/X44 ran axolotl with DeepSpeed ZeRO-3 (zero3_bf16.json); a torchtitan row shards by FSDP
    with EXTRA_CSV.open(newline="", encoding="utf-8") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    gpus = load_gpus()
    for row_id, impl in (("X43", "deepspeed"), ("X44", "deepspeed"), ("X30", "fsdp")):
        case = throughput_case(rows[row_id], MODELS, gpus)
        assert case.job is not None, case.skip_reason
        assert (case.job.sharding, case.job.zero3_impl) == ("zero3", impl), row_id


def test_zero2_holds_its_reduce_buffers_through_backward() -> None:
    # DeepSpeed's defaults: one buffer of reduce_bucket_size 5e8 elements, 16-bit: 1 GB
    lora = Job(method="lora", sharding="zero2", seq_len=1024)
    # whatever the model's size: the buffers are allocated at reduce_bucket_size, not the model's
    small, large = MODELS["Qwen/Qwen-1_8B"], MODELS["Qwen/Qwen-14B"]
    assert ds_reduce_buffer_bytes(small, lora) == ds_reduce_buffer_bytes(large, lora) == pytest.approx(1e9)
    for spec in (small, large):
        with_buffers = memory_per_gpu(spec, lora, 1)
        without = memory_per_gpu(spec, replace(lora, ds_reduce_buffer_elements=0), 1)
        phases, phases_without = dict(with_buffers.phases_gb), dict(without.phases_gb)
        assert phases["step"] - phases_without["step"] == pytest.approx(1.0)
        # released with the partition before the optimizer steps; nothing of it at load
        assert phases["optimizer"] == pytest.approx(phases_without["optimizer"])
        assert phases["load"] == pytest.approx(phases_without["load"])
        if with_buffers.peak_phase == "step":
            assert with_buffers.gradients_gb - without.gradients_gb == pytest.approx(1.0)
    # Qwen's ds_config_zero2.json: reduce_bucket_size 2e8 with overlap_comm, two buffers
    assert ds_reduce_buffer_bytes(small, replace(lora, ds_reduce_buffer_elements=2 * 2e8)) == pytest.approx(
        0.8e9
    )
    # fp32 modules under autocast reduce in fp32
    autocast = Job(method="full", sharding="zero2", mixed_precision="autocast")
    assert ds_reduce_buffer_bytes(small, autocast) == pytest.approx(2e9)


def test_zero3_under_deepspeed_holds_its_ipg_buffer_from_the_optimizers_setup_on() -> None:
    # stage3.py allocates one buffer of reduce_bucket_size elements at optimizer setup and keeps it
    spec = MODELS["Qwen/Qwen-7B"]
    job = Job(
        method="full", sharding="zero3", zero3_impl="deepspeed", seq_len=1024, ds_reduce_buffer_elements=5e8
    )
    assert ds_reduce_buffer_bytes(spec, job) == pytest.approx(1e9)  # DeepSpeed's default bucket, bf16
    with_buffer = memory_per_gpu(spec, job, 8)
    without = memory_per_gpu(spec, replace(job, ds_reduce_buffer_elements=0), 8)
    phases, phases_without = dict(with_buffer.phases_gb), dict(without.phases_gb)
    # in the step and in the optimizer step alike; not yet at load
    assert phases["step"] - phases_without["step"] == pytest.approx(1.0)
    assert phases["optimizer"] - phases_without["optimizer"] == pytest.approx(1.0)
    assert phases["load"] == pytest.approx(phases_without["load"])
    assert with_buffer.gradients_gb - without.gradients_gb == pytest.approx(1.0)
    # with CPU offload the buffer is still on the GPU
    assert ds_reduce_buffer_bytes(spec, replace(job, offload=True)) == pytest.approx(1e9)


def test_unstated_buckets_are_the_common_configs() -> None:
    spec = MODELS["Qwen/Qwen-7B"]
    # ZeRO-3 configs say "auto" (Qwen, axolotl, LLaMA-Factory): hidden_size², 4096² bf16, 34 MB
    zero3 = Job(method="full", sharding="zero3", zero3_impl="deepspeed")
    assert ds_reduce_elements(spec, zero3) == 4096**2
    assert ds_reduce_buffer_bytes(spec, zero3) == pytest.approx(2 * 4096**2)
    # ZeRO-2 configs keep DeepSpeed's default bucket (LLaMA-Factory's ds_z2_config.json: 5e8)
    assert ds_reduce_elements(spec, Job(method="lora", sharding="zero2")) == 5e8
    # a stated count wins under either stage
    assert ds_reduce_elements(spec, replace(zero3, ds_reduce_buffer_elements=2e8)) == 2e8


def test_qwens_zero3_row_reads_its_auto_bucket(shared_dir) -> None:
    # Qwen's ds_config_zero3.json: "reduce_bucket_size": "auto", hidden_size² once transformers fills it
    with (shared_dir / "data" / "measured_memory_calibration.csv").open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    zero3 = [row for row in rows if "ZeRO-3" in row["method"] and "Qwen" in row["model"]]
    assert zero3, "no Qwen ZeRO-3 memory row to read"
    for row in zero3:
        case = row_to_case(row, MODELS)
        assert case.job is not None, case.skip_reason
        hidden = MODELS["Qwen/Qwen-1_8B"].hidden_size
        assert ds_reduce_elements(MODELS["Qwen/Qwen-1_8B"], case.job) == pytest.approx(hidden**2)


@pytest.mark.parametrize("sharding", ["none", "zero3", "hybrid"])
def test_only_zero2_has_stage_2_reduce_buffers(sharding: str) -> None:
    job = Job(method="lora", sharding=sharding)  # type: ignore[arg-type]
    spec = MODELS["Qwen/Qwen-1_8B"]
    assert ds_reduce_buffer_bytes(spec, job) == 0.0
    assert memory_per_gpu(spec, job, 8) == memory_per_gpu(spec, replace(job, ds_reduce_buffer_elements=0), 8)


@pytest.mark.parametrize("elements", [-1.0, float("inf"), float("nan")])
def test_reduce_buffer_elements_must_be_a_count(elements: float) -> None:
    with pytest.raises(ValueError, match="ds_reduce_buffer_elements"):
        Job(sharding="zero2", ds_reduce_buffer_elements=elements)


def test_qwens_profile_rows_read_as_its_scripts_ran_them() -> None:
    with QWEN_MEMORY_CSV.open(encoding="utf-8") as f:
        rows = {(r["method"], r["seq_len"], r["model"]): r for r in csv.DictReader(f)}
    qlora = row_to_case(rows["qlora (GPTQ int4)", "2048", "Qwen-7B"], MODELS)
    emb = row_to_case(rows["lora (emb)", "2048", "Qwen-7B"], MODELS)
    lora = row_to_case(rows["lora", "2048", "Qwen-7B"], MODELS)
    assert qlora.job is not None and emb.job is not None and lora.job is not None
    # Q-LoRA: finetune_qlora_single_gpu.sh runs DeepSpeed ZeRO-2 (2 × 2e8-element buffers), fp16
    read = (qlora.job.sharding, qlora.job.ds_reduce_buffer_elements, qlora.job.quant)
    assert read == ("zero2", 4e8, "gptq")
    assert qlora.job.logits_fp32 is False
    # "LoRA (emb)" trains copies of the embedding and the head; "LoRA" none; both unsharded
    assert (emb.job.train_embeddings, lora.job.train_embeddings) == ("embed+head", "off")
    assert emb.job.sharding == lora.job.sharding == "none"
    for case in (qlora, emb, lora):
        assert (case.job.lora_rank, case.job.lora_targets, case.job.lora_dropout) == (64, "all-linear", 0.05)
