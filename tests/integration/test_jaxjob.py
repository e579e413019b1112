"""JAXJobs on the real control plane: submitted with `kubectl apply`, reconciled by JAXJobController running
in-process against kube-apiserver, scheduled by kube-scheduler onto kwok's fake nodes, and finished by kwok
(the test annotates a pod with its outcome and exit code).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import JAXJOB
from kubetrain.common.kube.resources import SERVICES
from kubetrain.controllers.jax import JAXJobController
from kubetrain.podcontract import JaxEnv
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

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jax" / "jax-spmd.yaml"
ROLE = "training.kubeflow.org/job-role"


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with on_control_plane(control_plane, [JAXJobController], namespace=namespace) as op:
        yield op


def jax_env(pod: dict[str, Any]) -> JaxEnv | None:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "jax")
    return JaxEnv.from_env({e["name"]: e["value"] for e in container.get("env") or []})


async def test_example_runs_with_the_coordinator_env_and_succeeds_when_every_worker_has(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    control_plane.kubectl("apply", "-f", str(EXAMPLE), namespace=namespace)
    names = ["jax-spmd-worker-0", "jax-spmd-worker-1"]
    await wait_until(lambda: operator.running(namespace, *names), what="2 Running workers")
    pods = await operator.pods(namespace)
    for index, name in enumerate(names):
        assert jax_env(pods[name]) == JaxEnv("jax-spmd-worker-0.jax-spmd", 6666, 2, index)
        assert pods[name]["metadata"]["labels"].get(ROLE) == ("master" if index == 0 else None)
    services = (await operator.api.list(SERVICES, namespace)).items
    assert [s["metadata"]["name"] for s in services] == ["jax-spmd"], "one headless Service per job"
    for name in names:
        assert (pods[name]["spec"]["hostname"], pods[name]["spec"]["subdomain"]) == (name, "jax-spmd")
    assert await operator.reason(namespace, "jax-spmd", "Running") == "JAXJobRunning"

    control_plane.finish_pod(namespace, names[0], Outcome.SUCCEEDED)
    await wait_until(lambda: _phase(operator, namespace, names[0], "Succeeded"), what="worker 0 Succeeded")
    assert await operator.condition(namespace, "jax-spmd", "Succeeded") is None  # every worker must
    control_plane.finish_pod(namespace, names[1], Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "jax-spmd", "Succeeded") == "JAXJobSucceeded"


async def _phase(op: InProcessOperator, ns: str, name: str, phase: str) -> bool:
    pod = (await op.pods(ns)).get(name) or {}
    return bool(pod.get("status", {}).get("phase") == phase)


async def test_a_failed_worker_fails_the_job_under_the_default_never_and_is_replaced_under_on_failure(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    """JAXJob's default restartPolicy is Never (Kubeflow's), unlike PyTorchJob's OnFailure."""
    for name, fields in (("strict", {}), ("retried", {"restartPolicy": "OnFailure"})):
        specs = {"Worker": replica_spec(2, container_spec("jax"), **fields)}
        manifest = job_manifest(JAXJOB, specs, name=name, namespace=namespace)
        kubectl_apply(control_plane, manifest, namespace=namespace)
    pods = [f"{job}-worker-{i}" for job in ("strict", "retried") for i in range(2)]
    await wait_until(lambda: operator.running(namespace, *pods), what="4 Running workers")
    assert (await operator.pods(namespace))["strict-worker-1"]["spec"]["restartPolicy"] == "Never"
    failed = await operator.after_failure(control_plane, namespace, "strict", "strict-worker-1", 1)
    assert failed == "JAXJobFailed"
    message = (await operator.condition(namespace, "strict", "Failed") or {}).get("message")
    assert message == f"JAXJob {namespace}/strict has failed because 1 Worker replica(s) failed."
    assert (
        await operator.after_failure(control_plane, namespace, "retried", "retried-worker-1", 1) == "replaced"
    )
    assert "JAXJobRestarting" in operator.events.reasons()


def test_kubectl_scale_sets_the_workers_and_unknown_replica_types_are_refused(
    control_plane: ControlPlane, namespace: str
) -> None:
    specs = {"Worker": replica_spec(2, container_spec("jax"))}
    kubectl_apply(control_plane, job_manifest(JAXJOB, specs, namespace=namespace), namespace=namespace)
    control_plane.kubectl("scale", "jaxjobs/job", "--replicas=3", namespace=namespace)
    replicas = control_plane.kubectl(
        "get", "jaxjob", "job", "-o", "jsonpath={.spec.jaxReplicaSpecs.Worker.replicas}", namespace=namespace
    ).stdout
    assert replicas == "3"
    bad = job_manifest(
        JAXJOB, {"Chief": replica_spec(1, container_spec("jax"))}, name="bad", namespace=namespace
    )
    with pytest.raises(KubectlError, match="keys must be replica types of JAXJob: Worker"):
        kubectl_apply(control_plane, bad, namespace=namespace)
