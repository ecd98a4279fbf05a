"""`gpucost serve`'s app on a loopback port for the tests, started and stopped by them.

`running(app)` binds 127.0.0.1 on a free port, runs uvicorn in a thread (as `gpucost serve` runs
it, on a bound socket) and yields the base URL; leaving the block stops the server. `serve_env`
is the environment the served answers come from: the replay-only home a fresh clone has after
`gpucost refresh --replay tests/replay`, a Hugging Face cache of our own, and the Hub off.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

# Our own small config.json, in Hugging Face's layout (a Llama-shaped 0.5B model that no seed
# holds): what the local Hub cache serves for `gpucost-tests/tiny-llama`.
HUB_MODEL = "gpucost-tests/tiny-llama"
TINY_CONFIG: dict[str, Any] = {
    "_name_or_path": HUB_MODEL,
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 16,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}


def hub_cache(folder: Path) -> Path:
    """A huggingface_hub cache holding TINY_CONFIG as HUB_MODEL's main snapshot."""
    repo = folder / f"models--{HUB_MODEL.replace('/', '--')}"
    snapshot = repo / "snapshots" / "0123456789abcdef"
    snapshot.mkdir(parents=True, exist_ok=True)
    (snapshot / "config.json").write_text(json.dumps(TINY_CONFIG), encoding="utf-8")
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text("0123456789abcdef", encoding="utf-8")
    return folder


@contextmanager
def serve_env(home: Path, hub: Path) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GPUCOST_HOME", str(home))
        patch.setenv("HF_HUB_CACHE", str(hub))
        patch.setenv("HF_HUB_OFFLINE", "1")
        patch.delenv("GPUCOST_PULL_URL", raising=False)
        yield


@contextmanager
def running(app: Any, timeout: float = 30.0) -> Iterator[str]:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout)
        sock.close()
