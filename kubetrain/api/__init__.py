"""API models of the kubeflow.org training CRDs: pydantic v2, defaulting, validation, CRD generation. No I/O.

The public surface, by module:

- models: `TFJob`, `PyTorchJob`, `JAXJob`, `XGBoostJob`, `PaddleJob` (kubeflow.org/v1) and `MPIJob`
  (kubeflow.org/v2beta1), their specs, the shared `ReplicaSpec`, `RunPolicy`, `SchedulingPolicy`,
  `JobStatus`, `ReplicaStatus`, `JobCondition`, `TrainerStatus` (KEP-2779 progress, with `latest_metric`),
  the pod template types and the enumerations. Every model dumps its wire form with `to_wire()`.
- `kinds`: `KindInfo` per kind (`TFJOB`, `PYTORCHJOB`, `JAXJOB`, `XGBOOSTJOB`, `PADDLEJOB`, `MPIJOB`, all
  in `KINDS`), `kind_info(job)`.
- `defaults`: `apply_defaults(job)`, a pure function returning a defaulted copy.
- `validation`: `validate(job) -> list[FieldError]` and `check_job(job)`, which raises `InvalidJobError`.
- `load`: `parse_job(mapping)`, `load_jobs(yaml_text)`, `load_valid_jobs(yaml_text)` (parsed, defaulted and
  validated) and `dump_jobs(jobs)`.
"""

from kubetrain.api.common import (
    MAX_REPLICAS,
    MAX_SLOTS_PER_WORKER,
    CleanPodPolicy,
    ConditionStatus,
    JobCondition,
    JobConditionType,
    JobSpecBase,
    JobStatus,
    LabelSelector,
    ReplicaSpec,
    ReplicaStatus,
    RestartPolicy,
    RunPolicy,
    SchedulingPolicy,
    TrainingJob,
)
from kubetrain.api.defaults import apply_defaults
from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jaxjob import JAXJob, JAXJobSpec, JAXReplicaType
from kubetrain.api.kinds import (
    GROUP,
    JAXJOB,
    KINDS,
    MPIJOB,
    MULTIKUEUE_CONTROLLER,
    PADDLEJOB,
    PYTORCHJOB,
    TFJOB,
    XGBOOSTJOB,
    AnyJob,
    KindInfo,
    ValidationRule,
    kind_info,
    lookup_kind,
)
from kubetrain.api.load import dump_jobs, load_jobs, load_valid_jobs, other_objects, parse_job
from kubetrain.api.meta import Int32, Int64, KubeModel, ObjectMeta, OwnerReference, Quantity, Time, WireModel
from kubetrain.api.mpijob import LauncherCreationPolicy, MPIImplementation, MPIJob, MPIJobSpec, MPIReplicaType
from kubetrain.api.owned_env import owned_env_names
from kubetrain.api.paddlejob import PaddleElasticPolicy, PaddleJob, PaddleJobSpec, PaddleReplicaType
from kubetrain.api.pod import (
    Container,
    ContainerPort,
    EnvVar,
    PodSpec,
    PodTemplateSpec,
    ResourceRequirements,
    Volume,
    VolumeMount,
)
from kubetrain.api.pytorchjob import (
    ElasticPolicy,
    PyTorchJob,
    PyTorchJobSpec,
    PyTorchReplicaType,
    RDZVBackend,
    RDZVConf,
)
from kubetrain.api.tfjob import SuccessPolicy, TFJob, TFJobSpec, TFReplicaType
from kubetrain.api.trainerstatus import (
    MAX_METRIC_NAME,
    MAX_METRIC_VALUE,
    MAX_METRICS,
    TrainerMetric,
    TrainerStatus,
    latest_metric,
)
from kubetrain.api.validation import check_job, validate
from kubetrain.api.xgboostjob import XGBoostJob, XGBoostJobSpec, XGBoostReplicaType

__all__ = [
    "GROUP",
    "JAXJOB",
    "KINDS",
    "MAX_METRICS",
    "MAX_METRIC_NAME",
    "MAX_METRIC_VALUE",
    "MAX_REPLICAS",
    "MAX_SLOTS_PER_WORKER",
    "MPIJOB",
    "MULTIKUEUE_CONTROLLER",
    "PADDLEJOB",
    "PYTORCHJOB",
    "TFJOB",
    "XGBOOSTJOB",
    "AnyJob",
    "CleanPodPolicy",
    "ConditionStatus",
    "Container",
    "ContainerPort",
    "ElasticPolicy",
    "EnvVar",
    "FieldError",
    "Int32",
    "Int64",
    "InvalidJobError",
    "JAXJob",
    "JAXJobSpec",
    "JAXReplicaType",
    "JobCondition",
    "JobConditionType",
    "JobSpecBase",
    "JobStatus",
    "KindInfo",
    "KubeModel",
    "LabelSelector",
    "LauncherCreationPolicy",
    "MPIImplementation",
    "MPIJob",
    "MPIJobSpec",
    "MPIReplicaType",
    "ObjectMeta",
    "OwnerReference",
    "PaddleElasticPolicy",
    "PaddleJob",
    "PaddleJobSpec",
    "PaddleReplicaType",
    "PodSpec",
    "PodTemplateSpec",
    "PyTorchJob",
    "PyTorchJobSpec",
    "PyTorchReplicaType",
    "Quantity",
    "RDZVBackend",
    "RDZVConf",
    "ReplicaSpec",
    "ReplicaStatus",
    "ResourceRequirements",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "SuccessPolicy",
    "TFJob",
    "TFJobSpec",
    "TFReplicaType",
    "Time",
    "TrainerMetric",
    "TrainerStatus",
    "TrainingJob",
    "ValidationRule",
    "Volume",
    "VolumeMount",
    "WireModel",
    "XGBoostJob",
    "XGBoostJobSpec",
    "XGBoostReplicaType",
    "apply_defaults",
    "check_job",
    "dump_jobs",
    "kind_info",
    "latest_metric",
    "load_jobs",
    "load_valid_jobs",
    "lookup_kind",
    "other_objects",
    "owned_env_names",
    "parse_job",
    "validate",
]
