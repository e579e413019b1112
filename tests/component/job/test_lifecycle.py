"""cleanPodPolicy, suspend and resume, and jobs managed by another controller."""

from __future__ import annotations

import pytest

from kubetrain.api import CleanPodPolicy, RunPolicy

from .harness import TOY, Cluster
from .toyjob import toy_job


@pytest.mark.parametrize(
    ("policy", "left"),
    [
        (CleanPodPolicy.ALL, []),
        (CleanPodPolicy.RUNNING, ["toy-leader-0", "toy-worker-1"]),
        (CleanPodPolicy.NONE, ["toy-leader-0", "toy-worker-0", "toy-worker-1"]),
    ],
)
async def test_clean_pod_policy_on_success(cluster: Cluster, policy: CleanPodPolicy, left: list[str]) -> None:
    await cluster.submit(toy_job(workers=2, run_policy=RunPolicy(clean_pod_policy=policy)))
    await cluster.run_all()
    await cluster.set_phase("toy-worker-1", "Succeeded", exit_code=0)
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    assert await cluster.is_true("Succeeded")
    assert sorted(await cluster.pods()) == left
    assert sorted(await cluster.services()) == left
    assert (await cluster.job())["status"]["replicaStatuses"]["Worker"]["active"] == 0


async def test_a_job_submitted_suspended_creates_nothing_until_resumed(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1, run_policy=RunPolicy(suspend=True)))
    assert await cluster.pods() == {}
    suspended = await cluster.condition("Suspended")
    assert suspended is not None and suspended["status"] == "True"
    assert suspended["reason"] == "ToyJobSuspended" and suspended["message"] == "ToyJob toy is suspended."
    assert "startTime" not in (await cluster.job())["status"]
    await cluster.step(50)
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"runPolicy": {"suspend": False}}})
    await cluster.step()
    assert sorted(await cluster.pods()) == ["toy-leader-0", "toy-worker-0"]
    resumed = await cluster.condition("Suspended")
    assert resumed is not None and (resumed["status"], resumed["reason"]) == ("False", "ToyJobResumed")
    assert (await cluster.job())["status"]["startTime"] == "2025-01-01T00:00:50Z"


async def test_suspending_a_running_job_deletes_its_pods_and_resuming_restarts_them(cluster: Cluster) -> None:
    policy = RunPolicy(active_deadline_seconds=1000)
    await cluster.submit(toy_job(workers=1, run_policy=policy))
    await cluster.run_all()
    await cluster.set_phase("toy-worker-0", "Succeeded", exit_code=0)
    await cluster.step(900)
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"runPolicy": {"suspend": True}}})
    await cluster.step()
    assert await cluster.pods() == {} and await cluster.services() == {}
    assert await cluster.conditions() == [
        ("Created", "True", "ToyJobCreated"),
        ("Running", "False", "ToyJobSuspended"),
        ("Suspended", "True", "ToyJobSuspended"),
    ]
    assert (await cluster.job())["status"]["replicaStatuses"]["Leader"]["active"] == 0
    await cluster.step(500)
    assert not await cluster.is_true("Failed"), "no deadline while suspended"
    await cluster.api.patch(TOY, "ns", "toy", {"spec": {"runPolicy": {"suspend": False}}})
    await cluster.step()
    pods = await cluster.pods()
    assert sorted(pods) == ["toy-leader-0", "toy-worker-0"], "every replica runs again, the completed one too"
    await cluster.step(999)
    assert not await cluster.is_true("Failed"), "the deadline counts from the resume"
    await cluster.step(1)
    assert await cluster.is_true("Failed")


async def test_a_job_managed_by_another_controller_is_left_alone(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1, run_policy=RunPolicy(managed_by="kueue.x-k8s.io/multikueue")))
    await cluster.step(10)
    assert await cluster.pods() == {}
    assert "status" not in await cluster.job()
    writes = [c.verb for c in cluster.api.calls if c.verb in ("create", "patch", "delete", "replace")]
    assert writes == ["create"], "only the user's create of the job itself"
    assert cluster.op.counter("kubetrain_jobs_skipped", reason="managed_by") >= 1, "seen, and left alone"


@pytest.mark.parametrize("policy", [CleanPodPolicy.NONE, CleanPodPolicy.RUNNING])
async def test_success_is_one_status_write_with_the_replicas_still_active_counted_as_succeeded(
    cluster: Cluster, policy: CleanPodPolicy
) -> None:
    """As the Kubeflow operators do, in one write: a second write of only the counts is a request wasted
    per job (at 500 jobs and QPS 50, ten seconds)."""
    await cluster.submit(toy_job(workers=2, run_policy=RunPolicy(clean_pod_policy=policy)))
    await cluster.run_all()
    before = cluster.api.count("patch", TOY)
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    await cluster.step(5)
    assert await cluster.is_true("Succeeded")
    assert cluster.api.count("patch", TOY) - before == 1
    statuses = (await cluster.job())["status"]["replicaStatuses"]
    assert {rtype: (s["active"], s["succeeded"]) for rtype, s in statuses.items()} == {
        "Leader": (0, 1),
        "Worker": (0, 2),
    }
