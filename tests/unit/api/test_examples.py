"""Every example under examples/ parses, defaults, validates and round-trips; the corpus covers each use."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import (
    AnyJob,
    JAXJob,
    MPIImplementation,
    MPIJob,
    PaddleJob,
    PyTorchJob,
    TFJob,
    XGBoostJob,
    apply_defaults,
    dump_jobs,
    load_jobs,
    validate,
)
from kubetrain.common.job.quantity import parse_quantity

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FILES = sorted(p for p in EXAMPLES.rglob("*.yaml") if "operators" not in p.parts)  # built-in kinds only
FRAMEWORK_DIRS = {
    "tensorflow": TFJob,
    "pytorch": PyTorchJob,
    "mpi": MPIJob,
    "jax": JAXJob,
    "xgboost": XGBoostJob,
    "paddle": PaddleJob,
}


def load(path: Path) -> AnyJob:
    jobs = load_jobs(path.read_text())
    assert len(jobs) == 1, f"{path.name}: one job per file"
    return jobs[0]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_example_parses_defaults_and_validates(path: Path) -> None:
    job = load(path)
    assert isinstance(job, FRAMEWORK_DIRS[path.parent.name])
    assert validate(job) == []
    assert validate(apply_defaults(job)) == []


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_example_round_trips(path: Path) -> None:
    job = load(path)
    assert job.to_wire() == next(
        d for d in yaml.safe_load_all(path.read_text()) if d and d["apiVersion"].startswith("kubeflow.org/")
    )
    assert load_jobs(dump_jobs([job])) == [job]


def _types(job: AnyJob) -> set[str]:
    return set(job.replica_specs)


def _is_tf(rtypes: set[str]) -> Callable[[AnyJob], bool]:
    return lambda job: isinstance(job, TFJob) and _types(job) == rtypes


def _pytorch_elastic(job: AnyJob) -> bool:
    return isinstance(job, PyTorchJob) and job.spec.elastic_policy is not None


def _mpi(impl: MPIImplementation, command: str) -> Callable[[AnyJob], bool]:
    def matches(job: AnyJob) -> bool:
        if not isinstance(job, MPIJob):
            return False
        launcher = job.replica_specs["Launcher"].template.spec.containers[0]
        text = " ".join([*(launcher.command or []), *(launcher.args or [])])
        return (job.spec.mpi_implementation or MPIImplementation.OPEN_MPI) == impl and command in text

    return matches


REQUIRED: dict[str, Callable[[AnyJob], bool]] = {
    "TF with PS and workers": _is_tf({"PS", "Worker"}),
    "TF MultiWorkerMirrored workers": _is_tf({"Worker"}),
    "TF with chief and evaluator": lambda job: (
        isinstance(job, TFJob) and {"Chief", "Evaluator"} <= _types(job)
    ),
    "PyTorch master and workers": lambda job: (
        isinstance(job, PyTorchJob) and _types(job) == {"Master", "Worker"}
    ),
    "PyTorch elastic": _pytorch_elastic,
    "MPI OpenMPI, Horovod style": _mpi(MPIImplementation.OPEN_MPI, "horovod"),
    "MPI Intel": _mpi(MPIImplementation.INTEL, "mpirun"),
}


@pytest.mark.parametrize("feature", list(REQUIRED))
def test_the_corpus_covers(feature: str) -> None:
    assert any(REQUIRED[feature](load(path)) for path in FILES), f"no example shows: {feature}"


def test_example_commands_run_our_example_trainers() -> None:
    for path in FILES:
        for spec in load(path).replica_specs.values():
            for container in spec.template.spec.containers:
                words = [*(container.command or []), *(container.args or [])]
                trainers = [w for w in words if w.startswith("kubetrain.runtimes.examples.")]
                assert all(w.count(".") == 3 for w in trainers), (path.name, trainers)


# what the examples ask of a node -------------------------------------------------------------------------
SMALL_NODE_CPU = Decimal(2)
CLUSTER_OWN_CPU = Decimal("1.05")
"""What a one-node kind cluster of 2 CPUs has already requested before a job comes: its control plane (API
server 250m, controller-manager 200m, scheduler 100m, etcd 100m), two CoreDNS (100m each), kindnet (100m),
and the kubetrain operator (100m, manifests/base). A job's pods share the rest: 950m."""
JOB_MEMORY = Decimal(6 * 2**30)
"""The most memory a job's pods may request together: what such a node (8 GiB) has beside its own pods."""


def _containers(path: Path) -> list[tuple[str, int, dict[str, Any]]]:
    """(replica type, replicas, container) of every container of the example's job."""
    job = next(
        d for d in yaml.safe_load_all(path.read_text()) if d and d["apiVersion"].startswith("kubeflow.")
    )
    specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    return [
        (rtype, int(spec.get("replicas", 1)), container)
        for rtype, spec in specs.items()
        for container in spec["template"]["spec"]["containers"]
    ]


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_container_requests_what_it_needs(path: Path) -> None:
    """Requests are written, not left to default from the limits (a limit of 2 CPUs alone requests 2 CPUs),
    and a memory limit leaves room above the request."""
    for rtype, _, container in _containers(path):
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        assert {"cpu", "memory"} <= set(requests), f"{path.name} {rtype}: requests {requests}"
        assert "cpu" not in limits, f"{path.name} {rtype}: a CPU limit throttles a trainer the node could run"
        memory = parse_quantity(limits.get("memory", requests["memory"]))
        assert memory >= parse_quantity(requests["memory"]), f"{path.name} {rtype}: {resources}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_every_example_fits_a_two_cpu_node(path: Path) -> None:
    """All of a job's pods together fit one small node beside the cluster's own pods (`Insufficient cpu`
    otherwise: the pods stay Pending). The node tier applies the files as they are on its 2-core node."""
    parts = _containers(path)
    cpu = sum(n * parse_quantity(c["resources"]["requests"]["cpu"]) for _, n, c in parts)
    memory = sum(n * parse_quantity(c["resources"]["requests"]["memory"]) for _, n, c in parts)
    assert cpu <= SMALL_NODE_CPU - CLUSTER_OWN_CPU, f"{path.name}: the pods request {cpu} CPUs"
    assert memory <= JOB_MEMORY, f"{path.name}: the pods request {memory / 2**30:.1f} GiB"
