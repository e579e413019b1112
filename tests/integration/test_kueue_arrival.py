"""Kueue installed after the operator started, against the real API server: the operator finds no Workload
API at start-up, looks again (`kubetrain.common.kueue.arrival`), stops once Kueue's CRDs are served, and,
restarted as its Deployment restarts it, queues a labelled job behind a Workload until Kueue admits it.

A control plane of its own: the session's plane may have Kueue's CRDs already (test_kueue_integration)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from test_kueue_integration import admit, submit, workload

from kubetrain.common.events import EventRecorder
from kubetrain.common.job import JobController
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.kueue import arrival
from kubetrain.common.manager import Manager
from kubetrain.common.operator import Operator, OperatorConfig
from kubetrain.controllers.pytorch import PyTorchJobController
from kubetrain.controllers.settings import ControllerSettings, add_controller
from kubetrain.testing.binaries import find_binaries
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.ecosystem import BUILD_HINT, components
from kubetrain.testing.operator import InProcessOperator, install_crds, wait_until

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def bare_plane() -> Iterator[ControlPlane]:
    """A fresh control plane with kubetrain's CRDs and no Kueue."""
    with ControlPlane(binaries=find_binaries()) as plane:
        install_crds(plane)
        yield plane


class _Operator(Operator):
    """The library's Operator with the built-in PyTorchJob controller's default settings."""

    def add_controller(
        self, manager: Manager, cls: type[JobController[Any]], recorder: EventRecorder
    ) -> None:
        settings = ControllerSettings()
        add_controller(manager, PyTorchJobController, settings, recorder=recorder, kueue=self.kueue)


def _install_kueue_crds(plane: ControlPlane) -> None:
    kueue = components()["kueue"]
    bases = kueue.source / "config" / "components" / "crd" / "bases"
    if not bases.is_dir():
        missing = f"Kueue {kueue.version}'s module tree is not at {kueue.source}; {BUILD_HINT}"
        pytest.fail(missing, pytrace=False)
    plane.kubectl("apply", "--server-side", "-f", str(bases))
    plane.wait_established("workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")


def _operator(plane: ControlPlane, namespace: str) -> _Operator:
    config = OperatorConfig(
        kubeconfig=str(plane.kubeconfig), namespaces=(namespace,), health_address=None,
        kueue_integration="PyTorchJob",
    )  # fmt: skip
    return _Operator([PyTorchJobController], config)


@pytest.fixture
async def namespace(bare_plane: ControlPlane) -> AsyncIterator[str]:
    name = bare_plane.create_namespace()
    yield name
    bare_plane.delete_namespace(name)


async def test_kueue_installed_later_restarts_the_operator_and_then_queues_jobs(
    bare_plane: ControlPlane,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(arrival, "RECHECK_SECONDS", 0.5)
    caplog.set_level(logging.INFO, logger="kubetrain.kueue")
    await _stops_once_kueue_is_served(bare_plane, namespace, caplog)
    restarted = _operator(bare_plane, namespace)  # what the Deployment does: start the operator again
    serving = asyncio.ensure_future(restarted.serve())
    api = await KubeApiClient.connect(str(bare_plane.kubeconfig))
    try:
        await wait_until(lambda: _ready(restarted), what="the restarted operator")
        assert restarted.kueue is not None and restarted.kueue.kinds == {"PyTorchJob"}
        await _queued_until_admitted(bare_plane, namespace, InProcessOperator(api, []))
    finally:
        if restarted.manager is not None:
            restarted.manager.stop()
        await asyncio.wait_for(serving, 60)
        await api.close()


async def _stops_once_kueue_is_served(
    plane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The operator started without Kueue says that queued jobs are not queued, and stops (exit code 1
    from `kubetrain operator`) once Kueue's CRDs are served."""
    first = _operator(plane, namespace)
    serving = asyncio.ensure_future(first.serve())
    try:
        warned = "jobs labelled kueue.x-k8s.io/queue-name are not queued"
        await wait_until(lambda: _logged(caplog, warned), what="the warning: queued jobs run outside Kueue")
        assert first.kueue is None
        _install_kueue_crds(plane)
        stopped, _ = await asyncio.wait({serving}, timeout=60)
        assert stopped, "the operator did not stop within 60 s once Kueue's API was served"
        with pytest.raises(RuntimeError, match=r"Workload API \(kueue.x-k8s.io/v1beta2\) is served now"):
            serving.result()
    finally:
        serving.cancel()


async def _queued_until_admitted(plane: ControlPlane, namespace: str, view: InProcessOperator) -> None:
    """A labelled job gets a Workload and no pod; the pods come once the test, as Kueue, admits it.
    `view` only reads (pods, Workloads): it is never started."""
    submit(plane, namespace)
    wl = await wait_until(lambda: workload(view, namespace), what="the job's Workload")
    assert await view.pods(namespace) == {}, "no pod before admission"
    flavor = '{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "f"}}'
    plane.kubectl("apply", "-f", "-", input=flavor)
    admit(plane, namespace, wl, "f")
    await wait_until(lambda: view.running(namespace, "job-master-0", "job-worker-0"), what="admitted pods")


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> bool:
    return any(text in r.getMessage() for r in caplog.records)


async def _ready(op: Operator) -> bool:
    return op.manager is not None and op.manager.is_ready()
