"""The gang failure policy's step in a reconcile: judge new rank failures, then act on the first decision.

`JobSync.run()` calls `GangStep.act(plans)` before its own limits and verdict. Without the job's
`kubetrain.io/failure-policy` annotation the step does nothing, so Kubeflow jobs behave as they always
did. With it, each rank failure not judged yet (`gangfailures.new_failures`) meets the rules
(`failurepolicy.rule_for`):

- `RestartGang`: every pod of the job is deleted at once (no per-pod kubelet back-off, no peer left
  blocked in a collective) and recreated once all are gone; one gang restart is counted against
  `maxGangRestarts` (the job fails with `<Kind>GangRestartLimitExceeded` beyond it), none against
  backoffLimit. Restarting=True with reason `<Kind>GangRestart` says why;
- `FailJob`: Failed with `<Kind>FailedByPolicy`, naming the rule and the failure;
- `Ignore`: a failed pod is replaced without charging backoffLimit; a container restarted in place is
  not charged either;
- no rule: what the replica's restartPolicy and backoffLimit do without a policy.

A trainer progress report (`status.trainerStatus.lastUpdatedTime`) older than `progressDeadlineSeconds`
is a failure with reason `ProgressStalled` (replica type ""): a rule may match it; if none does, the
gang restarts. Every judged failure gets an Event and counts in `kubetrain_rank_restarts_total`.

Write order, as in the rest of the template: the ledger first (what was judged, the gang restart), then
the status, then the deletions, so that an operator restart in between never acts on a failure twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, final

from kubetrain.api import ConditionStatus, JobConditionType, RestartPolicy
from kubetrain.common.events import EventType
from kubetrain.common.job.facts import PodFacts
from kubetrain.common.job.failurepolicy import (
    Action,
    Failure,
    FailurePolicy,
    FailureReason,
    read_policy,
    rule_for,
)
from kubetrain.common.job.gangcascade import InPlaceGang
from kubetrain.common.job.gangfailures import RankFailure, new_failures, stall_due
from kubetrain.common.job.gangstate import GangState
from kubetrain.common.job.policy import ReplicaPlan
from kubetrain.common.job.status import StatusBuilder, reason
from kubetrain.common.reconcile import Result

if TYPE_CHECKING:
    from kubetrain.common.job.sync import JobSync

__all__ = ["GangOutcome", "GangStep"]

_CONTINUE_AFTER_DRAIN = 5.0
"""Seconds before a gang restart waiting for its pods to go looks again if no watch event comes first."""


@final
@dataclass(frozen=True, slots=True)
class GangOutcome:
    """`result`: the reconcile ends here with it; `failed`: the policy failed the job (stop the pods);
    `restarting`: an in-place gang restart is still open (Restarting stays, Running waits)."""

    result: Result | None = None
    failed: bool = False
    restarting: bool = False


class GangStep:
    """The policy's part of one reconcile of one job."""

    def __init__(self, sync: JobSync[Any]) -> None:
        self.sync = sync
        self.policy: FailurePolicy | None = read_policy(sync.job.metadata.annotations)
        self.in_place = InPlaceGang(self)

    async def act(self, plans: dict[str, ReplicaPlan]) -> GangOutcome:
        if self.policy is None:
            return GangOutcome()
        await self.in_place.decide()
        if self.sync.ledger.gang.draining:
            return await self._drain()
        # an open gang restart that is over (the trainer reported progress since, or its deadline passed) is
        # closed before the failures are judged, so that one seen in the same reconcile is a new one
        over = self.sync.ledger.gang.cascading and self.in_place.over()
        if over and (result := await self.in_place.settle()) is not None:
            return GangOutcome(result)
        failures = new_failures(self.sync.view.pods, self.sync.ledger.gang)
        if (stall := self._stall()) is not None:
            failures.append(stall)
        if self.sync.ledger.gang.cascading:
            failures = await self.in_place.absorb(failures)
        for i, found in enumerate(failures):
            action = self.action(found)
            self.told(found.failure, action)
            if action is Action.IGNORE and found.failure.container_restart:
                continue
            if action is not None:
                await self._remember(failures[:i])
                return await self._act(self.policy, action, found, failures[i + 1 :])
        await self._remember(failures)
        if not self.sync.ledger.gang.cascading:
            return GangOutcome()
        result = await self.in_place.settle()
        return GangOutcome(result, restarting=self.sync.ledger.gang.cascading and not self.in_place.back())

    def into_status(self, builder: StatusBuilder) -> None:
        """`replicaStatuses[type].restarts` from the ledger, for a job with a policy (else left unset)."""
        if self.policy is None:
            return
        ranks, statuses = self.sync.ledger.gang.ranks, builder.status.replica_statuses or {}
        counted = {t: s.model_copy(update={"restarts": ranks.get(t, 0)}) for t, s in statuses.items()}
        builder.status = builder.status.model_copy(update={"replica_statuses": counted})

    def sooner(self, result: Result) -> Result:
        """`result`, due no later than the moment the gang would count as stalled."""
        dues = [d for d in (self._stall_due(), self.in_place.due()) if d is not None]
        due = min(dues, default=None)
        if due is None or (result.requeue_after is not None and result.requeue_after <= due):
            return result
        return Result(requeue_after=max(due, 0.0))

    # judging -------------------------------------------------------------------------------------------
    def action(self, found: RankFailure) -> Action | None:
        """The matching rule's action; a stall no rule matches restarts the gang (why one sets a deadline)."""
        assert self.policy is not None
        matched = rule_for(self.policy, found.failure)
        if matched is not None:
            return matched[1].action
        return Action.RESTART_GANG if found.failure.reason == FailureReason.PROGRESS_STALLED else None

    def charged(self, rtype: str) -> bool:
        """Whether backoffLimit counts the kubelet restarts of `rtype`'s pods (not under `Never`)."""
        spec = self.sync.job.replica_specs.get(rtype)
        policy = spec.restart_policy if spec is not None else None
        return policy not in (None, RestartPolicy.NEVER, RestartPolicy.EXIT_CODE)

    async def _act(
        self, policy: FailurePolicy, action: Action, found: RankFailure, rest: list[RankFailure]
    ) -> GangOutcome:
        if action is Action.RESTART_GANG:
            return await self._restart_gang(policy, found, rest)
        if action is Action.FAIL_JOB:
            matched = rule_for(policy, found.failure)
            where = f"failure policy rule {matched[0] if matched else '?'} (FailJob)"
            return await self._fail(found, where, "FailedByPolicy")
        if found.failure.pod:
            return await self._replace_ignored(found)
        await self.write(self.sync.ledger.gang.restarted_at(int(self.sync.now.timestamp())))
        return GangOutcome()  # an ignored stall: the deadline counts again from now

    def _stall(self) -> RankFailure | None:
        due = self._stall_due()
        if due is None or due > 0:
            return None
        failure = Failure("", "", None, FailureReason.PROGRESS_STALLED.value)
        return RankFailure(failure, PodFacts(name=""), 0)

    def _stall_due(self) -> float | None:
        if self.policy is None or self.sync.ledger.gang.draining:
            return None
        status, since = self.sync.builder.status, self.sync.ledger.gang.since
        # the clock starts again with a gang restart, and with a resume (startTime is reset then)
        starts = [t for t in (_from_unix(since) if since is not None else None, status.start_time) if t]
        return stall_due(
            status.trainer_status.last_updated_time if status.trainer_status is not None else None,
            max(starts, default=None),
            self.policy.progress_deadline_seconds,
            self.sync.now,
        )

    # acting --------------------------------------------------------------------------------------------
    async def _restart_gang(
        self, policy: FailurePolicy, found: RankFailure, rest: list[RankFailure]
    ) -> GangOutcome:
        sync, state = self.sync, self.sync.ledger.gang
        what = found.failure.describe() if found.failure.pod else "training made no progress"
        if state.restarts >= policy.max_gang_restarts:
            message = f"{what}; the gang was restarted {state.restarts} times, maxGangRestarts"
            return await self._fail(
                found, f"{message} is {policy.max_gang_restarts}", "GangRestartLimitExceeded"
            )
        if self.in_place.applies(found):
            result = await self.in_place.restart(found, rest)
            await self._announce(policy, found.failure, f"{what}; all pods restart in place")
            return GangOutcome(result)
        pods = sync.view.all_pods()
        carried = sum(p.restarts for p in pods)  # kubelet restarts of the deleted pods stay charged ...
        ignored = 1 if found.failure.container_restart else 0  # ... except the one this restart answers
        if found.failure.pod:
            state = state.judged(found.pod.uid, found.total, found.failure.replica_type)
        new_state = state.ignoring(ignored).gang_restart((p.uid for p in pods), int(sync.now.timestamp()))
        ledger = sync.ledger.for_gang_restart(new_state).with_restarts(carried)
        await sync._write_ledger_value(ledger)
        await self._announce(policy, found.failure, f"{what}; recreating all pods")
        await sync._delete_pods(pods)
        return GangOutcome(Result(requeue_after=sync.view.terminating_recheck(pods, sync.now)))

    async def _announce(self, policy: FailurePolicy, failure: Failure, what: str) -> None:
        """Restarting=True (`<Kind>GangRestart`, which also makes its Event) and the gang-restart metric."""
        sync = self.sync
        message = f"gang restart {sync.ledger.gang.restarts} of {policy.max_gang_restarts}: {what}"
        sync.builder.set(
            JobConditionType.RESTARTING,
            ConditionStatus.TRUE,
            reason(sync.ctl.kind.kind, "GangRestart"),
            message,
        )
        await sync.report.write(sync.builder)
        self._count("gang_restarts", failure.reason or "Error")

    async def _drain(self) -> GangOutcome:
        """A gang restart waits until every pod it deleted is gone, then the template recreates them."""
        sync, state = self.sync, self.sync.ledger.gang
        left = [p for p in sync.view.all_pods() if p.uid in state.draining]
        if left:
            await sync._delete_pods(left)  # stuck ones are deleted again without grace period
            recheck = sync.view.terminating_recheck(left, sync.now)
            return GangOutcome(
                Result(requeue_after=recheck if recheck is not None else _CONTINUE_AFTER_DRAIN)
            )
        # the progress deadline counts from the new gang, not from the restart's start: a stopped rank's
        # pod takes the kubelet's whole grace period to go, which the new gang must not be charged for
        recreated = state.drained().restarted_at(int(sync.now.timestamp()))
        await sync._write_ledger_value(sync.ledger.with_gang(recreated))
        return GangOutcome()

    async def _fail(self, found: RankFailure, why: str, suffix: str) -> GangOutcome:
        sync = self.sync
        what = found.failure.describe() if found.failure.pod else "training made no progress"
        await self._remember([found])
        sync.builder.failed(f"{sync.ctl.kind.kind} {sync.job.name} has failed: {why}: {what}", suffix)
        return GangOutcome(failed=True)

    async def _replace_ignored(self, found: RankFailure) -> GangOutcome:
        """Replace a failed pod without charging backoffLimit: its index is neither lost nor failed."""
        sync, pod = self.sync, found.pod
        rtype = found.failure.replica_type
        started = sync.ledger.started_indices(rtype) - {pod.index if pod.index is not None else -1}
        ledger = sync.ledger.with_gang(sync.ledger.gang.judged(pod.uid, found.total, rtype))
        await sync._write_ledger_value(ledger.with_started(rtype, started).with_restarts(pod.restarts))
        await sync._delete_pods([pod])
        return GangOutcome(Result(requeue_after=_CONTINUE_AFTER_DRAIN))

    async def _remember(self, failures: list[RankFailure]) -> None:
        """What was judged (container restarts an `Ignore` took on itself uncharged), and forget gone pods."""
        state = self.sync.ledger.gang.kept(p.uid for p in self.sync.view.all_pods())
        for found in failures:
            if not found.failure.pod:
                continue
            state = state.judged(found.pod.uid, found.total, found.failure.replica_type)
            if self._ignored(found):
                state = state.ignoring(1)
        await self.write(state)

    async def write(self, state: GangState) -> None:
        await self.sync._write_ledger_value(self.sync.ledger.with_gang(state))

    def _ignored(self, found: RankFailure) -> bool:
        assert self.policy is not None
        matched = rule_for(self.policy, found.failure)
        return found.failure.container_restart and matched is not None and matched[1].action is Action.IGNORE

    # telling -------------------------------------------------------------------------------------------
    def told(self, failure: Failure, action: Action | None, more: str = "") -> None:
        """An Event and the rank-restart metric for every failure judged."""
        then = (
            f"; failure policy: {action.value}" if action is not None else "; no failure policy rule matched"
        )
        text = (
            failure.describe() if failure.pod else "training made no progress within progressDeadlineSeconds"
        ) + then
        self.event("RankFailed", text + more)
        if failure.pod:
            self._count("rank_restarts", failure.reason or "Error", failure.replica_type)

    def event(self, why: str, message: str) -> None:
        """A Warning Event on the job."""
        self.sync.ctl.recorder.record(self.sync.raw, EventType.WARNING, why, message)

    def _count(self, counter: str, *labels: str) -> None:
        metrics = self.sync.ctl.metrics
        if metrics is not None:
            getattr(metrics, counter).labels(self.sync.job.namespace, self.sync.ctl.framework, *labels).inc()


def _from_unix(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
