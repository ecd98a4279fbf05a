"""benchmarks/eager_bytes.py: the compare half, which reads a counts.json against finetune.time (the
count half needs torch, transformers and peft; it was run by hand, see benchmarks/README.md)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from benchmarks import eager_bytes as eb
from finetune.time import (
    EAGER_RMS_NORM_BYTES,
    EAGER_ROTARY_BYTES,
    ELEMENTWISE_BACKWARD_RATIO,
    LOSS_BYTES_PER_LOGIT,
    attention_layout_bytes,
)

# what count printed with torch 2.13.0+cpu, transformers 5.25.0 and peft 0.21.2 (2026-12-07)
COUNTED = {
    "torch": "2.13.0+cpu",
    "transformers": "5.25.0",
    "peft": "0.21.2",
    "rms_norm_per_element": 36.09765625,
    "rotary_per_element": 20.0,
    "loss_ops": list(eb.LOSS_OPS),
    "loss_per_logit": 44.016046875,
    "layer_per_token": {"bare": 72690.0, "lora": 120690.0, "lora_fp32": 214578.0, "bare_backward": 155402.0},
}


def test_the_model_side_reads_the_time_models_constants():
    model = eb.model_counts()
    assert model["rms_norm_per_element"] == EAGER_RMS_NORM_BYTES
    assert model["rotary_per_element"] == EAGER_ROTARY_BYTES
    assert model["loss_per_logit"] == LOSS_BYTES_PER_LOGIT["standard"] - 2
    # each adapter adds its scale and add (10 per output element in bf16); the layer's outputs:
    # q and o (hidden 512), k and v (4 × 64), gate and up (1,376), down (512)
    assert model["layer lora"] - model["layer bare"] == 10 * (2 * 512 + 2 * 256 + 2 * 1376 + 512)


def test_the_loss_is_compared_as_its_kernels_move_it():
    # log_softmax reads its input twice (+4); the nll ops only gather the targets (−4 each)
    assert eb.kernel_loss_bytes(COUNTED) == pytest.approx(44.016046875 + 4 - 8)
    # another op list is not adjusted: it is not the path the adjustment describes
    other = {**COUNTED, "loss_ops": ["aten._to_copy.default", "aten.cross_entropy_fused"]}
    assert eb.kernel_loss_bytes(other) == pytest.approx(44.016046875)


def test_the_counts_of_2026_12_agree_with_the_model_within_a_percent():
    rows = eb.compare_rows(COUNTED)
    assert [name for name, _, _ in rows] == [
        "rms_norm_per_element",
        "rotary_per_element",
        "loss_per_logit",
        "layer bare",
        "layer lora",
        "layer lora_fp32",
        "layer bare_backward",
    ]
    for name, counted, model in rows[:-1]:
        # the layer's excess over the model: the cos and sin rows the products read, per-row rsqrt
        assert counted == pytest.approx(model, rel=0.01), name
        assert counted >= model, name
    # the frozen layer's backward: twice the forward with the layout term, 0.7 % over the count
    name, counted, model = rows[-1]
    assert name == "layer bare_backward"
    assert counted == pytest.approx(model, rel=0.01)


def test_the_backward_is_priced_at_the_ratio_times_the_forward_with_its_layout_term():
    model = eb.model_counts()
    layout = attention_layout_bytes(eb.layer_model())
    assert model["layer bare_backward"] == ELEMENTWISE_BACKWARD_RATIO * (model["layer bare"] + layout)
    # without the layout term the ratio would price the counted backward 7 % short: the
    # backward's own copies (rotate_half's slice backward, contiguous's clone) are what it covers
    assert (
        ELEMENTWISE_BACKWARD_RATIO * model["layer bare"] < 0.94 * COUNTED["layer_per_token"]["bare_backward"]
    )


def test_an_old_count_without_the_backward_compares_what_it_has():
    old = {
        **COUNTED,
        "layer_per_token": {k: v for k, v in COUNTED["layer_per_token"].items() if k != "bare_backward"},
    }
    assert "layer bare_backward" not in [name for name, _, _ in eb.compare_rows(old)]


def test_a_count_short_of_the_model_shows_as_a_negative_difference(tmp_path: Path, capsys):
    short = {**COUNTED, "rotary_per_element": 14.0}
    path = tmp_path / "counts.json"
    path.write_text(json.dumps(short))
    assert eb.main(["compare", str(path)]) == 0
    out = capsys.readouterr().out
    assert "| rotary_per_element | 14.0 | 20.0 | -30.0 % |" in out
    assert "torch 2.13.0+cpu, transformers 5.25.0, peft 0.21.2" in out
    assert "the loss's ops: aten._to_copy.default, aten._log_softmax.default" in out


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_count_without_torch_says_where_to_run(tmp_path: Path, capsys):
    assert eb.main(["count", "--out", str(tmp_path / "c.json")]) == 2
    assert "needs torch, transformers and peft" in capsys.readouterr().err
    assert not (tmp_path / "c.json").exists()
