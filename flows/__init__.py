"""Prefect flows and the `gpucost` command: thin orchestration over connectors/ and warehouse/."""

import os
import time

# The refresh's timing line covers the whole command from here (the first gpucost import).
STARTED = time.perf_counter()

from dotenv import load_dotenv  # noqa: E402 - after the clock starts

# Credentials and GPUCOST_ settings may live in ./.env (never committed); the real environment wins.
load_dotenv(override=False)
# Prefect reads these when it is imported: quiet, offline-friendly defaults (see stack-notes.md §2).
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
os.environ.setdefault("PREFECT_LOGGING_TO_API_WHEN_MISSING_FLOW", "ignore")
# Connectors log with the standard library (they know nothing of Prefect); show them in run logs.
os.environ.setdefault("PREFECT_LOGGING_EXTRA_LOGGERS", "connectors")
