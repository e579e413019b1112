"""XGBoostJobs on the real control plane: submitted with `kubectl apply`, reconciled by XGBoostJobController
running in-process against kube-apiserver, scheduled by kube-scheduler onto kwok's fake nodes, and finished
by kwok (the test annotates a pod with its outcome and exit code).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import XGBOOSTJOB
from kubetrain.common.kube.resources import SERVICES
from kubetrain.controllers.xgboost import XGBoostJobController
from kubetrain.podcontract import XGBoostEnv
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

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "xgboost" / "xgboost-digits.yaml"
ROLE = "training.kubeflow.org/job-role"
JOB = "xgboost-digits"


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with on_control_plane(control_plane, [XGBoostJobController], namespace=namespace) as op:
        yield op


def xgb_env(pod: dict[str, Any]) -> XGBoostEnv | None:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "xgboost")
    return XGBoostEnv.from_env({e["name"]: e["value"] for e in container.get("env") or []})


async def test_example_runs_with_the_collective_env_and_succeeds_when_the_master_has(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    control_plane.kubectl("apply", "-f", str(EXAMPLE), namespace=namespace)
    names = [f"{JOB}-master-0", f"{JOB}-worker-0", f"{JOB}-worker-1"]
    await wait_until(lambda: operator.running(namespace, *names), what="a Running master and 2 workers")
    pods = await operator.pods(namespace)
    workers = (f"{JOB}-worker-0.{JOB}", f"{JOB}-worker-1.{JOB}")
    for rank, name in enumerate(names):
        assert xgb_env(pods[name]) == XGBoostEnv(f"{JOB}-master-0.{JOB}", 9999, 3, rank, 9999, workers)
        assert pods[name]["metadata"]["labels"].get(ROLE) == ("master" if rank == 0 else None)
        assert (pods[name]["spec"]["hostname"], pods[name]["spec"]["subdomain"]) == (name, JOB)
        assert pods[name]["spec"]["restartPolicy"] == "Never"
    services = (await operator.api.list(SERVICES, namespace)).items
    assert [s["metadata"]["name"] for s in services] == [JOB], "one headless Service per job"
    assert await operator.reason(namespace, JOB, "Running") == "XGBoostJobRunning"

    for name in names[1:]:
        control_plane.finish_pod(namespace, name, Outcome.SUCCEEDED)
    await wait_until(lambda: _workers_succeeded(operator, namespace, 2), what="the status counts 2 workers")
    assert await operator.condition(namespace, JOB, "Succeeded") is None  # the master decides
    control_plane.finish_pod(namespace, names[0], Outcome.SUCCEEDED)
    assert await operator.reason(namespace, JOB, "Succeeded") == "XGBoostJobSucceeded"


async def _workers_succeeded(op: InProcessOperator, namespace: str, count: int) -> bool:
    status = (await op.job(namespace, JOB)).get("status") or {}
    return bool((status.get("replicaStatuses") or {}).get("Worker", {}).get("succeeded") == count)


async def test_a_failed_worker_fails_the_job_under_the_default_never(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    specs = {
        "Master": replica_spec(1, container_spec("xgboost")),
        "Worker": replica_spec(2, container_spec("xgboost")),
    }
    kubectl_apply(
        control_plane,
        job_manifest(XGBOOSTJOB, specs, name="strict", namespace=namespace),
        namespace=namespace,
    )
    pods = ["strict-master-0", "strict-worker-0", "strict-worker-1"]
    await wait_until(lambda: operator.running(namespace, *pods), what="3 Running pods")
    failed = await operator.after_failure(control_plane, namespace, "strict", "strict-worker-1", 1)
    assert failed == "XGBoostJobFailed"
    message = (await operator.condition(namespace, "strict", "Failed") or {}).get("message")
    assert message == f"XGBoostJob {namespace}/strict has failed because 1 Worker replica(s) failed."


def test_the_api_server_refuses_a_job_without_its_master_or_with_two(
    control_plane: ControlPlane, namespace: str
) -> None:
    workers = {"Worker": replica_spec(2, container_spec("xgboost"))}
    with pytest.raises(KubectlError, match=r"spec.xgbReplicaSpecs.Master is required; add a Master"):
        kubectl_apply(
            control_plane,
            job_manifest(XGBOOSTJOB, workers, name="headless", namespace=namespace),
            namespace=namespace,
        )
    two = {**workers, "Master": replica_spec(2, container_spec("xgboost"))}
    with pytest.raises(KubectlError, match=r"Master must have replicas: 1"):
        kubectl_apply(
            control_plane, job_manifest(XGBOOSTJOB, two, name="two", namespace=namespace), namespace=namespace
        )
    bad = {**workers, "Chief": replica_spec(1, container_spec("xgboost"))}
    with pytest.raises(KubectlError, match="keys must be replica types of XGBoostJob: Master, Worker"):
        kubectl_apply(
            control_plane, job_manifest(XGBOOSTJOB, bad, name="bad", namespace=namespace), namespace=namespace
        )
