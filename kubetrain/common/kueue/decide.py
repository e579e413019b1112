"""What a queued job may do now, from its Workload alone: a pure decision, made on every reconcile.

- no Workload yet: `CREATE` it; the job is queued (no pod, no Service);
- a Workload of the job that kubetrain did not make (Kueue's own integration manages the kind on this
  cluster): `FOREIGN`; the job is left to that integration, exactly as before (suspend is honoured);
- `Evicted=True` (preemption, the waitForPodsReady timeout, deactivation, a stopped ClusterQueue):
  `EVICTED`; the pods and Services go, and once none is left the quota is handed back (`wlstatus`);
- `Admitted=True`: `ADMITTED`; the pods are created with the admission's placement;
- anything else (pending, quota reserved while admission checks run, finished by Kueue): `QUEUED`.

Kueue's `Admitted` condition is the gate, not `QuotaReserved`: a reservation whose admission checks are not
ready yet runs nothing (`pkg/controller/jobframework/reconciler.go`, "handle job is suspended").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, final

from kubetrain.common.kueue.names import ADMITTED, EVICTED, FINISHED, QUOTA_RESERVED

__all__ = ["Decision", "Phase", "condition", "decide", "is_true"]


class Phase(StrEnum):
    CREATE = "Create"
    QUEUED = "Queued"
    ADMITTED = "Admitted"
    EVICTED = "Evicted"
    FOREIGN = "Foreign"


@final
@dataclass(frozen=True, slots=True)
class Decision:
    """The phase, and for QUEUED/EVICTED the reason suffix and message of the job's `Queued` condition."""

    phase: Phase
    reason: str = ""
    message: str = ""


def condition(workload: Mapping[str, Any] | None, ctype: str) -> Mapping[str, Any] | None:
    for cond in ((workload or {}).get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(workload: Mapping[str, Any] | None, ctype: str) -> bool:
    cond = condition(workload, ctype)
    return cond is not None and cond.get("status") == "True"


def decide(workload: Mapping[str, Any] | None, *, foreign: bool, queue: str) -> Decision:
    """The decision for a job labelled with LocalQueue `queue`; `workload`: its Workload made by kubetrain
    (None: none in the cache), `foreign`: a Workload of the job made by someone else exists."""
    if foreign:
        return Decision(Phase.FOREIGN)
    waiting = f"waiting for Kueue to admit it through LocalQueue {queue}"
    if workload is None:
        return Decision(Phase.CREATE, "Queued", f"{waiting}.")
    named = f"Workload {(workload.get('metadata') or {}).get('name')}"
    if is_true(workload, EVICTED):
        evicted = condition(workload, EVICTED) or {}
        why = str(evicted.get("reason") or "Evicted")
        text = (
            f"Kueue evicted it ({why}: {evicted.get('message') or 'no message'}); {waiting} again ({named})."
        )
        return Decision(Phase.EVICTED, f"Evicted{why}", text)
    if is_true(workload, FINISHED):
        done = condition(workload, FINISHED) or {}
        return Decision(Phase.QUEUED, "Queued", f"{named} was finished by Kueue: {done.get('message')}")
    if is_true(workload, ADMITTED):
        return Decision(Phase.ADMITTED)
    pending = condition(workload, QUOTA_RESERVED) or {}
    detail = f": {pending['message']}" if pending.get("status") == "False" and pending.get("message") else ""
    return Decision(Phase.QUEUED, "Queued", f"{waiting} ({named}){detail}.")
