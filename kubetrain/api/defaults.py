"""Defaulting, as the Kubeflow operators do it in memory before each reconcile (there is no mutating webhook).

One generic pass driven by `KindInfo` (replica-type keys in canonical case, replicas, restart policies, the
default port on the default container, a lone unnamed container given the default name, cleanPodPolicy and
suspend), plus a small step per built-in kind. A kind of one's own passes its `KindInfo` and gets the
generic pass. Pure: the input is never changed, and applying it twice changes nothing.
"""

from __future__ import annotations

from typing import Any, TypeVar

from kubetrain.api.common import CleanPodPolicy, JobSpecBase, ReplicaSpec, RunPolicy, TrainingJob
from kubetrain.api.kinds import KindInfo, kind_info
from kubetrain.api.mpijob import LauncherCreationPolicy, MPIImplementation, MPIJobSpec
from kubetrain.api.paddlejob import PaddleElasticPolicy, PaddleJobSpec, PaddleReplicaType
from kubetrain.api.pod import Container, ContainerPort, PodSpec
from kubetrain.api.pytorchjob import ElasticPolicy, PyTorchJobSpec, PyTorchReplicaType
from kubetrain.api.tfjob import SuccessPolicy, TFJobSpec

__all__ = [
    "DEFAULT_NPROC_PER_NODE",
    "DEFAULT_SLOTS_PER_WORKER",
    "DEFAULT_SSH_AUTH_MOUNT_PATH",
    "apply_defaults",
]

JobT = TypeVar("JobT", bound=TrainingJob[Any])
ElasticT = TypeVar("ElasticT", ElasticPolicy, PaddleElasticPolicy)

DEFAULT_NPROC_PER_NODE = "auto"
DEFAULT_SLOTS_PER_WORKER = 1
DEFAULT_SSH_AUTH_MOUNT_PATH = "/root/.ssh"


def apply_defaults(job: JobT, *, kind: KindInfo | None = None) -> JobT:
    """A copy of `job` with every default filled in; `job` itself is left as it was.

    `kind` is the job's `KindInfo`, which any kind (built-in or not) passes (`JobController` passes its
    `kind`); None looks it up among the built-in kinds.
    """
    info = kind or kind_info(job)
    spec: JobSpecBase = job.spec
    specs = normalise_replica_types(info, spec.replica_specs)
    specs = {rtype: _default_replica(info, rtype, rspec) for rtype, rspec in specs.items()}
    spec = spec.model_copy(
        update={type(spec).REPLICA_SPECS_FIELD: specs, "run_policy": _default_run_policy(spec.run_policy)}
    )
    spec = _default_kind_fields(spec)
    return job.model_copy(update={"spec": spec})


def normalise_replica_types(info: KindInfo, specs: dict[str, ReplicaSpec]) -> dict[str, ReplicaSpec]:
    """Replica-type keys in canonical case (`worker` -> `Worker`).

    Unknown keys are kept for validation to report; so are keys that would collide with another spelling of
    the same type (`worker` next to `Worker`), rather than silently dropping one of them.
    """
    canonical = {key: info.canonical_replica_type(key) for key in specs}
    counts: dict[str, int] = {}
    for target in canonical.values():
        if target is not None:
            counts[target] = counts.get(target, 0) + 1
    renamed: dict[str, ReplicaSpec] = {}
    for key, rspec in specs.items():
        target = canonical[key]
        renamed[target if target is not None and counts[target] == 1 else key] = rspec
    return renamed


def _default_replica(info: KindInfo, rtype: str, spec: ReplicaSpec) -> ReplicaSpec:
    update: dict[str, Any] = {}
    if spec.replicas is None and rtype in info.default_replicas:
        update["replicas"] = info.default_replicas[rtype]
    if spec.restart_policy is None and rtype in info.default_restart_policy:
        update["restart_policy"] = info.default_restart_policy[rtype]
    pod = _default_pod(info, spec.template.spec)
    if pod is not spec.template.spec:
        update["template"] = spec.template.model_copy(update={"spec": pod})
    return spec.model_copy(update=update) if update else spec


def _default_pod(info: KindInfo, pod: PodSpec) -> PodSpec:
    containers = list(pod.containers)
    if info.default_container_name and len(containers) == 1 and not containers[0].name:
        containers[0] = containers[0].model_copy(update={"name": info.default_container_name})
    index = info.default_container_index(containers)
    if index is not None and info.default_port_name and info.default_port is not None:
        containers[index] = _with_default_port(containers[index], info.default_port_name, info.default_port)
    if containers == pod.containers:
        return pod
    return pod.model_copy(update={"containers": containers})


def _with_default_port(container: Container, name: str, number: int) -> Container:
    ports = container.ports or []
    if any(port.name == name for port in ports):
        return container
    return container.model_copy(update={"ports": [*ports, ContainerPort(name=name, container_port=number)]})


def _default_run_policy(policy: RunPolicy | None) -> RunPolicy:
    policy = policy or RunPolicy()
    update: dict[str, Any] = {}
    if policy.clean_pod_policy is None:
        update["clean_pod_policy"] = CleanPodPolicy.NONE
    if policy.suspend is None:
        update["suspend"] = False
    return policy.model_copy(update=update) if update else policy


def _default_kind_fields(spec: JobSpecBase) -> JobSpecBase:
    if isinstance(spec, TFJobSpec):
        return _default_tf(spec)
    if isinstance(spec, PyTorchJobSpec):
        return _default_pytorch(spec)
    if isinstance(spec, MPIJobSpec):
        return _default_mpi(spec)
    if isinstance(spec, PaddleJobSpec):
        return _default_paddle(spec)
    return spec


def _default_tf(spec: TFJobSpec) -> TFJobSpec:
    if spec.success_policy is None:
        return spec.model_copy(update={"success_policy": SuccessPolicy.DEFAULT})
    return spec


def _default_pytorch(spec: PyTorchJobSpec) -> PyTorchJobSpec:
    update: dict[str, Any] = {}
    elastic = spec.elastic_policy
    if elastic is not None:
        workers = spec.pytorch_replica_specs.get(PyTorchReplicaType.WORKER)
        update["elastic_policy"] = _default_elastic(elastic, workers.replicas if workers else None)
    if spec.nproc_per_node is None and (elastic is None or elastic.n_proc_per_node is None):
        update["nproc_per_node"] = DEFAULT_NPROC_PER_NODE
    return spec.model_copy(update=update) if update else spec


def _default_paddle(spec: PaddleJobSpec) -> PaddleJobSpec:
    elastic = spec.elastic_policy
    if elastic is None:
        return spec
    workers = spec.paddle_replica_specs.get(PaddleReplicaType.WORKER)
    defaulted = _default_elastic(elastic, workers.replicas if workers else None)
    return spec if defaulted is elastic else spec.model_copy(update={"elastic_policy": defaulted})


def _default_elastic(elastic: ElasticT, worker_replicas: int | None) -> ElasticT:
    """If only one bound is set the other copies it; if neither, both are the Worker replica count."""
    low, high = elastic.min_replicas, elastic.max_replicas
    if low is None and high is None:
        if worker_replicas is None:
            return elastic
        low = high = worker_replicas
    low = high if low is None else low
    high = low if high is None else high
    if (low, high) == (elastic.min_replicas, elastic.max_replicas):
        return elastic
    return elastic.model_copy(update={"min_replicas": low, "max_replicas": high})


def _default_mpi(spec: MPIJobSpec) -> MPIJobSpec:
    defaults: dict[str, Any] = {
        "slots_per_worker": DEFAULT_SLOTS_PER_WORKER,
        "run_launcher_as_worker": False,
        "ssh_auth_mount_path": DEFAULT_SSH_AUTH_MOUNT_PATH,
        "mpi_implementation": MPIImplementation.OPEN_MPI,
        "launcher_creation_policy": LauncherCreationPolicy.AT_STARTUP,
    }
    update = {key: value for key, value in defaults.items() if getattr(spec, key) is None}
    return spec.model_copy(update=update) if update else spec
