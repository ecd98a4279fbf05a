"""`gpucost models`, `estimate --gpu`, any Hugging Face id for --model, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from connectors.http import make_client
from flows.cli import app
from flows.hf_configs import ConfigNotFound, cached_config, fetch_config, resolve_config

runner = CliRunner()
TINY = {
    "model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
    "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
    "max_position_embeddings": 4096, "tie_word_embeddings": False,
}  # fmt: skip


def _cache(root: Path, model_id: str, config: dict) -> Path:
    repo = root / "hub" / f"models--{model_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps(config))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    return root


def test_models_lists_the_seeds_with_parameter_counts() -> None:
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 0, result.output
    assert "meta-llama/Llama-3.1-8B" in result.output and "8.03B" in result.output


def test_estimate_on_stated_hardware_needs_no_warehouse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))  # an empty home: no warehouse at all
    args = ["estimate", "--model", "Llama-3.1-8B", "--method", "lora", "--tokens", "10M"]
    args += ["--gpu", "H100-SXM", "--gpus", "8", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["n_gpus"] == 8 and payload["fits"] and payload["cost_usd"] is None
    assert payload["tokens_per_s"] > 0
    assert payload["hours"] == pytest.approx(10e6 / payload["tokens_per_s"] / 3600)
    assert payload["totals_gb"]["device_gb"] == payload["memory_gb"]["total_gb"]
    priced = json.loads(runner.invoke(app, [*args, "--price-per-gpu-hour", "2"]).output)
    doubled = json.loads(runner.invoke(app, [*args, "--price-per-gpu-hour", "4"]).output)
    assert doubled["cost_usd"] == pytest.approx(2 * priced["cost_usd"])
    # per-second billing: hours (rounded up to the second) × price × GPUs
    assert priced["cost_usd"] == pytest.approx(priced["hours"] * 2 * 8, abs=2 * 8 / 3600)


def test_two_nodes_need_more_gpus_not_more_memory_per_gpu() -> None:
    base = ["estimate", "--model", "Llama-3.1-70B", "--method", "full", "--tokens", "10M", "--json"]
    one = json.loads(runner.invoke(app, [*base, "--gpu", "H100-SXM", "--gpus", "8"]).output)
    two = json.loads(runner.invoke(app, [*base, "--gpu", "H100-SXM", "--gpus", "8", "--nodes", "2"]).output)
    assert two["n_gpus"] == 16 and two["memory_gb"]["total_gb"] < one["memory_gb"]["total_gb"]


def test_estimate_compile_is_faster_and_leaves_memory_as_it_is() -> None:
    # a job that fits the card: one that does not gets no time (as in the mart)
    base = ["estimate", "--model", "Llama-3.2-1B", "--method", "lora", "--tokens", "10M", "--json"]
    base += ["--gpu", "RTX4090", "--micro-batch", "2"]
    eager = json.loads(runner.invoke(app, base).output)
    compiled = json.loads(runner.invoke(app, [*base, "--compile"]).output)
    assert compiled["tokens_per_s"] > eager["tokens_per_s"] and compiled["hours"] < eager["hours"]
    assert compiled["memory_gb"] == eager["memory_gb"]
    assert json.loads(runner.invoke(app, [*base, "--no-compile"]).output) == eager


def test_unknown_gpu_is_one_line() -> None:
    result = runner.invoke(app, ["estimate", "--model", "Llama-3.1-8B", "--gpu", "H1OO-SXM"])
    assert result.exit_code == 1
    assert "no GPU 'H1OO-SXM'" in result.output and "Traceback" not in result.output


def test_instruct_variant_resolves_to_its_base_seed() -> None:
    result = runner.invoke(app, ["memory", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["model_id"] == "meta-llama/Llama-3.1-8B"


def test_any_hf_id_resolves_from_the_local_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(_cache(tmp_path, "example/tiny-llama", TINY)))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    result = runner.invoke(app, ["memory", "--model", "example/tiny-llama", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["model_id"] == "example/tiny-llama"


def test_cached_config_reads_the_snapshot_refs_main_names(tmp_path: Path) -> None:
    root = _cache(tmp_path, "org/m", TINY)
    assert cached_config("org/m", root / "hub") == TINY
    assert cached_config("org/other", root / "hub") is None


def test_offline_and_not_cached_fails_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    result = runner.invoke(app, ["memory", "--model", "example/not-here"])
    assert result.exit_code == 1
    assert "HF_HUB_OFFLINE" in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def _client(handler) -> httpx.Client:
    return make_client(transport=httpx.MockTransport(handler), retries=0)


def test_fetch_from_the_hub_with_a_mock_transport() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=TINY)

    with _client(handler) as client:
        assert fetch_config("org/m", client, token="secret") == TINY
    assert str(seen[0].url) == "https://huggingface.co/org/m/resolve/main/config.json"
    assert seen[0].headers["Authorization"] == "Bearer secret"


@pytest.mark.parametrize(("status", "words"), [(404, "no model"), (401, "gated"), (500, "HTTP 500")])
def test_hub_errors_say_what_to_do(status: int, words: str) -> None:
    with _client(lambda r: httpx.Response(status)) as client, pytest.raises(ConfigNotFound, match=words):
        fetch_config("org/m", client)


def test_unreachable_hub_is_an_offline_error(tmp_path: Path) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("no route", request=request)

    with _client(handler) as client, pytest.raises(ConfigNotFound, match="offline"):
        resolve_config("org/m", environ={"HF_HOME": str(tmp_path)}, client=client)


@pytest.mark.parametrize("tokens", ["inf", "nan", "-5M", "0", "1e400", "lots"])
def test_bad_tokens_are_one_line(tokens: str) -> None:
    result = runner.invoke(
        app, ["estimate", "--model", "Llama-3.1-8B", "--gpu", "H100-SXM", "--tokens", tokens]
    )
    assert result.exit_code == 2  # the flag's value is wrong: a usage error
    assert "--tokens" in result.output and "Traceback" not in result.output


def test_config_with_zero_heads_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "num_attention_heads": 0}))
    result = runner.invoke(app, ["memory", "--config", str(path)])
    assert result.exit_code == 1
    assert "attention heads" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size"])
@pytest.mark.parametrize("value", ["1e400", "-1e400"])
def test_a_config_with_an_infinite_size_is_one_line(key: str, value: str, tmp_path: Path) -> None:
    """JSON's 1e400 reads as infinity, which has no int(): it was an OverflowError traceback. The
    config is now refused as it is read (flows/hf_configs.parse_config, the same limits the planner
    applies to a pasted config), naming the file and the number, before any field is looked at."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, key: 0}).replace(f'"{key}": 0', f'"{key}": {value}'))
    result = runner.invoke(app, ["memory", "--config", str(path)])
    assert result.exit_code == 1, result.output
    assert f"config.json holds the number {value} (beyond a finite float)" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
