"""Cluster DNS as a job's own pods use it on the real node: from inside a pod of the job, each replica's name
(`<pod>.<job>` under the job's headless Service, `<pod>` under per-replica Services) and the job's Service
resolve through the node's CoreDNS to the IPs the kubelet gave the pods, and so does the `MASTER_ADDR` the
operator put in the pod's env. Training over these names is tested in test_examples; this test fails on a
wrong answer even where a trainer would have found its peers another way."""

from __future__ import annotations

import contextlib
import copy
from typing import Any

import pytest

from kubetrain.testing.node import INIT_STAND_IN
from kubetrain.testing.node_plane import NodePlane
from kubetrain.testing.process import wait_until

from .examples import apply, shell_job

pytestmark = pytest.mark.node

JOB = "dns"
PODS = (f"{JOB}-master-0", f"{JOB}-worker-0")
SERVICE_MODE = "kubetrain.io/service-mode"


def dns_job(mode: str) -> dict[str, Any]:
    """A Master and a Worker that only sleep, in an image with `getent` (the node's stand-in image)."""
    job = shell_job(JOB, "OnFailure", "sleep 600")
    job["metadata"]["annotations"] = {SERVICE_MODE: mode}
    specs = job["spec"]["pytorchReplicaSpecs"]
    specs["Master"]["template"]["spec"]["containers"][0]["image"] = INIT_STAND_IN
    specs["Worker"] = copy.deepcopy(specs["Master"])
    return job


def pod_ips(plane: NodePlane, namespace: str) -> dict[str, str]:
    """Each pod's IP once both pods run."""
    ips: dict[str, str] = {}

    def running() -> bool:
        for pod in PODS:
            status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods/{pod}")
            state = found.get("status", {}) if status == 200 else {}
            if state.get("phase") == "Running" and state.get("podIP"):
                ips[pod] = state["podIP"]
        return len(ips) == len(PODS)

    wait_until(f"pods {PODS} running", running, timeout=180, interval=1.0)
    return ips


def getent(plane: NodePlane, namespace: str, pod: str, name: str) -> set[str]:
    """The addresses `getent hosts` gives for `name` inside `pod` (a relative name goes through the pod's
    search path, as a trainer's does); `$MASTER_ADDR` is expanded by the pod's shell, from its own env."""
    done = plane.kubectl(
        "exec",
        pod,
        "-c",
        "pytorch",
        "--",
        "sh",
        "-c",
        f'getent hosts "{name}"',
        namespace=namespace,
        check=False,
    )
    return {line.split()[0] for line in done.stdout.splitlines() if line.strip()}


@pytest.mark.parametrize("mode", ["job", "replica"])
def test_replicas_and_the_jobs_service_resolve_through_coredns_inside_a_pod(
    mode: str, node_plane: NodePlane, namespace_on_node: str
) -> None:
    namespace = namespace_on_node
    apply(node_plane, namespace, [dns_job(mode)])
    ips = pod_ips(node_plane, namespace)
    master, worker = (ips[p] for p in PODS)
    if mode == "job":
        wanted = {f"{PODS[0]}.{JOB}": {master}, f"{PODS[1]}.{JOB}": {worker}, JOB: {master, worker}}
    else:
        wanted = {PODS[0]: {master}, PODS[1]: {worker}}
    wanted["$MASTER_ADDR"] = {master}
    answers: dict[str, set[str]] = {}

    def resolved() -> bool:  # the EndpointSlices and CoreDNS's cache (5 s) may trail the pods by a moment
        answers.update({name: getent(node_plane, namespace, PODS[1], name) for name in wanted})
        return answers == wanted

    with contextlib.suppress(TimeoutError):  # the assertion below shows what was resolved instead
        wait_until("the names resolve to the pods' IPs", resolved, timeout=60, interval=2.0)
    assert answers == wanted, f"resolved inside {PODS[1]} (pods: {ips})"
    print(f"service mode {mode}: inside {PODS[1]}: {answers}")
