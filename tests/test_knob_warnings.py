"""Options that change nothing for the job asked are said, not silently dropped: each knob that
describes another sharding, method or setting (`finetune.job.knobs_without_effect`) is named in
one `warning:` line on stderr, with why; the answer itself is the same as without it."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from finetune import Job
from finetune.job import knobs_without_effect
from flows.cli import app
from flows.job_options import _flag_text, knob_warning
from tests.test_cli_flags import home  # noqa: F401  (the fixture: a temp GPUCOST_HOME, 200 columns)

runner = CliRunner()
MODEL = ["--model", "meta-llama/Llama-3.2-1B"]  # seeded: no Hub lookup
LORA = Job(method="lora")


def idle(job: Job, n_gpus: int = 1) -> list[str]:
    return [name for name, _ in knobs_without_effect(job, n_gpus)]


def test_defaults_set_nothing_to_warn_of() -> None:
    for method in ("full", "lora", "qlora"):
        for sharding in ("none", "zero2", "zero3", "hybrid"):
            assert idle(Job(method=method, sharding=sharding), 8) == []


@pytest.mark.parametrize(
    ("job", "n_gpus", "name"),
    [
        (Job(method="full", lora_rank=64), 1, "lora_rank"),
        (Job(method="full", lora_targets="qv"), 1, "lora_targets"),
        (Job(method="full", lora_dropout=0.1), 1, "lora_dropout"),
        (replace(LORA, quant="gptq"), 1, "quant"),
        (replace(LORA, grad_checkpointing=False, checkpoint_policy="selective"), 1, "checkpoint_policy"),
        (Job(method="qlora", optimizer="paged-adamw8bit", optimizer_impl="fused"), 1, "optimizer_impl"),
        (replace(LORA, sequence_parallel=False), 1, "sequence_parallel"),
        (replace(LORA, sharding="zero2", zero3_impl="deepspeed"), 8, "zero3_impl"),
        (replace(LORA, sharding="zero3", full_state_dict_load=True), 1, "full_state_dict_load"),
        (replace(LORA, sharding="none", full_state_dict_load=True), 8, "full_state_dict_load"),
        (replace(LORA, ddp_bucket_view=True), 1, "ddp_bucket_view"),  # one GPU: no DDP
        (replace(LORA, sharding="zero3", ddp_bucket_view=True), 8, "ddp_bucket_view"),
        # full fine-tuning of bf16 modules with an fp32 master is not torch DDP's to reduce
        (Job(method="full", ddp_bucket_view=True), 8, "ddp_bucket_view"),
        (replace(LORA, sharding="zero3", fsdp_no_sync=True), 8, "fsdp_no_sync"),  # GA 1
        (replace(LORA, sharding="zero2", grad_accumulation=4, fsdp_no_sync=True), 8, "fsdp_no_sync"),
        (
            replace(LORA, sharding="zero3", zero3_impl="deepspeed", grad_accumulation=4, fsdp_no_sync=True),
            8,
            "fsdp_no_sync",
        ),
        (replace(LORA, sharding="zero3", grad_accumulation=4, fsdp_no_sync=True), 1, "fsdp_no_sync"),
        (replace(LORA, sharding="none", lora_in_fsdp_units=True), 8, "lora_in_fsdp_units"),
        # DeepSpeed's reduce buffer: DDP and FSDP have none
        (replace(LORA, ds_reduce_buffer_elements=2e8), 8, "ds_reduce_buffer_elements"),
        (replace(LORA, sharding="zero3", ds_reduce_buffer_elements=2e8), 8, "ds_reduce_buffer_elements"),
        (replace(LORA, sharding="hybrid", ds_reduce_buffer_elements=0), 16, "ds_reduce_buffer_elements"),
        (
            replace(LORA, sharding="zero3", zero3_impl="deepspeed", lora_in_fsdp_units=True),
            8,
            "lora_in_fsdp_units",
        ),
    ],
)
def test_a_knob_that_changes_nothing_is_named_with_why(job: Job, n_gpus: int, name: str) -> None:
    found = dict(knobs_without_effect(job, n_gpus))
    assert list(found) == [name]
    assert found[name]  # a reason, said in words


@pytest.mark.parametrize(
    ("job", "n_gpus"),
    [
        (Job(method="lora", lora_rank=64, lora_targets="qv", lora_dropout=0.1), 1),
        (Job(method="qlora", quant="gptq"), 1),
        (replace(LORA, checkpoint_policy="selective"), 1),
        (Job(method="full", optimizer="adamw", optimizer_impl="fused"), 1),
        (replace(LORA, tensor_parallel=2, sequence_parallel=False), 2),
        (replace(LORA, sharding="zero3", zero3_impl="deepspeed"), 8),
        (replace(LORA, sharding="zero3", full_state_dict_load=True), 8),
        (replace(LORA, ddp_bucket_view=True), 8),
        (Job(method="full", precision="bf16-pure", ddp_bucket_view=True), 8),
        (replace(LORA, sharding="zero3", grad_accumulation=4, fsdp_no_sync=True), 8),
        (replace(LORA, sharding="hybrid", grad_accumulation=4, fsdp_no_sync=True), 16),
        (replace(LORA, sharding="zero3", offload=True, grad_accumulation=4, fsdp_no_sync=True), 8),
        (replace(LORA, sharding="zero3", lora_in_fsdp_units=True), 1),  # NO_SHARD keeps the whole gradient
        (replace(LORA, sharding="zero2", ds_reduce_buffer_elements=2e8), 1),  # DeepSpeed on one GPU too
        (replace(LORA, sharding="zero3", zero3_impl="deepspeed", ds_reduce_buffer_elements=0), 8),
    ],
)
def test_a_knob_that_counts_is_not_named(job: Job, n_gpus: int) -> None:
    assert idle(job, n_gpus) == []


def test_a_ranking_names_only_what_no_sharding_it_may_pick_would_use() -> None:
    accumulating = replace(LORA, grad_accumulation=4, fsdp_no_sync=True, ddp_bucket_view=True)
    placements = [(replace(accumulating, sharding=s), n) for s in ("none", "zero2", "zero3") for n in (1, 2)]
    # zero3 on 2 GPUs uses no_sync, none on 2 GPUs the bucket view: neither is named
    assert knob_warning(placements) is None
    deepspeed = replace(LORA, zero3_impl="deepspeed", lora_in_fsdp_units=True)
    warning = knob_warning(
        [(replace(deepspeed, sharding=s), n) for s in ("none", "zero2", "zero3") for n in (1, 2)]
    )
    assert warning is not None
    assert warning.startswith("--lora-in-fsdp-units changes nothing here: only FSDP's flat units mix")
    assert "--zero3-impl" not in warning  # zero3 under DeepSpeed is a placement it picks


def test_the_flag_is_written_as_typed() -> None:
    job = Job(method="full", lora_rank=64, lora_dropout=0.05, sequence_parallel=False, quant="gptq")
    assert _flag_text(job, "lora_rank") == "--lora-rank 64"
    assert _flag_text(job, "lora_dropout") == "--lora-dropout 0.05"
    assert _flag_text(job, "sequence_parallel") == "--no-sequence-parallel"
    assert _flag_text(job, "quant") == "--quant gptq"
    assert _flag_text(replace(job, fsdp_no_sync=True), "fsdp_no_sync") == "--fsdp-no-sync"
    # a count in exponent form reads as typed: 2e8, 1.5e10, 3e-05 keeps its sign
    assert _flag_text(replace(job, ds_reduce_buffer_elements=2e8), "ds_reduce_buffer_elements") == (
        "--ds-reduce-buffer-elements 2e8"
    )
    assert _flag_text(replace(job, ds_reduce_buffer_elements=1.5e10), "ds_reduce_buffer_elements").endswith(
        " 1.5e10"
    )
    assert _flag_text(replace(job, ds_reduce_buffer_elements=123456.0), "ds_reduce_buffer_elements").endswith(
        " 123456"
    )
    assert _flag_text(replace(job, lora_dropout=3e-5), "lora_dropout") == "--lora-dropout 3e-05"


@pytest.mark.usefixtures("home")
def test_memory_warns_on_stderr_and_answers_as_without_the_knob() -> None:
    args = ["memory", *MODEL, "--gpus", "4", "--sharding", "zero3", "--json"]
    warned = runner.invoke(app, [*args, "--ddp-bucket-view"])
    plain = runner.invoke(app, args)
    assert warned.exit_code == plain.exit_code == 0, warned.output
    (line,) = [line for line in warned.stderr.splitlines() if line.startswith("warning:")]
    assert line == (
        "warning: --ddp-bucket-view changes nothing here: it describes torch DDP's all-reduce "
        "buckets; sharding zero3 shards gradients"
    )
    # stdout stays the answer, parseable, and the knob moved nothing in it
    assert warned.stdout.replace('"ddp_bucket_view": true', '"ddp_bucket_view": false') == plain.stdout
    assert not [line for line in plain.stderr.splitlines() if line.startswith("warning:")]


@pytest.mark.usefixtures("home")
def test_estimate_on_stated_hardware_judges_the_sharding_it_placed() -> None:
    stated = ["estimate", *MODEL, "--tokens", "1M", "--gpu", "H100-SXM", "--gpus", "8"]

    def warnings(result) -> list[str]:
        return [line for line in result.stderr.splitlines() if line.startswith("warning:")]

    # stated DDP on 8 GPUs: the bucket view counts
    assert warnings(runner.invoke(app, [*stated, "--sharding", "none", "--ddp-bucket-view"])) == []
    # placed by the fastest sharding that fits: judged on the sharding the answer ran
    placed = runner.invoke(app, [*stated, "--ddp-bucket-view", "--json"])
    assert placed.exit_code == 0, placed.output
    sharding = json.loads(placed.stdout)["sharding"]
    if sharding == "none":
        assert warnings(placed) == []
    else:
        assert warnings(placed) == [
            "warning: --ddp-bucket-view changes nothing here: it describes torch DDP's all-reduce "
            f"buckets; sharding {sharding} shards gradients"
        ]
    result = runner.invoke(
        app, [*stated, "--sharding", "zero2", "--fsdp-no-sync", "--grad-accumulation", "4"]
    )
    assert result.exit_code == 0, result.output
    assert "warning: --fsdp-no-sync changes nothing here: no_sync is FSDP1's" in result.stderr


@pytest.mark.usefixtures("home")
def test_the_deepspeed_reduce_buffer_is_stated_in_elements_and_moves_the_gradient_buffers() -> None:
    """`--ds-reduce-buffer-elements`: a config's reduce_bucket_size in place of the defaults
    (5e8 under ZeRO-2), priced in the modules' bf16 (2 bytes an element) while backward runs;
    under FSDP it is said to change nothing."""
    args = ["memory", *MODEL, "--gpus", "4", "--seq-len", "8192", "--json"]

    def gradients_gb(*extra: str) -> float:
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        assert "warning:" not in result.stderr
        return json.loads(result.stdout)["memory_gb"]["gradients_gb"]

    default = gradients_gb("--sharding", "zero2")
    stated = gradients_gb("--sharding", "zero2", "--ds-reduce-buffer-elements", "2e8")
    none = gradients_gb("--sharding", "zero2", "--ds-reduce-buffer-elements", "0")
    assert default - none == pytest.approx(5e8 * 2 / 1e9, abs=0.01)  # DeepSpeed's own 5e8 bucket
    assert stated - none == pytest.approx(2e8 * 2 / 1e9, abs=0.01)
    fsdp = runner.invoke(app, [*args, "--sharding", "zero3", "--ds-reduce-buffer-elements", "2e8"])
    assert fsdp.exit_code == 0, fsdp.output
    assert (
        "warning: --ds-reduce-buffer-elements 2e8 changes nothing here: it sizes DeepSpeed's" in fsdp.stderr
    )
    negative = runner.invoke(app, [*args, "--sharding", "zero2", "--ds-reduce-buffer-elements", "-1"])
    assert negative.exit_code == 2 and "--ds-reduce-buffer-elements" in negative.output
