"""kubetrain's Kueue integration on the JobController template, with the test playing Kueue: it writes the
admission and the eviction into the Workload's status, as Kueue's scheduler would."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubetrain.common.job.ledger import Ledger
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kueue import RESOURCE_FLAVORS, WORKLOADS, KueueIntegration, workload_name

from .harness import TOY, Cluster, ClusterApi
from .toyjob import toy_job

QUEUE = "team-a"
GPU_FLAVOR = {
    "metadata": {"name": "gpu"},
    "spec": {
        "nodeLabels": {"pool": "gpu"},
        "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


@pytest.fixture
async def kueue() -> AsyncIterator[Cluster]:
    cluster = Cluster()
    cluster.api = ClusterApi(clock=cluster.clock, status_subresources=[TOY, WORKLOADS])
    await cluster.api.create(RESOURCE_FLAVORS, None, GPU_FLAVOR)
    await cluster.start_operator(kueue=KueueIntegration(frozenset({"ToyJob"})))
    yield cluster
    await cluster.op.stop(cluster.clock)


def queued(body: Obj, queue: str = QUEUE) -> Obj:
    body["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = queue
    return body


async def workloads(cluster: Cluster) -> list[Obj]:
    return (await cluster.api.list(WORKLOADS, "ns")).items


async def the_workload(cluster: Cluster) -> Obj:
    found = await workloads(cluster)
    assert len(found) == 1, [objects.name(w) for w in found]
    return found[0]


def _cond(ctype: str, status: str, reason: str) -> Obj:
    time = "2026-01-01T00:00:00Z"
    return {"type": ctype, "status": status, "reason": reason, "message": reason, "lastTransitionTime": time}


async def admit(cluster: Cluster, *, flavor: str = "gpu", checks: list[Obj] | None = None) -> None:
    """What Kueue's scheduler writes when it admits the Workload."""
    wl = await the_workload(cluster)
    assignments = [
        {"name": p["name"], "count": p["count"], "flavors": {"cpu": flavor}} for p in wl["spec"]["podSets"]
    ]
    status: dict[str, Any] = {
        "admission": {"clusterQueue": "cq", "podSetAssignments": assignments},
        "conditions": [
            _cond("QuotaReserved", "True", "QuotaReserved"),
            _cond("Admitted", "True", "Admitted"),
        ],
    }
    if checks is not None:
        status["admissionChecks"] = checks
    await cluster.api.patch(WORKLOADS, "ns", objects.name(wl), {"status": status}, subresource="status")
    await cluster.step()


async def evict(cluster: Cluster, reason: str = "Preempted") -> None:
    wl = await the_workload(cluster)
    conditions = [*wl["status"]["conditions"], _cond("Evicted", "True", reason)]
    await cluster.api.patch(WORKLOADS, "ns", objects.name(wl), {"status": {"conditions": conditions}},
                            subresource="status")  # fmt: skip
    await cluster.step()


def wl_condition(wl: Obj, ctype: str) -> Obj | None:
    return next((c for c in (wl.get("status") or {}).get("conditions") or () if c["type"] == ctype), None)


async def test_a_queued_job_waits_with_no_pod_and_one_workload_in_kueues_shape(kueue: Cluster) -> None:
    job = await kueue.submit(queued(toy_job(workers=2)))
    await kueue.step(5)
    assert await kueue.pods() == {}, "no pod before admission"
    assert await kueue.services() == {}, "no Service before admission"
    wl = await the_workload(kueue)
    uid = job["metadata"]["uid"]
    assert objects.name(wl) == workload_name(
        kind="ToyJob", group="toy.kubetrain.test", job_name="toy", job_uid=uid
    )
    assert wl["spec"]["queueName"] == QUEUE
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 2)]
    assert wl["spec"]["podSets"][1]["template"] == job["spec"]["toyReplicaSpecs"]["Worker"]["template"]
    assert wl["metadata"]["labels"]["kueue.x-k8s.io/job-uid"] == uid
    owner = objects.controller_of(wl)
    assert owner is not None and owner["uid"] == uid
    assert wl["spec"]["priority"] == 0
    last = (await kueue.job())["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == ("Queued", "True", "ToyJobQueued")
    assert QUEUE in last["message"]
    reasons = [e.reason for e in kueue.op.events.events]
    assert "CreatedWorkload" in reasons and "ToyJobQueued" in reasons


async def test_admission_creates_the_pods_with_the_flavors_placement(kueue: Cluster) -> None:
    await kueue.submit(queued(toy_job(workers=1)))
    update = {"name": "worker", "nodeSelector": {"zone": "a"}, "annotations": {"a": "b"}}
    check = {"name": "prov", "state": "Ready", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z",
             "podSetUpdates": [update]}  # fmt: skip
    await admit(kueue, checks=[check])
    pods = await kueue.pods()
    assert sorted(pods) == ["toy-leader-0", "toy-worker-0"]
    worker = pods["toy-worker-0"]
    assert worker["spec"]["nodeSelector"] == {"pool": "gpu", "zone": "a"}
    assert worker["spec"]["tolerations"] == GPU_FLAVOR["spec"]["tolerations"]
    assert worker["metadata"]["labels"]["kueue.x-k8s.io/podset"] == "worker"
    assert worker["metadata"]["annotations"]["a"] == "b"
    assert pods["toy-leader-0"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    job = await kueue.job()
    assert "nodeSelector" not in job["spec"]["toyReplicaSpecs"]["Worker"]["template"]["spec"], (
        "spec untouched"
    )
    assert all(c["type"] != "Queued" for c in job["status"]["conditions"])
    assert "Started" in [e.reason for e in kueue.op.events.events]


async def test_pods_ready_and_finished_are_told_to_the_workload(kueue: Cluster) -> None:
    await kueue.submit(queued(toy_job(workers=1)))
    await admit(kueue)
    await kueue.run_all()
    ready = wl_condition(await the_workload(kueue), "PodsReady")
    assert ready is not None and (ready["status"], ready["reason"]) == ("True", "Started")
    await kueue.set_phase("toy-worker-0", "Succeeded", exit_code=0)
    assert (await the_workload(kueue))["status"]["reclaimablePods"] == [{"name": "worker", "count": 1}]
    await kueue.set_phase("toy-leader-0", "Succeeded", exit_code=0)
    assert await kueue.is_true("Succeeded")
    done = wl_condition(await the_workload(kueue), "Finished")
    assert done is not None and (done["status"], done["reason"]) == ("True", "Succeeded")


async def test_eviction_stops_the_pods_requeues_and_charges_no_restart(kueue: Cluster) -> None:
    await kueue.submit(queued(toy_job(workers=2)))
    await admit(kueue)
    await kueue.run_all()
    await evict(kueue, "Preempted")
    await kueue.step(1)
    assert await kueue.pods() == {}, "no pod after eviction"
    assert await kueue.services() == {}
    job = await kueue.job()
    last = job["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == ("Queued", "True", "ToyJobEvictedPreempted")
    assert not await kueue.is_true("Restarting") and not await kueue.is_true("Failed")
    assert Ledger.read(job["metadata"].get("annotations") or {}).restarts == 0, "no restart charged"
    wl = await the_workload(kueue)
    assert "admission" not in wl["status"], "the quota is handed back"
    assert wl_condition(wl, "QuotaReserved")["status"] == "False"  # type: ignore[index]
    assert wl_condition(wl, "Requeued")["status"] == "True"  # type: ignore[index]
    # Kueue admits it again: it runs again, and can still succeed
    conditions = [c for c in wl["status"]["conditions"] if c["type"] != "Evicted"]
    await kueue.api.patch(WORKLOADS, "ns", objects.name(wl), {"status": {"conditions": conditions}},
                          subresource="status")  # fmt: skip
    await admit(kueue)
    assert sorted(await kueue.pods()) == ["toy-leader-0", "toy-worker-0", "toy-worker-1"]


async def test_a_workload_made_by_kueues_own_integration_is_left_alone(kueue: Cluster) -> None:
    body = queued(toy_job(workers=1))
    body["spec"]["runPolicy"] = {"suspend": True}  # as Kueue's webhook leaves it
    job = await kueue.api.create(TOY, "ns", body)
    name = workload_name(
        kind="ToyJob", group="toy.kubetrain.test", job_name="toy", job_uid=job["metadata"]["uid"]
    )
    owner = objects.owner_reference(job)
    theirs = {"metadata": {"name": name, "namespace": "ns", "ownerReferences": [owner]},
              "spec": {"queueName": QUEUE, "podSets": []}}  # fmt: skip
    await kueue.api.create(WORKLOADS, "ns", theirs)
    await kueue.step(5)
    assert await kueue.is_true("Suspended"), "honours suspend, as with Kueue's integration"
    await kueue.api.patch(TOY, "ns", "toy", {"spec": {"runPolicy": {"suspend": False}}})  # Kueue admits it
    await kueue.step(5)
    assert len(await workloads(kueue)) == 1, "no second Workload"
    assert "WorkloadOfKueue" in [e.reason for e in kueue.op.events.events]
    assert sorted(await kueue.pods()) == ["toy-leader-0", "toy-worker-0"]


async def test_a_job_without_a_queue_runs_at_once_with_no_workload(kueue: Cluster) -> None:
    await kueue.submit(toy_job(workers=1))
    assert sorted(await kueue.pods()) == ["toy-leader-0", "toy-worker-0"]
    assert await workloads(kueue) == []


async def test_a_queued_job_moved_to_another_queue_or_resized_takes_its_workload_along(
    kueue: Cluster,
) -> None:
    await kueue.submit(queued(toy_job(workers=1)))
    await kueue.api.patch(TOY, "ns", "toy", {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-b"}}})
    await kueue.step()
    assert (await the_workload(kueue))["spec"]["queueName"] == "team-b"
    resize = {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 3}}}}
    await kueue.api.patch(TOY, "ns", "toy", resize)
    await kueue.step()
    wl = await the_workload(kueue)
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("leader", 1), ("worker", 3)]
    held = {"status": {"conditions": [_cond("QuotaReserved", "True", "QuotaReserved")]}}
    await kueue.api.patch(WORKLOADS, "ns", objects.name(wl), held, subresource="status")
    await kueue.api.patch(TOY, "ns", "toy", {"spec": {"toyReplicaSpecs": {"Worker": {"replicas": 1}}}})
    await kueue.step()
    wl = await the_workload(kueue)
    assert wl["spec"]["podSets"][1]["count"] == 3, "a Workload holding quota is left as it is"


async def test_an_admission_that_contradicts_the_template_fails_the_job(kueue: Cluster) -> None:
    body = queued(toy_job(leader=None, workers=1))
    body["spec"]["toyReplicaSpecs"]["Worker"]["template"]["spec"]["nodeSelector"] = {"pool": "cpu"}
    await kueue.submit(body)
    await admit(kueue)
    failed = await kueue.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobAdmissionConflict"
    assert "nodeSelector" in failed["message"] and "pool" in failed["message"]
    assert await kueue.pods() == {}
    done = wl_condition(await the_workload(kueue), "Finished")
    assert done is not None and done["reason"] == "Failed"


async def test_a_job_written_for_kueues_own_integration_runs_on_admission(kueue: Cluster) -> None:
    """`suspend: true` with a queue label (as Kueue's kubeflow docs say to write it): the Workload is the
    switch, so it is queued and runs once admitted, its spec not rewritten."""
    body = queued(toy_job(workers=1))
    body["spec"]["runPolicy"] = {"suspend": True}
    await kueue.submit(body)
    assert await kueue.is_true("Queued") and await kueue.pods() == {}
    await admit(kueue)
    assert sorted(await kueue.pods()) == ["toy-leader-0", "toy-worker-0"]
    assert (await kueue.job())["spec"]["runPolicy"]["suspend"] is True


async def test_a_cluster_moved_from_kueues_integration_takes_its_workloads_over() -> None:
    """Kueue's configuration no longer integrates the kind (`adopt`): the job's Workload that Kueue's own
    integration made is labelled as the operator's and drives the job from then on; still one Workload."""
    cluster = Cluster()
    cluster.api = ClusterApi(clock=cluster.clock, status_subresources=[TOY, WORKLOADS])
    await cluster.api.create(RESOURCE_FLAVORS, None, GPU_FLAVOR)
    body = queued(toy_job(workers=1))
    body["spec"]["runPolicy"] = {"suspend": True}  # as Kueue's webhook left it
    job = await cluster.api.create(TOY, "ns", body)
    name = workload_name(
        kind="ToyJob", group="toy.kubetrain.test", job_name="toy", job_uid=job["metadata"]["uid"]
    )
    podsets = [{"name": "leader", "count": 1, "template": {}}, {"name": "worker", "count": 1, "template": {}}]
    meta = {"name": name, "namespace": "ns", "ownerReferences": [objects.owner_reference(job)],
            "finalizers": ["kueue.x-k8s.io/resource-in-use"]}  # fmt: skip
    theirs = {"metadata": meta, "spec": {"queueName": QUEUE, "podSets": podsets}}
    await cluster.api.create(WORKLOADS, "ns", theirs)
    await cluster.start_operator(kueue=KueueIntegration(frozenset({"ToyJob"}), adopt=True))
    try:
        await cluster.step(5)
        wl = await the_workload(cluster)
        assert wl["metadata"]["labels"]["toy.kubetrain.test/operator-name"] == "toyjob-controller"
        assert "AdoptedWorkload" in [e.reason for e in cluster.op.events.events]
        assert not wl["metadata"].get("finalizers"), "no finalizer left that no integration would remove"
        assert await cluster.is_true("Queued") and await cluster.pods() == {}
        await admit(cluster)
        assert sorted(await cluster.pods()) == ["toy-leader-0", "toy-worker-0"]
    finally:
        await cluster.op.stop(cluster.clock)
