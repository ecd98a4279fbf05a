"""The small helpers that let the type checker follow the code, and what they refuse."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from connectors.base import child
from connectors.http import _sync_stream
from finetune.architecture import _count, model_from_hf_config
from finetune.job import _choice
from warehouse.seed_models import load_finetune_jobs


def test_child_is_the_object_under_a_key_or_an_empty_one():
    assert child({"price": {"hourly": 1.5}}, "price") == {"hourly": 1.5}
    assert child({"price": None}, "price") == {}
    assert child({"price": [1.5]}, "price") == {}  # another shape reads as absent, not as an error
    assert child({}, "price") == {}


class _AsyncOnly(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"x"


def test_a_sync_transport_wrapper_refuses_an_async_only_stream():
    assert isinstance(_sync_stream(httpx.Response(200, content=b"ok")), httpx.SyncByteStream)
    with pytest.raises(TypeError, match="_AsyncOnly is not a sync byte stream"):
        _sync_stream(httpx.Response(200, stream=_AsyncOnly()))


def test_a_seed_row_value_outside_its_literal_is_refused_naming_the_column():
    assert _choice({"method": "lora"}, "method", ("full", "lora")) == "lora"
    assert _choice({}, "loss", ("standard", "chunked"), "chunked") == "chunked"  # a derived value
    with pytest.raises(ValueError, match=r"method='lorra' is not one of \['full', 'lora'\]; fix the seed"):
        _choice({"method": "lorra"}, "method", ("full", "lora"))


def test_every_seed_job_reads_through_the_checked_choices():
    jobs = load_finetune_jobs()
    assert jobs and all(job.job.method in ("full", "lora", "qlora") for job in jobs)


def test_a_config_count_is_an_int_or_unset():
    assert _count(8) == 8 and _count(8.0) == 8 and _count("8") == 8
    assert _count(None) is None and _count(0) is None and _count("") is None
    with pytest.raises(ValueError, match=r"expected a number in config\.json"):
        _count([8])
    with pytest.raises(ValueError, match="expected a number"):
        _count(True)


def test_a_config_with_experts_as_strings_still_reads():
    config = {
        "model_type": "mixtral",
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
        "vocab_size": 100,
        "num_local_experts": "8",
        "num_experts_per_tok": 2,
    }
    spec = model_from_hf_config(config, "x/moe")
    assert spec.num_experts == 8 and spec.experts_per_token == 2
