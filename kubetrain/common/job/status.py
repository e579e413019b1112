"""The only writer of job conditions: Kubeflow's condition rules, reasons and messages, exactly.

Rules of `set_condition` (Kubeflow `pkg/util/status.go`):
- once `Failed=True` is present nothing changes any more (a terminal latch);
- setting a condition to the status and reason it already has changes nothing (no churn, no write);
- `lastTransitionTime` is kept while the status is unchanged;
- Running and Restarting replace each other; Succeeded or Failed turn Running to False;
- a (re)set condition moves to the end of the list, so `conditions[-1]` is the latest state.

One condition is kubetrain's own: `CreateFailed=True` while the API server refuses the job's pods or
Services (a 422, a quota, an admission webhook), with its message. Being last, it is what the State column
(`conditions[-1:].type`) shows; once creating works again it is removed, and the State is the previous one.

Reasons are `<Kind><Suffix>`, e.g. `TFJobRunning`; messages are Kubeflow's. `StatusBuilder` applies
these rules to a `JobStatus` (a frozen model) and remembers every condition it changed, so that the
controller records one Event per transition, not one per reconcile.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import final

from kubetrain.api import (
    ConditionStatus,
    JobCondition,
    JobConditionType,
    JobStatus,
    LabelSelector,
    ReplicaStatus,
)
from kubetrain.common.job.facts import ReplicaCounts

__all__ = [
    "StatusBuilder",
    "Transition",
    "condition",
    "is_failed",
    "is_finished",
    "is_succeeded",
    "is_suspended",
    "is_true",
    "reason",
]

_T = ConditionStatus.TRUE
_F = ConditionStatus.FALSE


def reason(kind: str, suffix: str) -> str:
    """Kubeflow's `NewReason`: `TFJob` + `Running` -> `TFJobRunning`."""
    return f"{kind}{suffix}"


def condition(status: JobStatus | None, ctype: JobConditionType) -> JobCondition | None:
    for cond in (status.conditions if status else None) or ():
        if cond.type == ctype:
            return cond
    return None


def is_true(status: JobStatus | None, ctype: JobConditionType) -> bool:
    cond = condition(status, ctype)
    return cond is not None and cond.status == _T


def is_succeeded(status: JobStatus | None) -> bool:
    return is_true(status, JobConditionType.SUCCEEDED)


def is_failed(status: JobStatus | None) -> bool:
    return is_true(status, JobConditionType.FAILED)


def is_finished(status: JobStatus | None) -> bool:
    return is_succeeded(status) or is_failed(status)


def is_suspended(status: JobStatus | None) -> bool:
    return is_true(status, JobConditionType.SUSPENDED)


@final
@dataclass(frozen=True, slots=True)
class Transition:
    """A condition that changed during one reconcile."""

    type: JobConditionType
    status: ConditionStatus
    reason: str
    message: str


class StatusBuilder:
    """Computes the next status of one job from its current one. `now` should have whole seconds."""

    def __init__(
        self, *, kind: str, namespace: str, name: str, status: JobStatus | None, now: datetime
    ) -> None:
        self.kind = kind
        self.namespace = namespace
        self.name = name
        self.now = now
        self.status = status if status is not None else JobStatus()
        self.transitions: list[Transition] = []

    # the generic rule ---------------------------------------------------------------------------------
    def set(self, ctype: JobConditionType, value: ConditionStatus, why: str, message: str) -> bool:
        """Kubeflow's `setCondition`; True when the conditions changed."""
        if is_failed(self.status):
            return False
        current = condition(self.status, ctype)
        if current is not None and current.status == value and current.reason == why:
            return False
        since = current.last_transition_time if current is not None and current.status == value else self.now
        new = JobCondition(
            type=ctype,
            status=value,
            reason=why,
            message=message,
            last_update_time=self.now,
            last_transition_time=since,
        )
        kept = [
            self._filtered(c, ctype) for c in self.status.conditions or () if not _replaced(c.type, ctype)
        ]
        self._update(conditions=[*kept, new])
        self.transitions.append(Transition(ctype, value, why, message))
        return True

    # Kubeflow's transitions ---------------------------------------------------------------------------
    def created(self) -> bool:
        """`Created=True`, once: on the first reconcile of the job."""
        if condition(self.status, JobConditionType.CREATED) is not None:
            return False
        return self._created()

    def creation_failed(self, object_kind: str, message: str) -> bool:
        """`CreateFailed=True` with reason `<Kind>FailedCreate<ObjectKind>` and the API server's message."""
        why = reason(self.kind, f"FailedCreate{object_kind}")
        return self.set(JobConditionType.CREATE_FAILED, _T, why, message)

    def creation_succeeded(self) -> bool:
        """Creating children works (again): `CreateFailed` goes; a legacy `Created=False` becomes True."""
        changed = False
        if condition(self.status, JobConditionType.CREATE_FAILED) is not None and not is_failed(self.status):
            kept = [c for c in self.status.conditions or () if c.type != JobConditionType.CREATE_FAILED]
            self._update(conditions=kept)
            changed = True
        cond = condition(self.status, JobConditionType.CREATED)
        return (cond is not None and cond.status != _T and self._created()) or changed

    def _created(self) -> bool:
        text = f"{self.kind} {self.name} is created."
        return self.set(JobConditionType.CREATED, _T, reason(self.kind, "Created"), text)

    def running(self, suffix: str = "Running", message: str = "") -> bool:
        text = message or f"{self.kind} {self.namespace}/{self.name} is running."
        return self.set(JobConditionType.RUNNING, _T, reason(self.kind, suffix), text)

    def restarting(self, rtype: str, suffix: str = "Restarting") -> bool:
        text = f"job {self.name} is restarting because {rtype} replica(s) failed."
        return self.set(JobConditionType.RESTARTING, _T, reason(self.kind, suffix), text)

    def succeeded(self, suffix: str = "Succeeded", message: str = "") -> bool:
        text = message or f"{self.kind} {self.namespace}/{self.name} successfully completed."
        changed = self.set(JobConditionType.SUCCEEDED, _T, reason(self.kind, suffix), text)
        self.completed()
        return changed

    def failed(self, message: str, suffix: str = "Failed") -> bool:
        changed = self.set(JobConditionType.FAILED, _T, reason(self.kind, suffix), message)
        self.completed()
        return changed

    def failed_replicas(self, rtype: str, count: int, suffix: str = "Failed") -> bool:
        where = f"{self.kind} {self.namespace}/{self.name}"
        return self.failed(f"{where} has failed because {count} {rtype} replica(s) failed.", suffix)

    def backoff_limit_exceeded(self) -> bool:
        return self.failed(f"Job {self.name} has failed because it has reached the specified backoff limit")

    def deadline_exceeded(self) -> bool:
        return self.failed(f"Job {self.name} has failed because it was active longer than specified deadline")

    def invalid(self, message: str) -> bool:
        return self.failed(message, "FailedValidation")

    def suspended(self) -> bool:
        """Running=False (when it was True) and Suspended=True, both with reason `<Kind>Suspended`."""
        why, text = reason(self.kind, "Suspended"), f"{self.kind} {self.name} is suspended."
        if is_true(self.status, JobConditionType.RUNNING):
            self.set(JobConditionType.RUNNING, _F, why, text)
        if is_true(self.status, JobConditionType.SUSPENDED):
            return False
        return self.set(JobConditionType.SUSPENDED, _T, why, text)

    def queued(self, suffix: str, message: str) -> bool:
        """Running=False (when it was True) and Queued=True with reason `<Kind><suffix>`: the job waits for
        Kueue to admit it (kubetrain's own condition; it is last, so the State column shows Queued)."""
        why = reason(self.kind, suffix)
        if is_true(self.status, JobConditionType.RUNNING):
            self.set(JobConditionType.RUNNING, _F, why, message)
        return self.set(JobConditionType.QUEUED, _T, why, message)

    def admitted(self) -> bool:
        """Kueue admitted a queued job: the Queued condition goes (so the State is what the job does next)
        and startTime starts again now, as after a resume. True when the job was queued."""
        if not is_true(self.status, JobConditionType.QUEUED):
            return False
        kept = [c for c in self.status.conditions or () if c.type != JobConditionType.QUEUED]
        self._update(conditions=kept, start_time=self.now)
        return True

    def resumed(self) -> bool:
        """Suspended=False with reason `<Kind>Resumed`, and startTime starts again now."""
        if not is_true(self.status, JobConditionType.SUSPENDED):
            return False
        text = f"{self.kind} {self.name} is resumed."
        self.set(JobConditionType.SUSPENDED, _F, reason(self.kind, "Resumed"), text)
        self._update(start_time=self.now)
        return True

    # other fields -------------------------------------------------------------------------------------
    def started(self) -> None:
        """startTime, set once (and again on resume)."""
        if self.status.start_time is None:
            self._update(start_time=self.now)

    def replica_statuses(
        self, counts: Mapping[str, ReplicaCounts], selectors: Mapping[str, Mapping[str, str]]
    ) -> None:
        """replicaStatuses rebuilt from the counts; pods being replaced count as failed, as in Kubeflow."""
        statuses = {
            rtype: ReplicaStatus(
                active=c.active,
                succeeded=c.succeeded,
                failed=c.failed + c.restarting,
                label_selector=LabelSelector(match_labels=dict(selectors[rtype])),
                selector=",".join(f"{k}={v}" for k, v in sorted(selectors[rtype].items())),
            )
            for rtype, c in counts.items()
        }
        self._update(replica_statuses=statuses)

    def no_active(self, *, into_succeeded: bool) -> None:
        """Active counts to 0 (suspended, or finished); on success they move into `succeeded` (Kubeflow)."""
        statuses = {}
        for rtype, rs in (self.status.replica_statuses or {}).items():
            moved = (rs.succeeded or 0) + (rs.active or 0) if into_succeeded else rs.succeeded
            statuses[rtype] = rs.model_copy(update={"active": 0, "succeeded": moved})
        if statuses:
            self._update(replica_statuses=statuses)

    def completed(self) -> None:
        """completionTime, set once when the job finishes."""
        if self.status.completion_time is None:
            self._update(completion_time=self.now)

    def _filtered(self, cond: JobCondition, new_type: JobConditionType) -> JobCondition:
        ends = new_type in (JobConditionType.SUCCEEDED, JobConditionType.FAILED)
        if ends and cond.type == JobConditionType.RUNNING and cond.status == _T:
            return cond.model_copy(
                update={"status": _F, "last_update_time": self.now, "last_transition_time": self.now}
            )
        return cond

    def _update(self, **fields: object) -> None:
        self.status = self.status.model_copy(update=fields)


def _replaced(existing: JobConditionType, new: JobConditionType) -> bool:
    """Kubeflow's `filterOutCondition`: the same type, and Running/Restarting, replace each other."""
    pair = {JobConditionType.RUNNING, JobConditionType.RESTARTING}
    return existing == new or {existing, new} == pair
