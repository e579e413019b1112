"""The failure modes users hit with the Kubeflow operators, each reproduced against the template."""

from __future__ import annotations

from kubetrain.api import CleanPodPolicy, RestartPolicy, RunPolicy
from kubetrain.common.errors import Conflict, Forbidden, Invalid
from kubetrain.common.events import EventType
from kubetrain.common.kube.resources import PODS

from .harness import TOY, Cluster
from .toyjob import toy_job


async def test_a_pod_stuck_terminating_on_a_lost_node_is_force_deleted_and_replaced(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=2, restart_policy=RestartPolicy.ON_FAILURE))
    await cluster.run_all()
    old = (await cluster.pods())["toy-worker-1"]["metadata"]["uid"]
    await cluster.lose_node("toy-worker-1")
    await cluster.api.delete(PODS, "ns", "toy-worker-1")  # the node lifecycle controller evicts it
    await cluster.step(59)
    assert cluster.api.force_deleted == [], "within its grace period plus the margin the pod may still go"
    assert (await cluster.pods())["toy-worker-1"]["metadata"]["uid"] == old
    await cluster.step(1)
    assert cluster.api.force_deleted == ["toy-worker-1"]
    replacement = (await cluster.pods())["toy-worker-1"]
    assert replacement["metadata"]["uid"] != old and "deletionTimestamp" not in replacement["metadata"]
    await cluster.run_all()
    assert await cluster.is_true("Running")


async def test_a_lost_pod_fails_a_never_job_at_once_instead_of_hanging(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1, restart_policy=RestartPolicy.NEVER))
    await cluster.run_all()
    await cluster.lose_node("toy-worker-0")
    await cluster.api.delete(PODS, "ns", "toy-worker-0")
    await cluster.step()
    failed = await cluster.condition("Failed")
    assert (
        failed is not None
        and failed["message"] == "ToyJob ns/toy has failed because 1 Worker replica(s) failed."
    )


async def test_cleanup_of_a_finished_job_force_deletes_pods_stuck_terminating(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1, run_policy=RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)))
    await cluster.run_all()
    await cluster.lose_node("toy-worker-0")
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    assert sorted(await cluster.pods()) == ["toy-worker-0"]
    await cluster.step(60)
    assert await cluster.pods() == {}
    assert cluster.api.force_deleted == ["toy-worker-0"]


async def test_completed_pods_removed_by_the_cluster_are_not_recreated(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=2))
    await cluster.run_all()
    await cluster.set_phase("toy-worker-1", "Succeeded", exit_code=0)
    await cluster.api.delete(PODS, "ns", "toy-worker-1")  # the pod garbage collector
    await cluster.step()
    await cluster.restart_operator()
    assert "toy-worker-1" not in await cluster.pods()
    assert (await cluster.job())["status"]["replicaStatuses"]["Worker"]["succeeded"] == 1
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    for name in await cluster.pods():
        await cluster.api.delete(PODS, "ns", name)
    await cluster.step(100)
    assert await cluster.pods() == {}
    assert await cluster.is_true("Succeeded") and not await cluster.is_true("Failed")


async def test_a_failure_to_create_pods_is_shown_on_the_job_and_retried(cluster: Cluster) -> None:
    quota = 'pods "toy-leader-0" is forbidden: exceeded quota: compute, requested: cpu=2, limited: cpu=1'
    cluster.api.fail("create", Forbidden(quota, reason="Forbidden"), resource=PODS, times=20)
    await cluster.submit(toy_job(workers=1))
    failed = await cluster.condition("CreateFailed")
    assert failed is not None and (failed["status"], failed["reason"]) == ("True", "ToyJobFailedCreatePod")
    assert quota in failed["message"]
    assert (await cluster.conditions())[-1][0] == "CreateFailed", "the State column shows it"
    warnings = [e for e in cluster.op.events.events if e.type is EventType.WARNING]
    assert warnings and warnings[0].reason == "FailedCreatePod" and quota in warnings[0].message
    await cluster.step(60)
    assert sorted(await cluster.pods()) == ["toy-leader-0", "toy-worker-0"]
    assert await cluster.is_true("Created") and await cluster.condition("CreateFailed") is None


async def test_a_rejected_pod_keeps_the_job_visible_and_backs_off(cluster: Cluster) -> None:
    rejected = 'admission webhook "policy.example.com" denied the request: images must be signed'
    cluster.api.fail("create", Invalid(rejected, reason="Invalid"), resource=PODS, times=10_000)
    await cluster.submit(toy_job(workers=1))
    await cluster.step(60)
    failed = await cluster.condition("CreateFailed")
    assert failed is not None and failed["status"] == "True" and rejected in failed["message"]
    first_minute = cluster.api.count("create", PODS)
    await cluster.step(600)
    next_ten_minutes = cluster.api.count("create", PODS) - first_minute
    assert 2 < first_minute <= 32 and 0 < next_ten_minutes <= 10, "retried with exponential backoff"


async def test_a_finished_job_is_not_reconciled_in_a_loop(cluster: Cluster) -> None:
    await cluster.submit(toy_job(workers=1))
    await cluster.run_all()
    await cluster.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    await cluster.step(10)
    writes = _writes(cluster)
    reconciles = _reconciles(cluster)
    await cluster.step(3600)
    assert _reconciles(cluster) == reconciles, "nothing is due: no periodic reconcile of a finished job"
    await cluster.api.patch(TOY, "ns", "toy", {"metadata": {"labels": {"touched": "yes"}}})
    await cluster.set_phase("toy-worker-0", "Succeeded", exit_code=0)
    assert _reconciles(cluster) > reconciles
    assert _writes(cluster) == writes + 2, "only the test's own two patches: the operator wrote nothing"


async def test_a_conflict_on_the_status_write_is_retried(cluster: Cluster) -> None:
    stale = "the object has been modified; please apply your changes to the latest version and try again"
    cluster.api.fail("patch", Conflict(stale, reason="Conflict"), resource=TOY, times=2)
    await cluster.submit(toy_job(workers=1))
    await cluster.step(1)
    assert await cluster.is_true("Created")
    assert (await cluster.job())["status"]["startTime"]


def _writes(cluster: Cluster) -> int:
    return sum(1 for c in cluster.api.calls if c.verb in ("create", "patch", "delete", "replace"))


def _reconciles(cluster: Cluster) -> float:
    registry = cluster.op.metrics.registry
    return sum(
        registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": "toyjob-controller", "result": r}
        )
        or 0.0
        for r in ("success", "error", "requeue", "requeue_after")
    )
