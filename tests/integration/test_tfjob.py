"""TFJobs on the real control plane: submitted with `kubectl apply`, reconciled by TFJobController running
in-process against kube-apiserver, scheduled by kube-scheduler onto kwok's fake nodes, and finished by kwok
(the test annotates a pod with its outcome and exit code). Restart policies are exercised on real pods.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import TFJOB
from kubetrain.common.kube.resources import SERVICES
from kubetrain.controllers.tensorflow import TFJobController
from kubetrain.podcontract import TFConfig, TFTask
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

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tensorflow"


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with on_control_plane(control_plane, [TFJobController], namespace=namespace) as op:
        yield op


def tf_config(pod: dict[str, Any]) -> TFConfig | None:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")
    return TFConfig.from_env({e["name"]: e["value"] for e in container.get("env") or []})


async def test_ps_workers_example_runs_and_succeeds_when_worker_0_does(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    control_plane.kubectl("apply", "-f", str(EXAMPLES / "tf-ps-workers.yaml"), namespace=namespace)
    names = [f"tf-ps-workers-{r}-{i}" for r, n in (("ps", 2), ("worker", 3)) for i in range(n)]
    await wait_until(lambda: operator.running(namespace, *names), what="5 Running pods")
    pods = await operator.pods(namespace)
    for name in names:
        config = tf_config(pods[name])
        assert config is not None
        rtype, index = name.rsplit("-", 2)[1:]
        assert config.task == TFTask(type=rtype, index=int(index))
        assert config.address == f"{name}.tf-ps-workers.{namespace}.svc:2222"
        assert (pods[name]["spec"]["hostname"], pods[name]["spec"]["subdomain"]) == (name, "tf-ps-workers")
    services = (await operator.api.list(SERVICES, namespace)).items
    assert [s["metadata"]["name"] for s in services] == ["tf-ps-workers"], "one headless Service per job"
    assert await operator.reason(namespace, "tf-ps-workers", "Running") == "TFJobRunning"

    control_plane.finish_pod(namespace, "tf-ps-workers-worker-0", Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "tf-ps-workers", "Succeeded") == "TFJobSucceeded"
    # cleanPodPolicy Running: the parameter servers and the other workers go, the finished worker stays.
    await wait_until(
        lambda: _names(operator, namespace, ["tf-ps-workers-worker-0"]), what="only worker 0 left", within=90
    )


async def _names(op: InProcessOperator, ns: str, expected: list[str]) -> bool:
    return sorted(await op.pods(ns)) == expected


async def test_multiworker_example_retries_137_then_needs_all_workers(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator, request: pytest.FixtureRequest
) -> None:
    documents = list(yaml.safe_load_all((EXAMPLES / "tf-multiworker-mirrored.yaml").read_text()))
    for claim in claims_in(documents):  # what a provisioner would make
        volume = provide_volume(control_plane, namespace, claim, "/tmp/ckpt")
        request.addfinalizer(lambda v=volume: control_plane.kubectl("delete", "pv", v, "--wait=false"))
    (job,) = (d for d in documents if d["kind"] == "TFJob")
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "All"  # the file keeps its pods for `kubectl logs`
    job["metadata"].pop("annotations")  # its gang failure policy: this test is about restartPolicy ExitCode
    control_plane.kubectl("apply", "-f", "-", namespace=namespace, input=yaml.safe_dump_all(documents))
    names = [f"tf-multiworker-worker-{i}" for i in range(4)]
    await wait_until(lambda: operator.running(namespace, *names), what="4 Running workers")
    old = (await operator.pods(namespace))[names[2]]["metadata"]["uid"]
    control_plane.finish_pod(namespace, names[2], Outcome.FAILED, exit_code=137)  # ExitCode policy: retried
    await wait_until(lambda: operator.replaced(namespace, names[2], old), what="worker 2 replaced")
    assert "TFJobRestarting" in operator.events.reasons()

    for name in names[:3]:
        control_plane.finish_pod(namespace, name, Outcome.SUCCEEDED)
    await wait_until(lambda: _phase(operator, namespace, names[0], "Succeeded"), what="worker 0 Succeeded")
    assert await operator.condition(namespace, "tf-multiworker", "Succeeded") is None  # AllWorkers
    control_plane.finish_pod(namespace, names[3], Outcome.SUCCEEDED)
    assert await operator.reason(namespace, "tf-multiworker", "Succeeded") == "TFJobSucceeded"
    await wait_until(lambda: _names(operator, namespace, []), what="cleanPodPolicy All", within=90)


async def _phase(op: InProcessOperator, ns: str, name: str, phase: str) -> bool:
    pod = (await op.pods(ns)).get(name) or {}
    return bool(pod.get("status", {}).get("phase") == phase)


@pytest.mark.parametrize(
    ("policy", "exit_code", "outcome"),
    [
        ("OnFailure", 1, "replaced"),
        ("Never", 1, "TFJobFailed"),
        ("ExitCode", 137, "replaced"),
        ("ExitCode", 1, "TFJobFailed"),
    ],
)
async def test_restart_policy(
    control_plane: ControlPlane,
    namespace: str,
    operator: InProcessOperator,
    policy: str,
    exit_code: int,
    outcome: str,
) -> None:
    specs = {"Worker": replica_spec(2, container_spec("tensorflow"), restartPolicy=policy)}
    kubectl_apply(control_plane, job_manifest(TFJOB, specs, namespace=namespace), namespace=namespace)
    await wait_until(
        lambda: operator.running(namespace, "job-worker-0", "job-worker-1"), what="Running workers"
    )
    # Under OnFailure a pod reaches Failed only when it is evicted or its node shuts down.
    assert await operator.after_failure(control_plane, namespace, "job", "job-worker-1", exit_code) == outcome
    if outcome == "replaced":
        assert "TFJobRestarting" in operator.events.reasons()
        control_plane.finish_pod(namespace, "job-worker-0", Outcome.SUCCEEDED)
        assert await operator.reason(namespace, "job", "Succeeded") == "TFJobSucceeded"
    else:
        failed = await operator.condition(namespace, "job", "Failed")
        assert failed is not None
        assert failed["message"] == f"TFJob {namespace}/job has failed because 1 Worker replica(s) failed."
