"""A hung gang is seen on the real node: one rank of pytorch-ddp is stopped with SIGSTOP (not killed), so its
peers block in gloo's all-reduce and no rank fails. Without a progress deadline the job would wait for
gloo's own timeout (the example's `--timeout`, 300 s). With the example's failure policy plus
`progressDeadlineSeconds`, the operator sees the trainer's progress report (`status.trainerStatus`)
frozen, restarts the gang (condition `Restarting` / `PyTorchJobGangRestart`, an Event, one restart in the
ledger) within seconds of the deadline, and the job then Succeeds. The example's checkpoint claim gets a
volume of its own (the plane has no provisioner).

The signal goes through containerd to the container's main process (the trainer, PID 1 in its pod), as
`crictl`/`ctr` would send it: the kubelet and the operator see nothing but the missing progress."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until

from .examples import apply, job_state, load_example, wait_finished
from .progress import lengthen

pytestmark = pytest.mark.node

Obj = dict[str, Any]

DEADLINE = 30
"""progressDeadlineSeconds: rank 0 reports after every epoch (a fraction of a second each), and the operator
writes a report into the status at most every 10 s (`--progress-interval`), so 30 s is never reached by a
healthy gang, and is ten times shorter than gloo's timeout."""
EPOCHS = 40
"""Long enough that the gang is still training when the report is seen and the rank stopped, short enough
that training from scratch again after the gang restart keeps the test near two minutes."""
GLOO_TIMEOUT = 300
STOPPED = "pytorch-ddp-worker-1"
POLICY = "kubetrain.io/failure-policy"


def _container_id(plane: NodePlane, namespace: str, pod: str) -> str:
    status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
    assert status == 200, (status, found)
    statuses = found["status"].get("containerStatuses") or []
    assert statuses and "running" in statuses[0].get("state", {}), statuses
    return str(statuses[0]["containerID"]).removeprefix("containerd://")


def _condition(job: Obj, kind: str) -> Obj | None:
    return next((c for c in job.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _gang_restarts(job: Obj) -> int:
    ledger = json.loads(job["metadata"].get("annotations", {}).get("kubetrain.io/ledger", "{}"))
    return int(ledger.get("gang", {}).get("restarts", 0))


def _events(plane: NodePlane, namespace: str, reason: str) -> list[Obj]:
    status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/events")
    assert status == 200, (status, found)
    return [e for e in found["items"] if e.get("reason") == reason]


def _reported(plane: NodePlane, namespace: str, job: Obj) -> Callable[[], bool]:
    def check() -> bool:
        trainer = job_state(plane, namespace, job).get("status", {}).get("trainerStatus") or {}
        return bool(trainer.get("lastUpdatedTime"))

    return check


def test_a_stopped_rank_restarts_the_gang_before_gloo_times_out(
    node_plane: NodePlane,
    trainer_images: Callable[..., None],
    namespace_on_node: str,
    volumes_for_claims: Callable[[str, list[Any]], None],
) -> None:
    trainer_images("pytorch")
    namespace = namespace_on_node
    job, others = load_example("pytorch/pytorch-ddp.yaml")
    annotations = job["metadata"].setdefault("annotations", {})
    policy = json.loads(annotations.get(POLICY, "{}")) | {"progressDeadlineSeconds": DEADLINE}
    annotations[POLICY] = json.dumps(policy)
    volumes_for_claims(namespace, others)  # the checkpoints' claim: the plane has no provisioner
    apply(node_plane, namespace, [*others, lengthen(job, EPOCHS)])
    wait_until("the trainer's first progress report", _reported(node_plane, namespace, job), timeout=240)
    node_plane.node.ctr("tasks", "kill", "-s", "SIGSTOP", _container_id(node_plane, namespace, STOPPED))
    stopped = time.monotonic()

    def restarting() -> bool:
        condition = _condition(job_state(node_plane, namespace, job), "Restarting")
        return condition is not None and condition["reason"] == "PyTorchJobGangRestart"

    wait_until("Restarting / PyTorchJobGangRestart", restarting, timeout=GLOO_TIMEOUT, interval=1.0)
    seen = time.monotonic() - stopped
    print(f"{STOPPED} stopped; the gang restart came {seen:.0f} s later (deadline {DEADLINE} s)")
    assert seen < GLOO_TIMEOUT / 2, f"the gang restart came {seen:.0f} s after the stop"
    events = _events(node_plane, namespace, "PyTorchJobGangRestart")
    assert events, "no PyTorchJobGangRestart Event"
    assert "made no progress" in events[0]["message"], events[0]["message"]
    assert wait_finished(node_plane, namespace, job, 240) == "Succeeded"
    for event in _events(node_plane, namespace, "RankFailed") + events:
        print(f"Event {event['reason']} x{event.get('count', 1)}: {event['message']}")
    assert _gang_restarts(job_state(node_plane, namespace, job)) == 1
