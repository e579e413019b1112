"""What the operator tells a Workload, as JSON merge patches of its status that cannot clobber Kueue's.

Each patch carries the `resourceVersion` it was computed from, so a Workload that Kueue changed meanwhile
answers 409 Conflict and the job is reconciled again from the newer Workload; a patch never overwrites
what Kueue wrote after it read. The conditions list is replaced as a whole (a merge patch replaces
lists), which is safe for the same reason.

- `requeue`: after an eviction, once the job has no active pod: `Requeued` (True after a preemption or
  node failures, which Kueue requeues at once), `QuotaReserved=False`, `Admitted=False` and no
  `admission`: the handshake by which an integration hands the quota back
  (`jobframework/reconciler.go`, "handle eviction");
- `pods_ready`: the `PodsReady` condition that `waitForPodsReady` waits for (True once the job runs);
- `reclaimable`: `reclaimablePods`, the pods of a pod set that finished and need their quota no more;
- `finished`: `Finished=True` with reason Succeeded or Failed when the job ends.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from kubetrain.common.kube.resources import Obj
from kubetrain.common.kueue.decide import condition
from kubetrain.common.kueue.names import (
    ADMITTED,
    EVICTED,
    FINISHED,
    PODS_READY,
    QUOTA_RESERVED,
    REQUEUED,
)

__all__ = ["finished", "pods_ready", "reclaimable", "requeue"]

_REQUEUED_AT_ONCE = ("Preempted", "NodeFailures")
"""Eviction reasons after which Kueue puts the Workload straight back in the queue (`Requeued=True`)."""


def requeue(workload: Mapping[str, Any], now: datetime) -> Obj | None:
    """The patch that hands an evicted Workload's quota back; None when it holds none any more."""
    if (condition(workload, QUOTA_RESERVED) or {}).get("status") != "True":
        return None
    evicted = condition(workload, EVICTED) or {}
    why, text = str(evicted.get("reason") or "Evicted"), str(evicted.get("message") or "")
    requeued = "True" if why in _REQUEUED_AT_ONCE else "False"
    conditions = _set(workload, _cond(workload, REQUEUED, (requeued, why, text), now))
    conditions = _set(workload, _cond(workload, QUOTA_RESERVED, ("False", "Pending", text), now), conditions)
    no_reservation = _cond(
        workload, ADMITTED, ("False", "NoReservation", "The workload has no reservation"), now
    )
    conditions = _set(workload, no_reservation, conditions)
    return _patch(workload, {"conditions": conditions, "admission": None})


def pods_ready(workload: Mapping[str, Any], ready: bool, now: datetime) -> Obj | None:
    """The `PodsReady` patch, Kueue's reasons (Started, WaitForStart, WaitForRecovery, Recovered); None
    when the condition already says so."""
    current = condition(workload, PODS_READY)
    if ready:
        recovering = current is not None and current.get("reason") in ("WaitForRecovery", "Recovered")
        reason, text = (
            ("Recovered" if recovering else "Started"),
            "All pods reached readiness and the workload is running",
        )
    elif current is not None and (
        current.get("status") == "True" or current.get("reason") == "WaitForRecovery"
    ):
        reason, text = "WaitForRecovery", "At least one pod has failed, waiting for recovery"
    else:
        reason, text = "WaitForStart", "Not all pods are ready or succeeded"
    status = "True" if ready else "False"
    if current is not None and current.get("status") == status and current.get("reason") == reason:
        return None
    return _patch(
        workload, {"conditions": _set(workload, _cond(workload, PODS_READY, (status, reason, text), now))}
    )


def reclaimable(workload: Mapping[str, Any], counts: Mapping[str, int]) -> Obj | None:
    """The `reclaimablePods` patch for `counts` (by pod set, each at most the pod set's count); None when
    unchanged."""
    sizes = {
        p.get("name"): int(p.get("count") or 0) for p in (workload.get("spec") or {}).get("podSets") or ()
    }
    wanted = [{"name": n, "count": min(c, sizes.get(n, 0))} for n, c in sorted(counts.items()) if c > 0]
    current = (workload.get("status") or {}).get("reclaimablePods") or []
    if sorted((p.get("name"), p.get("count")) for p in current) == [(p["name"], p["count"]) for p in wanted]:
        return None
    return _patch(workload, {"reclaimablePods": wanted or None})


def finished(workload: Mapping[str, Any], *, succeeded: bool, message: str, now: datetime) -> Obj | None:
    """The `Finished=True` patch (reason Succeeded or Failed); None when the Workload is finished."""
    if (condition(workload, FINISHED) or {}).get("status") == "True":
        return None
    reason = "Succeeded" if succeeded else "Failed"
    done = _cond(workload, FINISHED, ("True", reason, message or f"Job finished: {reason}"), now)
    return _patch(workload, {"conditions": _set(workload, done)})


def _cond(workload: Mapping[str, Any], ctype: str, said: tuple[str, str, str], now: datetime) -> Obj:
    """Condition `ctype` with `said` = (status, reason, message), its transition time kept while the
    status is unchanged."""
    status, reason, message = said
    current = condition(workload, ctype)
    since = current.get("lastTransitionTime") if current and current.get("status") == status else None
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message[:32768],
        "lastTransitionTime": since or now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "observedGeneration": (workload.get("metadata") or {}).get("generation") or 0,
    }


def _set(workload: Mapping[str, Any], new: Obj, conditions: Sequence[Obj] | None = None) -> list[Obj]:
    base = (
        list(conditions)
        if conditions is not None
        else list((workload.get("status") or {}).get("conditions") or ())
    )
    return [*(c for c in base if c.get("type") != new["type"]), new]


def _patch(workload: Mapping[str, Any], status: Obj) -> Obj:
    version = (workload.get("metadata") or {}).get("resourceVersion")
    return {"metadata": {"resourceVersion": version}, "status": status}
