"""MPIJob (kubeflow.org/v2beta1, the mpi-operator API): one launcher running mpirun over SSH into workers."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, ClassVar

from pydantic import Field, StrictBool

from kubetrain.api.common import MAX_SLOTS_PER_WORKER, JobSpecBase, ReplicaSpec, TrainingJob
from kubetrain.api.meta import Int32

__all__ = ["LauncherCreationPolicy", "MPIImplementation", "MPIJob", "MPIJobSpec", "MPIReplicaType"]


class MPIReplicaType(StrEnum):
    """MPIJob replica types."""

    LAUNCHER = "Launcher"
    WORKER = "Worker"


class MPIImplementation(StrEnum):
    """Which MPI the image carries; it decides the hostfile format and the launcher's env."""

    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class LauncherCreationPolicy(StrEnum):
    """When the launcher is created: at once, or once every worker pod is Ready."""

    AT_STARTUP = "AtStartup"
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


class MPIJobSpec(JobSpecBase):
    """The desired state of an MPIJob."""

    REPLICA_SPECS_FIELD: ClassVar[str] = "mpi_replica_specs"

    slots_per_worker: Annotated[Int32, Field(le=MAX_SLOTS_PER_WORKER)] | None = None
    run_launcher_as_worker: StrictBool | None = None
    mpi_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    ssh_auth_mount_path: str | None = None
    launcher_creation_policy: LauncherCreationPolicy | None = None
    mpi_implementation: MPIImplementation | None = None


class MPIJob(TrainingJob[MPIJobSpec]):
    """An MPI training job (OpenMPI, Intel MPI or MPICH; Horovod runs on top of it)."""

    API_VERSION: ClassVar[str] = "kubeflow.org/v2beta1"
    KIND: ClassVar[str] = "MPIJob"

    spec: MPIJobSpec = Field(default_factory=MPIJobSpec)
