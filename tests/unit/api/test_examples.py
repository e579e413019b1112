"""Every example under examples/ parses, defaults, validates and round-trips; the corpus covers each use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
