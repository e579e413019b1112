"""XGBoostJob (kubeflow.org/v1): distributed XGBoost (or LightGBM) training, a Master and its Workers."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field

from kubetrain.api.common import JobSpecBase, ReplicaSpec, TrainingJob

__all__ = ["XGBoostJob", "XGBoostJobSpec", "XGBoostReplicaType"]


class XGBoostReplicaType(StrEnum):
    """XGBoostJob replica types: the Master (one, required; it hosts the tracker) and the Workers."""

    MASTER = "Master"
    WORKER = "Worker"


class XGBoostJobSpec(JobSpecBase):
    """The desired state of an XGBoostJob."""

    REPLICA_SPECS_FIELD: ClassVar[str] = "xgb_replica_specs"

    xgb_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class XGBoostJob(TrainingJob[XGBoostJobSpec]):
    """An XGBoost training job; every process gets the env a collective tracker and its workers read
    (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, and WORKER_ADDRS/WORKER_PORT for LightGBM)."""

    API_VERSION: ClassVar[str] = "kubeflow.org/v1"
    KIND: ClassVar[str] = "XGBoostJob"

    spec: XGBoostJobSpec = Field(default_factory=XGBoostJobSpec)
