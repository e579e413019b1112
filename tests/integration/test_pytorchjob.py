"""PyTorchJobs on the real control plane: submitted with `kubectl apply`, reconciled by PyTorchJobController
running in-process against kube-apiserver, run and finished by kwok. What only a real server shows: the
HPA accepted by autoscaling/v2 validation, `kubectl scale` through the CRD's scale subresource, Kueue-style
admission by clearing `suspend`, and restart policies on real pods.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import PYTORCHJOB
from kubetrain.common.kube.resources import HPAS
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.podcontract import TorchEnv
from kubetrain.testing.controlplane import ControlPlane
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
from kubetrain.testing.volumes import claims_in, provide_volume

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "pytorch"
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
}


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with on_control_plane(control_plane, [PyTorchJobController], namespace=namespace) as op:
        yield op


def torch_env(pod: dict[str, Any]) -> TorchEnv:
    return TorchEnv.parse({e["name"]: e["value"] for e in pod["spec"]["containers"][0].get("env") or []})


async def pod_names(op: InProcessOperator, ns: str, expected: list[str]) -> bool:
    return sorted(await op.pods(ns)) == expected


async def test_ddp_example_gets_ranks_waits_for_the_master_and_succeeds_with_it(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator, request: pytest.FixtureRequest
) -> None:
    example = EXAMPLES / "pytorch-ddp.yaml"
    for claim in claims_in(yaml.safe_load_all(example.read_text())):  # what a provisioner would make
        volume = provide_volume(control_plane, namespace, claim, "/tmp/ckpt")
        request.addfinalizer(lambda v=volume: control_plane.kubectl("delete", "pv", v, "--wait=false"))
    control_plane.kubectl("apply", "-f", str(example), namespace=namespace)
    names = ["pytorch-ddp-master-0", *(f"pytorch-ddp-worker-{i}" for i in range(3))]
    await wait_until(lambda: operator.running(namespace, *names), what="4 Running pods")
    pods = await operator.pods(namespace)
    for rank, name in enumerate(names):
        master = torch_env(pods[name]).master
        assert master is not None
        assert (master.addr, master.port, master.world_size, master.rank) == (
            "pytorch-ddp-master-0.pytorch-ddp",
            23456,
            4,
            rank,
        )
        inits = [c["name"] for c in pods[name]["spec"].get("initContainers") or []]
        assert inits == ([] if rank == 0 else ["init-pytorch"])
    assert await operator.reason(namespace, "pytorch-ddp", "Running") == "PyTorchJobRunning"
    control_plane.finish_pod(namespace, "pytorch-ddp-worker-0", Outcome.SUCCEEDED)
    control_plane.finish_pod(namespace, "pytorch-ddp-master-0", Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "pytorch-ddp", "Succeeded") == "PyTorchJobSucceeded"


async def test_elastic_example_with_metrics_scales_and_drops_its_hpa_while_suspended(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    body = yaml.safe_load((EXAMPLES / "pytorch-elastic.yaml").read_text())
    body["spec"]["elasticPolicy"]["metrics"] = [CPU]
    kubectl_apply(control_plane, body, namespace=namespace)
    hpa = await wait_until(lambda: _hpa(operator, namespace), what="the HPA")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 4)
    workers = ["pytorch-elastic-worker-0", "pytorch-elastic-worker-1"]
    await wait_until(lambda: operator.running(namespace, *workers), what="2 Running workers")

    control_plane.kubectl("scale", "pytorchjob/pytorch-elastic", "--replicas=3", namespace=namespace)
    await wait_until(
        lambda: operator.running(namespace, *workers, "pytorch-elastic-worker-2"), what="3 workers"
    )
    added = torch_env((await operator.pods(namespace))["pytorch-elastic-worker-2"]).rendezvous
    assert added is not None and (added.endpoint, added.min_nodes, added.max_nodes) == (
        "pytorch-elastic-worker-0.pytorch-elastic:23456",
        2,
        4,
    )

    control_plane.kubectl(
        "patch", "pytorchjob/pytorch-elastic", "--type=merge", "-p", _suspend(True), namespace=namespace
    )
    assert await operator.reason(namespace, "pytorch-elastic", "Suspended") == "PyTorchJobSuspended"
    await wait_until(lambda: _no_hpa(operator, namespace), what="the HPA deleted")
    await wait_until(lambda: pod_names(operator, namespace, []), what="pods deleted", within=90)

    control_plane.kubectl(
        "patch", "pytorchjob/pytorch-elastic", "--type=merge", "-p", _suspend(False), namespace=namespace
    )
    await wait_until(lambda: _hpa(operator, namespace), what="the HPA back")
    await wait_until(
        lambda: operator.running(namespace, *workers, "pytorch-elastic-worker-2"), what="resumed"
    )


async def _hpa(op: InProcessOperator, ns: str) -> dict[str, Any] | None:
    items = (await op.api.list(HPAS, ns)).items
    return items[0] if items else None


async def _no_hpa(op: InProcessOperator, ns: str) -> bool:
    return not (await op.api.list(HPAS, ns)).items


def _suspend(value: bool) -> str:
    return json.dumps({"spec": {"runPolicy": {"suspend": value}}})


async def test_kueue_example_waits_suspended_until_admitted(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    control_plane.kubectl("apply", "-f", str(EXAMPLES / "pytorch-kueue.yaml"), namespace=namespace)
    assert await operator.reason(namespace, "pytorch-queued", "Suspended") == "PyTorchJobSuspended"
    assert await operator.pods(namespace) == {}
    control_plane.kubectl(
        "patch", "pytorchjob/pytorch-queued", "--type=merge", "-p", _suspend(False), namespace=namespace
    )
    await wait_until(
        lambda: operator.running(namespace, "pytorch-queued-master-0"), what="the admitted master"
    )
    assert await operator.condition(namespace, "pytorch-queued", "Suspended") is None
    control_plane.finish_pod(namespace, "pytorch-queued-master-0", Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "pytorch-queued", "Succeeded") == "PyTorchJobSucceeded"


@pytest.mark.parametrize(
    ("policy", "exit_code", "outcome"),
    [
        ("OnFailure", 1, "replaced"),
        ("Never", 1, "PyTorchJobFailed"),
        ("ExitCode", 137, "replaced"),
        ("ExitCode", 1, "PyTorchJobFailed"),
    ],
)
async def test_restart_policy_of_the_master(
    control_plane: ControlPlane,
    namespace: str,
    operator: InProcessOperator,
    policy: str,
    exit_code: int,
    outcome: str,
) -> None:
    main = container_spec("pytorch")
    specs = {"Master": replica_spec(1, main, restartPolicy=policy), "Worker": replica_spec(1, main)}
    kubectl_apply(control_plane, job_manifest(PYTORCHJOB, specs, namespace=namespace), namespace=namespace)
    await wait_until(lambda: operator.running(namespace, "job-master-0", "job-worker-0"), what="Running pods")
    # Under OnFailure a pod reaches Failed only when it is evicted or its node shuts down.
    assert await operator.after_failure(control_plane, namespace, "job", "job-master-0", exit_code) == outcome
    if outcome == "replaced":
        assert "PyTorchJobRestarting" in operator.events.reasons()
        assert await operator.condition(namespace, "job", "Failed") is None
        control_plane.finish_pod(namespace, "job-master-0", Outcome.SUCCEEDED)
        assert await operator.reason(namespace, "job", "Succeeded") == "PyTorchJobSucceeded"
    else:
        failed = await operator.condition(namespace, "job", "Failed")
        assert failed is not None
        assert (
            failed["message"] == f"PyTorchJob {namespace}/job has failed because 1 Master replica(s) failed."
        )


async def test_pods_the_api_server_refuses_show_in_the_state_column_until_fixed(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    """A pod template the CRD accepts but no pod may have (a request above its limit): `kubectl get` says
    `CreateFailed`, the server's message is on the condition, and fixing the job clears it."""
    main = container_spec("pytorch", resources={"requests": {"cpu": "2"}, "limits": {"cpu": "1"}})
    specs = {"Master": replica_spec(1, main), "Worker": replica_spec(1, main)}
    kubectl_apply(control_plane, job_manifest(PYTORCHJOB, specs, namespace=namespace), namespace=namespace)
    failed = await operator.wait_for_condition(namespace, "job", "CreateFailed")
    assert failed["reason"] == "PyTorchJobFailedCreatePod"
    assert "must be less than or equal to cpu limit" in failed["message"], failed
    listed = control_plane.kubectl("get", "pytorchjob", "job", namespace=namespace).stdout.splitlines()
    assert listed[0].split()[:2] == ["NAME", "STATE"] and listed[1].split()[:2] == ["job", "CreateFailed"]
    path = '{.status.conditions[?(@.type=="CreateFailed")].message}'
    shown = control_plane.kubectl("get", "pytorchjob", "job", "-o", f"jsonpath={path}", namespace=namespace)
    assert "must be less than or equal to cpu limit" in shown.stdout
    fix = [
        {"op": "remove", "path": f"/spec/pytorchReplicaSpecs/{rtype}/template/spec/containers/0/resources"}
        for rtype in ("Master", "Worker")
    ]
    control_plane.kubectl(
        "patch", "pytorchjob", "job", "--type=json", "-p", json.dumps(fix), namespace=namespace
    )
    await wait_until(lambda: operator.running(namespace, "job-master-0", "job-worker-0"), what="Running pods")
    await operator.wait_for_condition(namespace, "job", "Running")
    job = await operator.job(namespace, "job")
    assert "CreateFailed" not in [c["type"] for c in job["status"]["conditions"]]
