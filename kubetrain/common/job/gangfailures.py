"""The failures of a job's ranks that its gang failure policy has not judged yet, and a stalled gang.

Pure functions over `PodFacts` and the ledger's `GangState`. A pod's failures are counted, not diffed
by event: its container restarts (`restartCount`, in place under `OnFailure`/`Always`) plus one when the
pod itself failed or its node was lost. Those beyond what the ledger has `seen` for its UID are new; of
several new ones between two looks only the latest is visible (`lastState`), and it stands for them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import final

from kubetrain.common.job.facts import PodFacts, PodPhase
from kubetrain.common.job.failurepolicy import Failure, FailureReason
from kubetrain.common.job.gangstate import GangState

__all__ = ["RankFailure", "new_failures", "stall_due", "stalled"]

_NODE_LOST = frozenset({"NodeLost", "DeletionByTaintManager", "DeletionByPodGC"})


@final
@dataclass(frozen=True, slots=True)
class RankFailure:
    """A failure not judged yet, the pod it happened to, and that pod's failure count with it."""

    failure: Failure
    pod: PodFacts
    total: int

    @property
    def pod_failed(self) -> bool:
        """The pod itself failed or is lost (not a container restarted in place)."""
        return not self.failure.container_restart


def new_failures(pods: Mapping[str, Iterable[PodFacts]], state: GangState) -> list[RankFailure]:
    """The failures not judged yet, in the kind's replica order, then by pod name."""
    found = []
    for rtype, facts in pods.items():
        for pod in sorted(facts, key=lambda p: p.name):
            failure = _failure(rtype, pod, state)
            if failure is not None:
                found.append(failure)
    return found


def _count(pod: PodFacts) -> int:
    """The failures of `pod` so far: its container restarts, plus one if it failed or is lost."""
    return pod.restarts + (1 if _ended(pod) else 0)


def _lost(pod: PodFacts) -> bool:
    return pod.deleting and pod.phase in (PodPhase.RUNNING, PodPhase.UNKNOWN)


def _ended(pod: PodFacts) -> bool:
    return pod.phase is PodPhase.FAILED or _lost(pod) or pod.reason == FailureReason.NODE_LOST


def _failure(rtype: str, pod: PodFacts, state: GangState) -> RankFailure | None:
    if pod.uid in state.draining:
        return None
    lost, ended, total = _lost(pod), _ended(pod), _count(pod)
    if total <= state.seen.get(pod.uid, 0):
        return None
    if ended:
        reason = FailureReason.NODE_LOST.value if lost or pod.reason in _NODE_LOST else pod.reason
        failure = Failure(rtype, pod.name, pod.exit_code, reason or pod.exit_reason)
    else:
        code, why = pod.last_exit if pod.last_exit is not None else (None, "")
        failure = Failure(rtype, pod.name, code, why, container_restart=True)
    return RankFailure(failure, pod, total)


def stalled(
    last_progress: datetime | None, since: datetime | None, deadline: int | None, now: datetime
) -> bool:
    """Whether the trainer's progress report is older than `deadline` seconds (counted from the later of
    the report and `since`: the last gang restart or resume). No report yet: never stalled (the trainer
    may not report at all)."""
    due = stall_due(last_progress, since, deadline, now)
    return due is not None and due <= 0


def stall_due(
    last_progress: datetime | None, since: datetime | None, deadline: int | None, now: datetime
) -> float | None:
    """Seconds until the gang counts as stalled (<= 0: it does); None when there is nothing to watch."""
    if last_progress is None or deadline is None:
        return None
    base = max(last_progress, since) if since is not None else last_progress
    return (base + timedelta(seconds=deadline) - now).total_seconds()
