"""What the benchmark submits: N jobs of R replicas, and the same N x R pods for the bare-client floor.

Each job has one leader replica (PyTorchJob and XGBoostJob Master, MPIJob Launcher; TFJob, JAXJob and
PaddleJob (collective) have none: all Workers) and R - 1 (or R) Workers. Every pod template carries kwok's
`sim.kubetrain.dev/outcome` and `run-for` annotations (see kubetrain.testing.kwok), so the pods run for
`run_for` once started and then succeed, which makes the job succeed; `restartPolicy: Never` because kwok
only finishes such pods.

The floor pods are the job's pod template under the operator's pod names (`{job}-{rtype}-{index}`),
without what an operator adds (env, ports, init containers): the least a pod create can cost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api import JAXJOB, KINDS, MPIJOB, PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB, KindInfo
from kubetrain.common.kube.resources import Resource
from kubetrain.testing.kwok import Outcome, outcome_annotations

__all__ = ["Workload", "kind_by_name"]

_LEADER = {
    PYTORCHJOB.kind: "Master",
    MPIJOB.kind: "Launcher",
    XGBOOSTJOB.kind: "Master",
    TFJOB.kind: None,
    JAXJOB.kind: None,
    PADDLEJOB.kind: None,
}
_IMAGE = "bench.kubetrain.dev/trainer:1"
_JOB_NAME_LABEL = "training.kubeflow.org/job-name"


def kind_by_name(name: str) -> KindInfo:
    """The kind named `name`, any case (`pytorchjob`, `TFJob`); ValueError naming the choices otherwise."""
    for info in KINDS:
        if name.lower() in (info.kind.lower(), info.plural, info.singular):
            return info
    choices = ", ".join(info.kind for info in KINDS)
    raise ValueError(f"unknown kind {name!r}; choose one of {choices}")


@dataclass(frozen=True)
class Workload:
    """N jobs of `replicas` replicas of `kind`, whose pods run `run_for` (a Go duration) and succeed."""

    kind: KindInfo
    jobs: int
    replicas: int
    run_for: str = "2s"
    prefix: str = "bench"

    def __post_init__(self) -> None:
        if self.jobs < 1:
            raise ValueError(f"jobs={self.jobs}: must be at least 1")
        if self.replicas < (2 if _LEADER[self.kind.kind] else 1):
            raise ValueError(f"replicas={self.replicas}: a {self.kind.kind} needs a leader and a worker")

    @property
    def pods(self) -> int:
        return self.jobs * self.replicas

    @property
    def resource(self) -> Resource:
        """The REST resource of the jobs."""
        return Resource(self.kind.group, self.kind.version, self.kind.plural, self.kind.kind)

    def job_names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.jobs)]

    def layout(self) -> dict[str, int]:
        """Replicas by replica type, e.g. {"Master": 1, "Worker": 3}."""
        leader = _LEADER[self.kind.kind]
        return {leader: 1, "Worker": self.replicas - 1} if leader else {"Worker": self.replicas}

    def template(self) -> dict[str, Any]:
        """The pod template of every replica."""
        annotations = outcome_annotations(Outcome.SUCCEEDED, run_for=self.run_for)
        container: dict[str, Any] = {"name": self.kind.default_container_name or "main", "image": _IMAGE}
        if self.kind is MPIJOB:
            container["command"] = ["mpirun", "true"]
        return {"metadata": {"annotations": annotations}, "spec": {"containers": [container]}}

    def job(self, name: str) -> dict[str, Any]:
        """The wire form of one job."""
        specs = {
            rtype: {"replicas": count, "restartPolicy": "Never", "template": self.template()}
            for rtype, count in self.layout().items()
        }
        return {
            "apiVersion": self.kind.api_version,
            "kind": self.kind.kind,
            "metadata": {"name": name},
            "spec": {self.kind.replica_specs_field: specs},
        }

    def floor_pods(self, name: str) -> list[dict[str, Any]]:
        """The pods of job `name`, as the floor creates them."""
        pods = []
        for rtype, count in self.layout().items():
            for index in range(count):
                template = self.template()
                pods.append(
                    {
                        "metadata": {
                            "name": f"{name}-{rtype.lower()}-{index}",
                            "labels": {_JOB_NAME_LABEL: name},
                            "annotations": template["metadata"]["annotations"],
                        },
                        "spec": {**template["spec"], "restartPolicy": "Never"},
                    }
                )
        return pods
