"""The JobController template on the real control plane: kube-apiserver, controller-manager, scheduler, kwok.

The operator runs in-process (a Manager with the test-only ToyJob kind, its CRD generated from the model)
against the real API server; the scheduler places pods on kwok's fake nodes and kwok runs and finishes
them. What the fake cannot vouch for is checked here: real admission (quota), real graceful deletion
and force deletion, owner references honoured by the garbage collector, the status subresource with
resourceVersion preconditions, and deadlines and TTLs on the wall clock.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kubetrain.api import CleanPodPolicy, RestartPolicy, RunPolicy, SchedulingPolicy
from kubetrain.api.crd import custom_resource_definition
from kubetrain.common.errors import NotFound
from kubetrain.common.job import LEDGER_ANNOTATION, GangScheduling, add_job_controller
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, SCHED_PODGROUPS, SERVICES, Obj, Resource
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.manager import Manager
from kubetrain.common.testing import MemoryEventRecorder
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import ANNOTATION_EXIT_CODE, ANNOTATION_OUTCOME, ANNOTATION_RUN_FOR, Outcome

pytestmark = pytest.mark.integration


def _load_toy() -> ModuleType:
    """The ToyJob kind of the component tests (a plain module: it imports only kubetrain)."""
    path = Path(__file__).resolve().parents[1] / "component" / "job" / "toyjob.py"
    spec = importlib.util.spec_from_file_location("kubetrain_test_toyjob", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


toy = _load_toy()
TOY: Resource = toy.ToyJobController.job_resource()
RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)


@pytest.fixture(scope="module")
def toy_crd(control_plane: ControlPlane) -> ControlPlane:
    crd = custom_resource_definition(toy.TOYJOB)
    control_plane.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crd))
    control_plane.wait_established(toy.TOYJOB.crd_name)
    return control_plane


@pytest.fixture(scope="module")
def podgroup_crd(toy_crd: ControlPlane) -> ControlPlane:
    """scheduler-plugins' PodGroup resource (schema left open: only the operator's writes are checked)."""
    open_schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    schema = {"type": "object", "properties": {"spec": open_schema, "status": open_schema}}
    version = {
        "name": SCHED_PODGROUPS.version,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "schema": {"openAPIV3Schema": schema},
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{SCHED_PODGROUPS.group}"},
        "spec": {
            "group": SCHED_PODGROUPS.group,
            "names": {
                "kind": "PodGroup",
                "plural": "podgroups",
                "singular": "podgroup",
                "listKind": "PodGroupList",
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }
    toy_crd.kubectl("apply", "--server-side", "-f", "-", input=json.dumps(crd))
    toy_crd.wait_established(f"podgroups.{SCHED_PODGROUPS.group}")
    return toy_crd


class Operator:
    def __init__(self, api: KubeApiClient, namespace: str, gang: GangScheduling | None = None) -> None:
        self.api = api
        self.namespace = namespace
        self.events = MemoryEventRecorder()
        self.manager = Manager(api, http_address=None, namespace=namespace)
        add_job_controller(
            self.manager, toy.ToyJobController, recorder=self.events, terminating_timeout=2.0, gang=gang
        )

    async def submit(self, body: Obj) -> Obj:
        return await self.api.create(TOY, self.namespace, body)

    async def job(self, name: str = "toy") -> Obj:
        return await self.api.get(TOY, self.namespace, name)

    async def condition(self, ctype: str, name: str = "toy") -> dict[str, Any] | None:
        conditions = ((await self.job(name)).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == ctype), None)

    async def is_true(self, ctype: str, name: str = "toy") -> bool:
        cond = await self.condition(ctype, name)
        return cond is not None and cond["status"] == "True"

    async def pods(self) -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in (await self.api.list(PODS, self.namespace)).items}

    async def live_pods(self) -> dict[str, Obj]:
        return {n: p for n, p in (await self.pods()).items() if not p["metadata"].get("deletionTimestamp")}

    async def services(self) -> list[str]:
        return sorted(s["metadata"]["name"] for s in (await self.api.list(SERVICES, self.namespace)).items)

    async def annotate(self, pod: str, annotations: dict[str, str]) -> None:
        await self.api.patch(PODS, self.namespace, pod, {"metadata": {"annotations": annotations}})

    async def finish(self, pod: str, outcome: Outcome, exit_code: int | None = None) -> None:
        annotations = {ANNOTATION_OUTCOME: outcome.value}
        if exit_code is not None:
            annotations[ANNOTATION_EXIT_CODE] = str(exit_code)
        await self.annotate(pod, annotations)


@asynccontextmanager
async def running(
    plane: ControlPlane, namespace: str, gang: GangScheduling | None = None
) -> AsyncIterator[Operator]:
    api = await KubeApiClient.connect(str(plane.kubeconfig))
    op = Operator(api, namespace, gang)
    task = asyncio.ensure_future(op.manager.run())
    try:
        yield op
    finally:
        op.manager.stop()
        await asyncio.wait_for(task, 60)
        await api.close()


@pytest.fixture
async def operator(toy_crd: ControlPlane, namespace: str) -> AsyncIterator[Operator]:
    async with running(toy_crd, namespace) as op:
        yield op


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 30.0, what: str = "condition"
) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        await asyncio.sleep(0.2)


def _template(job: Obj, rtype: str) -> dict[str, Any]:
    template: dict[str, Any] = job["spec"]["toyReplicaSpecs"][rtype]["template"]
    return template


def _pod_annotations(job: Obj, rtype: str, annotations: dict[str, str]) -> Obj:
    _template(job, rtype).setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
    return job


async def test_children_run_and_the_job_succeeds_then_cleans_up(operator: Operator) -> None:
    policy = RunPolicy(clean_pod_policy=CleanPodPolicy.RUNNING)
    job = await operator.submit(toy.toy_job(workers=2, run_policy=policy, namespace=operator.namespace))

    async def all_running() -> bool:
        pods = await operator.pods()
        return len(pods) == 3 and all(p.get("status", {}).get("phase") == "Running" for p in pods.values())

    await eventually(all_running, what="three Running pods")
    pods = await operator.pods()
    worker = pods["toy-worker-1"]
    assert worker["metadata"]["labels"]["toy.kubetrain.test/replica-index"] == "1"
    assert worker["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    assert worker["spec"]["nodeName"].startswith("kwok-node-")

    async def services() -> bool:
        return await operator.services() == ["toy-leader-0", "toy-worker-0", "toy-worker-1"]

    await eventually(services, what="one headless Service per replica")
    await eventually(lambda: operator.is_true("Running"), what="Running")
    await operator.finish("toy-worker-0", Outcome.SUCCEEDED)

    async def worker_done() -> bool:
        return (await operator.pods())["toy-worker-0"].get("status", {}).get("phase") == "Succeeded"

    # Else the leader may succeed first, and cleanPodPolicy Running rightly deletes a still-Running worker-0.
    await eventually(worker_done, what="toy-worker-0 Succeeded")
    await operator.finish("toy-leader-0", Outcome.SUCCEEDED)
    await eventually(lambda: operator.is_true("Succeeded"), what="Succeeded")

    async def cleaned() -> bool:
        return sorted(await operator.live_pods()) == ["toy-leader-0", "toy-worker-0"]

    await eventually(cleaned, what="cleanPodPolicy Running")
    finished = await operator.job()
    status = finished["status"]
    assert status["completionTime"] and status["replicaStatuses"]["Leader"]["succeeded"] == 1
    await asyncio.sleep(3)
    assert (await operator.job())["metadata"]["resourceVersion"] == finished["metadata"]["resourceVersion"], (
        "a finished job is not written again and again"
    )


async def test_deleting_the_job_garbage_collects_its_children(operator: Operator) -> None:
    await operator.submit(toy.toy_job(workers=1, namespace=operator.namespace))
    await eventually(lambda: _count(operator.pods, 2), what="pods")

    async def hosts_file() -> bool:
        return not await _gone(operator.api, CONFIGMAPS, operator.namespace, "toy-hosts")

    await eventually(hosts_file, what="the extra ConfigMap")
    await operator.api.delete(TOY, operator.namespace, "toy")
    await eventually(lambda: _count(operator.pods, 0), timeout=60, what="pods collected")
    await eventually(lambda: _gone(operator.api, CONFIGMAPS, operator.namespace, "toy-hosts"), timeout=60)


async def test_exit_code_restarts_until_the_backoff_limit(operator: Operator) -> None:
    policy = RunPolicy(backoff_limit=2)
    body = toy.toy_job(
        leader=None, workers=1, restart_policy=RestartPolicy.EXIT_CODE, run_policy=policy,
        namespace=operator.namespace,
    )  # fmt: skip
    crash = {ANNOTATION_OUTCOME: "Failed", ANNOTATION_EXIT_CODE: "137", ANNOTATION_RUN_FOR: "1s"}
    await operator.submit(_pod_annotations(body, "Worker", crash))
    await eventually(lambda: operator.is_true("Failed"), timeout=60, what="Failed after the backoff limit")
    failed = await operator.condition("Failed")
    assert failed is not None and failed["message"] == (
        "Job toy has failed because it has reached the specified backoff limit"
    )
    ledger = json.loads((await operator.job())["metadata"]["annotations"][LEDGER_ANNOTATION])
    assert ledger["restarts"] == 2, "two restarts allowed; the third failure ends the job"
    assert operator.events.reasons().count("ExitedWithCode") == 2


async def test_exit_code_1_fails_the_job_at_once(operator: Operator) -> None:
    body = toy.toy_job(
        leader=None, workers=1, restart_policy=RestartPolicy.EXIT_CODE, namespace=operator.namespace
    )
    await operator.submit(body)
    await eventually(lambda: _phase(operator, "toy-worker-0", "Running"), what="Running")
    uid = (await operator.pods())["toy-worker-0"]["metadata"]["uid"]
    await operator.finish("toy-worker-0", Outcome.FAILED, exit_code=1)
    await eventually(lambda: operator.is_true("Failed"), what="Failed")
    assert (await operator.pods())["toy-worker-0"]["metadata"]["uid"] == uid


async def test_active_deadline_fires_on_time(operator: Operator) -> None:
    policy = RunPolicy(active_deadline_seconds=4)
    await operator.submit(toy.toy_job(workers=1, run_policy=policy, namespace=operator.namespace))
    started = time.monotonic()
    await eventually(lambda: operator.is_true("Failed"), timeout=30, what="deadline")
    assert 2.5 <= time.monotonic() - started < 15, "the deadline fired by itself, on time (whole seconds)"
    failed = await operator.condition("Failed")
    assert failed is not None and "active longer than specified deadline" in failed["message"]
    await eventually(lambda: _count(operator.live_pods, 0), what="pods stopped")


async def test_ttl_deletes_the_finished_job(operator: Operator) -> None:
    policy = RunPolicy(ttl_seconds_after_finished=3)
    await operator.submit(toy.toy_job(leader=1, workers=0, run_policy=policy, namespace=operator.namespace))
    await eventually(lambda: _phase(operator, "toy-leader-0", "Running"), what="Running")
    await operator.finish("toy-leader-0", Outcome.SUCCEEDED)
    await eventually(lambda: operator.is_true("Succeeded"), what="Succeeded")
    finished = time.monotonic()
    await eventually(lambda: _gone(operator.api, TOY, operator.namespace, "toy"), timeout=30, what="TTL")
    assert 1 <= time.monotonic() - finished < 15, "completionTime has whole seconds: up to 1 s early"


async def test_suspend_deletes_pods_and_resume_recreates_them(operator: Operator) -> None:
    policy = RunPolicy(suspend=True)
    await operator.submit(toy.toy_job(workers=1, run_policy=policy, namespace=operator.namespace))
    await eventually(lambda: operator.is_true("Suspended"), what="Suspended")
    assert await operator.pods() == {}
    await operator.api.patch(TOY, operator.namespace, "toy", {"spec": {"runPolicy": {"suspend": False}}})
    await eventually(lambda: _count(operator.pods, 2), what="pods after resume")
    # the resume's reconcile creates the pods first and writes its status last: wait for that write too
    await eventually(lambda: _reason(operator, "Suspended", "ToyJobResumed"), what="ToyJobResumed")
    resumed = await operator.condition("Suspended")
    assert resumed is not None and resumed["status"] == "False"
    await operator.api.patch(TOY, operator.namespace, "toy", {"spec": {"runPolicy": {"suspend": True}}})
    await eventually(lambda: _count(operator.pods, 0), what="pods deleted on suspend")
    assert await operator.services() == []


async def test_a_job_managed_by_multikueue_is_left_alone(operator: Operator) -> None:
    policy = RunPolicy(managed_by="kueue.x-k8s.io/multikueue")
    await operator.submit(toy.toy_job(workers=1, run_policy=policy, namespace=operator.namespace))
    await asyncio.sleep(3)
    assert await operator.pods() == {}
    assert "status" not in await operator.job()


async def test_a_pod_stuck_terminating_on_a_lost_node_is_force_deleted(operator: Operator) -> None:
    node = {"metadata": {"name": f"lost-{operator.namespace}"}, "spec": {}}
    await operator.api.create(NODES, None, node)
    try:
        body = toy.toy_job(
            leader=None, workers=1, restart_policy=RestartPolicy.ON_FAILURE, namespace=operator.namespace
        )
        spec = _template(body, "Worker")["spec"]
        spec.update(nodeName=node["metadata"]["name"], terminationGracePeriodSeconds=1)
        await operator.submit(body)
        await eventually(lambda: _count(operator.pods, 1), what="the pod")
        first = (await operator.pods())["toy-worker-0"]["metadata"]["uid"]
        await operator.api.delete(PODS, operator.namespace, "toy-worker-0")  # an eviction nobody confirms
        pod = (await operator.pods())["toy-worker-0"]
        assert pod["metadata"]["deletionTimestamp"], "the API server waits for the lost kubelet"

        async def replaced() -> bool:
            pods = await operator.pods()
            return "toy-worker-0" in pods and pods["toy-worker-0"]["metadata"]["uid"] != first

        await eventually(replaced, timeout=30, what="force deletion and replacement")
        assert any(e.message == "Force-deleted pod: toy-worker-0" for e in operator.events.events)
    finally:
        await operator.api.delete(NODES, None, node["metadata"]["name"])


async def test_a_quota_rejection_is_shown_on_the_job_until_it_clears(operator: Operator) -> None:
    quota = {"metadata": {"name": "two-pods"}, "spec": {"hard": {"pods": "2"}}}
    await operator.api.create(RESOURCE_QUOTAS, operator.namespace, quota)

    async def counted() -> (
        bool
    ):  # admission enforces a quota once the quota controller has filled status.used
        return "used" in (
            (await operator.api.get(RESOURCE_QUOTAS, operator.namespace, "two-pods")).get("status") or {}
        )

    await eventually(counted, what="quota usage")
    await operator.submit(toy.toy_job(workers=2, namespace=operator.namespace))

    await eventually(lambda: operator.is_true("CreateFailed"), what="CreateFailed=True")
    failed = await operator.condition("CreateFailed")
    assert failed is not None and failed["reason"] == "ToyJobFailedCreatePod"
    assert "exceeded quota" in failed["message"]
    await operator.api.delete(RESOURCE_QUOTAS, operator.namespace, "two-pods")
    await eventually(lambda: _count(operator.pods, 3), timeout=60, what="all pods once the quota is gone")

    async def cleared() -> bool:
        return await operator.condition("CreateFailed") is None

    await eventually(cleared, what="CreateFailed cleared")


async def test_a_foreign_pod_with_a_replica_name_is_reported(operator: Operator) -> None:
    squatter = {"metadata": {"name": "toy-worker-0"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    await operator.api.create(PODS, operator.namespace, squatter)
    await operator.submit(toy.toy_job(leader=None, workers=1, namespace=operator.namespace))

    async def reported() -> bool:
        failed = await operator.condition("CreateFailed")
        return failed is not None and "already exists and is not owned by this job" in failed["message"]

    await eventually(reported, what="CreateFailed naming the squatter")


async def test_a_hook_that_raises_fails_the_job_with_its_error(
    operator: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    def configure_pod(self: Any, job: Any, rtype: str, index: int, pod: Obj) -> Obj:
        raise KeyError("TOY_SEED")

    monkeypatch.setattr(toy.ToyJobController, "configure_pod", configure_pod)
    await operator.submit(toy.toy_job(leader=None, workers=1, namespace=operator.namespace))
    await eventually(lambda: operator.is_true("Failed"), what="Failed")
    failed = await operator.condition("Failed")
    assert failed is not None and failed["reason"] == "ToyJobReconcileError"
    assert failed["message"].startswith("configure_pod raised KeyError: 'TOY_SEED' (5 tries")
    assert "ToyJobReconcileError" in operator.events.reasons()
    assert await operator.pods() == {}


async def test_a_completed_pod_removed_by_the_cluster_is_not_rerun(operator: Operator) -> None:
    await operator.submit(toy.toy_job(leader=None, workers=2, namespace=operator.namespace))
    await eventually(lambda: _phase(operator, "toy-worker-1", "Running"), what="Running")
    await operator.finish("toy-worker-1", Outcome.SUCCEEDED)
    await eventually(lambda: _phase(operator, "toy-worker-1", "Succeeded"), what="worker 1 done")
    await asyncio.sleep(1)
    await operator.api.delete(PODS, operator.namespace, "toy-worker-1")
    await asyncio.sleep(3)
    assert "toy-worker-1" not in await operator.pods()
    status = (await operator.job())["status"]
    assert status["replicaStatuses"]["Worker"]["succeeded"] == 1


async def test_gang_scheduling_creates_the_podgroup_and_decorates_the_pods(
    podgroup_crd: ControlPlane, namespace: str
) -> None:
    policy = RunPolicy(scheduling_policy=SchedulingPolicy(min_available=2, schedule_timeout_seconds=30))
    async with running(podgroup_crd, namespace, GangScheduling("scheduler-plugins-scheduler")) as op:
        job = await op.submit(toy.toy_job(workers=2, run_policy=policy, namespace=namespace))
        await eventually(lambda: _count(op.pods, 3), what="pods")
        group = await op.api.get(SCHED_PODGROUPS, namespace, "toy")
        assert group["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 30}
        assert group["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        for pod in (await op.pods()).values():
            assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
            assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "toy"
            assert pod["status"]["phase"] == "Pending", "no such scheduler here: the gang waits"
        await op.api.patch(TOY, namespace, "toy", {"spec": {"runPolicy": {"suspend": True}}})
        await eventually(lambda: _gone(op.api, SCHED_PODGROUPS, namespace, "toy"), what="PodGroup deleted")


async def _count(pods: Callable[[], Awaitable[dict[str, Obj]]], n: int) -> bool:
    return len(await pods()) == n


async def _phase(operator: Operator, pod: str, phase: str) -> bool:
    found = (await operator.pods()).get(pod)
    return found is not None and (found.get("status") or {}).get("phase") == phase


async def _reason(operator: Operator, ctype: str, reason: str) -> bool:
    found = await operator.condition(ctype)
    return found is not None and found.get("reason") == reason


async def _gone(api: KubeApiClient, resource: Resource, namespace: str, name: str) -> bool:
    try:
        await api.get(resource, namespace, name)
    except NotFound:
        return True
    return False
