"""PyTorchJob (kubeflow.org/v1): PyTorch training with Master and Worker replicas, optionally elastic."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field, StrictBool

from kubetrain.api.common import JobSpecBase, Replicas, ReplicaSpec, TrainingJob
from kubetrain.api.meta import Int32, WireModel

__all__ = ["ElasticPolicy", "PyTorchJob", "PyTorchJobSpec", "PyTorchReplicaType", "RDZVBackend", "RDZVConf"]


class PyTorchReplicaType(StrEnum):
    """PyTorchJob replica types."""

    MASTER = "Master"
    WORKER = "Worker"


class RDZVBackend(StrEnum):
    """torchrun rendezvous backends the operator accepts."""

    C10D = "c10d"
    ETCD = "etcd"
    ETCD_V2 = "etcd-v2"


class RDZVConf(WireModel):
    """One extra rendezvous setting, passed to torchrun as `key=value` in PET_RDZV_CONF."""

    key: str | None = None
    value: str | None = None


class ElasticPolicy(WireModel):
    """torchrun elastic training: node-count bounds, rendezvous, restarts and optional HPA metrics."""

    min_replicas: Replicas | None = None
    max_replicas: Replicas | None = None
    rdzv_backend: RDZVBackend | None = None
    rdzv_port: Int32 | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RDZVConf] | None = None
    standalone: StrictBool | None = None
    n_proc_per_node: Int32 | None = None
    """Deprecated since Kubeflow v1.7: use `spec.nprocPerNode`."""
    max_restarts: Int32 | None = None
    metrics: list[dict[str, Any]] | None = None
    """autoscaling/v2 MetricSpecs; when set, a HorizontalPodAutoscaler scales the Workers."""


class PyTorchJobSpec(JobSpecBase):
    """The desired state of a PyTorchJob."""

    REPLICA_SPECS_FIELD: ClassVar[str] = "pytorch_replica_specs"

    elastic_policy: ElasticPolicy | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    nproc_per_node: str | None = None
    """Processes per pod: `auto`, `cpu`, `gpu` or a positive integer written as a string."""


class PyTorchJob(TrainingJob[PyTorchJobSpec]):
    """A PyTorch training job; the operator sets MASTER_ADDR, WORLD_SIZE, RANK and the PET_* torchrun env."""

    API_VERSION: ClassVar[str] = "kubeflow.org/v1"
    KIND: ClassVar[str] = "PyTorchJob"

    spec: PyTorchJobSpec = Field(default_factory=PyTorchJobSpec)
