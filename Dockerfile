# The gpucost image: the locked environment without dev dependencies, run as a non-root user, with a
# Prefect process worker as what it runs by default. The same image is the flow-run image of the
# Docker and Kubernetes work pools (deployments/docker.prefect.yaml, deployments/kubernetes.prefect.yaml).
#
#   docker build -t gpucost:latest .
#   docker run --rm -v gpucost-data:/data -e PREFECT_API_URL=http://prefect:4200/api gpucost:latest
#
# The default is CMD, not ENTRYPOINT, on purpose: Docker and Kubernetes workers start each flow run
# by giving the container the command `prefect flow-run execute` (Kubernetes as the container's
# args), which an ENTRYPOINT would receive as its own arguments.
FROM python:3.12-slim-bookworm

# uv, pinned to the version that wrote uv.lock's format here
COPY --from=ghcr.io/astral-sh/uv:0.13.9 /uv /uvx /bin/

# Bytecode compiled once at build time (start-up), files copied from uv's cache rather than linked
# (the cache is a build mount that does not outlive the layer), the image's Python, never a download.
ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv

WORKDIR /app

# Dependencies first, in their own layer: a code change does not reinstall them.
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-project

COPY connectors ./connectors
COPY finetune ./finetune
COPY warehouse ./warehouse
COPY answers ./answers
COPY flows ./flows
COPY deployments ./deployments
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev

RUN useradd --uid 10001 --user-group --create-home --shell /usr/sbin/nologin gpucost \
    && mkdir /data \
    && chown gpucost:gpucost /data
USER gpucost

# The warehouse, raw archive and feeds live on the volume at /data; Prefect's own files in the
# user's home. Feeds go to object storage with GPUCOST_FEEDS_URL (and GPUCOST_S3_ENDPOINT_URL).
ENV PATH=/app/.venv/bin:$PATH \
    GPUCOST_HOME=/data \
    GPUCOST_PROJECT_DIR=/app \
    PREFECT_HOME=/home/gpucost/.prefect \
    PREFECT_SERVER_ANALYTICS_ENABLED=false \
    DO_NOT_TRACK=1
VOLUME ["/data"]

CMD ["prefect", "worker", "start", "--pool", "gpucost", "--type", "process"]
