"""`gpucost serve`'s JSON API against the replay warehouse, over HTTP on a loopback port.

Every endpoint answers what its CLI twin prints with --json for the same fields; every bad field
is a 422 naming the flag; nothing accepts a write, a path or a URL; bodies, hosts and compute are
bounded. The server runs in this process (tests/served.py), started and stopped by the module.
"""

from __future__ import annotations

import hashlib
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from flows import web
from flows.cli import app as cli
from flows.cli_finetune import estimate as estimate_command
from flows.hf_configs import MAX_CONFIG_BYTES
from flows.job_options import JOB_OPTIONS
from flows.options_schema import command_fields
from tests.replay_warehouse import replay_only_home
from tests.served import HUB_MODEL, TINY_CONFIG, hub_cache, running, serve_env

runner = CliRunner()
ENDPOINTS = ("/api/estimate", "/api/memory", "/api/prices", "/api/history", "/api/status")
JOB = {"model": "Llama-3.1-8B", "method": "qlora", "tokens": "50M", "seq_len": "1024"}
JOB_ARGS = ["--model", "Llama-3.1-8B", "--method", "qlora", "--tokens", "50M", "--seq-len", "1024"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return replay_only_home(tmp_path_factory.getbasetemp())


@pytest.fixture(scope="module")
def served(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_env(home, hub_cache(tmp_path_factory.mktemp("hub"))), running(web.create_app()) as url:
        yield url


@pytest.fixture(scope="module")
def client(served: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served, timeout=60, trust_env=False) as http:
        yield http


@pytest.fixture(scope="module")
def warehouse_digest(home: Path) -> str:
    """The replay warehouse's bytes before any request of this module."""
    return hashlib.sha256((home / "replay" / "warehouse.duckdb").read_bytes()).hexdigest()


def cli_json(*args: str) -> Any:
    result = runner.invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def cli_json_of(command: str, fields: dict[str, str]) -> Any:
    """`gpucost command --json` given the API's query `fields` as flags (price_per_gpu_hour is
    --price-per-gpu-hour)."""
    flags = [part for name, value in fields.items() for part in ("--" + name.replace("_", "-"), value)]
    return cli_json(command, *flags)


def same_rows(api: list[dict[str, Any]], printed: list[dict[str, Any]]) -> None:
    """Equal, but for the age of each price, which moves between the two asks."""
    assert len(api) == len(printed) > 0
    for a, p in zip(api, printed, strict=True):
        assert a.pop("price_age_hours") == pytest.approx(p.pop("price_age_hours"), abs=0.05)
        assert a == p


# -- the answers equal the CLI's ---------------------------------------------------------------


def test_estimate_answers_what_gpucost_estimate_json_prints(client, warehouse_digest):
    answer = client.get("/api/estimate", params=JOB)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["kind"] == "ranking" and body["notice"].startswith("sample data")
    same_rows(body["offers"], cli_json("estimate", *JOB_ARGS))


def test_estimate_with_spot_and_filters_answers_what_the_cli_prints(client):
    fields = {**JOB, "spot": "true", "offer_gpu": "H100,A100", "top": "5", "show_all": "true"}
    body = client.get("/api/estimate", params=fields).json()
    printed = cli_json("estimate", *JOB_ARGS, "--spot", "--offer-gpu", "H100,A100", "--top", "5", "--all")
    same_rows(body["offers"], printed)
    assert any(o["is_spot"] for o in body["offers"])


def test_a_post_body_answers_what_the_query_string_does(client):
    by_get = client.get("/api/estimate", params=JOB).json()
    by_post = client.post("/api/estimate", json={**JOB, "seq_len": 1024}).json()
    same_rows(by_post["offers"], by_get["offers"])


def test_estimate_says_memory_by_component_the_sharding_and_the_bill_items(client):
    body = client.get("/api/estimate", params=JOB).json()
    best = body["offers"][0]
    memory = body["memory"]
    assert memory["sharding"] == best["sharding"] and memory["n_gpus"] == best["gpus_used"]
    # the breakdown is the one the ranked row's GB/GPU came from
    assert memory["memory_gb"]["total_gb"] == pytest.approx(best["total_gb"])
    assert sum(v for k, v in memory["memory_gb"].items() if k != "total_gb") == pytest.approx(
        best["total_gb"]
    )
    from finetune.cost import BILL_ITEMS

    assert body["bill_items"] == list(BILL_ITEMS)
    for item in BILL_ITEMS:
        assert f"{item}_usd" in best
    known = [best[f"{item}_usd"] for item in BILL_ITEMS if best[f"{item}_usd"] is not None]
    assert best["total_usd"] == pytest.approx(sum(known))


def test_estimate_says_why_each_other_offer_was_left_out(client):
    # a 70B LoRA fits no small GPU: those offers are left out saying so, with the numbers
    body = client.get("/api/estimate", params={"model": "Llama-3.1-70B", "tokens": "10M"}).json()
    assert body["excluded_total"] == len(body["excluded"]) or len(body["excluded"]) == web.EXCLUDED_ROWS
    assert body["counts"]["offers"] == body["counts"]["priced"] + (
        body["excluded_total"] - body["counts"]["folded"]
    )
    reasons = [row["excluded_reason"] for row in body["excluded"]]
    assert all(reasons)
    assert any(r.startswith("does not fit: needs ") and "GB usable" in r for r in reasons)
    ranked = {(o["provider"], o["instance_type"], o["region"]) for o in body["offers"]}
    assert not ranked & {(r["provider"], r["instance_type"], r["region"]) for r in body["excluded"]}


def test_a_job_nothing_can_hold_is_an_answer_that_says_why(client):
    body = client.get("/api/estimate", params={"model": "Llama-3.1-405B", "method": "full"}).json()
    assert body["offers"] == [] and "no current offer can hold this job" in body["why"]


def test_estimate_on_stated_hardware_answers_what_the_cli_prints(client):
    fields = {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "gpus": "8", "price_per_gpu_hour": "2.5"}
    body = client.get("/api/estimate", params=fields).json()
    printed = cli_json_of("estimate", fields)
    assert body["kind"] == "stated" and body["stated"] == printed


def test_memory_answers_what_gpucost_memory_json_prints(client):
    fields = {"model": "Qwen2.5-7B", "method": "full", "gpus": "8", "sharding": "zero3"}
    body = client.get("/api/memory", params=fields).json()
    printed = cli_json_of("memory", fields)
    assert body.pop("warning") is None
    assert body == printed


def test_the_deepspeed_reduce_buffer_is_a_field_of_the_api_as_of_the_cli(client):
    fields = {"model": "Qwen2.5-7B", "gpus": "4", "sharding": "zero2", "ds_reduce_buffer_elements": "4e8"}
    body = client.get("/api/memory", params=fields).json()
    printed = cli_json_of("memory", fields)
    assert body.pop("warning") is None
    assert body == printed and body["job"]["ds_reduce_buffer_elements"] == 4e8
    refused = client.get("/api/memory", params={**fields, "ds_reduce_buffer_elements": "-1"})
    assert refused.status_code == 422 and "ds_reduce_buffer_elements" in refused.text


def test_a_pasted_config_answers_as_the_same_config_json_given_to_the_cli(client, tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_CONFIG), encoding="utf-8")
    pasted = client.post("/api/estimate", json={"config_json": json.dumps(TINY_CONFIG), "tokens": "20M"})
    assert pasted.status_code == 200, pasted.text
    assert pasted.json()["model_id"] == HUB_MODEL
    same_rows(pasted.json()["offers"], cli_json("estimate", "--config", str(config), "--tokens", "20M"))
    memory = client.get("/api/memory", params={"config_json": json.dumps(TINY_CONFIG)}).json()
    assert memory["memory_gb"] == cli_json("memory", "--config", str(config))["memory_gb"]


def test_a_hugging_face_id_is_read_from_the_local_hub_cache(client):
    body = client.get("/api/memory", params={"model": HUB_MODEL}).json()
    assert body["model_id"] == HUB_MODEL and body["params"] > 0


def test_an_uncached_hugging_face_id_with_the_hub_off_says_what_to_do(client):
    answer = client.get("/api/memory", params={"model": "gpucost-tests/not-cached"})
    assert answer.status_code == 422
    (error,) = answer.json()["detail"]
    assert error["field"] == "model" and "HF_HUB_OFFLINE" in error["message"]


def test_a_long_sequence_is_answered_with_the_clis_warning(client):
    body = client.get("/api/memory", params={"model": HUB_MODEL, "seq_len": "8192"}).json()
    assert body["warning"].startswith(f"--seq-len 8192 is beyond {HUB_MODEL}'s context length of 4096")


def test_an_option_that_changes_nothing_is_answered_with_the_clis_warning(client):
    # the same line the CLI prints on stderr, in the answer's one `warning`
    body = client.get("/api/memory", params={"model": HUB_MODEL, "method": "full", "lora_rank": "64"}).json()
    assert body["warning"] == "--lora-rank 64 changes nothing here: full fine-tuning has no LoRA adapters"
    assert client.get("/api/memory", params={"model": HUB_MODEL}).json()["warning"] is None


def test_prices_answers_what_gpucost_prices_json_prints(client):
    body = client.get("/api/prices", params={"gpu": "H100", "spot": "true"}).json()
    printed = cli_json("prices", "--gpu", "H100", "--spot")
    same_rows(body["rows"], printed)
    assert body["why"] is None and body["notice"].startswith("sample data")


def test_prices_that_match_nothing_say_why(client):
    body = client.get("/api/prices", params={"gpu": "H100", "max_price": "0.01"}).json()
    assert body["rows"] == [] and "max-price" in body["why"]


def test_history_answers_what_gpucost_history_json_prints(client):
    body = client.get("/api/history", params={"gpu": "H100-SXM", "since": "90d"}).json()
    assert body["rows"] == cli_json("history", "--gpu", "H100-SXM", "--since", "90d")
    assert body["summary"] and {s["gpu_name"] for s in body["summary"]} == {"H100-SXM"}


def test_status_lists_each_providers_last_run_and_freshness(client, home):
    body = client.get("/api/status").json()
    from warehouse.db import connect

    con = connect(home / "replay" / "warehouse.duckdb", read_only=True)
    providers = {p for (p,) in con.execute("select distinct provider from ops.provider_runs").fetchall()}
    con.close()
    assert {row["provider"] for row in body["providers"]} == providers
    assert {p["provider"] for p in body["freshness"]["providers"]} == providers


# -- bad input: one clear error per bad field, HTTP 422 ------------------------------------------

BAD = [
    ("/api/estimate", {"model": "Llama-3.1-8B", "micro_batch": "0"}, "micro_batch", "--micro-batch"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "method": "dpo"}, "method", "'full', 'lora' or 'qlora'"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "colour": "red"}, "colour", "no such option"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "tokens": "lots"}, "tokens", "write a count"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "epochs": "0"}, "epochs", "--epochs"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "max_price": "inf"}, "max_price", "finite"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "padding_efficiency": "2"}, "padding_efficiency", "1"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "checkpoint_every": "often"}, "checkpoint_every", "30m"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "idle": "a while"}, "idle", "--idle"),
    (
        "/api/estimate",
        {"model": "Llama-3.1-8B", "download": "adapter", "method": "full"},
        "download",
        "merged",
    ),
    ("/api/estimate", {"model": "Llama-3.1-8B", "gpus": "8"}, "gpus", "add --gpu NAME"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "gpu": "H100-SXM", "provider": "aws"}, "provider", "--gpu"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "gpu": "H1000"}, "gpu", "no GPU 'H1000'"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "mean_len": "200"}, "mean_len", "--max-len"),
    ("/api/estimate", {"model": "Llama-3.1-8B", "offer_gpu": "TPU9"}, "offer_gpu", "--offer-gpu"),
    ("/api/estimate", {}, "model", "give exactly one of --model"),
    ("/api/estimate", {"model": "Llama-3.1-9B"}, "model", "no model 'Llama-3.1-9B'"),
    # only the model and the job together refuse it: Gemma 2's soft-cap forces eager on the plain stack
    ("/api/estimate", {"model": "google/gemma-2-9b", "doc_len": "300"}, "doc_len", "kernels='fused'"),
    ("/api/memory", {"model": "google/gemma-2-9b", "doc_len": "300"}, "doc_len", "eager"),
    ("/api/memory", {"model": "Llama-3.1-8B", "sharding": "hybrid"}, "sharding", "--sharding hybrid"),
    ("/api/memory", {"model": "Llama-3.1-8B", "gpus": "-1"}, "gpus", "--gpus"),
    ("/api/prices", {"spot": "true", "on_demand": "true"}, "spot", "exclusive"),
    ("/api/prices", {"min_vram": "-5"}, "min_vram", "--min-vram"),
    ("/api/prices", {"spot": "maybe"}, "spot", "--spot"),
    ("/api/history", {}, "gpu", "required"),
    ("/api/history", {"gpu": "H100", "since": "tomorrow"}, "since", "--since"),
    ("/api/status", {"verbose": "1"}, "verbose", "no such option"),
]


@pytest.mark.parametrize(("path", "fields", "field", "says"), BAD)
def test_a_bad_field_is_a_422_naming_it(client, path, fields, field, says):
    answer = client.get(path, params=fields)
    assert answer.status_code == 422, answer.text
    errors = answer.json()["detail"]
    named = [e for e in errors if e["field"] == field]
    assert named, errors
    assert says in named[0]["message"]


def test_every_bad_field_is_named_once_not_only_the_first(client):
    types = client.get("/api/estimate", params={"model": "x", "micro_batch": "0", "lora_rank": "0"}).json()
    assert sorted(e["field"] for e in types["detail"]) == ["lora_rank", "micro_batch"]
    rules = client.get(
        "/api/estimate",
        params={"model": "Llama-3.1-8B", "tokens": "lots", "checkpoint_every": "often", "idle": "long"},
    ).json()
    assert sorted(e["field"] for e in rules["detail"]) == ["checkpoint_every", "tokens"]


PASTED = [
    ('{"hidden_size": 1e400, "num_hidden_layers": 2}', "beyond a finite float"),
    ('{"hidden_size": NaN}', "NaN"),
    ('{"hidden_size": Infinity}', "Infinity"),
    ('{"hidden_size": 1234567890123456789012}', "digits"),
    (json.dumps({**TINY_CONFIG, "num_hidden_layers": 10**9}), "parameters is beyond any known model"),
    (
        json.dumps(
            {**TINY_CONFIG, "num_hidden_layers": 10**9, "hidden_size": 1, "intermediate_size": 1}
            | {"num_attention_heads": 1, "num_key_value_heads": 1, "vocab_size": 1}
        ),
        "layers 1,000,000,000 is beyond any model this estimates (at most 1,024)",
    ),
    (json.dumps({**TINY_CONFIG, "vocab_size": 10**8}), "vocab_size"),
    ("[1, 2, 3]", "not a JSON object"),
    ("{not json", "not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, "not a config.json"),
    (json.dumps({"hidden_size": 8}), "cannot size the model"),
]


@pytest.mark.parametrize(("text", "says"), PASTED)
def test_a_pasted_config_is_parsed_with_limits(client, text, says):
    answer = client.post("/api/memory", json={"config_json": text})
    assert answer.status_code == 422, answer.text
    (error,) = answer.json()["detail"]
    assert error["field"] == "config_json" and says in error["message"], error


def test_a_pasted_config_over_its_size_is_refused(client):
    padded = json.dumps({**TINY_CONFIG, "notes": "x" * MAX_CONFIG_BYTES})
    answer = client.post("/api/memory", json={"config_json": padded})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["field"] == "config_json"


def test_a_model_and_a_pasted_config_together_are_one_too_many(client):
    answer = client.post(
        "/api/memory", json={"model": "Llama-3.1-8B", "config_json": json.dumps(TINY_CONFIG)}
    )
    assert answer.status_code == 422 and "not both" in answer.json()["detail"][0]["message"]


def test_a_body_over_the_cap_is_refused_before_it_is_read(client):
    big = b'{"config_json": "' + b"x" * (web.MAX_BODY_BYTES + 1) + b'"}'
    answer = client.post("/api/estimate", content=big, headers={"content-type": "application/json"})
    assert answer.status_code == 413 and "bytes" in answer.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it arrives
        for _ in range(web.MAX_BODY_BYTES // 65536 + 2):
            yield b"x" * 65536

    streamed = client.post("/api/estimate", content=chunks(), headers={"content-type": "application/json"})
    assert streamed.status_code == 413


# -- read-only, no URL, bounded ------------------------------------------------------------------


# the page, its docs and schema are served too: each refuses a write like the API does
PAGES = ("/", "/docs", "/openapi.json")


@pytest.mark.parametrize("path", [*ENDPOINTS, *PAGES])
def test_no_endpoint_accepts_a_write(client, path):
    for method in ("PUT", "PATCH", "DELETE"):
        assert client.request(method, path, json={}).status_code == 405
    if path not in ("/api/estimate", "/api/memory"):
        assert client.post(path, json={}).status_code == 405


def test_the_schema_lists_only_reads_and_no_refresh(client):
    # what the server answers is what its schema lists (and the three pages): nothing else to
    # call, no refresh or upload endpoint; POST only where a pasted config.json needs a body
    schema = client.get("/openapi.json").json()
    methods = {path: set(ops) for path, ops in schema["paths"].items()}
    assert methods == {
        "/api/estimate": {"get", "post"},
        "/api/memory": {"get", "post"},
        "/api/prices": {"get"},
        "/api/history": {"get"},
        "/api/status": {"get"},
    }
    for path in ("/api/refresh", "/refresh", "/api/pull", "/api/sql", "/api/export"):
        assert client.get(path).status_code == 404
        assert client.post(path, json={}).status_code == 404


# one field per endpoint that could carry a URL or a path
OUTBOUND = [
    ("/api/estimate", {"model": "https://evil.example/org/model"}),
    ("/api/estimate", {"model": "../../etc/passwd"}),
    ("/api/memory", {"model": "http://169.254.169.254/latest"}),
    ("/api/memory", {"config": "/etc/passwd"}),
    ("/api/prices", {"gpu": "http://evil.example/gpus"}),
    ("/api/history", {"gpu": "file:///etc/passwd"}),
    ("/api/status", {"url": "http://evil.example/"}),
]


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every address a socket of this process connects to while the test runs (the server runs
    in this process's threads, so an outbound fetch of its would be recorded too)."""
    attempts: list[object] = []
    real_connect = socket.socket.connect

    def recording(self: socket.socket, address: object) -> object:
        attempts.append(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", recording)
    return attempts


def only_to_the_server(client: httpx.Client, attempts: list[object]) -> bool:
    """The only connections made are the test's own to the server."""
    server_port = int(str(client.base_url).rsplit(":", 1)[1].rstrip("/"))
    return all(isinstance(a, tuple) and a[1] == server_port for a in attempts)


@pytest.mark.parametrize(("path", "fields"), OUTBOUND)
def test_no_endpoint_fetches_a_url_or_reads_a_path_it_is_given(client, path, fields, connections):
    answer = client.get(path, params=fields)
    assert answer.status_code == 422, answer.text
    assert only_to_the_server(client, connections), connections


# the two endpoints that take a JSON body: a URL inside it reaches no host either
OUTBOUND_BODIES = [
    ("/api/estimate", {"model": "https://evil.example/org/model"}, 422),
    ("/api/memory", {"model": "http://169.254.169.254/latest"}, 422),
    # a pasted config naming a URL as its model: the text is parsed, the URL is only a name
    (
        "/api/memory",
        {"config_json": json.dumps({**TINY_CONFIG, "_name_or_path": "https://evil.example/org/model"})},
        200,
    ),
    (
        "/api/estimate",
        {"config_json": json.dumps({**TINY_CONFIG, "_name_or_path": "http://169.254.169.254/x"})},
        200,
    ),
]


@pytest.mark.parametrize(("path", "body", "status"), OUTBOUND_BODIES)
def test_no_body_makes_the_server_fetch_a_url(client, path, body, status, connections):
    answer = client.post(path, json=body)
    assert answer.status_code == status, answer.text
    assert only_to_the_server(client, connections), connections


def test_hosts_other_than_loopback_names_are_refused(client):
    # a page elsewhere reaching this server by DNS rebinding sends its own host name
    assert client.get("/api/status", headers={"host": "evil.example"}).status_code == 400


def test_the_answers_leave_the_warehouse_as_it_was(client, home, warehouse_digest):
    for path in ENDPOINTS:
        client.get(path, params={"gpu": "H100"} if path == "/api/history" else None)
    client.post("/api/estimate", json=JOB)
    after = hashlib.sha256((home / "replay" / "warehouse.duckdb").read_bytes()).hexdigest()
    assert after == warehouse_digest


def test_an_estimate_over_its_compute_budget_is_refused_saying_what_to_do(home, tmp_path):
    with serve_env(home, tmp_path), running(web.create_app(budget_seconds=0.001)) as url:
        answer = httpx.get(f"{url}/api/estimate", params=JOB, timeout=60, trust_env=False)
    assert answer.status_code == 503
    assert "compute budget" in answer.json()["detail"] and "--budget-seconds" in answer.json()["detail"]


def test_a_busy_server_refuses_past_its_concurrency():
    budget = web.Budget(0.05, concurrent=1)
    budget._slots.acquire()  # one estimate running
    try:
        with pytest.raises(web.Refused) as refused, budget.spend(None):
            pass
    finally:
        budget._slots.release()
    assert refused.value.status == 503 and "busy" in refused.value.message
    with budget.spend(None):  # once it is done, the next one runs
        pass


# -- the schema, the page ------------------------------------------------------------------------


def test_the_api_takes_every_option_of_gpucost_estimate(client):
    schema = client.get("/openapi.json").json()
    names = {p["name"] for p in schema["paths"]["/api/estimate"]["get"]["parameters"]}
    options = {f.name for f in command_fields(estimate_command, frozenset({"config"}))}
    # all but the file path (a pasted config instead) and the output formats
    assert names == (options - {"config", "bill", "as_json"}) | {"config_json"}
    assert set(JOB_OPTIONS) - {"config"} <= names
    assert set(ENDPOINTS) <= set(schema["paths"])


def test_docs_list_every_endpoint_and_field_without_a_cdn(client):
    page = client.get("/docs").text
    for path in ENDPOINTS:
        assert f"GET {path}</code>" in page
    assert "micro_batch" in page and "config_json" in page
    assert "cdn" not in page.lower() and "<script" not in page


def test_the_page_has_a_job_form_with_a_control_per_field(client):
    page = client.get("/").text
    assert 'id="plan-form"' in page and 'id="view-plan"' in page
    for field in web.ESTIMATE_FIELDS:
        assert f'name="{field.name}"' in page, field.name
    assert 'name="config_json"' in page


def test_exposure_is_said_for_any_host_but_loopback():
    assert web.exposure("127.0.0.1", 8080) is None and web.exposure("localhost", 8080) is None
    said = web.exposure("0.0.0.0", 8080, 5)
    assert said is not None and "0.0.0.0:8080" in said and "no login" in said and "5 s budget" in said


def test_serve_refuses_a_port_in_use_in_one_line():
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        result = runner.invoke(cli, ["serve", "--port", str(taken.getsockname()[1])])
    finally:
        taken.close()
    assert result.exit_code == 1 and "pick another with --port" in result.output


def test_gpucost_serve_starts_on_loopback_answers_and_stops_on_sigterm(home, tmp_path):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    env = {
        **dict(__import__("os").environ),
        "GPUCOST_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "HF_HUB_CACHE": str(tmp_path),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "flows.cli", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/status", timeout=5, trust_env=False)
                break
            except httpx.TransportError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert answer.status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        out, errors = process.communicate(timeout=30)
    # uvicorn shuts down, then ends by the signal it caught (its exit status says SIGTERM)
    assert process.returncode in (0, -signal.SIGTERM), errors
    assert f"http://127.0.0.1:{port}/" in out and "sample data" in errors
    assert "warning" not in errors  # loopback exposes nothing


def test_serve_on_all_interfaces_says_what_it_exposes_first(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))  # no warehouse: said, and served anyway
    started: list[dict[str, Any]] = []
    monkeypatch.setattr(web, "serve", lambda sock, **options: started.append(options))
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    # bound, never listening: nothing is reachable while the test runs
    result = runner.invoke(cli, ["serve", "--host", "0.0.0.0", "--port", str(port), "--budget-seconds", "3"])
    assert result.exit_code == 0, result.output
    assert "0.0.0.0" in result.stderr and "no login" in result.stderr and "3 s budget" in result.stderr
    assert started == [{"budget_seconds": 3.0, "any_host": True}]
    assert "memory and --gpu estimates work" in result.stderr


def test_serve_binds_loopback_by_default_and_says_nothing_of_exposure(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUCOST_HOME", str(tmp_path))
    bound: list[tuple[object, dict[str, Any]]] = []
    monkeypatch.setattr(web, "serve", lambda sock, **options: bound.append((sock.getsockname(), options)))
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    result = runner.invoke(cli, ["serve", "--port", str(port)])  # no --host
    assert result.exit_code == 0, result.output
    # the socket the app would serve on is bound to the loopback address, not to every interface
    assert bound == [(("127.0.0.1", port), {"budget_seconds": web.DEFAULT_BUDGET_SECONDS, "any_host": False})]
    assert "no login" not in result.stderr


def test_the_fields_carry_the_clis_flags_bounds_and_choices():
    fields = {f.name: f for f in web.ESTIMATE_FIELDS}
    assert fields["show_all"].flag == "--all" and fields["show_all"].kind == "bool"
    assert fields["compiled"].flag == "--compile"
    assert fields["offer_gpu"].flag == "--offer-gpu" and fields["offer_gpu"].nullable
    assert fields["micro_batch"].minimum == 1 and fields["micro_batch"].kind == "int"
    assert fields["method"].choices == ("full", "lora", "qlora") and fields["method"].default == "lora"
    assert fields["padding_efficiency"].maximum == 1.0
    assert {f.name for f in web.HISTORY_FIELDS if f.required} == {"gpu"}


def test_the_cli_reads_a_config_json_with_the_same_limits(tmp_path):
    config = tmp_path / "config.json"
    config.write_text('{"hidden_size": 1e400}', encoding="utf-8")
    result = runner.invoke(cli, ["memory", "--config", str(config)])
    assert result.exit_code == 1 and "beyond a finite float" in result.output
    result = runner.invoke(cli, ["memory", "--model", "https://evil.example/org/model"])
    assert result.exit_code == 1 and "is not a model id" in result.output
