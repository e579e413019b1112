"""MPIJob on the real control plane: `kubectl apply`, the real API server's admission, kwok as the kubelet.

The operator runs in-process (MPIJobController in a Manager, scoped to the test's namespace) against the
real kube-apiserver; the scheduler places pods on kwok's fake nodes and kwok runs, readies and finishes
them as the pod annotations say. Checked here, where the in-memory fake cannot vouch: the objects the
controller renders pass real validation (pod hostname/subdomain, DNS config, secret and config map
volumes, an immutable `kubernetes.io/ssh-auth` Secret, a headless Service without ports), the launcher
waits for Ready workers, and the job's conditions and cleanup follow the launcher.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import load_jobs
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, SECRETS, SERVICES, Obj
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.controllers.mpi import MPIJobController
from kubetrain.podcontract import Hostfile, MPIImplementation
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome, outcome_annotations
from kubetrain.testing.operator import InProcessOperator

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MPIJOBS = MPIJobController.job_resource()


@pytest.fixture(scope="module")
def mpi_crd(control_plane: ControlPlane) -> ControlPlane:
    control_plane.kubectl("apply", "-f", str(ROOT / "manifests" / "crds" / "kubeflow.org_mpijobs.yaml"))
    jsonpath = "jsonpath={.status.conditions[?(@.type=='Established')].status}"
    for _ in range(300):  # `kubectl wait` fails outright while the CRD has no conditions yet
        got = control_plane.kubectl("get", "crd/mpijobs.kubeflow.org", "-o", jsonpath, check=False)
        if got.stdout.strip() == "True":
            return control_plane
        time.sleep(0.1)
    raise AssertionError("the MPIJob CRD was not Established in 30 s")


class Run:
    """One test's namespace, with the operator running in it."""

    def __init__(self, plane: ControlPlane, api: KubeApiClient, namespace: str) -> None:
        self.plane = plane
        self.api = api
        self.namespace = namespace
        self.operator = InProcessOperator(
            api, [MPIJobController], namespace=namespace, terminating_timeout=2.0
        )

    def apply(
        self,
        example: str,
        *,
        launcher: dict[str, str] | None = None,
        restart: str | None = None,
        workers_gated: bool = False,
        **spec: Any,
    ) -> str:
        """`kubectl apply` an example from examples/mpi, with pod annotations for kwok on the launcher."""
        body = load_jobs((ROOT / "examples" / "mpi" / example).read_text())[0].to_wire()
        body["spec"].update(spec)
        replica = body["spec"]["mpiReplicaSpecs"]["Launcher"]
        if launcher:
            replica["template"].setdefault("metadata", {}).setdefault("annotations", {}).update(launcher)
        if restart:
            replica["restartPolicy"] = restart
        if workers_gated:
            worker = body["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
            worker["schedulingGates"] = [{"name": "sim.kubetrain.dev/hold"}]
        self.plane.kubectl("apply", "-f", "-", namespace=self.namespace, input=json.dumps(body))
        return str(body["metadata"]["name"])

    async def get(self, resource: Any, name: str) -> Obj:
        return await self.api.get(resource, self.namespace, name)

    async def pods(self) -> dict[str, Obj]:
        items = (await self.api.list(PODS, self.namespace)).items
        return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}

    async def conditions(self, job: str) -> dict[str, tuple[str, str]]:
        status = (await self.get(MPIJOBS, job)).get("status") or {}
        return {c["type"]: (c["status"], c["reason"]) for c in status.get("conditions") or []}

    async def has(self, job: str, ctype: str, reason: str) -> bool:
        return (await self.conditions(job)).get(ctype) == ("True", reason)


@pytest.fixture
async def run(mpi_crd: ControlPlane, namespace: str) -> AsyncIterator[Run]:
    api = await KubeApiClient.connect(str(mpi_crd.kubeconfig))
    run = Run(mpi_crd, api, namespace)
    try:
        async with run.operator:
            yield run
    finally:
        await api.close()


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        await asyncio.sleep(0.25)


def env(pod: Obj) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


async def test_applied_job_gets_its_objects_and_succeeds_with_its_launcher(run: Run) -> None:
    job = run.apply("mpi-mpich.yaml", launcher=outcome_annotations(Outcome.SUCCEEDED, run_for="4s"))
    names = {f"{job}-launcher-0", f"{job}-worker-0", f"{job}-worker-1"}
    await eventually(lambda: _have(run, names), "launcher and workers created")
    await eventually(lambda: run.has(job, "Running", "MPIJobRunning"), "Running")

    pods = await run.pods()
    launcher, worker = pods[f"{job}-launcher-0"], pods[f"{job}-worker-1"]
    assert env(launcher)["HYDRA_HOST_FILE"] == "/etc/mpi/hostfile"
    assert env(launcher)["K_MPI_JOB_ROLE"] == "launcher"
    assert env(worker) == {"K_MPI_JOB_ROLE": "worker"}
    assert (worker["spec"]["hostname"], worker["spec"]["subdomain"]) == (f"{job}-worker-1", job)
    assert worker["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]

    service = await run.get(SERVICES, job)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"]["training.kubeflow.org/job-name"] == job
    hostfile = Hostfile.parse(
        (await run.get(CONFIGMAPS, f"{job}-config"))["data"]["hostfile"], MPIImplementation.MPICH
    )
    assert [e.host for e in hostfile.entries] == [
        f"{job}-worker-{i}.{job}.{run.namespace}.svc" for i in (0, 1)
    ]
    secret = await run.get(SECRETS, f"{job}-ssh")
    assert (secret["type"], secret["immutable"]) == ("kubernetes.io/ssh-auth", True)
    assert base64.b64decode(secret["data"]["ssh-privatekey"]).startswith(b"-----BEGIN EC PRIVATE KEY-----")

    await eventually(lambda: run.has(job, "Succeeded", "MPIJobSucceeded"), "Succeeded", timeout=90)
    await eventually(lambda: _have(run, {f"{job}-launcher-0"}), "workers cleaned up, launcher kept")
    assert (await run.conditions(job))["Running"][0] == "False"


async def test_wait_for_workers_ready_starts_the_launcher_after_its_workers(run: Run) -> None:
    # the workers are held Pending by a scheduling gate until the test lifts it (kwok readies pods at once)
    job = run.apply("mpi-allreduce-openmpi.yaml", workers_gated=True)
    workers = {f"{job}-worker-0", f"{job}-worker-1"}
    await eventually(lambda: _have(run, workers), "workers created")
    await asyncio.sleep(3)
    assert set(await run.pods()) == workers, "the launcher came before its workers were Ready"
    for name in sorted(workers):
        patch = json.dumps({"spec": {"schedulingGates": None}})
        run.plane.kubectl("patch", "pod", name, "--type=merge", "-p", patch, namespace=run.namespace)
    await eventually(lambda: _have(run, {*workers, f"{job}-launcher-0"}), "launcher created", timeout=90)
    pods = await run.pods()
    readiness = [_ready_since(pods[n]) for n in workers]
    assert all(readiness)
    assert pods[f"{job}-launcher-0"]["metadata"]["creationTimestamp"] >= max(readiness)
    hostfile = (await run.get(CONFIGMAPS, f"{job}-config"))["data"]["hostfile"]
    assert hostfile.splitlines()[0] == f"{job}-launcher.{job}.{run.namespace}.svc slots=1"


async def test_launcher_failing_under_never_fails_the_job(run: Run) -> None:
    failing = outcome_annotations(Outcome.FAILED, exit_code=3, run_for="2s")
    job = run.apply("mpi-intel.yaml", launcher=failing, restart="Never")
    await eventually(lambda: run.has(job, "Failed", "MPIJobFailed"), "Failed", timeout=90)
    status = (await run.get(MPIJOBS, job))["status"]
    assert status["replicaStatuses"]["Launcher"]["failed"] == 1
    await eventually(lambda: _have(run, {f"{job}-launcher-0"}), "workers cleaned up")


async def test_failed_launcher_under_on_failure_is_replaced_until_the_backoff_limit(run: Run) -> None:
    failing = outcome_annotations(Outcome.FAILED, exit_code=137, run_for="2s")
    job = run.apply("mpi-intel.yaml", launcher=failing, runPolicy={"backoffLimit": 1})
    launcher = f"{job}-launcher-0"
    await eventually(lambda: _have(run, {launcher}, subset=True), "launcher created")
    first = (await run.pods())[launcher]["metadata"]["uid"]
    await eventually(
        lambda: run.has(job, "Failed", "MPIJobFailed"), "Failed at the backoff limit", timeout=90
    )
    # once replaced under the same name (Restarting, soon followed by Running again), then failed for good
    assert "MPIJobRestarting" in run.operator.events.reasons()
    assert (await run.pods())[launcher]["metadata"]["uid"] != first
    failed = [c for c in (await run.get(MPIJOBS, job))["status"]["conditions"] if c["type"] == "Failed"]
    assert "backoff limit" in failed[0]["message"]


async def _have(run: Run, names: set[str], *, subset: bool = False) -> bool:
    present = set(await run.pods())
    return names <= present if subset else present == names


async def _ready(run: Run, names: set[str]) -> bool:
    pods = await run.pods()
    return all(n in pods and _ready_since(pods[n]) for n in names)


def _ready_since(pod: Obj) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond["type"] == "Ready" and cond["status"] == "True":
            return str(cond.get("lastTransitionTime") or "")
    return ""
