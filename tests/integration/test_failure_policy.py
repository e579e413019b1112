"""The gang failure policy on the real control plane: kube-apiserver stores the annotation, kwok runs and
fails the pods, the PyTorchJob controller runs in-process. What only a real server shows: graceful pod
deletion (the gang is recreated only once every old pod is gone), and the ledger read back after an
operator restart.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.common.job.failurepolicy import FAILURE_POLICY_ANNOTATION
from kubetrain.common.kube import objects
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.testing import operator as testop
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome
from kubetrain.testing.operator import InProcessOperator, wait_until

pytestmark = pytest.mark.integration

PODS = ["job-master-0", "job-worker-0", "job-worker-1"]


@pytest.fixture
async def operator(control_plane: ControlPlane, namespace: str) -> AsyncIterator[InProcessOperator]:
    async with testop.on_control_plane(control_plane, [PyTorchJobController], namespace=namespace) as op:
        yield op


def gang_job(namespace: str, policy: dict[str, object]) -> dict[str, object]:
    main = testop.container_spec("pytorch")
    specs = {
        "Master": testop.replica_spec(1, main, restartPolicy="Never"),
        "Worker": testop.replica_spec(2, main, restartPolicy="Never"),
    }
    body = testop.job_manifest(PYTORCHJOB, specs, namespace=namespace, runPolicy={"backoffLimit": 0})
    body["metadata"]["annotations"] = {FAILURE_POLICY_ANNOTATION: json.dumps(policy)}
    return body


async def uids(op: InProcessOperator, namespace: str) -> dict[str, str]:
    return {name: objects.uid(pod) for name, pod in (await op.pods(namespace)).items()}


async def test_a_killed_rank_restarts_the_whole_gang_and_the_job_then_succeeds(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    policy = {"maxGangRestarts": 1, "rules": [{"action": "RestartGang", "onExitCodes": [137]}]}
    testop.kubectl_apply(control_plane, gang_job(namespace, policy), namespace=namespace)
    await wait_until(lambda: operator.running(namespace, *PODS), what="the gang running")
    before = await uids(operator, namespace)
    control_plane.finish_pod(namespace, "job-worker-1", Outcome.FAILED, exit_code=137)

    async def recreated() -> bool:
        now = await uids(operator, namespace)
        return sorted(now) == PODS and not set(now.values()) & set(before.values())

    await wait_until(recreated, what="every pod of the gang recreated")
    await wait_until(lambda: operator.running(namespace, *PODS), what="the new gang running")
    # Restarting=True (reason PyTorchJobGangRestart) gives way to Running, as in Kubeflow; its Event stays
    told = [e.message for e in operator.events.events if e.reason == "PyTorchJobGangRestart"]
    assert (
        len(told) == 1 and "gang restart 1 of 1: pod job-worker-1 (Worker) failed, exit code 137" in told[0]
    )
    assert await operator.condition(namespace, "job", "Failed") is None, "backoffLimit 0 is not charged"
    labels = {"job_namespace": namespace, "framework": "pytorch", "reason": "Error"}
    assert operator.metrics.registry.get_sample_value("kubetrain_gang_restarts_total", labels) == 1
    assert "RankFailed" in operator.events.reasons()

    # the limit of gang restarts is read back from the job's ledger: a second kill fails the job
    control_plane.finish_pod(namespace, "job-worker-0", Outcome.FAILED, exit_code=137)
    assert await operator.reason(namespace, "job", "Failed") == "PyTorchJobGangRestartLimitExceeded"


async def test_a_gang_whose_progress_report_stops_is_restarted_after_the_deadline(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    testop.kubectl_apply(
        control_plane, gang_job(namespace, {"progressDeadlineSeconds": 3}), namespace=namespace
    )
    await wait_until(lambda: operator.running(namespace, *PODS), what="the gang running")
    before = await uids(operator, namespace)
    # the trainer's last report, as the operator's progress endpoint writes it; then no report comes
    now = datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    report = {"status": {"trainerStatus": {"progressPercentage": 10, "lastUpdatedTime": now}}}
    resource = PyTorchJobController.job_resource()
    await operator.api.patch(resource, namespace, "job", report, subresource="status")

    async def restarted() -> bool:
        return not set((await uids(operator, namespace)).values()) & set(before.values())

    await wait_until(restarted, what="the stalled gang recreated", within=30)
    told = [e.message for e in operator.events.events if e.reason == "PyTorchJobGangRestart"]
    assert len(told) == 1 and "training made no progress" in told[0]
    labels = {"job_namespace": namespace, "framework": "pytorch", "reason": "ProgressStalled"}
    assert operator.metrics.registry.get_sample_value("kubetrain_gang_restarts_total", labels) == 1


async def test_an_invalid_policy_fails_the_job_naming_the_field(
    control_plane: ControlPlane, namespace: str, operator: InProcessOperator
) -> None:
    testop.kubectl_apply(
        control_plane, gang_job(namespace, {"rules": [{"action": "Reboot"}]}), namespace=namespace
    )
    failed = await operator.wait_for_condition(namespace, "job", "Failed")
    assert failed["reason"] == "PyTorchJobFailedValidation"
    assert f"metadata.annotations[{FAILURE_POLICY_ANNOTATION}].rules[0].action" in failed["message"]
    assert await operator.pods(namespace) == {}
