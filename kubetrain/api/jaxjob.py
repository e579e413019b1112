"""JAXJob (kubeflow.org/v1): JAX multi-process training, every process a Worker replica."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from kubetrain.api.common import JobSpecBase, ReplicaSpec, TrainingJob

__all__ = ["JAXJob", "JAXJobSpec", "JAXReplicaType"]


class JAXReplicaType(StrEnum):
    """JAXJob replica types: only workers; worker 0 hosts the `jax.distributed` coordinator."""

    WORKER = "Worker"


class JAXJobSpec(JobSpecBase):
    """The desired state of a JAXJob."""

    REPLICA_SPECS_FIELD: ClassVar[str] = "jax_replica_specs"

    jax_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class JAXJob(TrainingJob[JAXJobSpec]):
    """A JAX training job; every process gets the env `jax.distributed.initialize` reads (COORDINATOR_*)."""

    API_VERSION: ClassVar[str] = "kubeflow.org/v1"
    KIND: ClassVar[str] = "JAXJob"

    spec: JAXJobSpec = Field(default_factory=JAXJobSpec)
