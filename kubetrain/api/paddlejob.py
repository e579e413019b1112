"""PaddleJob (kubeflow.org/v1): PaddlePaddle training, collective (Workers only) or parameter-server
(a Master replica type beside the Workers), started by `python -m paddle.distributed.launch`."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import Field

from kubetrain.api.common import JobSpecBase, Replicas, ReplicaSpec, TrainingJob
from kubetrain.api.meta import Int32, WireModel

__all__ = ["PaddleElasticPolicy", "PaddleJob", "PaddleJobSpec", "PaddleReplicaType"]


class PaddleReplicaType(StrEnum):
    """PaddleJob replica types: without a Master the job is collective (worker 0 hosts the rendezvous);
    with one, the Masters are the parameter servers and Master 0 hosts it."""

    MASTER = "Master"
    WORKER = "Worker"


class PaddleElasticPolicy(WireModel):
    """Bounds of the Worker count and restarts; Kubeflow defaults the bounds and renders nothing from them."""

    min_replicas: Replicas | None = None
    max_replicas: Replicas | None = None
    max_restarts: Int32 | None = None
    metrics: list[dict[str, Any]] | None = None
    """autoscaling/v2 MetricSpecs (kept as written; Kubeflow v1.9 creates no autoscaler for them)."""


class PaddleJobSpec(JobSpecBase):
    """The desired state of a PaddleJob."""

    REPLICA_SPECS_FIELD: ClassVar[str] = "paddle_replica_specs"

    elastic_policy: PaddleElasticPolicy | None = None
    paddle_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class PaddleJob(TrainingJob[PaddleJobSpec]):
    """A PaddlePaddle training job; every container gets the env `paddle.distributed.launch` reads
    (PADDLE_MASTER, PADDLE_NNODES, PADDLE_JOB_ID, and in parameter-server mode the server/trainer counts)."""

    API_VERSION: ClassVar[str] = "kubeflow.org/v1"
    KIND: ClassVar[str] = "PaddleJob"

    spec: PaddleJobSpec = Field(default_factory=PaddleJobSpec)
