"""The RunPolicy decisions, pure and on an injected `now`: restart, backoff, deadline, TTL, cleanup.

Every decision is taken from what the cluster shows (pods, the job's status and its ledger annotation),
never from in-memory counters, so an operator restart changes nothing. The rules:

- A Failed pod is replaced (deleted, then recreated under the same name) under `Always` and `OnFailure`,
  and under `ExitCode` when its exit code is >= 128 or unknown (killed, evicted); exit codes 1-127 under
  `ExitCode`, and any failure under `Never`, are permanent.
- A pod being deleted is not active. Once its grace period (`deletionTimestamp`) has passed by more than
  `terminating_timeout` seconds it is "stuck" (its node is gone): it is force-deleted so that its name
  frees up, and meanwhile it counts as restarting (or as failed under `Never` if it was running).
- A pod that vanished (its node deleted, the pod garbage-collected before the operator saw it go) is
  judged by whether it was seen running (the ledger's `started` indices): under `Never` it is a failure,
  never a silent second run; under `Always`, `OnFailure` and `ExitCode` it is recreated and counts a
  restart. One that never ran is simply created again; one that succeeded is never run again.
- backoffLimit counts restarts: container restarts of the pods that stay, plus every pod replaced so
  far (with its container restarts) and every lost one. The job fails once that total exceeds the
  limit. A failed pod counts once, by its UID, however often deleting it has to be retried.
- At most `CREATES_PER_RECONCILE` missing indices are planned at a time: the plan's size follows the
  pods that exist, not the replica count a user wrote.
- activeDeadlineSeconds runs from `status.startTime`; ttlSecondsAfterFinished from `completionTime`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from itertools import islice
from typing import final

from kubetrain.api import CleanPodPolicy, RestartPolicy
from kubetrain.common.job.facts import PodFacts, PodPhase, ReplicaCounts
from kubetrain.common.job.limits import CREATES_PER_RECONCILE

__all__ = [
    "DEFAULT_TERMINATING_TIMEOUT",
    "Bucket",
    "ReplicaPlan",
    "classify",
    "deadline_exceeded",
    "is_retryable_exit_code",
    "is_stuck",
    "past_backoff_limit",
    "plan_replica",
    "pods_to_clean",
    "seconds_until",
    "will_restart",
]

_LIVE = (PodPhase.RUNNING, PodPhase.UNKNOWN)
_RAN = (*_LIVE, PodPhase.SUCCEEDED, PodPhase.FAILED)

DEFAULT_TERMINATING_TIMEOUT = 60.0
"""Seconds after the end of a pod's grace period before it counts as stuck Terminating."""


class Bucket(StrEnum):
    """Where one pod counts in `ReplicaCounts`."""

    PENDING = "pending"
    ACTIVE = "active"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RESTARTING = "restarting"


@final
@dataclass(frozen=True, slots=True)
class ReplicaPlan:
    """What to do for one replica type of a running job."""

    counts: ReplicaCounts
    create: tuple[int, ...] = ()
    """Indices without a pod, to create."""
    restart: tuple[PodFacts, ...] = ()
    """Failed pods to delete so that they are recreated; each counts towards backoffLimit."""
    remove: tuple[PodFacts, ...] = ()
    """Pods beyond the replica count (scale-down) or duplicates of an index: delete."""
    force: tuple[PodFacts, ...] = ()
    """Pods stuck Terminating: delete with grace period 0."""
    restart_units: int = 0
    """What the pods in `restart` add to the backoff count: 1 each plus their container restarts."""
    live_restarts: int = 0
    """Container restarts of the pods that stay (only for replica types that restart)."""
    recheck_after: float | None = None
    """Seconds until a Terminating pod becomes stuck, when one is waited for."""
    succeeded_indices: frozenset[int] = field(default_factory=frozenset)
    started_indices: frozenset[int] = field(default_factory=frozenset)
    """Indices whose current pod has run (for the ledger): a pod of these that vanishes was lost."""
    counted: frozenset[str] = field(default_factory=frozenset)
    """UIDs of the pods in `restart`: counted in the ledger, so a repeated delete never counts again."""


def is_retryable_exit_code(code: int) -> bool:
    """Kubeflow's rule: 128 and above means killed by a signal (OOM, preemption, SIGTERM): retry."""
    return code >= 128


def will_restart(policy: RestartPolicy, pod: PodFacts) -> bool:
    """Whether a pod that reached phase Failed is replaced rather than counted as a failure."""
    if policy in (RestartPolicy.ALWAYS, RestartPolicy.ON_FAILURE):
        return True
    if policy is RestartPolicy.EXIT_CODE:
        return pod.exit_code is None or pod.disrupted or is_retryable_exit_code(pod.exit_code)
    return False


def is_stuck(pod: PodFacts, now: datetime, terminating_timeout: float) -> bool:
    """True once a pod's deletion is overdue by more than `terminating_timeout` seconds."""
    return pod.deletion is not None and now >= pod.deletion + timedelta(seconds=terminating_timeout)


def classify(policy: RestartPolicy, pod: PodFacts) -> Bucket:
    """The bucket of a pod at a live index under `policy`."""
    if pod.phase is PodPhase.SUCCEEDED:
        return Bucket.SUCCEEDED
    if pod.phase is PodPhase.FAILED:
        return Bucket.RESTARTING if will_restart(policy, pod) else Bucket.FAILED
    if pod.deleting:
        # Running (or on a lost node) and going away: Kubeflow counts it failed when it will not come back.
        lost = pod.phase in (PodPhase.RUNNING, PodPhase.UNKNOWN) and policy is RestartPolicy.NEVER
        return Bucket.FAILED if lost else Bucket.RESTARTING
    return Bucket.ACTIVE if pod.phase is PodPhase.RUNNING else Bucket.PENDING


def plan_replica(
    *,
    replicas: int,
    policy: RestartPolicy,
    pods: Iterable[PodFacts],
    now: datetime,
    terminating_timeout: float = DEFAULT_TERMINATING_TIMEOUT,
    succeeded_before: Iterable[int] = (),
    started_before: Iterable[int] = (),
    counted_before: Collection[str] = (),
) -> ReplicaPlan:
    """Decide for one replica type: which indices to create, which pods to replace, remove or force-delete.

    From the job's ledger: `succeeded_before` are indices whose pod is known to have succeeded (such an
    index stays succeeded even when its pod has been removed by the cluster, and is never recreated);
    `started_before` are indices whose pod was seen running (one that vanished unseen is lost: failed
    under `Never`, recreated with a restart counted otherwise); `counted_before` are UIDs of failed pods
    whose restart is already counted (their deletion is retried without counting them again).
    """
    primary, extra = _by_index(pods, replicas)
    done_earlier = frozenset(i for i in succeeded_before if 0 <= i < replicas)
    buckets = {index: classify(policy, pod) for index, pod in primary.items()}
    restart = tuple(
        p for i, p in sorted(primary.items()) if buckets[i] is Bucket.RESTARTING and not p.deleting
    )
    fresh = [p for p in restart if p.uid not in counted_before]
    lost = sorted(
        i for i in started_before if 0 <= i < replicas and i not in primary and i not in done_earlier
    )
    lost_fails = policy is RestartPolicy.NEVER
    stuck = [p for p in [*primary.values(), *extra] if p.deleting and is_stuck(p, now, terminating_timeout)]
    waiting = [p.deletion for p in [*primary.values(), *extra] if p.deleting and p not in stuck]
    succeeded = {i for i, b in buckets.items() if b is Bucket.SUCCEEDED} | (done_earlier - primary.keys())
    counts = ReplicaCounts(
        replicas=replicas,
        active=_count(buckets.values(), Bucket.ACTIVE),
        pending=_count(buckets.values(), Bucket.PENDING),
        succeeded=len(succeeded),
        failed=_count(buckets.values(), Bucket.FAILED) + (len(lost) if lost_fails else 0),
        restarting=_count(buckets.values(), Bucket.RESTARTING),
        pods=primary,
    )
    skip = primary.keys() | done_earlier | (set(lost) if lost_fails else set())
    return ReplicaPlan(
        counts=counts,
        create=tuple(islice((i for i in range(replicas) if i not in skip), CREATES_PER_RECONCILE)),
        restart=restart,
        remove=tuple(p for p in extra if not p.deleting),
        force=tuple(stuck),
        restart_units=sum(1 + p.restarts for p in fresh) + (0 if lost_fails else len(lost)),
        live_restarts=0
        if policy is RestartPolicy.NEVER
        else sum(p.restarts for p in primary.values() if not p.deleting and p not in restart),
        recheck_after=min((_seconds(d, now) + terminating_timeout for d in waiting if d), default=None),
        succeeded_indices=frozenset(succeeded),
        started_indices=_started(primary, restart, started_before, lost if lost_fails else ()),
        counted=frozenset(p.uid for p in restart if p.uid),
    )


def _started(
    primary: Mapping[int, PodFacts],
    restart: Sequence[PodFacts],
    before: Iterable[int],
    lost: Iterable[int],
) -> frozenset[int]:
    """Indices whose current pod has run: seen running or finished now, or known earlier while its pod
    is being deleted. A replaced pod's index starts afresh (its restart is counted, also while the pod is
    still being deleted: the operator deletes only failed pods of a running job, so a Running pod going
    away was deleted by someone else); a lost one under `Never` stays (it stays failed)."""
    earlier = frozenset(before)
    replaced = {p.index for p in restart}
    ran = {
        i
        for i, p in primary.items()
        if i not in replaced and (p.phase in (_LIVE if p.deleting else _RAN) or (p.deleting and i in earlier))
    }
    return frozenset(ran | set(lost))


def past_backoff_limit(limit: int | None, restarts: int) -> bool:
    """True when `restarts` exceed backoffLimit (None: no limit). 0 means: fail on the first restart."""
    return limit is not None and restarts > limit


def deadline_exceeded(start: datetime | None, deadline_seconds: int | None, now: datetime) -> bool:
    """activeDeadlineSeconds, counted from `status.startTime`."""
    return (
        start is not None
        and deadline_seconds is not None
        and now >= start + timedelta(seconds=deadline_seconds)
    )


def seconds_until(origin: datetime | None, after_seconds: int | None, now: datetime) -> float | None:
    """Seconds from `now` until `origin + after_seconds` (0 when past); None when either is unset.

    The next look of a deadline (origin startTime) or of a TTL (origin completionTime).
    """
    if origin is None or after_seconds is None:
        return None
    return max(_seconds(origin + timedelta(seconds=after_seconds), now), 0.0)


def pods_to_clean(policy: CleanPodPolicy, pods: Sequence[PodFacts]) -> list[PodFacts]:
    """The pods a finished job deletes: All -> every pod; Running -> Pending/Running ones; None -> none."""
    if policy is CleanPodPolicy.ALL:
        return list(pods)
    if policy is CleanPodPolicy.RUNNING:
        return [p for p in pods if not p.phase.terminal]
    return []


def _by_index(pods: Iterable[PodFacts], replicas: int) -> tuple[dict[int, PodFacts], list[PodFacts]]:
    """One pod per live index (the one not being deleted, else any); the rest are surplus."""
    primary: dict[int, PodFacts] = {}
    extra: list[PodFacts] = []
    for pod in sorted(pods, key=lambda p: (p.deleting, p.name)):
        if pod.index is None or not 0 <= pod.index < replicas or pod.index in primary:
            extra.append(pod)
        else:
            primary[pod.index] = pod
    return primary, extra


def _count(buckets: Iterable[Bucket], bucket: Bucket) -> int:
    return sum(1 for b in buckets if b is bucket)


def _seconds(when: datetime, now: datetime) -> float:
    return (when - now).total_seconds()
