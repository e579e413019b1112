"""The types every training kind shares: replica specs, run policy, gang scheduling, status, enumerations.

Field for field these follow kubeflow.org/v1 `common_types.go` (the mpi-operator's v2beta1 keeps its own copy
of the same fields). `TrainingJob` is the generic base of every kind (TFJob, PyTorchJob, JAXJob, XGBoostJob,
PaddleJob, MPIJob), so that the reusable controller code can be written once against it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, ClassVar, Generic, TypeVar

from pydantic import Field, StrictBool, model_validator

from kubetrain.api.meta import Int32, Int64, KubeModel, ObjectMeta, Quantity, Time, WireModel
from kubetrain.api.pod import PodTemplateSpec
from kubetrain.api.trainerstatus import TrainerStatus

__all__ = [
    "MAX_REPLICAS",
    "MAX_SLOTS_PER_WORKER",
    "CleanPodPolicy",
    "ConditionStatus",
    "JobCondition",
    "JobConditionType",
    "JobSpecBase",
    "JobStatus",
    "LabelSelector",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "TrainingJob",
]


MAX_REPLICAS = 10_000
"""The most replicas of one replica type (and the largest elastic bound): two pods per node of the largest
cluster Kubernetes supports (5,000 nodes, 150,000 pods). The operator's memory and time grow with the pods
that exist; the bound stops a typo such as `replicas: 2147483647` first (docs/validation.md says more)."""
MAX_SLOTS_PER_WORKER = 1_024
"""The most MPI slots (processes) per worker: more than the hardware threads of today's largest nodes."""

Replicas = Annotated[Int32, Field(le=MAX_REPLICAS)]
"""A replica count: an int32 of at most `MAX_REPLICAS` (the CRD says the same with `maximum`)."""


class RestartPolicy(StrEnum):
    """What happens to a replica's pod when it exits. `ExitCode`: exit codes >= 128 are retried."""

    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"


class CleanPodPolicy(StrEnum):
    """Which pods are deleted once the job has finished."""

    ALL = "All"
    RUNNING = "Running"
    NONE = "None"


class JobConditionType(StrEnum):
    """The condition types of `status.conditions`."""

    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    SUSPENDED = "Suspended"
    FAILED = "Failed"
    CREATE_FAILED = "CreateFailed"
    """kubetrain's own: the API server refuses the job's pods or Services (docs/differences.md)."""
    QUEUED = "Queued"
    """kubetrain's own: the job waits for Kueue to admit it (docs/ecosystem.md)."""


class ConditionStatus(StrEnum):
    """The status of a condition."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class ReplicaSpec(WireModel):
    """One replica type: how many pods, from which template, restarted how."""

    replicas: Replicas | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    restart_policy: RestartPolicy | None = None


class SchedulingPolicy(WireModel):
    """Gang-scheduling settings: handed to the PodGroup of Volcano or scheduler-plugins."""

    min_available: Int32 | None = None
    queue: str | None = None
    min_resources: dict[str, Quantity] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: Int32 | None = None


class RunPolicy(WireModel):
    """Runtime policies of the whole job: cleanup, TTL, deadline, retries, gang scheduling, suspend, owner."""

    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: Int32 | None = None
    active_deadline_seconds: Int64 | None = None
    backoff_limit: Int32 | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: StrictBool | None = None
    managed_by: str | None = None


class LabelSelector(KubeModel):
    """`metav1.LabelSelector` (the deprecated `replicaStatuses.*.labelSelector`)."""

    match_labels: dict[str, str] | None = None
    match_expressions: list[dict[str, Any]] | None = None


class ReplicaStatus(WireModel):
    """Pod counts of one replica type, plus the selector used by the scale subresource."""

    active: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    label_selector: LabelSelector | None = None
    selector: str | None = None


class JobCondition(WireModel):
    """One entry of `status.conditions`; reasons look like `TFJobRunning`."""

    type: JobConditionType
    status: ConditionStatus
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class JobStatus(WireModel):
    """The observed state of a job, written by the operator only."""

    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None
    trainer_status: TrainerStatus | None = None
    """The trainer's latest progress report (KEP-2779), written by the operator's status endpoint."""


class JobSpecBase(WireModel):
    """What every job spec has: a run policy and a map of replica specs under a kind-specific field name."""

    REPLICA_SPECS_FIELD: ClassVar[str]
    """The Python name of the replica-specs field, e.g. `tf_replica_specs` (wire name `tfReplicaSpecs`)."""

    run_policy: RunPolicy | None = None

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """The replica specs keyed by replica type, whatever the kind calls the field."""
        specs: dict[str, ReplicaSpec] = getattr(self, self.REPLICA_SPECS_FIELD)
        return specs


SpecT = TypeVar("SpecT", bound=JobSpecBase)


class TrainingJob(WireModel, Generic[SpecT]):
    """Base of the job kinds: apiVersion, kind, metadata, spec and status.

    Subclasses give `api_version` and `kind` their fixed values as defaults; a wrong value is rejected, and
    both are always written by `to_wire()`, even when the object was built in code.
    """

    API_VERSION: ClassVar[str]
    KIND: ClassVar[str]

    api_version: str = ""
    kind: str = ""
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: SpecT
    status: JobStatus | None = None

    @model_validator(mode="before")
    @classmethod
    def _fill_type_meta(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for key, alias, value in (
                ("api_version", "apiVersion", cls.API_VERSION),
                ("kind", "kind", cls.KIND),
            ):
                if key not in data and alias not in data:
                    data[alias] = value
        return data

    @model_validator(mode="after")
    def _check_type_meta(self) -> TrainingJob[SpecT]:
        if self.api_version != self.API_VERSION or self.kind != self.KIND:
            raise ValueError(
                f"apiVersion/kind {self.api_version}/{self.kind} do not match {self.API_VERSION}/{self.KIND}"
            )
        return self

    @property
    def name(self) -> str:
        """`metadata.name`, or `""` when not set (e.g. only `generateName` was given)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str:
        """`metadata.namespace`, or `""` when not set."""
        return self.metadata.namespace or ""

    @property
    def run_policy(self) -> RunPolicy:
        """The run policy, or an empty one when the spec has none."""
        return self.spec.run_policy or RunPolicy()

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        """Shorthand for `spec.replica_specs`."""
        return self.spec.replica_specs
