"""MPIJobController running in an operator over the in-memory API server, on virtual time.

The tests play the kubelet (pod phases, readiness, evictions) and check what an MPIJob user sees: when
the launcher appears, which condition the job carries, what is cleaned up when the launcher finishes, and
how the hostfile follows the workers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubetrain.common.job import LEDGER_ANNOTATION
from kubetrain.common.kube import objects
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, SECRETS, SERVICES, Obj
from kubetrain.common.testing import FakeClock
from kubetrain.controllers.mpi import MPIJobController
from kubetrain.testing.operator import InProcessOperator

NS = "ns"
MPIJOBS = MPIJobController.job_resource()
LAUNCHER, W0, W1 = "pi-launcher-0", "pi-worker-0", "pi-worker-1"


class Cluster:
    """The in-memory API server, a FakeClock, and the MPIJob operator running against them."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = InMemoryApiClient(clock=self.clock, status_subresources=[MPIJOBS])
        self.operator = InProcessOperator(self.api, [MPIJobController], clock=self.clock)

    async def step(self, seconds: float = 0.0) -> None:
        await self.clock.advance(seconds)
        for _ in range(3):
            await self.clock.advance(0.1)

    async def submit(self, workers: int = 2, launcher_policy: str = "OnFailure", **spec: Any) -> None:
        template = {
            "spec": {"containers": [{"name": "mpi", "image": "mpi:1", "command": ["mpirun", "true"]}]}
        }
        specs = {
            "Launcher": {"replicas": 1, "restartPolicy": launcher_policy, "template": template},
            "Worker": {
                "replicas": workers,
                "template": {"spec": {"containers": [{"name": "mpi", "image": "mpi:1"}]}},
            },
        }
        body = {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "pi", "namespace": NS},
            "spec": {"mpiReplicaSpecs": specs, **spec},
        }
        await self.api.create(MPIJOBS, NS, body)
        await self.step()

    async def pods(self) -> dict[str, Obj]:
        return {
            objects.name(p): p for p in (await self.api.list(PODS, NS)).items if not objects.is_deleting(p)
        }

    async def config(self, key: str) -> str:
        data: dict[str, str] = (await self.api.get(CONFIGMAPS, NS, "pi-config"))["data"]
        return data[key]

    async def conditions(self) -> list[tuple[str, str, str]]:
        status = (await self.api.get(MPIJOBS, NS, "pi")).get("status") or {}
        return [(c["type"], c["status"], c["reason"]) for c in status.get("conditions") or []]

    async def last(self) -> tuple[str, str, str]:
        return (await self.conditions())[-1]

    async def set_phase(
        self, name: str, phase: str, *, ready: bool = False, exit_code: int | None = None, reason: str = ""
    ) -> None:
        state: dict[str, Any] = {"running": {}}
        if exit_code is not None:
            state = {"terminated": {"exitCode": exit_code}}
        status: dict[str, Any] = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "mpi", "restartCount": 0, "state": state}],
        }
        if reason:
            status["reason"] = reason
        await self.api.patch(PODS, NS, name, {"status": status})
        await self.step()

    async def run(self, *names: str) -> None:
        for name in names:
            await self.set_phase(name, "Running", ready=True)


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    cluster = Cluster()
    cluster.operator.start()
    await cluster.step()
    yield cluster
    cluster.operator.manager.stop()
    await cluster.clock.advance(0.1)
    await cluster.operator.stop()


async def test_wait_for_workers_ready_creates_the_launcher_only_once_every_worker_is_ready(
    cluster: Cluster,
) -> None:
    await cluster.submit(launcherCreationPolicy="WaitForWorkersReady")
    assert set(await cluster.pods()) == {W0, W1}
    await cluster.set_phase(W0, "Running", ready=True)
    await cluster.set_phase(W1, "Running", ready=False)
    assert set(await cluster.pods()) == {W0, W1}
    await cluster.set_phase(W1, "Running", ready=True)
    assert set(await cluster.pods()) == {W0, W1, LAUNCHER}


async def test_at_startup_creates_launcher_and_workers_at_once_with_their_objects(cluster: Cluster) -> None:
    await cluster.submit()
    assert set(await cluster.pods()) == {W0, W1, LAUNCHER}
    assert objects.name(await cluster.api.get(SERVICES, NS, "pi")) == "pi"
    assert (await cluster.api.get(SECRETS, NS, "pi-ssh"))["type"] == "kubernetes.io/ssh-auth"
    assert await cluster.last() == ("Created", "True", "MPIJobCreated")


async def test_status_follows_the_launcher_and_workers_go_when_it_succeeds(cluster: Cluster) -> None:
    await cluster.submit()
    await cluster.run(LAUNCHER, W0)
    assert await cluster.last() == ("Created", "True", "MPIJobCreated")  # not every worker runs yet
    await cluster.run(W1)
    assert await cluster.last() == ("Running", "True", "MPIJobRunning")
    await cluster.set_phase(LAUNCHER, "Succeeded", exit_code=0)
    assert await cluster.last() == ("Succeeded", "True", "MPIJobSucceeded")
    assert set(await cluster.pods()) == {LAUNCHER}  # cleanPodPolicy Running: the launcher's logs stay
    status = (await cluster.api.get(MPIJOBS, NS, "pi"))["status"]
    assert status["completionTime"]
    assert status["replicaStatuses"]["Launcher"]["succeeded"] == 1


async def test_launcher_that_fails_under_never_fails_the_job_and_workers_go(cluster: Cluster) -> None:
    await cluster.submit(launcher_policy="Never")
    await cluster.run(LAUNCHER, W0, W1)
    await cluster.set_phase(LAUNCHER, "Failed", exit_code=1)
    assert await cluster.last() == ("Failed", "True", "MPIJobFailed")
    assert set(await cluster.pods()) == {LAUNCHER}


async def test_failed_launcher_under_on_failure_is_replaced_until_the_backoff_limit(cluster: Cluster) -> None:
    await cluster.submit(runPolicy={"backoffLimit": 1})
    await cluster.run(LAUNCHER, W0, W1)
    first = objects.uid((await cluster.pods())[LAUNCHER])
    await cluster.set_phase(LAUNCHER, "Failed", exit_code=137)
    assert ("Restarting", "True", "MPIJobRestarting") in await cluster.conditions()
    replacement = (await cluster.pods())[LAUNCHER]
    assert objects.uid(replacement) != first
    await cluster.run(LAUNCHER)
    await cluster.set_phase(LAUNCHER, "Failed", exit_code=137)
    assert await cluster.last() == ("Failed", "True", "MPIJobFailed")
    assert (
        "backoff limit" in (await cluster.api.get(MPIJOBS, NS, "pi"))["status"]["conditions"][-1]["message"]
    )


async def test_an_evicted_worker_fails_the_job(cluster: Cluster) -> None:
    await cluster.submit()
    await cluster.run(LAUNCHER, W0, W1)
    await cluster.set_phase(W1, "Failed", reason="Evicted")
    assert await cluster.last() == ("Failed", "True", "MPIJobEvicted")


async def test_hostfile_and_discover_hosts_follow_the_workers(cluster: Cluster) -> None:
    await cluster.submit(slotsPerWorker=2)
    assert (
        await cluster.config("hostfile") == "pi-worker-0.pi.ns.svc slots=2\npi-worker-1.pi.ns.svc slots=2\n"
    )
    assert await cluster.config("discover_hosts.sh") == "#!/bin/sh\n"
    await cluster.run(W1)
    assert await cluster.config("discover_hosts.sh") == "#!/bin/sh\necho pi-worker-1.pi.ns.svc\n"
    await cluster.api.patch(MPIJOBS, NS, "pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
    await cluster.step()
    assert "pi-worker-2" in await cluster.pods()
    assert (await cluster.config("hostfile")).splitlines()[-1] == "pi-worker-2.pi.ns.svc slots=2"
    await cluster.api.patch(MPIJOBS, NS, "pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 1}}}})
    await cluster.step()
    assert set(await cluster.pods()) == {LAUNCHER, W0}
    assert await cluster.config("hostfile") == "pi-worker-0.pi.ns.svc slots=2\n"
    assert await cluster.config("discover_hosts.sh") == "#!/bin/sh\n"


async def test_the_ssh_key_is_generated_once(cluster: Cluster) -> None:
    await cluster.submit()
    before = (await cluster.api.get(SECRETS, NS, "pi-ssh"))["data"]
    await cluster.run(LAUNCHER, W0, W1)
    await cluster.api.patch(MPIJOBS, NS, "pi", {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": 3}}}})
    await cluster.step()
    assert (await cluster.api.get(SECRETS, NS, "pi-ssh"))["data"] == before
    assert cluster.api.count("create", SECRETS) == 1
    assert cluster.api.count("patch", SECRETS) == 0


async def test_suspend_removes_every_pod_and_resume_brings_them_back(cluster: Cluster) -> None:
    await cluster.submit()
    await cluster.run(LAUNCHER, W0, W1)
    await cluster.api.patch(MPIJOBS, NS, "pi", {"spec": {"runPolicy": {"suspend": True}}})
    await cluster.step()
    assert await cluster.pods() == {}
    assert ("Suspended", "True", "MPIJobSuspended") in await cluster.conditions()
    await cluster.api.patch(MPIJOBS, NS, "pi", {"spec": {"runPolicy": {"suspend": False}}})
    await cluster.step()
    assert set(await cluster.pods()) == {LAUNCHER, W0, W1}
    assert ("Suspended", "False", "MPIJobResumed") in await cluster.conditions()


async def test_the_ssh_secret_costs_no_write_of_its_own_and_survives_an_operator_restart(
    cluster: Cluster,
) -> None:
    """The Secret's creation goes into the job's ledger with its next write (here: the workers seen
    running), not with a write of its own; an operator that restarts before that write sends the create
    once more, is answered AlreadyExists, and keeps the key."""
    await cluster.submit()
    assert LEDGER_ANNOTATION not in objects.annotations(await cluster.api.get(MPIJOBS, NS, "pi"))
    before = (await cluster.api.get(SECRETS, NS, "pi-ssh"))["data"]
    cluster.operator.manager.stop()
    await cluster.clock.advance(0.1)
    await cluster.operator.stop()
    cluster.operator = InProcessOperator(cluster.api, [MPIJobController], clock=cluster.clock)
    cluster.operator.start()
    await cluster.step()
    assert cluster.api.count("create", SECRETS) == 2, "sent once more after the restart"
    await cluster.run(LAUNCHER, W0, W1)
    assert cluster.api.count("create", SECRETS) == 2, "and remembered from then on"
    assert (await cluster.api.get(SECRETS, NS, "pi-ssh"))["data"] == before
    ledger = json.loads(objects.annotations(await cluster.api.get(MPIJOBS, NS, "pi"))[LEDGER_ANNOTATION])
    assert ledger["created"] == ["secrets/pi-ssh"], "written with the started workers"
