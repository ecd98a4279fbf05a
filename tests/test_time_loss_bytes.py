"""The standard loss's traffic (issue 23): transformers' causal-LM loss, `logits.float()` then
F.cross_entropy, runs seven kernels over the b·s·V logits. The count left out one: nll_loss's
backward zero-fills a dense fp32 gradient the size of the logits before log_softmax's backward
reads it (PyTorch aten/src/ATen/native/cuda/Loss.cu: `grad_input.zero_()`): 42 bytes per logit,
not 38."""

from __future__ import annotations

from dataclasses import replace

import pytest

from finetune import Job
from finetune.time import LOSS_BYTES_PER_LOGIT, step_time
from tests.factories import H100
from warehouse.seed_models import load_models

LLAMA_1B = load_models()["meta-llama/Llama-3.2-1B"]
BF16, FP32 = 2, 4


def test_the_standard_loss_moves_the_bytes_of_its_seven_kernels() -> None:
    head_writes_logits = BF16
    upcast = BF16 + FP32
    log_softmax = 2 * FP32 + FP32  # reads for the row max and the sum of exponentials, one write
    nll_backward_zero_fill = FP32
    log_softmax_backward = 2 * FP32 + FP32  # reads its output and the incoming gradient
    cast_back = FP32 + BF16
    total = (
        head_writes_logits + upcast + log_softmax + nll_backward_zero_fill + log_softmax_backward + cast_back
    )
    assert total == LOSS_BYTES_PER_LOGIT["standard"] == 42
    # torchtune's chunked loss runs the same kernels one chunk at a time
    assert LOSS_BYTES_PER_LOGIT["chunked"] == LOSS_BYTES_PER_LOGIT["standard"]


def test_the_loss_term_is_the_count_over_the_logits_at_streaming_bandwidth() -> None:
    job = Job(method="lora", seq_len=2048, micro_batch=2)
    standard = step_time(LLAMA_1B, job, H100, 1, None, True)
    fused = step_time(LLAMA_1B, replace(job, loss="fused"), H100, 1, None, True)
    ratio = LOSS_BYTES_PER_LOGIT["standard"] / LOSS_BYTES_PER_LOGIT["fused"]
    assert standard.loss_s == pytest.approx(fused.loss_s * ratio)
    logits = job.seq_len * job.micro_batch * LLAMA_1B.vocab_size
    # 42 bytes per logit of a 128,256-word vocabulary, at 90 % of 3,350 GB/s
    assert standard.loss_s == pytest.approx(42 * logits / (0.9 * 3350e9))
