"""The kind registry: everything the generic code needs to know about every kind (`KINDS`).

Controllers, defaulting, validation and the CRD generator read identity from here (group, version, names,
replica types, default container and port, defaults, label values) instead of spelling it out again, so that
adding a kind means adding one `KindInfo`.

Upstream CRDs declare no short names and no categories. We declare no short names either (a short name that
a future upstream version picks differently would clash), and put every kind in the `kubeflow` category,
so that `kubectl get kubeflow` lists every training job; they are deliberately not in `all`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kubetrain.api.common import RestartPolicy, TrainingJob
from kubetrain.api.jaxjob import JAXJob, JAXReplicaType
from kubetrain.api.mpijob import MPIJob, MPIReplicaType
from kubetrain.api.paddlejob import PaddleJob, PaddleReplicaType
from kubetrain.api.pod import Container
from kubetrain.api.pytorchjob import PyTorchJob, PyTorchReplicaType
from kubetrain.api.tfjob import TFJob, TFReplicaType
from kubetrain.api.xgboostjob import XGBoostJob, XGBoostReplicaType

__all__ = [
    "GROUP",
    "JAXJOB",
    "KINDS",
    "MPIJOB",
    "MULTIKUEUE_CONTROLLER",
    "PADDLEJOB",
    "PYTORCHJOB",
    "TFJOB",
    "XGBOOSTJOB",
    "AnyJob",
    "KindInfo",
    "ValidationRule",
    "kind_info",
    "lookup_kind",
]

GROUP = "kubeflow.org"
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""The `runPolicy.managedBy` value with which Kueue's MultiKueue takes a job over; we then leave it alone."""

AnyJob = TFJob | PyTorchJob | JAXJob | XGBoostJob | PaddleJob | MPIJob
"""Any job this operator serves."""


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class ValidationRule:
    """A CEL rule of one's own kind, which its CRD carries (`x-kubernetes-validations`): the API server checks
    it when a job is created or changed, and refuses a job that breaks it with `message`, at `kubectl apply`,
    as it refuses the built-in kinds' bad jobs.

    `at` is the dotted path of wire names to the schema node the rule is attached to: "" is the job itself,
    "spec", "spec.sleepReplicaSpecs"; `self` in `rule` is that node. `field_path` (relative to `at`, e.g.
    ".replicas") is the field the API server's error names; the message should name it too, and the fix.
    """

    rule: str
    message: str
    at: str = ""
    field_path: str | None = None


@dataclass(frozen=True, kw_only=True)
class KindInfo:
    """Identity and defaults of one training kind. All replica types are canonical CamelCase strings.

    A kind of one's own needs only `group`, `version`, `kind`, `model`, `replica_specs_field` and
    `replica_types`; the rest is derived: `singular` and `plural` from the kind (`sleepjob`, `sleepjobs`),
    `operator_name` (`sleepjob-controller`), `controller_name` (`<group>/sleepjob-operator`), the
    `managedBy` values (that, and Kueue's MultiKueue), one replica and `restartPolicy: Never` for each
    replica type not in `default_replicas` or `default_restart_policy`, and the labels' prefix.
    """

    group: str
    version: str
    kind: str
    plural: str = ""
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    model: type[TrainingJob[Any]]
    replica_specs_field: str
    """The wire name of the replica-specs map, e.g. `tfReplicaSpecs`."""
    replica_types: tuple[str, ...]
    """Every replica type of the kind, in canonical order."""
    master_types: frozenset[str] = frozenset()
    """The replica types of which a job may hold one replica at most (Chief/Master/Launcher); PaddleJob's
    Master is not one of them: its Masters are parameter servers, as many as the job asks for."""
    default_container_name: str | None = None
    """The container the operator configures; None means containers[0] (MPI v2beta1 has no name rule)."""
    default_port_name: str | None = None
    default_port: int | None = None
    """Port added to the default container by defaulting and used for Services; None: no default port."""
    default_restart_policy: Mapping[str, RestartPolicy] = field(compare=False, default_factory=_empty)
    """Per replica type; a type not named here gets `Never`."""
    default_replicas: Mapping[str, int] = field(compare=False, default_factory=_empty)
    """Per replica type; a type not named here gets 1."""
    operator_name: str = ""
    """Value of the `<label prefix>operator-name` label on the pods and Services of this kind."""
    controller_name: str = ""
    """The `runPolicy.managedBy` value meaning "this operator" (also what an unset managedBy means)."""
    managed_by_values: tuple[str, ...] = ()
    """Every value `runPolicy.managedBy` may take."""
    owned_env: frozenset[str] = field(compare=False, default=frozenset())
    """Env var names the operator always sets in the containers it configures; users must not set them."""
    env_in_every_container: bool = False
    """Whether the operator configures every container of a pod (PyTorch, JAX, XGBoost, Paddle), not only
    the default one."""
    scale_replica_type: str | None = None
    """The replica type the CRD's scale subresource scales (`kubectl scale`, HPA); None: no subresource."""
    required_types: tuple[str, ...] = ()
    """The replica types every job must have (MPIJob's Launcher, XGBoostJob's Master); empty: none."""
    validations: tuple[ValidationRule, ...] = ()
    """CEL rules of the kind's own, placed in its CRD beside kubetrain's (name, replica types, run policy)."""
    label_prefix: str = ""
    """The prefix of the labels on the kind's pods and Services (`job-name`, `replica-type`, ...), ending
    in `/`. Default: Kubeflow's `training.kubeflow.org/` for a kind in `kubeflow.org`, else `<group>/`."""

    def __post_init__(self) -> None:
        derived = {
            "singular": self.singular or self.kind.lower(),
            "label_prefix": self.label_prefix or _label_prefix(self.group),
        }
        derived["plural"] = self.plural or derived["singular"] + "s"
        derived["operator_name"] = self.operator_name or f"{derived['singular']}-controller"
        derived["controller_name"] = self.controller_name or f"{self.group}/{derived['singular']}-operator"
        for name, value in derived.items():
            object.__setattr__(self, name, value)
        if not self.managed_by_values:
            object.__setattr__(self, "managed_by_values", (self.controller_name, MULTIKUEUE_CONTROLLER))
        replicas = {t: 1 for t in self.replica_types} | dict(self.default_replicas)
        policies = {t: RestartPolicy.NEVER for t in self.replica_types} | dict(self.default_restart_policy)
        object.__setattr__(self, "default_replicas", MappingProxyType(replicas))
        object.__setattr__(self, "default_restart_policy", MappingProxyType(policies))
        if not self.label_prefix.endswith("/"):
            raise ValueError(
                f"KindInfo.label_prefix={self.label_prefix!r}: end it in '/', e.g. 'example.dev/'"
            )

    @property
    def api_version(self) -> str:
        """`group/version`, e.g. `kubeflow.org/v1`."""
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        """The CustomResourceDefinition's name, e.g. `tfjobs.kubeflow.org`."""
        return f"{self.plural}.{self.group}"

    def canonical_replica_type(self, key: str) -> str | None:
        """The canonical spelling of a replica-type key compared case-insensitively (`worker` -> `Worker`)."""
        for rtype in self.replica_types:
            if rtype.lower() == key.lower():
                return rtype
        return None

    def default_container_index(self, containers: Sequence[Container]) -> int | None:
        """Index of the container the operator configures: the one with the default name, else the first."""
        for index, container in enumerate(containers):
            if self.default_container_name and container.name == self.default_container_name:
                return index
        return 0 if containers else None


def _label_prefix(group: str) -> str:
    return "training.kubeflow.org/" if group == GROUP else f"{group}/"


def _frozen(mapping: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(mapping))


_TRAINING_OPERATOR = "kubeflow.org/training-operator"

TFJOB = KindInfo(
    group=GROUP,
    version="v1",
    kind="TFJob",
    plural="tfjobs",
    singular="tfjob",
    short_names=(),
    categories=("kubeflow",),
    model=TFJob,
    replica_specs_field="tfReplicaSpecs",
    replica_types=tuple(TFReplicaType),
    master_types=frozenset({TFReplicaType.CHIEF, TFReplicaType.MASTER}),
    default_container_name="tensorflow",
    default_port_name="tfjob-port",
    default_port=2222,
    default_restart_policy=_frozen({t: RestartPolicy.NEVER for t in TFReplicaType}),
    default_replicas=_frozen({t: 1 for t in TFReplicaType}),
    operator_name="tfjob-controller",
    controller_name=_TRAINING_OPERATOR,
    managed_by_values=(_TRAINING_OPERATOR, MULTIKUEUE_CONTROLLER),
    owned_env=frozenset({"TF_CONFIG"}),
)

PYTORCHJOB = KindInfo(
    group=GROUP,
    version="v1",
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    short_names=(),
    categories=("kubeflow",),
    model=PyTorchJob,
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=tuple(PyTorchReplicaType),
    master_types=frozenset({PyTorchReplicaType.MASTER}),
    default_container_name="pytorch",
    default_port_name="pytorchjob-port",
    default_port=23456,
    default_restart_policy=_frozen({t: RestartPolicy.ON_FAILURE for t in PyTorchReplicaType}),
    default_replicas=_frozen({t: 1 for t in PyTorchReplicaType}),
    operator_name="pytorchjob-controller",
    controller_name=_TRAINING_OPERATOR,
    managed_by_values=(_TRAINING_OPERATOR, MULTIKUEUE_CONTROLLER),
    owned_env=frozenset(
        {
            "MASTER_ADDR",
            "MASTER_PORT",
            "WORLD_SIZE",
            "RANK",
            "PET_MASTER_ADDR",
            "PET_MASTER_PORT",
            "PET_NODE_RANK",
            "PET_NNODES",
            "PET_NPROC_PER_NODE",
        }
    ),
    env_in_every_container=True,
    scale_replica_type=PyTorchReplicaType.WORKER,
)

JAXJOB = KindInfo(
    group=GROUP,
    version="v1",
    kind="JAXJob",
    plural="jaxjobs",
    singular="jaxjob",
    short_names=(),
    categories=("kubeflow",),
    model=JAXJob,
    replica_specs_field="jaxReplicaSpecs",
    replica_types=tuple(JAXReplicaType),
    master_types=frozenset(),
    default_container_name="jax",
    default_port_name="jaxjob-port",
    default_port=6666,
    default_restart_policy=_frozen({t: RestartPolicy.NEVER for t in JAXReplicaType}),
    default_replicas=_frozen({t: 1 for t in JAXReplicaType}),
    operator_name="jaxjob-controller",
    controller_name=_TRAINING_OPERATOR,
    managed_by_values=(_TRAINING_OPERATOR, MULTIKUEUE_CONTROLLER),
    owned_env=frozenset({"COORDINATOR_ADDRESS", "COORDINATOR_PORT", "NUM_PROCESSES", "PROCESS_ID"}),
    env_in_every_container=True,
    scale_replica_type=JAXReplicaType.WORKER,
)

XGBOOSTJOB = KindInfo(
    group=GROUP,
    version="v1",
    kind="XGBoostJob",
    plural="xgboostjobs",
    singular="xgboostjob",
    short_names=(),
    categories=("kubeflow",),
    model=XGBoostJob,
    replica_specs_field="xgbReplicaSpecs",
    replica_types=tuple(XGBoostReplicaType),
    master_types=frozenset({XGBoostReplicaType.MASTER}),
    required_types=(XGBoostReplicaType.MASTER,),
    default_container_name="xgboost",
    default_port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policy=_frozen({t: RestartPolicy.NEVER for t in XGBoostReplicaType}),
    default_replicas=_frozen({t: 1 for t in XGBoostReplicaType}),
    operator_name="xgboostjob-controller",
    controller_name=_TRAINING_OPERATOR,
    managed_by_values=(_TRAINING_OPERATOR, MULTIKUEUE_CONTROLLER),
    owned_env=frozenset({"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "WORKER_ADDRS", "WORKER_PORT"}),
    env_in_every_container=True,
)

PADDLEJOB = KindInfo(
    group=GROUP,
    version="v1",
    kind="PaddleJob",
    plural="paddlejobs",
    singular="paddlejob",
    short_names=(),
    categories=("kubeflow",),
    model=PaddleJob,
    replica_specs_field="paddleReplicaSpecs",
    replica_types=tuple(PaddleReplicaType),
    master_types=frozenset(),
    default_container_name="paddle",
    default_port_name="master",
    default_port=36543,
    default_restart_policy=_frozen({t: RestartPolicy.ON_FAILURE for t in PaddleReplicaType}),
    default_replicas=_frozen({t: 1 for t in PaddleReplicaType}),
    operator_name="paddlejob-controller",
    controller_name=_TRAINING_OPERATOR,
    managed_by_values=(_TRAINING_OPERATOR, MULTIKUEUE_CONTROLLER),
    owned_env=frozenset({"PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_JOB_ID"}),
    env_in_every_container=True,
    scale_replica_type=PaddleReplicaType.WORKER,
)

_MPI_OPERATOR = "kubeflow.org/mpi-operator"

MPIJOB = KindInfo(
    group=GROUP,
    version="v2beta1",
    kind="MPIJob",
    plural="mpijobs",
    singular="mpijob",
    short_names=(),
    categories=("kubeflow",),
    model=MPIJob,
    replica_specs_field="mpiReplicaSpecs",
    replica_types=tuple(MPIReplicaType),
    master_types=frozenset({MPIReplicaType.LAUNCHER}),
    required_types=(MPIReplicaType.LAUNCHER,),
    default_container_name=None,
    default_port_name=None,
    default_port=None,
    default_restart_policy=_frozen(
        {MPIReplicaType.LAUNCHER: RestartPolicy.ON_FAILURE, MPIReplicaType.WORKER: RestartPolicy.NEVER}
    ),
    default_replicas=_frozen({MPIReplicaType.LAUNCHER: 1, MPIReplicaType.WORKER: 0}),
    operator_name="mpi-operator",
    controller_name=_MPI_OPERATOR,
    managed_by_values=(_MPI_OPERATOR, MULTIKUEUE_CONTROLLER),
    owned_env=frozenset({"K_MPI_JOB_ROLE"}),
)

KINDS: tuple[KindInfo, ...] = (TFJOB, PYTORCHJOB, MPIJOB, JAXJOB, XGBOOSTJOB, PADDLEJOB)
"""Every kind this operator serves."""

_BY_MODEL: dict[type[Any], KindInfo] = {info.model: info for info in KINDS}


def kind_info(job: TrainingJob[Any] | type[TrainingJob[Any]]) -> KindInfo:
    """The `KindInfo` of a job or job class."""
    cls = job if isinstance(job, type) else type(job)
    return _BY_MODEL[cls]


def lookup_kind(kind: str, api_version: str | None = None) -> KindInfo | None:
    """The kind served under `kind` (and `api_version`, when given), or None."""
    for info in KINDS:
        if info.kind == kind and (api_version is None or info.api_version == api_version):
            return info
    return None
