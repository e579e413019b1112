"""Every CEL rule of the CRDs rejects on the real API server, naming the field; kubetrain's validation agrees.

The table holds one broken job per rule (docs/validation.md lists the rules): the API server must refuse
it with a message that names the field, and `kubetrain.api.validate` (what `kubetrain run --local` and
`submit` use) must report an error at the same field. A valid job of each kind passes both. Transition
rules (immutable fields) need a stored object, so they are tested as updates.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kubetrain.api import KINDS, InvalidJobError, parse_job, validate
from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

KIND = {info.kind: info for info in KINDS}
Job = dict[str, Any]


def valid_job(kind: str, name: str = "valid") -> Job:
    """A valid job of `kind` that exercises the fields the rules look at."""
    info = KIND[kind]
    container = {"name": info.default_container_name or "main", "image": "busybox:1.36"}
    template = {"spec": {"containers": [container]}}
    types = {
        "TFJob": ("Chief", "Worker"),
        "PyTorchJob": ("Master", "Worker"),
        "MPIJob": ("Launcher", "Worker"),
        "JAXJob": ("Worker",),
        "XGBoostJob": ("Master", "Worker"),
        "PaddleJob": ("Worker",),
    }
    specs = {
        t: {"replicas": 1 if t == types[kind][0] else 2, "template": copy.deepcopy(template)}
        for t in types[kind]
    }
    spec: Job = {
        info.replica_specs_field: specs,
        "runPolicy": {"managedBy": info.managed_by_values[0], "schedulingPolicy": {"queue": "team-a"}},
    }
    if kind == "PyTorchJob":
        spec.update(nprocPerNode="2", elasticPolicy={"minReplicas": 1, "maxReplicas": 3, "rdzvPort": 29400})
    if kind == "MPIJob":
        spec.update(slotsPerWorker=2)
    return {"apiVersion": info.api_version, "kind": kind, "metadata": {"name": name}, "spec": spec}


def _specs(job: Job) -> Job:
    specs: Job = job["spec"][KIND[job["kind"]].replica_specs_field]
    return specs


def _set(path: str, value: Any) -> Callable[[Job], None]:
    """A change that sets the dotted `path` (under the job) to `value`; `None` removes it."""

    def change(job: Job) -> None:
        *parents, last = path.split(".")
        node = job
        for key in parents:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(last, None)
        else:
            node[last] = value

    return change


def _rename(old: str, new: str) -> Callable[[Job], None]:
    return lambda job: _specs(job).update({new: _specs(job).pop(old)})


def _replicas(rtype: str, count: int | None) -> Callable[[Job], None]:
    return lambda job: _set("replicas", count)(_specs(job)[rtype])


@dataclass(frozen=True)
class Case:
    id: str
    kinds: tuple[str, ...]
    change: Callable[[Job], None]
    field: str
    """The field the API server's message and kubetrain's error both name (for map rules: the map)."""


ALL = ("TFJob", "PyTorchJob", "MPIJob", "JAXJob", "XGBoostJob", "PaddleJob")
V1 = ("TFJob", "PyTorchJob", "JAXJob", "XGBoostJob", "PaddleJob")
CASES = [
    Case("name-not-dns1035", ALL, _set("metadata.name", "9lives"), "metadata.name"),
    Case("name-with-dot", ALL, _set("metadata.name", "mnist.v2"), "metadata.name"),
    Case("name-too-long-for-pod-names", ALL, _set("metadata.name", "n" * 55), "metadata.name"),
    Case(
        "managed-by-unknown",
        ALL,
        _set("spec.runPolicy.managedBy", "example.com/mine"),
        "spec.runPolicy.managedBy",
    ),
    Case(
        "replica-specs-missing", ALL, lambda j: j["spec"].pop(KIND[j["kind"]].replica_specs_field), "REPLICAS"
    ),
    Case("replica-specs-empty", ALL, lambda j: _specs(j).clear(), "REPLICAS"),
    Case("replica-type-unknown", ALL, _rename("Worker", "Wroker"), "REPLICAS"),
    Case("tf-chief-replicas", ("TFJob",), _replicas("Chief", 2), "spec.tfReplicaSpecs"),
    Case("tf-chief-and-master", ("TFJob",), _rename("Worker", "Master"), "spec.tfReplicaSpecs"),
    Case("jax-chief", ("JAXJob",), _rename("Worker", "Chief"), "spec.jaxReplicaSpecs"),
    Case("xgb-no-master", ("XGBoostJob",), lambda j: _specs(j).pop("Master"), "spec.xgbReplicaSpecs"),
    Case("xgb-two-masters", ("XGBoostJob",), _replicas("Master", 2), "spec.xgbReplicaSpecs"),
    Case("paddle-chief", ("PaddleJob",), _rename("Worker", "Chief"), "spec.paddleReplicaSpecs"),
    Case("pytorch-master-replicas", ("PyTorchJob",), _replicas("Master", 3), "spec.pytorchReplicaSpecs"),
    Case("nproc-word", ("PyTorchJob",), _set("spec.nprocPerNode", "four"), "spec.nprocPerNode"),
    Case("nproc-too-long", ("PyTorchJob",), _set("spec.nprocPerNode", "12345678901"), "spec.nprocPerNode"),
    Case("nproc-zero", ("PyTorchJob",), _set("spec.nprocPerNode", "0"), "spec.nprocPerNode"),
    Case("elastic-without-worker", ("PyTorchJob",), lambda j: _specs(j).pop("Worker"), "spec.elasticPolicy"),
    Case(
        "elastic-min-above-max",
        ("PyTorchJob",),
        _set("spec.elasticPolicy", {"minReplicas": 3, "maxReplicas": 2}),
        "spec.elasticPolicy.maxReplicas",
    ),
    Case(
        "elastic-min-zero",
        ("PyTorchJob",),
        _set("spec.elasticPolicy.minReplicas", 0),
        "spec.elasticPolicy.minReplicas",
    ),
    Case(
        "elastic-nproc-twice",
        ("PyTorchJob",),
        _set("spec.elasticPolicy.nProcPerNode", 2),
        "spec.elasticPolicy.nProcPerNode",
    ),
    Case(
        "elastic-rdzv-port",
        ("PyTorchJob",),
        _set("spec.elasticPolicy.rdzvPort", 70000),
        "spec.elasticPolicy.rdzvPort",
    ),
    Case("mpi-no-launcher", ("MPIJob",), lambda j: _specs(j).pop("Launcher"), "spec.mpiReplicaSpecs"),
    Case("mpi-two-launchers", ("MPIJob",), _replicas("Launcher", 2), "spec.mpiReplicaSpecs"),
    Case("mpi-worker-replicas-unset", ("MPIJob",), _replicas("Worker", None), "spec.mpiReplicaSpecs"),
    Case("mpi-worker-replicas-zero", ("MPIJob",), _replicas("Worker", 0), "spec.mpiReplicaSpecs"),
    Case("mpi-slots-zero", ("MPIJob",), _set("spec.slotsPerWorker", 0), "spec.slotsPerWorker"),
]
TABLE = [pytest.param(kind, case, id=f"{kind}-{case.id}") for case in CASES for kind in case.kinds]


def _field(case: Case, kind: str) -> str:
    return f"spec.{KIND[kind].replica_specs_field}" if case.field == "REPLICAS" else case.field


def _server(plane: ControlPlane, namespace: str, job: Job, verb: str = "create") -> tuple[int, str]:
    result = plane.kubectl(verb, "-f", "-", namespace=namespace, input=json.dumps(job), check=False)
    return result.returncode, result.stdout + result.stderr


def _local_paths(job: Job) -> list[str]:
    try:
        return [error.path for error in validate(parse_job(job))]
    except InvalidJobError as exc:
        return [error.path for error in exc.errors]


@pytest.mark.parametrize("kind", ALL)
def test_a_valid_job_passes_the_api_server_and_local_validation(
    crds: ControlPlane, namespace: str, kind: str
) -> None:
    job = valid_job(kind)
    assert _local_paths(job) == []
    code, out = _server(crds, namespace, job)
    assert code == 0, out


@pytest.mark.parametrize(("kind", "case"), TABLE)
def test_every_rule_rejects_naming_the_field(
    crds: ControlPlane, namespace: str, kind: str, case: Case
) -> None:
    job = valid_job(kind)
    case.change(job)
    field = _field(case, kind)
    code, out = _server(crds, namespace, job)
    assert code != 0, f"the API server accepted it: {out}"
    assert field in out, out
    local = _local_paths(job)
    assert any(path.startswith(field) for path in local), f"kubetrain validation says {local}, not {field}"


def _update(plane: ControlPlane, namespace: str, job: Job, change: Callable[[Job], None]) -> tuple[int, str]:
    code, out = _server(plane, namespace, job)
    assert code == 0, out
    stored = json.loads(
        plane.kubectl(
            "get",
            f"{KIND[job['kind']].plural}.kubeflow.org",
            job["metadata"]["name"],
            "-o",
            "json",
            namespace=namespace,
        ).stdout
    )
    change(stored)
    return _server(plane, namespace, stored, "replace")


IMMUTABLE = [
    (
        "managed-by-changed",
        ALL,
        _set("spec.runPolicy.managedBy", "kueue.x-k8s.io/multikueue"),
        "spec.runPolicy.managedBy",
    ),
    ("managed-by-removed", ALL, _set("spec.runPolicy.managedBy", None), "spec.runPolicy.managedBy"),
    (
        "queue-changed",
        V1,
        _set("spec.runPolicy.schedulingPolicy.queue", "team-b"),
        "spec.runPolicy.schedulingPolicy.queue",
    ),
]


@pytest.mark.parametrize(
    ("kind", "change", "field"),
    [
        pytest.param(kind, change, field, id=f"{kind}-{name}")
        for name, kinds, change, field in IMMUTABLE
        for kind in kinds
    ],
)
def test_immutable_fields_reject_an_update(
    crds: ControlPlane, namespace: str, kind: str, change: Callable[[Job], None], field: str
) -> None:
    code, out = _update(crds, namespace, valid_job(kind, "immutable"), change)
    assert code != 0, f"the API server accepted the update: {out}"
    assert field in out and "immutable" in out, out


@pytest.mark.parametrize("kind", ALL)
def test_managed_by_may_be_set_at_creation_and_other_fields_change(
    crds: ControlPlane, namespace: str, kind: str
) -> None:
    job = valid_job(kind, "mutable")
    job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    code, out = _update(crds, namespace, job, _set("spec.runPolicy.backoffLimit", 5))
    assert code == 0, out
