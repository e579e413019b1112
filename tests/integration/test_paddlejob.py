"""PaddleJobs on the real control plane: submitted with `kubectl apply`, reconciled by PaddleJobController
running in-process against kube-apiserver, scheduled by kube-scheduler onto kwok's fake nodes, and finished
by kwok (the test annotates a pod with its outcome and exit code).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import PADDLEJOB
from kubetrain.common.kube.resources import SERVICES
from kubetrain.controllers.paddle import PaddleJobController
from kubetrain.podcontract import PaddleEnv, PaddleRole
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kubectl import KubectlError
from kubetrain.testing.kwok import Outcome
from kubetrain.testing.operator import (
    InProcessOperator,
    container_spec,
    job_manifest,
    kubectl_apply,
    on_control_plane,
    replica_spec,
    wait_until,
)

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "paddle" / "paddle-collective.yaml"
ROLE = "training.kubeflow.org/job-role"
POD_IP = {  # as stored: the API server defaults the fieldRef's apiVersion
    "name": "POD_IP_DUMMY",
    "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}},
}


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with on_control_plane(control_plane, [PaddleJobController], namespace=namespace) as op:
        yield op


def paddle_env(pod: dict[str, Any], pod_ip: str) -> PaddleEnv:
    """The env the launcher in `pod` reads, `$(POD_IP_DUMMY)` expanded as the kubelet expands it."""
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "paddle")
    entries = container.get("env") or []
    plain = {e["name"]: e["value"].replace("$(POD_IP_DUMMY)", pod_ip) for e in entries if "value" in e}
    return PaddleEnv.parse(plain)


async def test_example_runs_with_the_launcher_env_and_succeeds_when_every_worker_has(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    control_plane.kubectl("apply", "-f", str(EXAMPLE), namespace=namespace)
    names = ["paddle-collective-worker-0", "paddle-collective-worker-1"]
    await wait_until(lambda: operator.running(namespace, *names), what="2 Running workers")
    pods = await operator.pods(namespace)
    worker0 = pods[names[0]]["spec"]["containers"][0]["env"]
    assert POD_IP in worker0, "worker 0 serves the rendezvous at its own pod IP (downward API)"
    assert paddle_env(pods[names[0]], "10.0.0.9") == PaddleEnv("paddle-collective", 2, "10.0.0.9", 36543)
    peer = "paddle-collective-worker-0.paddle-collective"
    assert paddle_env(pods[names[1]], "unused") == PaddleEnv("paddle-collective", 2, peer, 36543)
    assert all(ROLE not in pods[name]["metadata"]["labels"] for name in names), "no master in collective"
    services = (await operator.api.list(SERVICES, namespace)).items
    assert [s["metadata"]["name"] for s in services] == ["paddle-collective"], "one headless Service per job"
    for name in names:
        assert (pods[name]["spec"]["hostname"], pods[name]["spec"]["subdomain"]) == (
            name,
            "paddle-collective",
        )
    assert await operator.reason(namespace, "paddle-collective", "Running") == "PaddleJobRunning"

    control_plane.finish_pod(namespace, names[0], Outcome.SUCCEEDED)
    await asyncio.to_thread(control_plane.wait_for_pod_phase, namespace, names[0], "Succeeded")
    assert await operator.condition(namespace, "paddle-collective", "Succeeded") is None  # every worker must
    control_plane.finish_pod(namespace, names[1], Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "paddle-collective", "Succeeded") == "PaddleJobSucceeded"


async def test_parameter_server_mode_the_masters_decide_and_a_failed_worker_is_replaced(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    """PaddleJob's default restartPolicy is OnFailure (Kubeflow's): a failed pod is replaced; the Masters
    (parameter servers, two here: no one-replica limit) decide the job's success."""
    specs = {
        "Master": replica_spec(2, container_spec("paddle")),
        "Worker": replica_spec(2, container_spec("paddle")),
    }
    kubectl_apply(
        control_plane, job_manifest(PADDLEJOB, specs, name="ps", namespace=namespace), namespace=namespace
    )
    pods = ["ps-master-0", "ps-master-1", "ps-worker-0", "ps-worker-1"]
    await wait_until(lambda: operator.running(namespace, *pods), what="4 Running pods")
    seen = await operator.pods(namespace)
    assert seen["ps-worker-1"]["spec"]["restartPolicy"] == "OnFailure"
    server = paddle_env(seen["ps-master-0"], "10.0.0.7")
    assert server == PaddleEnv("ps", 4, "10.0.0.7", 36543, PaddleRole.SERVER)
    trainer = paddle_env(seen["ps-worker-0"], "unused")
    assert trainer == PaddleEnv("ps", 4, "ps-master-0.ps", 36543, PaddleRole.TRAINER)
    assert [seen[p]["metadata"]["labels"].get(ROLE) for p in pods] == ["master", "master", None, None]
    replaced = await operator.after_failure(control_plane, namespace, "ps", "ps-worker-1", 1)
    assert replaced == "replaced"
    assert "PaddleJobRestarting" in operator.events.reasons()
    for name in ("ps-master-0", "ps-master-1"):
        control_plane.finish_pod(namespace, name, Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "ps", "Succeeded") == "PaddleJobSucceeded"


def test_kubectl_scale_sets_the_workers_and_unknown_replica_types_are_refused(
    control_plane: ControlPlane, namespace: str
) -> None:
    specs = {"Worker": replica_spec(2, container_spec("paddle"))}
    kubectl_apply(control_plane, job_manifest(PADDLEJOB, specs, namespace=namespace), namespace=namespace)
    control_plane.kubectl("scale", "paddlejobs/job", "--replicas=3", namespace=namespace)
    replicas = control_plane.kubectl(
        "get",
        "paddlejob",
        "job",
        "-o",
        "jsonpath={.spec.paddleReplicaSpecs.Worker.replicas}",
        namespace=namespace,
    ).stdout
    assert replicas == "3"
    bad = job_manifest(
        PADDLEJOB, {"Chief": replica_spec(1, container_spec("paddle"))}, name="bad", namespace=namespace
    )
    with pytest.raises(KubectlError, match="keys must be replica types of PaddleJob: Master, Worker"):
        kubectl_apply(control_plane, bad, namespace=namespace)
