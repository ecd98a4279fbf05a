"""The Prefect automation that frees a refresh whose worker died: `gpucost deploy` creates it.

A worker killed mid-run (its machine lost, its container evicted, `kill -9`) takes the flow-run
process with it, and nothing tells the Prefect server: the run stays `Running`. While it does, it
holds the deployment's concurrency slot and the work queue's (limit 1 each, deployments/prefect.yaml),
so every later refresh waits behind it: the queue's slot never expires, the deployment's lease only
after five minutes. Prefect's answer for a self-hosted server is an automation on the heartbeats
every flow run sends (`PREFECT_FLOWS_HEARTBEAT_FREQUENCY`, 180 s by default; docs.prefect.io,
"How to detect and respond to zombie flows", checked 2026-12-02): a refresh that sent no heartbeat,
and did not finish, for two heartbeat periods is set `Crashed`, which releases both slots. The next
refresh then runs and marks the dead run `abandoned` in the warehouse (warehouse.pipeline.mark_abandoned).

Scoped to the `refresh` flow, so other flows on a shared server are left alone.
"""

from __future__ import annotations

from datetime import timedelta

from prefect.automations import Automation
from prefect.client.schemas.objects import StateType
from prefect.events.actions import ChangeFlowRunState
from prefect.events.schemas.automations import EventTrigger, Posture
from prefect.events.schemas.events import ResourceSpecification
from prefect.settings import get_current_settings

NAME = "gpucost: crash refreshes whose worker died"
FLOW_NAME = "refresh"  # flows/refresh.py's @flow(name=...)
MISSED_HEARTBEATS = 2  # one late heartbeat on a busy machine is not a dead run


def heartbeat_seconds() -> int | None:
    """How often flow runs send heartbeats here (Prefect's setting); None when they are off."""
    return get_current_settings().flows.heartbeat_frequency


def silent_refreshes(heartbeat: int) -> Automation:
    """The automation for flow runs that send a heartbeat every `heartbeat` seconds."""
    finished = ("Completed", "Failed", "Cancelled", "Crashed")
    return Automation(
        name=NAME,
        description=(
            f"A refresh that sent no heartbeat for {MISSED_HEARTBEATS * heartbeat} s and did not finish "
            "lost its process (a killed worker): set it Crashed so its concurrency slots free up."
        ),
        trigger=EventTrigger(
            posture=Posture.Proactive,
            after={"prefect.flow-run.heartbeat"},
            expect={"prefect.flow-run.heartbeat", *(f"prefect.flow-run.{state}" for state in finished)},
            match=ResourceSpecification({"prefect.resource.id": ["prefect.flow-run.*"]}),
            match_related=ResourceSpecification(
                {"prefect.resource.role": "flow", "prefect.resource.name": FLOW_NAME}
            ),
            for_each={"prefect.resource.id"},
            threshold=1,
            within=timedelta(seconds=MISSED_HEARTBEATS * heartbeat),
        ),
        actions=[
            ChangeFlowRunState(
                name="Crashed",
                state=StateType.CRASHED,
                message=f"no heartbeat for {MISSED_HEARTBEATS * heartbeat} s: its worker or process died",
                force=False,  # a run that finished meanwhile keeps its own final state
            )
        ],
    )


def ensure(heartbeat: int) -> str:
    """Create the automation, or update the one a previous deploy made; what was done."""
    wanted = silent_refreshes(heartbeat)
    try:
        # Prefect types read() as sync-or-awaitable (async_dispatch); called from sync code it is sync
        existing: Automation = Automation.read(name=NAME)  # type: ignore[assignment]
    except ValueError:  # Prefect's "not found"
        wanted.create()
        return "created"
    wanted.id = existing.id
    wanted.update()
    return "updated"
