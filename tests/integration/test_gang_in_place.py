"""In-place gang restarts on the real control plane: the pods a job with a failure policy gets carry the
`RestartAllContainers` rule where a node declares the feature, and the real kube-apiserver (1.36) accepts
and keeps them; where no node declares it, the pods are Kubeflow's, without rules.

The declaring node is a kwok node created with `status.declaredFeatures`, as a 1.36 kubelet reports it; it
is deleted again after its test, so that every other test of the session sees nodes that declare nothing.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.common.job.failurepolicy import FAILURE_POLICY_ANNOTATION
from kubetrain.common.job.ledger import LEDGER_ANNOTATION
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.testing import operator as testop
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import FakeNode
from kubetrain.testing.operator import InProcessOperator, wait_until

pytestmark = pytest.mark.integration

PODS = ["job-master-0", "job-worker-0", "job-worker-1"]
POLICY = {"rules": [{"action": "FailJob", "onExitCodes": [2]}, {"action": "RestartGang"}]}
NODE = "kwok-restart-all"


@pytest.fixture
def declaring_node(control_plane: ControlPlane) -> Iterator[str]:
    node = FakeNode(NODE).manifest()
    node["status"]["declaredFeatures"] = ["RestartAllContainersOnContainerExits"]
    control_plane.rest.create("/api/v1/nodes", node)
    try:
        yield NODE
    finally:
        control_plane.rest.request("DELETE", f"/api/v1/nodes/{NODE}")


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with testop.on_control_plane(control_plane, [PyTorchJobController], namespace=namespace) as op:
        yield op


def submit(plane: ControlPlane, namespace: str) -> None:
    main = testop.container_spec("pytorch")
    specs = {
        "Master": testop.replica_spec(1, main, restartPolicy="Never"),
        "Worker": testop.replica_spec(2, main, restartPolicy="OnFailure"),
    }
    body = testop.job_manifest(PYTORCHJOB, specs, namespace=namespace)
    body["metadata"]["annotations"] = {FAILURE_POLICY_ANNOTATION: json.dumps(POLICY)}
    testop.kubectl_apply(plane, body, namespace=namespace)


def main_container(pod: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in pod["spec"]["containers"] if c["name"] == "pytorch")


async def mode(op: InProcessOperator, namespace: str) -> str:
    ledger = json.loads((await op.job(namespace, "job"))["metadata"]["annotations"][LEDGER_ANNOTATION])
    return str(ledger["gang"]["mode"])


async def test_pods_carry_the_restart_rule_where_a_node_declares_it(
    control_plane: ControlPlane, namespace: str, declaring_node: str, operator: InProcessOperator
) -> None:
    submit(control_plane, namespace)
    await wait_until(lambda: operator.running(namespace, *PODS), what="the gang running")
    pods = await operator.pods(namespace)
    rule = {"action": "RestartAllContainers", "exitCodes": {"operator": "NotIn", "values": [0, 2]}}
    for name, policy in (
        ("job-master-0", "Never"),
        ("job-worker-0", "OnFailure"),
        ("job-worker-1", "OnFailure"),
    ):
        container = main_container(pods[name])
        assert container["restartPolicy"] == policy, name
        assert container["restartPolicyRules"] == [rule], f"the API server kept {name}'s rule"
        # the scheduler places a pod that uses the action only where a node declares it
        assert pods[name]["spec"]["nodeName"] == declaring_node
    assert await mode(operator, namespace) == "in-place"


async def test_pods_have_no_rule_where_no_node_declares_it(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    submit(control_plane, namespace)
    await wait_until(lambda: operator.running(namespace, *PODS), what="the gang running")
    for name, pod in (await operator.pods(namespace)).items():
        container = main_container(pod)
        assert "restartPolicyRules" not in container and "restartPolicy" not in container, name
    assert await mode(operator, namespace) == "recreate"
