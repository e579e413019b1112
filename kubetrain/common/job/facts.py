"""Typed, read-only views of what the cluster shows about a job: the facts hooks and policies decide on.

Pods stay plain dicts in the cache; hooks never parse them. `PodFacts` extracts once the few fields that
matter (phase, exit code of the main container, restarts, deletion), `ReplicaCounts` summarises one
replica type after the restart policy has been applied, and `Observed` is the whole picture handed to
`verdict()` and `extra_objects()`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any, final

from pydantic import TypeAdapter

from kubetrain.api import Time
from kubetrain.common.job.labels import KUBEFLOW_PREFIX, replica_index
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj, Resource

__all__ = ["Observed", "PodFacts", "PodPhase", "ReplicaCounts", "blind_key"]

_TIME: TypeAdapter[datetime] = TypeAdapter(Time)


class PodPhase(StrEnum):
    """`status.phase` of a pod; an absent or unknown phase reads as Pending."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"

    @property
    def terminal(self) -> bool:
        return self in (PodPhase.SUCCEEDED, PodPhase.FAILED)


@final
@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the operator reads from one pod."""

    name: str
    uid: str = ""
    index: int | None = None
    phase: PodPhase = PodPhase.PENDING
    exit_code: int | None = None
    """Exit code of the main container once it has terminated (the default-named one, else the first)."""
    reason: str = ""
    """`status.reason`, e.g. `Evicted`."""
    ready: bool = False
    restarts: int = 0
    """Container restarts so far, init containers included."""
    deletion: datetime | None = None
    """`deletionTimestamp`: when the grace period of a requested deletion ends."""
    disrupted: bool = False
    """The pod has a `DisruptionTarget=True` condition (preemption, eviction, node shutdown)."""
    exit_reason: str = ""
    """Why the main container terminated (`OOMKilled`, `Error`), when it has."""
    last_exit: tuple[int | None, str] | None = None
    """Exit code and reason of the main container's previous run (`lastState`), once it restarted."""
    restarted_all: bool = False
    """That previous run's exit matched a `RestartAllContainers` rule of the main container: the kubelet
    restarted every container of the pod in place (`kubetrain.common.job.inplace`)."""
    running_since: datetime | None = None
    """When the main container's current run started (`state.running.startedAt`); None: not running."""

    @property
    def deleting(self) -> bool:
        return self.deletion is not None

    @classmethod
    def of(
        cls, pod: Mapping[str, Any], *, main_container: str | None = None, prefix: str = KUBEFLOW_PREFIX
    ) -> PodFacts:
        """Read a pod. `main_container` names the container whose exit code counts (None: the first);
        `prefix` is its kind's label prefix."""
        status: Mapping[str, Any] = pod.get("status") or {}
        deletion = (pod.get("metadata") or {}).get("deletionTimestamp")
        return cls(
            name=objects.name(pod),
            uid=objects.uid(pod),
            index=replica_index(objects.labels(pod), prefix=prefix),
            phase=_phase(status.get("phase")),
            exit_code=_exit_code(pod, main_container),
            reason=str(status.get("reason") or ""),
            ready=_condition(status, "Ready"),
            restarts=_restarts(status),
            deletion=_TIME.validate_python(deletion) if deletion else None,
            disrupted=_condition(status, "DisruptionTarget"),
            exit_reason=str((_terminated(pod, main_container, "state") or {}).get("reason") or ""),
            last_exit=(last := _ended(_terminated(pod, main_container, "lastState"))),
            restarted_all=last is not None and _restarts_all(pod, main_container, last[0]),
            running_since=_running_since(pod, main_container),
        )


@final
@dataclass(frozen=True, slots=True)
class ReplicaCounts:
    """One replica type as the template sees it, after applying its restart policy.

    Each pod of an index below `replicas` is in exactly one bucket: `pending`, `active` (Running),
    `succeeded`, `failed` (will not be restarted: the job cannot succeed through it) or `restarting`
    (failed or lost, and being replaced). Missing pods are in none; `pods` maps index to pod.
    """

    replicas: int
    active: int = 0
    pending: int = 0
    succeeded: int = 0
    failed: int = 0
    restarting: int = 0
    pods: Mapping[int, PodFacts] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def all_succeeded(self) -> bool:
        return self.succeeded >= self.replicas

    def pod(self, index: int) -> PodFacts | None:
        return self.pods.get(index)


@final
@dataclass(frozen=True, slots=True)
class Observed:
    """Everything observed for a job: replica counts, and its extra objects by resource and name."""

    replicas: Mapping[str, ReplicaCounts]
    extras: Mapping[Resource, Mapping[str, Obj]] = field(default_factory=lambda: MappingProxyType({}))
    created: frozenset[str] = frozenset()
    """Keys (`secrets/pi-ssh`) of the blind extra objects the job's ledger records as created."""

    def was_created(self, resource: Resource, name: str) -> bool:
        """Whether a blind extra object (`ExtraObject(blind=True)`) was created already."""
        return blind_key(resource, name) in self.created

    def extra(self, resource: Resource, name: str) -> Obj | None:
        """An owned extra object (read-only), or None."""
        return self.extras.get(resource, {}).get(name)

    def counts(self, rtype: str) -> ReplicaCounts:
        """The counts of a replica type; an absent type reads as zero replicas."""
        return self.replicas.get(rtype) or ReplicaCounts(replicas=0)


def _phase(raw: Any) -> PodPhase:
    try:
        return PodPhase(raw)
    except ValueError:
        return PodPhase.PENDING


def _condition(status: Mapping[str, Any], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in status.get("conditions") or ())


def _restarts(status: Mapping[str, Any]) -> int:
    counted = [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]
    return sum(int(s.get("restartCount") or 0) for s in counted)


def _exit_code(pod: Mapping[str, Any], main_container: str | None) -> int | None:
    terminated = _terminated(pod, main_container, "state")
    if terminated and terminated.get("exitCode") is not None:
        return int(terminated["exitCode"])
    return None


def _main(pod: Mapping[str, Any], main_container: str | None) -> Mapping[str, Any] | None:
    """The main container's spec: the named one, else the first."""
    containers = (pod.get("spec") or {}).get("containers") or ()
    named = [c for c in containers if c.get("name") == main_container]
    return named[0] if named else (containers[0] if containers else None)


def _restarts_all(pod: Mapping[str, Any], main_container: str | None, code: int | None) -> bool:
    """Whether the kubelet's first matching restart rule of the main container for `code` is
    `RestartAllContainers` (the kubelet takes the first rule that matches, as here)."""
    for rule in (_main(pod, main_container) or {}).get("restartPolicyRules") or ():
        codes = rule.get("exitCodes") or {}
        if (code in (codes.get("values") or ())) == (codes.get("operator") == "In"):
            return bool(rule.get("action") == "RestartAllContainers")
    return False


def _main_status(pod: Mapping[str, Any], main_container: str | None) -> Mapping[str, Any]:
    """The main container's entry of `containerStatuses` (the named one, else the first); {} if none."""
    target = (_main(pod, main_container) or {}).get("name")
    for state in (pod.get("status") or {}).get("containerStatuses") or ():
        if state.get("name") == target:
            return dict(state)
    return {}


def _terminated(pod: Mapping[str, Any], main_container: str | None, which: str) -> Mapping[str, Any] | None:
    """`state.terminated` (or `lastState.terminated`) of the main container: the named one, else the first."""
    state = _main_status(pod, main_container).get(which) or {}
    terminated: Mapping[str, Any] | None = state.get("terminated")
    return terminated


def _running_since(pod: Mapping[str, Any], main_container: str | None) -> datetime | None:
    started = ((_main_status(pod, main_container).get("state") or {}).get("running") or {}).get("startedAt")
    return _TIME.validate_python(started) if started else None


def _ended(terminated: Mapping[str, Any] | None) -> tuple[int | None, str] | None:
    if not terminated:
        return None
    code = terminated.get("exitCode")
    return (int(code) if code is not None else None, str(terminated.get("reason") or ""))


def blind_key(resource: Resource, name: str) -> str:
    """How the job's ledger names a blind extra object: `secrets/pi-ssh`."""
    return f"{resource.plural}/{name}"
