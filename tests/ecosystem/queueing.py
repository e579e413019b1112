"""What the Kueue tests share: the queues an administrator makes (Kueue's v1beta2 API), readers of the
Workloads of a job, and the SleepJob example (examples/operators/sleepjob) run beside the operator, as its
author runs it (`python -m sleepjob`), so that a kind written on `kubetrain.common` is queued like ours.

A job waits in one of two ways, by the integration that holds it: kubetrain's (the job's `Queued`
condition; no pod, no Workload made by Kueue) or Kueue's built-in one (Kueue's webhook suspends the job and
its controller makes the Workload; MPIJob in Kueue's default configuration).
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from kubetrain.api import KindInfo
from kubetrain.testing import ControlPlane, FakeNode
from kubetrain.testing.kueue import Kueue
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec
from kubetrain.testing.process import free_port, wait_until
from kubetrain.testing.rest import http_ok

from .harness import (
    BY_KIND,
    LOGS,
    PRIORITY_LABEL,
    QUEUE_LABEL,
    Obj,
    component,
    conditions,
    job,
    own_plane,
    suspended,
)

ROOT = Path(__file__).resolve().parents[2]
KUEUE_API = "kueue.x-k8s.io/v1beta2"
SLEEPJOB_PROJECT = ROOT / "examples" / "operators" / "sleepjob"
SLEEPJOB_FRAMEWORK = "SleepJob.v1.example.dev"
"""How examples/operators/sleepjob/README.md tells a user to name SleepJob in Kueue's externalFrameworks."""
POOL_LABEL = "example.com/pool"
POOL = "training"
LOCAL_QUEUE = "team"
QUOTA_CPU = "2"
"""Room for one test job at a time (two pods of 1 CPU each)."""


def sleepjob_kind() -> KindInfo:
    """The example's KindInfo, imported from its project (it is not part of kubetrain); also known to the
    harness's readers from then on."""
    if str(SLEEPJOB_PROJECT) not in sys.path:
        sys.path.insert(0, str(SLEEPJOB_PROJECT))
    info = cast(KindInfo, importlib.import_module("sleepjob.kind").SLEEPJOB)
    BY_KIND[info.kind] = info
    return info


def sleepjob(name: str, *, labels: dict[str, str]) -> Obj:
    """A SleepJob of two Sleepers of 1 CPU; a Sleeper that fails with a signal's exit code is replaced."""
    info = sleepjob_kind()
    container = container_spec(info.default_container_name or "sleep", resources={"requests": {"cpu": "1"}})
    specs = {"Sleeper": replica_spec(2, container, restartPolicy="ExitCode")}
    body = job_manifest(info, specs, name=name, namespace="")
    del body["metadata"]["namespace"]
    body["metadata"]["labels"] = labels
    return body


def queued(kind: str, name: str, priority: str | None = None) -> Obj:
    """A job of `kind` (one of ours, or SleepJob) in the LocalQueue `team`, at `priority` if given."""
    labels = {QUEUE_LABEL: LOCAL_QUEUE, **({PRIORITY_LABEL: priority} if priority else {})}
    return sleepjob(name, labels=labels) if kind == "SleepJob" else job(kind, name, labels=labels)


@contextmanager
def sleepjob_operator(plane: ControlPlane, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """The example's CRD applied and its operator running (`python -m sleepjob`, this checkout's kubetrain
    on its path), started after Kueue, as the kubetrain operator is."""
    plane.kubectl("apply", "--server-side", "-f", str(SLEEPJOB_PROJECT / "config" / "crd"))
    plane.wait_established("sleepjobs.example.dev")
    health = free_port()
    log = workdir / "sleepjob-operator.log"
    argv = [sys.executable, "-m", "sleepjob", "--kubeconfig", str(plane.kubeconfig),
            f"--health-probe-bind-address=127.0.0.1:{health}", "--metrics-bind-address=0"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        process = subprocess.Popen(argv, cwd=SLEEPJOB_PROJECT, env=env, stdout=out, stderr=subprocess.STDOUT)
    LOGS["sleepjob-operator"] = log
    try:
        wait_until("the SleepJob operator ready", lambda: http_ok(f"http://127.0.0.1:{health}/readyz"),
                   timeout=60)  # fmt: skip
        yield process
    finally:
        process.terminate()
        process.wait(timeout=60)


@contextmanager
def kueue_plane(nodes: Sequence[FakeNode], workdir: Path, **options: Any) -> Iterator[ControlPlane]:
    """A control plane of its own with Kueue (webhooks registered; `options` go to `Kueue`) and the
    ResourceFlavor and priority classes of `kueue_objects()`."""
    component("kueue")
    with own_plane(nodes) as plane, Kueue(plane, workdir, **options) as kueue:
        LOGS["kueue"] = kueue.log_path
        apply(plane, kueue_objects())
        yield plane


def kueue_objects() -> list[Obj]:
    """The ResourceFlavor and the two WorkloadPriorityClasses every test uses."""
    flavor = {"nodeLabels": {POOL_LABEL: POOL}}
    return [
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": POOL}, "spec": flavor},
        *(
            {"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": n}, "value": v}
            for n, v in (("kt-low", 100), ("kt-high", 1000))
        ),
    ]


def queues(namespace: str) -> list[Obj]:
    """A ClusterQueue for `namespace` only (StrictFIFO, lower priorities preemptible) and its LocalQueue."""
    quota = [{"name": "cpu", "nominalQuota": QUOTA_CPU}]
    cluster_queue = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        "queueingStrategy": "StrictFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [{"name": POOL, "resources": quota}]}],
    }
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": {"name": namespace},
            "spec": cluster_queue,
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": namespace},
        },
    ]


def apply(plane: ControlPlane, items: list[Obj]) -> None:
    plane.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


@contextmanager
def queue_namespace(plane: ControlPlane) -> Iterator[str]:
    """A namespace with its own ClusterQueue and LocalQueue `team`."""
    name = plane.create_namespace("kueue-")
    apply(plane, queues(name))
    yield name
    plane.delete_namespace(name)
    plane.kubectl("delete", "clusterqueue", name, "--wait=false", "--ignore-not-found")


def workloads(plane: ControlPlane, namespace: str, body: Obj) -> list[Obj]:
    """The Workloads that the job `body` owns (whoever made them)."""
    status, found = plane.rest.get(f"/apis/{KUEUE_API}/namespaces/{namespace}/workloads")
    assert status == 200, found
    name = body["metadata"]["name"]
    return [
        dict(item)
        for item in found["items"]
        if any(
            o["kind"] == body["kind"] and o["name"] == name
            for o in item["metadata"].get("ownerReferences") or []
        )
    ]


def workload(plane: ControlPlane, namespace: str, body: Obj) -> Obj | None:
    """The job's one Workload (None before it is made); a second one fails the test."""
    found = workloads(plane, namespace, body)
    assert len(found) <= 1, f"{len(found)} Workloads for one job: {[w['metadata']['name'] for w in found]}"
    return found[0] if found else None


def workload_conditions(found: Obj | None) -> dict[str, str]:
    return {c["type"]: c["status"] for c in ((found or {}).get("status") or {}).get("conditions") or []}


def pending(plane: ControlPlane, namespace: str, body: Obj) -> bool:
    """The job's Workload exists and Kueue has looked at it and reserved no quota for it."""
    found = workload(plane, namespace, body)
    return found is not None and workload_conditions(found).get("QuotaReserved") == "False"


def waiting(body: Obj) -> bool:
    """The job says it waits for Kueue: `Queued` (kubetrain's integration) or suspended (Kueue's)."""
    return "Queued" in conditions(body) or (suspended(body) and "Suspended" in conditions(body))
