"""TF_CONFIG: the cluster spec and own task that a TFJob replica receives, rendered and parsed here.

The rendered JSON is byte-for-byte what the Kubeflow training-operator writes (Go's encoding/json: compact,
cluster keys sorted, fields in the order cluster, task, environment), which is also what TensorFlow's
`TFConfigClusterResolver` reads. The strategy a replica should use follows from the document alone, so the
decision lives here too, testable without TensorFlow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.names import TF_CONFIG
from kubetrain.podcontract.values import parse_host_port

__all__ = ["StrategyKind", "TFConfig", "TFReplicaType", "TFTask"]

_PS_FIX = (
    "ParameterServerStrategy needs one coordinator and workers: add `Chief: {replicas: 1}` and Worker "
    "replicas to tfReplicaSpecs (without a Chief, worker 0 coordinates, so give it at least 2 workers)"
)

_FIX = (
    "The operator sets TF_CONFIG on every replica of a distributed TFJob (container 'tensorflow') as "
    '{"cluster":{"worker":["host:port",...]},"task":{"type":"worker","index":0},"environment":"cloud"}'
)


class TFReplicaType(StrEnum):
    """The task types a TFJob can have (lower-cased replica types)."""

    CHIEF = "chief"
    MASTER = "master"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"


class StrategyKind(StrEnum):
    """Which tf.distribute strategy a replica should build, decided from TF_CONFIG alone."""

    DEFAULT = "default"
    """One replica (or no TF_CONFIG): no distribution."""
    MULTI_WORKER_MIRRORED = "multi_worker_mirrored"
    """Workers (and a chief) without parameter servers: synchronous all-reduce."""
    PARAMETER_SERVER = "parameter_server"
    """A chief coordinates, ps tasks hold variables, workers run a tf.distribute.Server."""
    EVALUATOR = "evaluator"
    """A side-car evaluator: reads checkpoints, joins no collective."""


@dataclass(frozen=True)
class TFTask:
    """The replica's own place in the cluster."""

    type: str
    index: int = 0

    def __post_init__(self) -> None:
        if not self.type:
            raise ContractError(TF_CONFIG, "task.type is empty", _FIX)
        if self.index < 0:
            raise ContractError(TF_CONFIG, f"task.index is {self.index}, below 0", _FIX)


@dataclass(frozen=True)
class TFConfig:
    """The TF_CONFIG document. `cluster` maps a task type to the addresses (host:port) of its replicas."""

    cluster: Mapping[str, tuple[str, ...]]
    task: TFTask
    environment: str | None = "cloud"

    def __post_init__(self) -> None:
        frozen = {k: tuple(self.cluster[k]) for k in sorted(self.cluster)}
        object.__setattr__(self, "cluster", MappingProxyType(frozen))
        for job, addresses in frozen.items():
            if not job:
                raise ContractError(TF_CONFIG, "the cluster has an empty job name", _FIX)
            for address in addresses:
                parse_host_port(address, TF_CONFIG, _FIX)
        self._check_task()

    def _check_task(self) -> None:
        if self.task.type == TFReplicaType.EVALUATOR and self.task.type not in self.cluster:
            return  # TensorFlow lets an evaluator stay outside the cluster it evaluates
        count = len(self.cluster.get(self.task.type, ()))
        if self.task.index >= count:
            raise ContractError(
                TF_CONFIG,
                f"task {self.task.type}:{self.task.index} is not in the cluster "
                f"({self.task.type!r} has {count} address(es))",
                _FIX,
            )

    # --- what a replica reads -------------------------------------------------------------------
    @property
    def address(self) -> str | None:
        """This task's own host:port, None for an evaluator outside the cluster."""
        addresses = self.cluster.get(self.task.type, ())
        return addresses[self.task.index] if self.task.index < len(addresses) else None

    @property
    def num_tasks(self) -> int:
        return sum(len(a) for a in self.cluster.values())

    def count(self, task_type: str) -> int:
        return len(self.cluster.get(task_type, ()))

    def strategy_kind(self) -> StrategyKind:
        """The strategy this replica should use; raises ContractError for clusters no strategy fits."""
        if self.task.type == TFReplicaType.EVALUATOR:
            return StrategyKind.EVALUATOR
        if self.count(TFReplicaType.PS) > 0:
            self.with_coordinator()  # raises when no replica can coordinate
            return StrategyKind.PARAMETER_SERVER
        trainers = self.num_tasks - self.count(TFReplicaType.EVALUATOR)
        return StrategyKind.DEFAULT if trainers <= 1 else StrategyKind.MULTI_WORKER_MIRRORED

    def with_coordinator(self) -> TFConfig:
        """The parameter-server view of this cluster: TensorFlow 2's ParameterServerStrategy needs a chief
        (the coordinator) besides the workers. A PS + Worker TFJob without one (the TF1-era shape, where
        worker 0 succeeding ends the job) gets worker 0 promoted to chief and the other workers renumbered;
        every replica computes the same view. Unchanged when the cluster has a chief or no ps."""
        if self.count(TFReplicaType.PS) == 0 or self.count(TFReplicaType.CHIEF) > 0:
            if self.count(TFReplicaType.CHIEF) > 1:
                raise ContractError(TF_CONFIG, "the cluster has more than one chief", _PS_FIX)
            if self.count(TFReplicaType.PS) > 0 and self.count(TFReplicaType.WORKER) == 0:
                raise ContractError(TF_CONFIG, "the cluster has ps tasks but no workers", _PS_FIX)
            return self
        workers = self.cluster.get(TFReplicaType.WORKER, ())
        if len(workers) < 2:
            raise ContractError(
                TF_CONFIG, f"the cluster has ps tasks, no chief and {len(workers)} worker(s)", _PS_FIX
            )
        cluster = dict(self.cluster) | {
            TFReplicaType.CHIEF.value: workers[:1],
            TFReplicaType.WORKER.value: workers[1:],
        }
        task = self.task
        if task.type == TFReplicaType.WORKER:
            task = (
                TFTask(TFReplicaType.CHIEF.value, 0) if task.index == 0 else TFTask(task.type, task.index - 1)
            )
        return TFConfig(cluster=cluster, task=task, environment=self.environment)

    @property
    def id_in_cluster(self) -> int | None:
        """The replica's rank among the trainers as MultiWorkerMirroredStrategy numbers them: the chief (or
        master) 0, then the workers; None for ps and evaluator tasks."""
        leaders = self.count(TFReplicaType.CHIEF) + self.count(TFReplicaType.MASTER)
        if self.task.type in (TFReplicaType.CHIEF, TFReplicaType.MASTER):
            return self.task.index
        if self.task.type == TFReplicaType.WORKER:
            return leaders + self.task.index
        return None

    @property
    def is_chief(self) -> bool:
        """The replica that saves checkpoints and reports: chief/master, else worker 0 without one."""
        if self.task.type in (TFReplicaType.CHIEF, TFReplicaType.MASTER):
            return True
        has_chief = self.count(TFReplicaType.CHIEF) + self.count(TFReplicaType.MASTER) > 0
        return self.task.type == TFReplicaType.WORKER and self.task.index == 0 and not has_chief

    # --- render / parse -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "cluster": {job: list(addresses) for job, addresses in self.cluster.items()},
            "task": {"type": self.task.type, "index": self.task.index},
        }
        if self.environment is not None:
            doc["environment"] = self.environment
        return doc

    def render(self) -> str:
        """The TF_CONFIG value, as the training-operator writes it."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def render_sparse(self) -> str:
        """The training-operator's `enableDynamicWorker` document: a ps sees only itself, a worker sees
        all ps and only itself. Note its key is `sparseCluster`, which TensorFlow's resolver does not read;
        it is rendered for compatibility with code written against that operator."""
        workers: dict[str, str] = {}
        ps: list[str] = []
        own = self.address
        if self.task.type == TFReplicaType.PS and own is not None:
            ps = [own]
        elif self.task.type == TFReplicaType.WORKER and own is not None:
            ps = list(self.cluster.get(TFReplicaType.PS, ()))
            workers = {str(self.task.index): own}
        doc = {
            "sparseCluster": {"worker": workers, "ps": ps},
            "task": {"type": self.task.type, "index": self.task.index},
        }
        return json.dumps(doc, separators=(",", ":"))

    @classmethod
    def parse(cls, text: str) -> TFConfig:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ContractError(TF_CONFIG, f"not valid JSON ({e.msg} at char {e.pos})", _FIX) from None
        if not isinstance(doc, dict):
            raise ContractError(TF_CONFIG, "not a JSON object", _FIX)
        environment = doc.get("environment")
        if environment is not None and not isinstance(environment, str):
            raise ContractError(TF_CONFIG, "environment is not a string", _FIX)
        return cls(cluster=_parse_cluster(doc), task=_parse_task(doc.get("task")), environment=environment)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TFConfig | None:
        """TF_CONFIG from the environment; None when unset (a non-distributed TFJob gets none)."""
        value = (os.environ if env is None else env).get(TF_CONFIG)
        if value is None or not value.strip():
            return None
        return cls.parse(value)


def _parse_cluster(doc: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    cluster = doc.get("cluster")
    if cluster is None:
        hint = " (it has 'sparseCluster': the dynamic-worker form, which TensorFlow cannot read)"
        raise ContractError(TF_CONFIG, "no 'cluster'" + (hint if "sparseCluster" in doc else ""), _FIX)
    if not isinstance(cluster, dict) or not cluster:
        raise ContractError(TF_CONFIG, "'cluster' is not a non-empty object", _FIX)
    parsed: dict[str, tuple[str, ...]] = {}
    for job, addresses in cluster.items():
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise ContractError(TF_CONFIG, f"cluster.{job} is not a list of 'host:port' strings", _FIX)
        parsed[job] = tuple(addresses)
    return parsed


def _parse_task(task: object) -> TFTask:
    if not isinstance(task, dict):
        raise ContractError(TF_CONFIG, "'task' is missing or not an object", _FIX)
    task_type, index = task.get("type"), task.get("index", 0)
    if not isinstance(task_type, str):
        raise ContractError(TF_CONFIG, "task.type is missing or not a string", _FIX)
    if not isinstance(index, int) or isinstance(index, bool):
        raise ContractError(TF_CONFIG, f"task.index is {index!r}, not an integer", _FIX)
    return TFTask(type=task_type, index=index)
