"""The image, checked as far as this machine can without Docker: its environment built the way the
Dockerfile builds it runs `gpucost --help` and a replay refresh, and the Docker and Kubernetes
work-pool examples under deployments/ validate with the models and JSON-schema check Prefect itself
applies (prefect.yaml: `prefect.cli.deploy._models.PrefectYamlModel`; a work pool's base job template:
`prefect.server.schemas.actions.WorkPoolCreate`; a deployment's job variables: the server's
`prefect.utilities.schema_tools.validate` call in `prefect.server.api.validation`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO

DEPLOYMENTS = REPO / "deployments"
DOCKERFILE = REPO / "Dockerfile"


def dockerfile_commands() -> list[str]:
    """The Dockerfile's RUN instructions, continuation lines joined, build mounts dropped."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    runs = [line.removeprefix("RUN ").strip() for line in text.splitlines() if line.startswith("RUN ")]
    return [re.sub(r"--mount=\S+\s*", "", run).strip() for run in runs]


def dockerfile_env() -> dict[str, str]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("ENV "):
            found |= dict(re.findall(r"(\w+)=(\S+)", line))
    return found


# --- the Dockerfile -------------------------------------------------------------------------------


def test_the_dockerfile_syncs_the_lock_without_dev_dependencies_and_runs_as_a_user():
    syncs = [c for c in dockerfile_commands() if c.startswith("uv sync")]
    assert syncs and all("--frozen" in c and "--no-dev" in c for c in syncs)
    text = DOCKERFILE.read_text()
    user = re.search(r"^USER (\S+)$", text, re.M)
    assert user and user.group(1) != "root"
    assert re.search(rf"useradd --uid 10001 .*{user.group(1)}", text.replace("\\\n", " "))
    # the worker is the default command, and no ENTRYPOINT would swallow a flow run's command
    assert '"prefect", "worker", "start"' in text and not re.search(r"^ENTRYPOINT", text, re.M)
    assert dockerfile_env()["GPUCOST_HOME"] == "/data" and 'VOLUME ["/data"]' in text


def test_the_build_context_leaves_secrets_data_and_environments_out():
    ignored = set((REPO / ".dockerignore").read_text().split())
    assert {".env", ".venv", ".git", "data", "*.duckdb", "tests"} <= ignored
    # everything the Dockerfile copies is in the context
    copied = re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE.read_text(), re.M)
    for names in copied:
        for name in names.split():
            assert (REPO / name).exists(), name
            assert name not in ignored, name


@pytest.fixture(scope="module")
def image_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment built by the Dockerfile's own `uv sync` commands, from uv's cache only."""
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv is not on PATH; .ci/run installs it")
    venv = tmp_path_factory.mktemp("image") / "venv"
    # the Dockerfile's uv settings (copy from the cache, compile bytecode, no Python download),
    # with the environment in a temp folder instead of /app/.venv
    from_dockerfile = {k: v for k, v in dockerfile_env().items() if k.startswith("UV_")}
    assert from_dockerfile.keys() >= {"UV_PROJECT_ENVIRONMENT", "UV_LINK_MODE", "UV_COMPILE_BYTECODE"}
    env = {
        **os.environ,
        **from_dockerfile,
        "UV_PROJECT_ENVIRONMENT": str(venv),
        "UV_OFFLINE": "1",  # no test touches the network: the cache the checkout's sync filled
        "UV_PYTHON": sys.executable,
        "UV_NO_PROGRESS": "1",
    }
    env.pop("VIRTUAL_ENV", None)
    for command in (c for c in dockerfile_commands() if c.startswith("uv sync")):
        done = subprocess.run(
            [uv, *command.split()[1:]], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, done.stderr
    return venv


def run_in(venv: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("GPUCOST_", "PREFECT_API", "VIRTUAL_ENV", "AWS_"))
    }
    env |= {
        "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        "GPUCOST_HOME": str(tmp_path / "data"),
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "COLUMNS": "120",
    }
    return subprocess.run(
        [str(venv / "bin" / "gpucost"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_image_environment_has_no_dev_dependencies(image_env: Path):
    site = next((image_env / "lib").glob("python3.*/site-packages"))
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"prefect", "duckdb", "boto3", "gpucost"} <= installed
    assert not installed & {"pytest", "moto", "hypothesis", "ruff", "mypy"}


def test_the_image_environment_answers_help_and_a_replay_refresh(image_env: Path, tmp_path: Path):
    helped = run_in(image_env, tmp_path, "--help")
    assert helped.returncode == 0, helped.stderr
    assert "refresh" in helped.stdout and "backup" in helped.stdout

    refreshed = run_in(image_env, tmp_path, "refresh", "--replay", str(REPO / "tests" / "replay"))
    assert refreshed.returncode == 0, refreshed.stdout + refreshed.stderr
    assert (tmp_path / "data" / "replay" / "warehouse.duckdb").is_file()
    prices = run_in(image_env, tmp_path, "prices", "--gpu", "H100", "--json")
    assert prices.returncode == 0, prices.stderr
    assert json.loads(prices.stdout)  # offers answered from the warehouse the image built


# --- the work-pool examples -------------------------------------------------------------------------


def worker_template(worker_type: str) -> dict[str, Any]:
    """The default base job template Prefect ships for a worker type (its collections registry)."""
    import prefect.server.api.collections_data as data

    registry = Path(data.__path__[0]) / "views" / "aggregate-worker-metadata.json"
    for workers in json.loads(registry.read_text()).values():
        if worker_type in workers:
            return workers[worker_type]["default_base_job_configuration"]
    raise AssertionError(f"Prefect ships no {worker_type} worker template")


def deployment_file(name: str) -> dict[str, Any]:
    from prefect.cli.deploy._models import PrefectYamlModel

    raw = yaml.safe_load((DEPLOYMENTS / name).read_text())
    PrefectYamlModel.model_validate(raw)  # what `prefect deploy` loads the file with
    return raw


def validate_job_variables(job_variables: dict[str, Any], template: dict[str, Any]) -> None:
    """The check the Prefect server makes when a deployment is created on a pool with `template`."""
    from prefect.utilities.schema_tools import is_valid_schema, validate

    is_valid_schema(template["variables"], preprocess=False)
    validate(
        job_variables,
        template["variables"],
        raise_on_error=True,
        preprocess=True,
        ignore_required=True,
        allow_none_with_default=True,
    )


KUBERNETES_TEMPLATE = json.loads((DEPLOYMENTS / "kubernetes-base-job-template.json").read_text())


@pytest.mark.parametrize(
    ("name", "worker_type", "template"),
    [
        ("docker.prefect.yaml", "docker", worker_template("docker")),
        ("kubernetes.prefect.yaml", "kubernetes", KUBERNETES_TEMPLATE),
    ],
)
def test_the_work_pool_sections_validate_against_prefects_schema(name, worker_type, template):
    config = deployment_file(name)
    assert config["deployments"]
    for deployment in config["deployments"]:
        pool = deployment["work_pool"]
        validate_job_variables(pool["job_variables"], template)
        env = pool["job_variables"]["env"]
        assert env["GPUCOST_HOME"] == "/data"  # the persistent volume
        assert env["GPUCOST_FEEDS_URL"] == "{{ $GPUCOST_FEEDS_URL }}"  # feeds to object storage
        # no secret written out: credentials are Prefect Secret blocks
        assert all(v.startswith("{{") for k, v in env.items() if k.startswith("AWS_"))
        assert deployment["concurrency_limit"]["limit"] == 1
        # the flow the image holds, and the image's code folder
        assert (REPO / deployment["entrypoint"].split(":")[0]).is_file()
    assert (
        config["pull"][0]["prefect.deployments.steps.set_working_directory"]["directory"]
        == (dockerfile_env()["GPUCOST_PROJECT_DIR"])
    )


def test_a_job_variable_of_the_wrong_shape_is_refused():
    from prefect.utilities.schema_tools import ValidationError

    with pytest.raises(ValidationError):
        validate_job_variables({"volumes": "gpucost-data:/data"}, worker_template("docker"))


def test_the_docker_pool_mounts_the_warehouse_volume_at_gpucost_home():
    (deployment, *_) = deployment_file("docker.prefect.yaml")["deployments"]
    volumes = deployment["work_pool"]["job_variables"]["volumes"]
    assert [v.split(":")[1] for v in volumes] == [dockerfile_env()["GPUCOST_HOME"]]


def test_the_kubernetes_template_is_prefects_default_plus_the_warehouse_claim():
    from prefect.server.schemas.actions import WorkPoolCreate
    from prefect.utilities.templating import apply_values

    WorkPoolCreate(name="gpucost-k8s", type="kubernetes", base_job_template=KUBERNETES_TEMPLATE)
    default = worker_template("kubernetes")
    ours = KUBERNETES_TEMPLATE["variables"]["properties"]
    assert set(ours) - set(default["variables"]["properties"]) == {"warehouse_claim"}

    (deployment, *_) = deployment_file("kubernetes.prefect.yaml")["deployments"]
    values = {k: v.get("default") for k, v in ours.items()} | deployment["work_pool"]["job_variables"]
    manifest = apply_values(KUBERNETES_TEMPLATE["job_configuration"], values)["job_manifest"]
    pod = manifest["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (volume,) = pod["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == "gpucost-data"
    assert container["volumeMounts"] == [{"name": volume["name"], "mountPath": "/data"}]
    # the image's user, so files on the claim stay writable across pods
    assert pod["securityContext"]["runAsUser"] == 10001 and pod["securityContext"]["runAsNonRoot"]
    # the rest is Prefect's template unchanged
    default_pod = default["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]
    assert {k: v for k, v in pod.items() if k not in ("volumes", "securityContext")}.keys() == (
        default_pod.keys()
    )
