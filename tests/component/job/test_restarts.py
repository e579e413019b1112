"""Restart policies and backoffLimit, counted from what the cluster shows, across an operator restart."""

from __future__ import annotations

import pytest

from kubetrain.api import RestartPolicy, RunPolicy

from .harness import Cluster
from .toyjob import toy_job


async def test_never_fails_the_job_on_the_first_failed_pod(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=2, restart_policy=RestartPolicy.NEVER))
    await cluster.run_all()
    uid = (await cluster.pods())["toy-worker-1"]["metadata"]["uid"]
    await cluster.set_phase("toy-worker-1", "Failed", exit_code=137)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailed"
    assert failed["message"] == "ToyJob ns/toy has failed because 1 Worker replica(s) failed."
    assert (await cluster.pods())["toy-worker-1"]["metadata"]["uid"] == uid, (
        "the failed pod is kept for its logs"
    )
    assert cluster.op.counter("training_operator_jobs_failed") == 1


@pytest.mark.parametrize("policy", [RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS])
async def test_on_failure_and_always_replace_a_failed_pod(cluster: Cluster, policy: RestartPolicy) -> None:
    await cluster.submit(toy_job(leader=None, workers=2, restart_policy=policy))
    pod = (await cluster.pods())["toy-worker-0"]
    assert pod["spec"]["restartPolicy"] == policy.value, "the kubelet restarts containers in place"
    await cluster.run_all()
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=1)
    replaced = (await cluster.pods())["toy-worker-0"]
    assert replaced["metadata"]["uid"] != pod["metadata"]["uid"]
    restarting = [e for e in cluster.op.events.events if e.reason == "ToyJobRestarting"]
    assert [(e.type, e.message) for e in restarting] == [
        ("Warning", "job toy is restarting because Worker replica(s) failed.")
    ]
    assert "ExitedWithCode" in cluster.op.events.reasons()
    # a pod created by a later reconcile is told by an Event of its own, as Kubeflow's operators do
    recreated = [e.message for e in cluster.op.events.events if e.reason == "SuccessfulCreatePod"]
    assert recreated == ["Created pod: toy-worker-0"]
    assert cluster.op.counter("training_operator_jobs_restarted") == 1
    await cluster.run_all()
    assert await cluster.is_true("Running") and await cluster.condition("Restarting") is None


async def test_exit_code_retries_signals_and_fails_on_application_errors(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=2, restart_policy=RestartPolicy.EXIT_CODE))
    pods = await cluster.pods()
    assert pods["toy-worker-0"]["spec"]["restartPolicy"] == "Never", "ExitCode runs as Never"
    await cluster.run_all()
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=137)
    assert (await cluster.pods())["toy-worker-0"]["metadata"]["uid"] != pods["toy-worker-0"]["metadata"][
        "uid"
    ]
    assert "ToyJobRestarting" in cluster.op.events.reasons()
    assert not await cluster.is_true("Failed")
    await cluster.set_phase("toy-worker-1", "Failed", exit_code=1)
    failed = await cluster.condition("Failed")
    assert (
        failed is not None
        and failed["message"] == "ToyJob ns/toy has failed because 1 Worker replica(s) failed."
    )
    assert "toy-worker-1" in await cluster.pods()


async def test_backoff_limit_counts_replaced_pods_across_an_operator_restart(cluster: Cluster) -> None:
    policy = RunPolicy(backoff_limit=2)
    await cluster.submit(toy_job(workers=1, restart_policy=RestartPolicy.EXIT_CODE, run_policy=policy))
    for attempt in range(2):
        await cluster.run_all()
        await cluster.set_phase("toy-worker-0", "Failed", exit_code=143)
        assert not await cluster.is_true("Failed"), f"restart {attempt + 1} is within backoffLimit 2"
        await cluster.restart_operator()
    await cluster.run_all()
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=143)
    failed = await cluster.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobFailed"
    assert failed["message"] == "Job toy has failed because it has reached the specified backoff limit"
    pods = await cluster.pods()
    assert "toy-leader-0" not in pods, "running pods of a job over its backoff limit are stopped"
    assert pods["toy-worker-0"]["status"]["phase"] == "Failed", "the last failed pod is kept, not replaced"


async def test_backoff_limit_counts_container_restarts_in_place(cluster: Cluster) -> None:
    await cluster.submit(
        toy_job(workers=1, restart_policy=RestartPolicy.ON_FAILURE, run_policy=RunPolicy(backoff_limit=3))
    )
    await cluster.set_phase("toy-worker-0", "Running", restarts=3)
    assert not await cluster.is_true("Failed")
    await cluster.set_phase("toy-worker-0", "Running", restarts=4)
    failed = await cluster.condition("Failed")
    assert failed is not None and "backoff limit" in failed["message"]
    assert await cluster.pods() == {}, "every pod that was still running has been stopped"


async def test_backoff_limit_zero_fails_on_the_first_restart(cluster: Cluster) -> None:
    await cluster.submit(
        toy_job(workers=1, restart_policy=RestartPolicy.ON_FAILURE, run_policy=RunPolicy(backoff_limit=0))
    )
    await cluster.run_all()
    await cluster.set_phase("toy-worker-0", "Failed", exit_code=1)
    assert await cluster.is_true("Failed")
    assert (await cluster.pods())["toy-worker-0"]["status"]["phase"] == "Failed"
