"""The pod status the local kubelet reports, and its restart rules: pure functions, Kubernetes semantics.

What the operator reads from a pod (phase, the main container's restartCount and terminated exitCode,
the Ready condition) is written exactly as a kubelet writes it:
- Pending while volumes and env are prepared (waiting reason ContainerCreating or
  CreateContainerConfigError), Running once the process started (Ready=True: there are no probes
  locally);
- restartPolicy Always restarts the container in place whatever its exit code, OnFailure only after a
  non-zero exit, Never never; a restarted container keeps the pod Running, bumps restartCount, keeps
  the previous termination in lastState and waits in CrashLoopBackOff (the delay doubles per restart);
- otherwise the pod ends Succeeded (exit 0) or Failed, with the container's terminated state.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from kubetrain.common.kube.resources import Obj

__all__ = [
    "crash_backoff",
    "final_status",
    "pending_status",
    "restarts_in_place",
    "running_status",
    "terminated_state",
    "unschedulable_status",
    "waiting_restart_status",
]

START_ERROR_EXIT_CODE = 128
"""What the container runtime reports when a command cannot be started (reason StartError)."""


def restarts_in_place(restart_policy: str, code: int) -> bool:
    """Whether the kubelet restarts a container that exited with `code` under the pod's restartPolicy."""
    if restart_policy == "Always":
        return True
    return restart_policy == "OnFailure" and code != 0


def crash_backoff(restarts: int, *, initial: float, cap: float) -> float:
    """Seconds before restart number `restarts` (1 for the first): initial, doubled each time, capped."""
    return float(min(initial * 2 ** max(restarts - 1, 0), cap))


def terminated_state(code: int, *, started: datetime, finished: datetime, message: str = "") -> Obj:
    """A container's `terminated` state; the reason is Completed (0), StartError (128 at start) or Error."""
    reason = "Completed" if code == 0 else "Error"
    if message and code == START_ERROR_EXIT_CODE:
        reason = "StartError"
    state: dict[str, Any] = {
        "exitCode": code,
        "reason": reason,
        "startedAt": _ts(started),
        "finishedAt": _ts(finished),
    }
    if message:
        state["message"] = message
    return {"terminated": state}


def pending_status(container: str, *, reason: str, message: str = "", now: datetime) -> Obj:
    waiting: dict[str, Any] = {"reason": reason}
    if message:
        waiting["message"] = message
    return {
        "phase": "Pending",
        "conditions": _conditions(ready=False, now=now),
        "containerStatuses": [_container(container, {"waiting": waiting}, restarts=0, ready=False)],
        "startTime": _ts(now),
        "hostIP": "127.0.0.1",
    }


def unschedulable_status(message: str, *, now: datetime) -> Obj:
    """A pod no node can take yet: Pending, PodScheduled False/Unschedulable, as the scheduler writes it."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    return {"phase": "Pending", "conditions": [{**condition, "lastTransitionTime": _ts(now)}]}


def running_status(
    container: str, *, restarts: int, started: datetime, last: Obj | None, now: datetime
) -> Obj:
    status = _container(container, {"running": {"startedAt": _ts(started)}}, restarts=restarts, ready=True)
    if last:
        status["lastState"] = last
    return {
        "phase": "Running",
        "conditions": _conditions(ready=True, now=now),
        "containerStatuses": [status],
        "podIP": "127.0.0.1",
        "podIPs": [{"ip": "127.0.0.1"}],
    }


def waiting_restart_status(container: str, *, restarts: int, last: Obj, delay: float, now: datetime) -> Obj:
    message = f"back-off {delay:g}s restarting failed container={container}"
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
    status = _container(container, waiting, restarts=restarts, ready=False)
    status["lastState"] = last
    return {
        "phase": "Running",
        "conditions": _conditions(ready=False, now=now),
        "containerStatuses": [status],
    }


def final_status(container: str, *, state: Obj, restarts: int, last: Obj | None, now: datetime) -> Obj:
    """The pod's terminal status: Succeeded when the container exited 0, else Failed."""
    code = int(state["terminated"]["exitCode"])
    status = _container(container, state, restarts=restarts, ready=False)
    if last:
        status["lastState"] = last
    return {
        "phase": "Succeeded" if code == 0 else "Failed",
        "conditions": _conditions(ready=False, now=now),
        "containerStatuses": [status],
    }


def _container(name: str, state: Obj, *, restarts: int, ready: bool) -> Obj:
    return {
        "name": name,
        "state": state,
        "ready": ready,
        "started": "running" in state,
        "restartCount": restarts,
        "image": "",
        "imageID": "",
    }


def _conditions(*, ready: bool, now: datetime) -> list[Obj]:
    value = "True" if ready else "False"
    return [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": _ts(now)},
        {"type": "Initialized", "status": "True", "lastTransitionTime": _ts(now)},
        {"type": "ContainersReady", "status": value, "lastTransitionTime": _ts(now)},
        {"type": "Ready", "status": value, "lastTransitionTime": _ts(now)},
    ]


def _ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
