"""B3: a replica whose Node was deleted while the operator was down, its pod already gone, per restart policy.

The Worker runs on a kwok node of its own. The operator is stopped; the Node is deleted and its pod
force-deleted (what the pod garbage collector does to the pods of a deleted Node); then the operator
starts again and finds an index that was running and has no pod. Under `Never` that replica failed (the
job fails; it never runs a second time); under `OnFailure`, `Always` and `ExitCode` it is created again
and counts one restart. The operator knows it had been running only from the job's ledger annotation.
"""

from __future__ import annotations

import json

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.common.job import LEDGER_ANNOTATION
from kubetrain.common.kube import objects
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import FakeNode
from kubetrain.testing.operator import (
    container_spec,
    job_manifest,
    kubectl_apply,
    on_control_plane,
    replica_spec,
    wait_until,
)

pytestmark = pytest.mark.chaos


@pytest.mark.parametrize("policy", ["Never", "OnFailure", "Always", "ExitCode"])
async def test_a_replica_lost_with_its_node_while_the_operator_was_down(
    control_plane: ControlPlane, namespace: str, policy: str
) -> None:
    node = f"lost-{namespace}"
    control_plane.add_node(FakeNode(node))
    worker = replica_spec(1, container_spec("pytorch"), restartPolicy=policy)
    worker["template"]["spec"]["nodeName"] = node
    specs = {"Master": replica_spec(1, container_spec("pytorch")), "Worker": worker}
    kubectl_apply(
        control_plane, job_manifest(PYTORCHJOB, specs, name="b3", namespace=namespace), namespace=namespace
    )
    async with on_control_plane(control_plane, [PyTorchJobController], namespace=namespace) as op:
        await wait_until(lambda: op.running(namespace, "b3-master-0", "b3-worker-0"), what="Running")

        async def seen_running() -> bool:
            # The reconcile that reports the Worker active has written the ledger (before its status).
            status = (await op.job(namespace, "b3")).get("status") or {}
            return bool(((status.get("replicaStatuses") or {}).get("Worker") or {}).get("active"))

        await wait_until(seen_running, what="the job's status counts the Worker active")
        lost = objects.uid((await op.pods(namespace))["b3-worker-0"])
    control_plane.kubectl("delete", f"node/{node}", "--wait=false")
    control_plane.kubectl(
        "delete", "pod/b3-worker-0", "--grace-period=0", "--force", "--wait=false", namespace=namespace
    )
    async with on_control_plane(control_plane, [PyTorchJobController], namespace=namespace) as op:
        if policy == "Never":
            failed = await op.wait_for_condition(namespace, "b3", "Failed")
            assert failed["message"].endswith("has failed because 1 Worker replica(s) failed.")
            assert "b3-worker-0" not in await op.pods(namespace), "a Never replica never runs twice"
            return

        async def recreated() -> bool:
            pod = (await op.pods(namespace)).get("b3-worker-0")
            return pod is not None and objects.uid(pod) != lost

        await wait_until(recreated, what="the lost Worker created again")
        annotations = (await op.job(namespace, "b3"))["metadata"].get("annotations") or {}
        ledger = json.loads(annotations.get(LEDGER_ANNOTATION) or "{}")
        assert ledger.get("restarts") == 1, "a lost replica that ran counts one restart"
        assert await op.condition(namespace, "b3", "Failed") is None
