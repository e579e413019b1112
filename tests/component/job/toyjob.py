"""ToyJob: a training kind that exists only in the tests, written against the public kubetrain API alone.

It shows how small a new operator is (a model, a KindInfo and a JobController subclass with a few pure
hooks) and lets the template be tested without any TF, PyTorch or MPI knowledge. A ToyJob has a Leader
(at most one, the master) and Workers; it succeeds when the Leader has succeeded, or, without a Leader,
when every Worker has.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import ClassVar

from pydantic import Field

from kubetrain.api import (
    JobSpecBase,
    KindInfo,
    ReplicaSpec,
    RestartPolicy,
    RunPolicy,
    TrainingJob,
)
from kubetrain.common.job import (
    ExtraObject,
    JobController,
    JobState,
    Observed,
    Verdict,
    default_verdict,
    replica_name,
)
from kubetrain.common.kube.resources import CONFIGMAPS, Obj

GROUP = "toy.kubetrain.test"
LEADER, WORKER = "Leader", "Worker"
TOY_PORT = 7777


class ToyJobSpec(JobSpecBase):
    REPLICA_SPECS_FIELD: ClassVar[str] = "toy_replica_specs"

    toy_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class ToyJob(TrainingJob[ToyJobSpec]):
    API_VERSION: ClassVar[str] = f"{GROUP}/v1"
    KIND: ClassVar[str] = "ToyJob"

    spec: ToyJobSpec = Field(default_factory=ToyJobSpec)


TOYJOB = KindInfo(
    group=GROUP,
    version="v1",
    kind="ToyJob",
    plural="toyjobs",
    singular="toyjob",
    short_names=(),
    categories=(),
    model=ToyJob,
    replica_specs_field="toyReplicaSpecs",
    replica_types=(LEADER, WORKER),
    master_types=frozenset({LEADER}),
    default_container_name="toy",
    default_port_name="toy-port",
    default_port=TOY_PORT,
    default_restart_policy=MappingProxyType({LEADER: RestartPolicy.NEVER, WORKER: RestartPolicy.NEVER}),
    default_replicas=MappingProxyType({LEADER: 1, WORKER: 1}),
    operator_name="toyjob-controller",
    controller_name=f"{GROUP}/toy-operator",
    managed_by_values=(f"{GROUP}/toy-operator", "kueue.x-k8s.io/multikueue"),
)


class ToyJobController(JobController[ToyJob]):
    """The whole operator of the toy kind."""

    kind = TOYJOB
    framework = "toy"
    extra_resources = (CONFIGMAPS,)

    def configure_pod(self, job: ToyJob, rtype: str, index: int, pod: Obj) -> Obj:
        world = sum(spec.replicas or 0 for spec in job.replica_specs.values())
        for container in pod["spec"]["containers"]:
            env = container.setdefault("env", [])
            env += [{"name": "TOY_ROLE", "value": rtype.lower()}, {"name": "TOY_WORLD", "value": str(world)}]
        return pod

    def verdict(self, job: ToyJob, observed: Observed) -> Verdict:
        peers = default_verdict(observed.replicas, self.replica_types(job))
        if LEADER not in job.replica_specs or peers.state is JobState.FAILED:
            return peers
        leader = observed.counts(LEADER)
        if leader.all_succeeded:
            return Verdict.succeeded()
        return Verdict.running() if leader.active else Verdict.pending()

    def extra_objects(self, job: ToyJob, observed: Observed) -> Sequence[ExtraObject]:
        """A ConfigMap listing every replica's host name, as an MPI hostfile would."""
        hosts = [
            replica_name(job.name, rtype, index)
            for rtype in self.replica_types(job)
            for index in range(job.replica_specs[rtype].replicas or 0)
        ]
        body = {"metadata": {"name": f"{job.name}-hosts"}, "data": {"hosts": "\n".join(hosts)}}
        return [ExtraObject(CONFIGMAPS, body)]


def toy_job(
    name: str = "toy",
    *,
    namespace: str = "ns",
    leader: int | None = 1,
    workers: int = 2,
    restart_policy: RestartPolicy | None = None,
    run_policy: RunPolicy | None = None,
) -> Obj:
    """The wire form of a ToyJob, as a user would submit it."""
    template = {
        "spec": {
            "containers": [
                {"name": "toy", "image": "toy:1", "ports": [{"name": "toy-port", "containerPort": TOY_PORT}]}
            ]
        }
    }
    specs: dict[str, ReplicaSpec] = {}
    if leader is not None:
        specs[LEADER] = ReplicaSpec.model_validate({"replicas": leader, "template": template})
    if workers:
        specs[WORKER] = ReplicaSpec.model_validate({"replicas": workers, "template": template})
    if restart_policy is not None:
        specs = {k: v.model_copy(update={"restart_policy": restart_policy}) for k, v in specs.items()}
    spec = ToyJobSpec(toy_replica_specs=specs, run_policy=run_policy)
    return ToyJob(metadata={"name": name, "namespace": namespace}, spec=spec).to_wire()
