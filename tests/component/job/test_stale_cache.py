"""Deterministic names make creation idempotent when the cache lags: AlreadyExists of our own pod is success.

These tests call `reconcile()` directly with hand-filled caches, to show exactly a cache that has not
seen a pod the API server already holds.
"""

from __future__ import annotations

import pytest

from kubetrain.common.errors import AlreadyExists
from kubetrain.common.job import replica_labels
from kubetrain.common.job.controller import CONFLICT_RETRY
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, SERVICES, Obj
from kubetrain.common.kube.store import Store
from kubetrain.common.reconcile import Request
from kubetrain.common.testing import FakeClock, MemoryEventRecorder

from .harness import TOY, ClusterApi
from .toyjob import TOYJOB, ToyJobController, toy_job


async def _setup(pod_owner: str | None) -> tuple[ClusterApi, ToyJobController, Obj]:
    clock = FakeClock()
    api = ClusterApi(clock=clock, status_subresources=[TOY])
    job = await api.create(TOY, "ns", toy_job(workers=1))
    pod: Obj = {"metadata": {"name": "toy-worker-0", "namespace": "ns"}, "spec": {"containers": []}}
    if pod_owner == "job":
        pod["metadata"]["ownerReferences"] = [objects.owner_reference(job)]
    await api.create(PODS, "ns", pod)
    cache = {res: Store() for res in (TOY, PODS, SERVICES, CONFIGMAPS)}
    cache[TOY].upsert(job)  # the cache knows the job, not the pod
    controller = ToyJobController(api=api, cache=cache, clock=clock, recorder=MemoryEventRecorder())
    return api, controller, job


async def test_already_exists_for_our_own_pod_counts_as_created() -> None:
    api, controller, _ = await _setup(pod_owner="job")
    await controller.reconcile(Request("ns", "toy"))
    status = (await api.get(TOY, "ns", "toy"))["status"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("Created", "True")]
    assert api.count("create", PODS) == 3, "the test's pod, then the leader and the worker"


async def test_already_exists_for_a_pod_of_someone_else_is_an_error_on_the_job() -> None:
    api, controller, _ = await _setup(pod_owner=None)
    with pytest.raises(AlreadyExists):
        await controller.reconcile(Request("ns", "toy"))
    status = (await api.get(TOY, "ns", "toy"))["status"]
    created = status["conditions"][-1]
    assert (created["type"], created["status"], created["reason"]) == (
        "CreateFailed",
        "True",
        "ToyJobFailedCreatePod",
    )
    assert 'pod "toy-worker-0" already exists and is not owned by this job' in created["message"]


async def test_a_stale_cached_job_is_not_acted_on_after_our_own_write() -> None:
    api, controller, job = await _setup(pod_owner="job")
    await api.delete(PODS, "ns", "toy-worker-0")
    cache = controller.cache
    for name in ("toy-leader-0", "toy-worker-0"):
        pod = {
            "metadata": {"name": name, "namespace": "ns", "ownerReferences": [objects.owner_reference(job)],
                         "labels": replica_labels("toyjob-controller", "toy", name.split("-")[1].title(), 0,
                                                  prefix=TOYJOB.label_prefix)},
            "status": {"phase": "Succeeded"},
        }  # fmt: skip
        cache[PODS].upsert(await api.create(PODS, "ns", pod))
    await controller.reconcile(Request("ns", "toy"))
    assert (await api.get(TOY, "ns", "toy"))["status"]["conditions"][-1]["type"] == "Succeeded"
    for name in ("toy-leader-0", "toy-worker-0"):  # the pod garbage collector removes the completed pods
        await api.delete(PODS, "ns", name)
        cache[PODS].remove("ns", name)
    creates, gets = api.count("create", PODS), api.count("get", TOY)
    result = await controller.reconcile(Request("ns", "toy"))  # the cache still shows the job unfinished
    assert api.count("create", PODS) == creates, "no pod of a finished job is recreated from a stale cache"
    assert result.requeue_after is not None
    assert api.count("get", TOY) == gets, "the cache shows the version our write was based on: no GET needed"
    cache[TOY].upsert(await api.get(TOY, "ns", "toy"))  # the watch event arrives
    await controller.reconcile(Request("ns", "toy"))
    assert api.count("create", PODS) == creates


async def test_a_job_someone_else_wrote_after_us_is_looked_up_once_then_acted_on() -> None:
    api, controller, _ = await _setup(pod_owner="job")
    await api.delete(PODS, "ns", "toy-worker-0")
    await controller.reconcile(Request("ns", "toy"))  # creates the pods and writes Created
    cache = controller.cache
    theirs = await api.patch(TOY, "ns", "toy", {"metadata": {"labels": {"team": "a"}}})
    cache[TOY].upsert(theirs)  # the cache shows a version the fence never saw, newer than ours
    gets = api.count("get", TOY)
    result = await controller.reconcile(Request("ns", "toy"))
    assert api.count("get", TOY) == gets + 1, "one GET tells a newer version from an older one"
    assert result.requeue_after != CONFLICT_RETRY, "the cache is current: the reconcile went ahead"
    await controller.reconcile(Request("ns", "toy"))
    assert api.count("get", TOY) == gets + 1, "the fence was cleared"
