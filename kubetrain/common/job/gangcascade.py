"""A gang restart done in place, and the restarts of the peers that follow it: one gang restart, not many.

When a rank's main container exits with a code its `RestartAllContainers` rule names
(`kubetrain.common.job.inplace`), the kubelet has already restarted every container of its pod in place.
If the policy's decision is `RestartGang`, that is one gang restart (`GangStep`): counted against
`maxGangRestarts`, with the `<Kind>GangRestart` condition, Event and metric, and no pod deleted. Its peers
then fail on their own: over gloo, NCCL or MPI the collective they were in breaks, they exit non-zero, and
their own rule restarts them in place. Those restarts belong to the gang restart (the ledger keeps it open
under `waiting`/`until`): each is a rank restart of its replica type (`replicaStatuses[].restarts`, a
`RankFailed` Event, `kubetrain_rank_restarts_total`), never another gang restart.

Only the replica types the kind says must restart with the gang are waited for (`restarts_with_gang`: an
MPIJob's workers run sshd and go on serving a restarted launcher). A peer that has not restarted within
`PEER_GRACE_SECONDS` (blocked in a collective that never times out) is recreated alone: its pod is
deleted and made again, while the others stay. The job's Running condition returns once no peer is
waited for and every pod is Ready again. The gang restart itself stays open until the trainer reports
progress again, or until the gang has run again for `PEER_GRACE_SECONDS` (and at least until its
deadline): a rank that restarts meanwhile (a peer whose first restart met a rendezvous still breaking)
belongs to it too, so that one killed rank is one gang restart however its peers come back.

Neither the kubelet's restarts the gang restart answers nor its peers' ones count toward backoffLimit.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.job.facts import PodFacts
from kubetrain.common.job.failurepolicy import Action
from kubetrain.common.job.gangfailures import RankFailure
from kubetrain.common.job.gangstate import GangState
from kubetrain.common.job.inplace import in_place_codes, restart_rule
from kubetrain.common.progress.coalesce import JobKey
from kubetrain.common.reconcile import Result

if TYPE_CHECKING:
    from kubetrain.common.job.gangpolicy import GangStep

__all__ = ["PEER_GRACE_SECONDS", "InPlaceGang"]

PEER_GRACE_SECONDS = 30
"""How long an in-place gang restart waits for a peer to restart on its own before recreating its pod."""


class InPlaceGang:
    """The in-place side of one `GangStep`: the job's mode, its rules, its gang restarts and their peers."""

    def __init__(self, step: GangStep) -> None:
        self.step = step
        self.sync = step.sync

    async def decide(self) -> None:
        """Decide the job's mode once (pods made before the decision have no rules: recreate), then give
        the renderer its restart rules when the mode is in place."""
        sync, policy = self.sync, self.step.policy
        assert policy is not None
        mode = sync.ledger.gang.mode
        if mode is None:
            made = bool(sync.view.all_pods())
            mode = GangRestartMode.RECREATE if made else await sync.ctl.gang_restart.mode()
            await self.step.write(sync.ledger.gang.decided(mode.value))
        if mode == GangRestartMode.IN_PLACE:
            rules = {t: restart_rule(in_place_codes(policy, t)) for t in sync.job.replica_specs}
            sync.render.restart_rules = {t: rule for t, rule in rules.items() if rule is not None}

    def applies(self, found: RankFailure) -> bool:
        """Whether the kubelet restarted the failed rank's whole pod in place (its rule matched)."""
        return found.failure.container_restart and found.pod.restarted_all

    async def restart(self, found: RankFailure, rest: list[RankFailure]) -> Result:
        """One gang restart, in place: counted, told, and the peers waited for; no pod is deleted.
        `rest`: the failures seen with it, of which those that restarted in place belong to it."""
        sync, state = self.sync, self.sync.ledger.gang
        now = int(sync.now.timestamp())
        peers = [p.uid for p in self._must_restart() if p.uid != found.pod.uid]
        state = self._judged(state, found).in_place_restart(peers, now, now + PEER_GRACE_SECONDS)
        await self.step.write(state)
        await self.absorb(rest)
        return Result(requeue_after=float(PEER_GRACE_SECONDS))

    async def absorb(self, failures: list[RankFailure]) -> list[RankFailure]:
        """Take the in-place `RestartGang` restarts among `failures` into the open gang restart; the others
        are returned, to be judged as usual. Every failure of a waited-for peer ends its wait."""
        state, kept, number = self.sync.ledger.gang, [], self.sync.ledger.gang.restarts
        for found in failures:
            if found.failure.pod and self.applies(found) and self.step.action(found) is Action.RESTART_GANG:
                self.step.told(found.failure, Action.RESTART_GANG, f", in place within gang restart {number}")
                state = self._judged(state, found)
            else:
                kept.append(found)
        state = state.restarted(f.pod.uid for f in failures if f.failure.pod)
        await self.step.write(state)
        return kept

    async def settle(self) -> Result | None:
        """Close the open gang restart when it is over; recreate the peers still waited for at its deadline.
        None: the reconcile goes on (with the Restarting condition held while the gang restart is open)."""
        sync, state = self.sync, self.sync.ledger.gang
        state = state.restarted(state.waiting - {p.uid for p in sync.view.all_pods()})
        if state.back is None and not state.waiting and (last := self._last_start()) is not None:
            state = state.came_back(int(last.timestamp()))
        if not self._over(state):
            await self.step.write(state)  # still open: a rank failing again meanwhile is part of it
            return None
        if self.back():
            await self.step.write(state.closed())
            return None
        late = [(t, p) for t, facts in sync.view.pods.items() for p in facts if p.uid in state.waiting]
        await self._recreate([(t, p) for t, p in late if not p.deleting], state.closed())
        return Result(requeue_after=1.0) if late else None

    def back(self) -> bool:
        """Whether no peer is waited for any more and every pod of the job is Ready again: the gang runs
        (the Restarting condition gives way to Running), though its restart stays open until its deadline."""
        pods = self.sync.view.all_pods()
        return (
            not self.sync.ledger.gang.waiting and bool(pods) and all(p.ready and not p.deleting for p in pods)
        )

    def over(self) -> bool:
        """Whether the open gang restart is over: the trainer reported progress since every rank ran again,
        or its deadline has passed and the gang has run again for `PEER_GRACE_SECONDS` since (a peer that
        restarted in time may fail once more, its rendezvous meeting a rank that restarted later)."""
        return self._over(self.sync.ledger.gang)

    def _over(self, state: GangState) -> bool:
        return state.until is None or self._trained(state) or self._closes(state) <= self.sync.now.timestamp()

    @staticmethod
    def _closes(state: GangState) -> int:
        """When the open gang restart ends if the trainer does not report first (Unix seconds): its deadline,
        or `PEER_GRACE_SECONDS` after every rank ran again, whichever is later."""
        assert state.until is not None
        return state.until if state.back is None else max(state.until, state.back + PEER_GRACE_SECONDS)

    def _trained(self, state: GangState) -> bool:
        """Whether the trainer reported progress after every rank of the gang restart ran again (`back`):
        the gang trains again, and a failure from now on is a new one. A report from before (rank 0
        finishing the step it was in when a peer died) does not count. A report still waiting to be
        written counts (the endpoint writes a job's reports at most once per interval)."""
        reported = self._last_report()
        return state.back is not None and reported is not None and reported.timestamp() > state.back

    def _last_start(self) -> datetime.datetime | None:
        """When the last of the ranks that restart with the gang started running; None while one is not
        running."""
        starts = [p.running_since for p in self._must_restart()]
        if not starts or any(s is None for s in starts):
            return None
        return max(s for s in starts if s is not None)

    def _last_report(self) -> datetime.datetime | None:
        """When the trainer last reported: its newest report, written or waiting."""
        sync = self.sync
        reports = [sync.builder.status.trainer_status]
        progress = sync.ctl.progress
        if progress is not None and progress.reports is not None:
            reports.append(progress.reports.pending(JobKey(sync.ctl.kind, sync.job.namespace, sync.job.name)))
        times = [r.last_updated_time for r in reports if r is not None and r.last_updated_time is not None]
        return max(times, default=None)

    def due(self) -> float | None:
        """Seconds until the open gang restart's deadline, or its end; None when none is open."""
        state = self.sync.ledger.gang
        return None if state.until is None else max(self._closes(state) - self.sync.now.timestamp(), 0.0)

    # ---------------------------------------------------------------------------------------------------
    def _must_restart(self) -> list[PodFacts]:
        sync = self.sync
        return [
            p
            for rtype, facts in sync.view.pods.items()
            if sync.ctl.restarts_with_gang(sync.job, rtype)
            for p in facts
            if not p.deleting
        ]

    def _judged(self, state: GangState, found: RankFailure) -> GangState:
        """`found` judged; its kubelet restarts are not charged to backoffLimit where they would be."""
        rtype, pod = found.failure.replica_type, found.pod
        charged = self.step.charged(rtype)
        state = state.ignoring(found.total - state.seen.get(pod.uid, 0) if charged else 0)
        return state.judged(pod.uid, found.total, rtype)

    async def _recreate(self, late: list[tuple[str, PodFacts]], state: GangState) -> None:
        """Delete the peers that did not restart (the template makes them again): their indices are not
        lost, and their kubelet restarts stay charged where they were. Each is a rank restart. The job
        drains them as a gang restart drains its pods (`GangStep`): until its container stopped, a deleted
        pod stays Running, which would read as a lost node's pod (a new failure, restarting the whole
        gang) and its index, once gone, as lost (a restart charged to backoffLimit)."""
        sync = self.sync
        for rtype, pod in late:
            state = state.judged(pod.uid, pod.restarts + 1, rtype)
        ledger = sync.ledger.with_gang(state.draining_too(p.uid for _, p in late))
        for rtype in {t for t, _ in late}:
            gone = {p.index for t, p in late if t == rtype and p.index is not None}
            ledger = ledger.with_started(rtype, sync.ledger.started_indices(rtype) - gone)
        carried = sum(p.restarts for t, p in late if self.step.charged(t))
        await sync._write_ledger_value(ledger.with_restarts(carried))
        if late:
            names = ", ".join(p.name for _, p in late)
            self.step.event("GangRestartPeersRecreated", f"{names} did not restart in place: recreating")
        await sync._delete_pods([p for _, p in late])
