"""What the ecosystem tests share: a control plane of their own, the operator installed from the shipped
manifests (as the e2e tier runs it), and small readers of jobs, pods and Kueue's Workloads.

Each module gets a plane of its own: Kueue's webhooks (failurePolicy Fail, on every pod create) and a
second scheduler must never reach the tests of the other tiers, and the node layout (flavor labels,
capacity for exactly three pods) is part of what a module tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from e2e.shipped import MANIFESTS, install, operator_container, rbac_denials, start_operator

from kubetrain.api import KINDS, KindInfo
from kubetrain.common.job.ledger import LEDGER_ANNOTATION
from kubetrain.testing import ControlPlane, FakeNode, MissingBinariesError, Outcome, find_binaries
from kubetrain.testing.ecosystem import MissingComponentError, find_component
from kubetrain.testing.operator import container_spec, job_manifest, replica_spec
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

Obj = dict[str, Any]
BY_KIND: dict[str, KindInfo] = {info.kind: info for info in KINDS}
LEADER = {
    "TFJob": "Chief", "PyTorchJob": "Master", "MPIJob": "Launcher", "XGBoostJob": "Master",
    "PaddleJob": "Master",
}  # fmt: skip
"""The replica type whose success (of its pod 0) makes a job of each kind succeed; every test job has one,
plus Workers. A JAXJob has only Workers, all of which must succeed."""
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
RETRYABLE_EXIT = 137
"""A SIGKILL exit: the operator replaces a Worker that failed with it and counts a restart."""
WORKER_RESTART = {
    "TFJob": "ExitCode", "PyTorchJob": "ExitCode", "MPIJob": "OnFailure", "XGBoostJob": "ExitCode",
    "PaddleJob": "ExitCode", "JAXJob": "ExitCode",
}  # fmt: skip
"""The Workers' restartPolicy: one under which a failed pod is replaced (MPIJob has no ExitCode)."""

LOGS: dict[str, Path] = {}
"""Log files of the components the running module started, added to a failing test's report."""


def component(name: str) -> None:
    """Fail (never skip) when the ecosystem component `name` is not built."""
    try:
        find_component(name)
    except MissingComponentError as err:
        pytest.fail(str(err), pytrace=False)


@contextmanager
def own_plane(nodes: Sequence[FakeNode]) -> Iterator[ControlPlane]:
    """A started control plane with `nodes`; fails the test when the binaries are missing."""
    try:
        binaries = find_binaries()
    except MissingBinariesError as err:
        pytest.fail(str(err), pytrace=False)
    with ControlPlane(binaries=binaries, nodes=nodes) as plane:
        LOGS.update(plane.logs())
        yield plane
    LOGS.clear()


@contextmanager
def shipped_operator(
    plane: ControlPlane, overlay: str, workdir: Path, *extra: str
) -> Iterator[OperatorProcess]:
    """`kubectl apply -k manifests/<overlay>`, then the operator as its Deployment runs it (its arguments,
    and `extra`; its ServiceAccount); on the way out, the shipped RBAC must not have refused it anything."""
    objects = install(plane, MANIFESTS / overlay)
    op = start_operator(plane, objects, workdir, *extra)
    LOGS["operator"] = op.log_path
    try:
        op.wait_ready()
        yield op
        namespace, _ = operator_container(objects)
        assert rbac_denials(op, namespace) == [], "the shipped RBAC must allow everything the operator does"
    finally:
        op.stop()


def job(
    kind: str,
    name: str,
    *,
    workers: int = 1,
    labels: dict[str, str] | None = None,
    cpu: str = "1",
    **spec: Any,
) -> Obj:
    """A job of `kind`: one leader (LEADER) and `workers` Workers, each pod asking for `cpu`; a Worker
    that fails with RETRYABLE_EXIT is replaced. A kind without a leader (JAXJob) gets `workers + 1`
    Workers."""
    info = BY_KIND[kind]
    requests = {"requests": {"cpu": cpu}}
    container = container_spec(info.default_container_name or "trainer", resources=requests)
    if kind not in LEADER:
        specs = {"Worker": replica_spec(workers + 1, container, restartPolicy=WORKER_RESTART[kind])}
    else:
        specs = {
            LEADER[kind]: replica_spec(1, container, restartPolicy="OnFailure"),
            "Worker": replica_spec(workers, container, restartPolicy=WORKER_RESTART[kind]),
        }
    body = job_manifest(info, specs, name=name, namespace="", **spec)
    del body["metadata"]["namespace"]
    if labels:
        body["metadata"]["labels"] = labels
    return body


def spare(body: Obj) -> str:
    """The pod of the job's last Worker: one whose failure or loss the job survives."""
    return pod_names(body)[-1]


def submit(plane: ControlPlane, namespace: str, body: Obj) -> None:
    plane.kubectl("create", "-f", "-", namespace=namespace, input=json.dumps(body))


def get(plane: ControlPlane, namespace: str, kind: str, name: str) -> Obj:
    info = BY_KIND[kind]
    path = f"/apis/{info.group}/{info.version}/namespaces/{namespace}/{info.plural}/{name}"
    status, found = plane.rest.get(path)
    assert status == 200, f"{kind} {namespace}/{name}: {status} {found}"
    return dict(found)


def suspended(body: Obj) -> bool:
    return bool((body["spec"].get("runPolicy") or {}).get("suspend"))


def conditions(body: Obj) -> set[str]:
    return {c["type"] for c in (body.get("status") or {}).get("conditions") or [] if c["status"] == "True"}


def restarts(body: Obj) -> int:
    ledger = json.loads((body["metadata"].get("annotations") or {}).get(LEDGER_ANNOTATION) or "{}")
    return int(ledger.get("restarts", 0))


def pods(plane: ControlPlane, namespace: str, job_name: str | None = None) -> dict[str, Obj]:
    """The pods of `namespace` (of one job when `job_name` is given) that are not being deleted."""
    status, found = plane.rest.get(f"/api/v1/namespaces/{namespace}/pods")
    assert status == 200, found
    return {
        p["metadata"]["name"]: p
        for p in found["items"]
        if not p["metadata"].get("deletionTimestamp") and (job_name is None or job_name in _job_names(p))
    }


def _job_names(pod: Obj) -> set[str]:
    """The job-name labels of a pod, under any kind's label prefix (`training.kubeflow.org/`, ...)."""
    return {
        value for key, value in (pod["metadata"].get("labels") or {}).items() if key.endswith("/job-name")
    }


def pod_names(body: Obj) -> list[str]:
    """`{job}-{type}-{index}` of every replica."""
    field = next(k for k in body["spec"] if k.endswith("ReplicaSpecs"))
    name = body["metadata"]["name"]
    return [
        f"{name}-{rtype.lower()}-{index}"
        for rtype, spec in body["spec"][field].items()
        for index in range(int(spec["replicas"]))
    ]


def all_running(plane: ControlPlane, namespace: str, body: Obj) -> bool:
    found = pods(plane, namespace)
    return all(found.get(p, {}).get("status", {}).get("phase") == "Running" for p in pod_names(body))


def wait_running(plane: ControlPlane, namespace: str, body: Obj, timeout: float = 120) -> dict[str, Obj]:
    """Wait until every replica pod of `body` is Running; the pods."""
    what = f"every pod of {body['kind']} {body['metadata']['name']} Running"
    wait_until(what, lambda: all_running(plane, namespace, body), timeout=timeout, interval=0.5)
    found = pods(plane, namespace)
    return {p: found[p] for p in pod_names(body)}


def deciders(body: Obj) -> list[str]:
    """The pods whose success makes the job succeed: the leader's pod 0, or every pod of a kind without
    one (its replicas are peers)."""
    leader = LEADER.get(body["kind"])
    return [f"{body['metadata']['name']}-{leader.lower()}-0"] if leader else pod_names(body)


def finish(plane: ControlPlane, namespace: str, body: Obj, timeout: float = 120) -> Obj:
    """Let the deciding pods succeed; wait until the job is Succeeded and return it."""
    for pod in deciders(body):
        plane.finish_pod(namespace, pod, Outcome.SUCCEEDED)
    return wait_for(plane, namespace, body, lambda j: "Succeeded" in conditions(j), "Succeeded", timeout)


def wait_for(
    plane: ControlPlane, namespace: str, body: Obj, check: Any, what: str, timeout: float = 120
) -> Obj:
    """Wait until `check(job)` holds for the job `body` names; the job."""
    kind, name = body["kind"], body["metadata"]["name"]
    seen: list[Obj] = []

    def reached() -> bool:
        seen[:] = [get(plane, namespace, kind, name)]
        return bool(check(seen[0]))

    wait_until(f"{kind} {namespace}/{name}: {what}", reached, timeout=timeout, interval=0.5)
    return seen[0]


def fake_nodes(*nodes: tuple[str, str, dict[str, str]]) -> tuple[FakeNode, ...]:
    """FakeNodes (name, cpu, labels) without GPUs."""
    return tuple(FakeNode(name, cpu=cpu, gpus=0, labels=labels) for name, cpu, labels in nodes)
