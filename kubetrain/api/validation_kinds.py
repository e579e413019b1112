"""The validation rules that belong to one kind (TF, PyTorch, MPI), plus the gang-size check.

Each function receives the defaulted job and yields `FieldError`s; `validation.validate` runs them after the
rules shared by every kind.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from typing import Any

from kubetrain.api.common import RestartPolicy, TrainingJob
from kubetrain.api.errors import FieldError
from kubetrain.api.mpijob import MPIJob, MPIReplicaType
from kubetrain.api.pytorchjob import ElasticPolicy, PyTorchJob, PyTorchReplicaType
from kubetrain.api.tfjob import TFJob, TFReplicaType

__all__ = ["kind_errors"]

_NPROC = re.compile(r"^(auto|cpu|gpu|[1-9][0-9]*)$")
_NPROC_MAX_LENGTH = 10  # "2147483647"; the CRD's maxLength, which bounds its CEL rule's cost
_MAX_PORT = 65535


def kind_errors(job: TrainingJob[Any]) -> Iterator[FieldError]:
    """The per-kind rules for a defaulted job."""
    if isinstance(job, TFJob):
        yield from _tf_errors(job)
    elif isinstance(job, PyTorchJob):
        yield from _pytorch_errors(job)
    elif isinstance(job, MPIJob):
        yield from _mpi_errors(job)
    yield from _gang_errors(job)


def _tf_errors(job: TFJob) -> Iterator[FieldError]:
    specs = job.spec.tf_replica_specs
    if TFReplicaType.CHIEF in specs and TFReplicaType.MASTER in specs:
        yield FieldError(
            "spec.tfReplicaSpecs.Master",
            "Chief and Master are the same role and a TFJob may have only one of them",
            "keep Chief and remove Master (Master is the older name)",
        )


def _pytorch_errors(job: PyTorchJob) -> Iterator[FieldError]:
    spec = job.spec
    nproc = spec.nproc_per_node
    if nproc is not None and (not _NPROC.match(nproc) or len(nproc) > _NPROC_MAX_LENGTH):
        yield FieldError(
            "spec.nprocPerNode",
            f"{spec.nproc_per_node!r} is not allowed",
            'use auto, cpu, gpu or a positive whole number written as a string, e.g. "2"',
        )
    if spec.elastic_policy is not None:
        workers = spec.pytorch_replica_specs.get(PyTorchReplicaType.WORKER)
        yield from _elastic_errors(
            spec.elastic_policy, workers.replicas if workers else None, spec.nproc_per_node
        )


def _elastic_errors(elastic: ElasticPolicy, workers: int | None, nproc: str | None) -> Iterator[FieldError]:
    path = "spec.elasticPolicy"
    low, high = elastic.min_replicas, elastic.max_replicas
    if workers is None:
        yield FieldError(
            path, "needs a Worker replica spec (elastic training scales the Workers)", "add a Worker"
        )
    if low is not None and low < 1:
        yield FieldError(f"{path}.minReplicas", f"must be >= 1, got {low}", "set minReplicas to 1 or more")
    if low is not None and high is not None and high < low:
        yield FieldError(
            f"{path}.maxReplicas",
            f"is {high}, less than minReplicas {low}",
            "set maxReplicas >= minReplicas",
        )
    elif workers is not None and low is not None and high is not None and not low <= workers <= high:
        yield FieldError(
            "spec.pytorchReplicaSpecs.Worker.replicas",
            f"{workers} is outside the elastic bounds {low}..{high}",
            "set Worker replicas between elasticPolicy.minReplicas and maxReplicas",
        )
    if elastic.n_proc_per_node is not None and nproc is not None:
        yield FieldError(
            f"{path}.nProcPerNode",
            "is deprecated and cannot be combined with spec.nprocPerNode",
            "remove elasticPolicy.nProcPerNode and keep spec.nprocPerNode",
        )
    for alias, value, low_bound in (
        ("nProcPerNode", elastic.n_proc_per_node, 1),
        ("maxRestarts", elastic.max_restarts, 0),
        ("rdzvPort", elastic.rdzv_port, 1),
    ):
        if value is not None and value < low_bound:
            yield FieldError(
                f"{path}.{alias}", f"must be >= {low_bound}, got {value}", f"set it to {low_bound} or more"
            )
    if elastic.rdzv_port is not None and elastic.rdzv_port > _MAX_PORT:
        yield FieldError(
            f"{path}.rdzvPort", f"{elastic.rdzv_port} is not a port", f"use a port in 1..{_MAX_PORT}"
        )


def _mpi_errors(job: MPIJob) -> Iterator[FieldError]:
    spec = job.spec
    specs = spec.mpi_replica_specs
    workers = specs.get(MPIReplicaType.WORKER)
    if workers is not None and workers.replicas is not None and workers.replicas == 0:
        yield FieldError(
            "spec.mpiReplicaSpecs.Worker.replicas",
            "is 0 (the default when unset), but an MPIJob Worker spec needs at least 1 replica",
            "set replicas to 1 or more, or remove the Worker spec to run on the launcher alone",
        )
    for rtype, rspec in specs.items():
        if rspec.restart_policy not in (None, RestartPolicy.NEVER, RestartPolicy.ON_FAILURE):
            yield FieldError(
                f"spec.mpiReplicaSpecs.{rtype}.restartPolicy",
                f"{rspec.restart_policy.value} is not supported by MPIJob",
                "use Never or OnFailure",
            )
    if spec.slots_per_worker is not None and spec.slots_per_worker < 1:
        yield FieldError(
            "spec.slotsPerWorker",
            f"must be >= 1 (every host of the hostfile needs a slot), got {spec.slots_per_worker}",
            "set it to the number of processes each worker runs, 1 or more",
        )
    path = spec.ssh_auth_mount_path
    if path is not None and (not path.startswith("/") or posixpath.normpath(path) == "/"):
        yield FieldError(
            "spec.sshAuthMountPath",
            f"{path!r} is not an absolute directory path",
            "use a directory such as /root/.ssh or /home/mpiuser/.ssh",
        )


def _gang_errors(job: TrainingJob[Any]) -> Iterator[FieldError]:
    scheduling = job.run_policy.scheduling_policy
    if scheduling is None or scheduling.min_available is None:
        return
    total = sum(spec.replicas or 0 for spec in job.replica_specs.values())
    if scheduling.min_available > total:
        yield FieldError(
            "spec.runPolicy.schedulingPolicy.minAvailable",
            f"is {scheduling.min_available}, more than the job's {total} replicas: the gang never starts",
            f"set it to at most {total}, or remove it (the default is every replica)",
        )
