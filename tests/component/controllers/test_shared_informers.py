"""Two kinds' controllers in one operator share the pods and Services informers, and stay out of each
other's jobs.

Every controller's children come from one informer per resource (`operator-name in (...)`), so each
controller's store holds the other kinds' pods too. What a user relies on: a TFJob and a PyTorchJob of the
same name in the same namespace each get, count and clean up only their own pods and Services, and a
change of one job's pod reconciles that job alone. Pod and Service names do not collide (PS/Chief against
Master/Worker, a Service per replica: with a Service per job, the two jobs would ask for the same name),
so every overlap left is the one the sharing makes: the job's name, its namespace, the `job-name` label
and the store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubetrain.api import PYTORCHJOB, TFJOB
from kubetrain.common.job import ServiceMode
from kubetrain.common.kube import objects
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, SERVICES, Obj
from kubetrain.common.progress.service import ProgressConfig, ProgressService
from kubetrain.common.testing import FakeClock
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.controllers.settings import ControllerSettings
from kubetrain.controllers.tensorflow import TFJobController
from kubetrain.testing.operator import InProcessOperator, job_manifest, replica_spec

NS = "ns"
TF_PODS = ["job-chief-0", "job-ps-0"]
TORCH_PODS = ["job-master-0", "job-worker-0"]
ALL = {"runPolicy": {"cleanPodPolicy": "All"}}
PER_REPLICA = ControllerSettings(service_mode=ServiceMode.REPLICA)


class Cluster:
    def __init__(self) -> None:
        self.clock = FakeClock()
        tf, torch = TFJobController.job_resource(), PyTorchJobController.job_resource()
        self.api = InMemoryApiClient(clock=self.clock, status_subresources=[tf, torch])
        self.operator = InProcessOperator(
            self.api, [TFJobController, PyTorchJobController], settings=PER_REPLICA, clock=self.clock
        )

    async def step(self) -> None:
        for _ in range(3):
            await self.clock.advance(0.1)

    async def owned(self, resource: Any, kind: str) -> list[str]:
        """Live objects of `resource` whose controlling owner is the `kind` job named `job`."""
        items = (await self.api.list(resource, NS)).items
        return sorted(objects.name(o) for o in items if _owner(o) == (kind, "job") and not _deleting(o))

    async def phase(self, name: str, phase: str, *, exit_code: int | None = None) -> None:
        state: dict[str, Any] = {"running": {}}
        if exit_code is not None:
            state = {"terminated": {"exitCode": exit_code, "reason": "Completed"}}
        statuses = [{"name": c, "restartCount": 0, "state": state} for c in ("tensorflow", "pytorch")]
        await self.api.patch(PODS, NS, name, {"status": {"phase": phase, "containerStatuses": statuses}})
        await self.step()

    def reconciles(self, controller: str) -> float:
        value = self.operator.metrics.registry.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": controller, "result": "success"}
        )
        return value or 0.0

    async def status(self, kind: str) -> Obj:
        return dict((await self.operator.job(NS, "job", kind=kind)).get("status") or {})


def _owner(obj: Obj) -> tuple[str, str] | None:
    ref = objects.controller_of(obj)
    return (str(ref.get("kind")), str(ref.get("name"))) if ref else None


def _deleting(obj: Obj) -> bool:
    return objects.is_deleting(obj)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    c = Cluster()
    async with c.operator:
        await c.step()
        tf = {"PS": replica_spec(1), "Chief": replica_spec(1)}
        await c.api.create(c.operator.controllers["TFJob"].job_resource(), NS, job_manifest(TFJOB, tf, **ALL))
        torch = {"Master": replica_spec(1), "Worker": replica_spec(1)}
        resource = c.operator.controllers["PyTorchJob"].job_resource()
        await c.api.create(resource, NS, job_manifest(PYTORCHJOB, torch, **ALL))
        await c.step()
        yield c


async def test_the_kinds_share_one_pods_and_one_services_informer(cluster: Cluster) -> None:
    manager = cluster.operator.manager
    shared = [i for i in manager.informers if i.resource in (PODS, SERVICES)]
    assert [(i.resource, i.label_selector) for i in shared] == [
        (res, "training.kubeflow.org/operator-name in (pytorchjob-controller,tfjob-controller)")
        for res in (PODS, SERVICES)
    ]
    # one informer: the fake refuses its streaming list, so it lists once and watches (2: the refused one)
    assert (cluster.api.count("list", PODS), cluster.api.count("watch", PODS)) == (1, 2)


def test_the_progress_service_reads_the_controllers_informers_and_opens_only_its_ca_copies() -> None:
    """Jobs and pods come from the controllers' informers; its one own watch is of its CA ConfigMaps,
    selected by their label, so that a copy changed or deleted is written again."""
    operator = Cluster().operator  # built, not started: informers are made while wiring
    before = list(operator.manager.informers)
    config = ProgressConfig("127.0.0.1", 0, "https://op:8443", "kubetrain", 30.0, ("op",))
    ProgressService(operator.manager, operator.api, [TFJOB, PYTORCHJOB], config)
    (added,) = [i for i in operator.manager.informers if i not in before]
    assert added.resource == CONFIGMAPS and added.label_selector == "kubetrain.io/progress-ca in (true)"


async def test_each_kind_creates_and_counts_only_its_own_pods_and_services(cluster: Cluster) -> None:
    assert await cluster.owned(PODS, "TFJob") == TF_PODS
    assert await cluster.owned(PODS, "PyTorchJob") == TORCH_PODS
    assert await cluster.owned(SERVICES, "TFJob") == TF_PODS
    assert await cluster.owned(SERVICES, "PyTorchJob") == ["job-master-0", "job-worker-0"]

    for name in TF_PODS:
        await cluster.phase(name, "Running")
    tf, torch = await cluster.status("TFJob"), await cluster.status("PyTorchJob")
    assert {r: s.get("active", 0) for r, s in tf["replicaStatuses"].items()} == {"PS": 1, "Chief": 1}
    assert {r: s.get("active", 0) for r, s in torch["replicaStatuses"].items()} == {"Master": 0, "Worker": 0}


async def test_a_pod_event_reconciles_only_the_job_of_its_kind(cluster: Cluster) -> None:
    tf, torch = cluster.reconciles("tfjob-controller"), cluster.reconciles("pytorchjob-controller")
    await cluster.phase("job-ps-0", "Running")
    assert cluster.reconciles("tfjob-controller") > tf, "the TFJob saw its pod change"
    assert cluster.reconciles("pytorchjob-controller") == torch

    tf = cluster.reconciles("tfjob-controller")
    await cluster.phase("job-worker-0", "Running")
    assert cluster.reconciles("pytorchjob-controller") > torch, "the PyTorchJob saw its pod change"
    assert cluster.reconciles("tfjob-controller") == tf


async def test_a_finished_job_deletes_only_its_own_pods_and_services(cluster: Cluster) -> None:
    await cluster.phase("job-chief-0", "Succeeded", exit_code=0)
    await cluster.step()
    assert await cluster.operator.condition(NS, "job", "Succeeded", kind="TFJob") is not None
    assert await cluster.owned(PODS, "TFJob") == []
    assert await cluster.owned(SERVICES, "TFJob") == []
    assert await cluster.owned(PODS, "PyTorchJob") == TORCH_PODS
    assert await cluster.owned(SERVICES, "PyTorchJob") == ["job-master-0", "job-worker-0"]
    assert await cluster.operator.condition(NS, "job", "Succeeded", kind="PyTorchJob") is None
