"""The Kueue step of a job's reconcile: hold the job until Kueue admits it, run it where the admission
says, stop it when Kueue evicts it, and keep its Workload told (`kubetrain.common.kueue` has the rules).

It applies to a job labelled `kueue.x-k8s.io/queue-name` whose kind the operator's Kueue integration
manages (`--kueue-integration`); any other job never gets here, and reconciles exactly as before.

- `admission()` reads the job's Workload from the informer cache (never a GET per reconcile) and decides;
  for an admitted job it works out each replica type's placement (ResourceFlavors are read through a
  minute-long memory) and gives it to the renderer, so each new pod gets it.
- `hold()` keeps a job that is not admitted at no pod and no Service, like a suspended job but with the
  `Queued` condition (reason `<Kind>Queued`, or `<Kind>Evicted<Kueue's reason>` after an eviction) and
  without touching `runPolicy.suspend`; it makes the Workload when there is none, and after an eviction,
  once the last pod is gone, hands the quota back to Kueue. Pods deleted this way are not failures: no
  restart is counted and backoffLimit is not charged.
- `after_run()` and `finished()` tell the Workload `PodsReady`, `reclaimablePods` and `Finished`.

`runPolicy.suspend` is not the switch of such a job, its Workload is: under Kueue's own integrations
`suspend` is Kueue's (its webhook sets it, its controller clears it on admission, and a user who sets it on
an admitted job sees Kueue clear it again), so a job written for them (`suspend: true` with a queue label)
is queued and runs on admission here too, its spec never rewritten. A queued job is stopped the Kueue way:
`spec.active: false` on its Workload (an eviction with reason Deactivated).

A Workload of the job that kubetrain did not make (the job's Workload name is the same on both sides, so
creating ours fails) is taken over when Kueue's configuration says that Kueue no longer integrates the kind
(a cluster moved from Kueue's integration to kubetrain's); otherwise it means Kueue's own integration
manages this kind here, and the job is left to it, remembered per job. Never a second Workload.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from kubetrain.common.events import EventType
from kubetrain.common.job import workloads
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kueue import wlstatus
from kubetrain.common.kueue.decide import Decision, Phase, decide
from kubetrain.common.kueue.integration import KueueIntegration
from kubetrain.common.kueue.lookup import ClusterObjects
from kubetrain.common.kueue.names import (
    QUEUE_LABEL,
    RESOURCE_FLAVORS,
    podset_name,
)
from kubetrain.common.kueue.placement import (
    Placement,
    PlacementConflict,
    assigned_flavors,
    place_pod,
    placements,
)
from kubetrain.common.reconcile import Request, Result

if TYPE_CHECKING:
    from kubetrain.common.clock import Clock
    from kubetrain.common.job.contract import JobContract
    from kubetrain.common.job.sync import JobSync
    from kubetrain.common.kube.client import ApiClient

__all__ = ["Admission", "Queueing", "admission"]

log = logging.getLogger(__name__)


class Queueing:
    """The Kueue integration of one job kind's controller: its setting and what it remembers."""

    def __init__(self, integration: KueueIntegration, *, api: ApiClient, clock: Clock) -> None:
        self.integration = integration
        self.objects = ClusterObjects(api, clock)
        self.foreign: dict[Request, str] = {}
        """The jobs (and their uids) whose Workload another integration (Kueue's own) made."""

        self.placed: dict[Request, tuple[tuple[str, str, int], dict[str, Placement] | str]] = {}
        """Each admitted job's placements (or conflict), by the Workload version and job generation."""

    def forget(self, request: Request) -> None:
        self.foreign.pop(request, None)
        self.placed.pop(request, None)


@final
@dataclass(slots=True)
class Admission:
    """The Kueue decision of one reconcile of one queued job, and the Workload it was made from."""

    decision: Decision
    workload: Obj | None
    queue: str

    @property
    def admitted(self) -> bool:
        return self.decision.phase is Phase.ADMITTED

    @property
    def foreign(self) -> bool:
        return self.decision.phase is Phase.FOREIGN


async def admission(ctl: JobContract[Any], sync: JobSync[Any]) -> Admission | None:
    """The job's Kueue decision; None when the job is not queued through kubetrain's integration."""
    queueing, raw = ctl.queueing, sync.raw
    queue = objects.labels(raw).get(QUEUE_LABEL)
    if queueing is None or not queue:
        return None
    workload = workloads.cached_workload(ctl, raw)
    found = decide(
        workload, foreign=queueing.foreign.get(objects.request_for(raw)) == objects.uid(raw), queue=queue
    )
    result = Admission(found, workload, queue)
    if result.foreign:
        return None
    if result.admitted and not sync.finished:
        await _place(ctl, sync, result)
    return result


async def hold(ctl: JobContract[Any], sync: JobSync[Any], gate: Admission) -> Result:
    """A job that may not run now: no pod, no Service, `Queued=True`; its Workload made or told."""
    decision = gate.decision
    if decision.phase is Phase.CREATE and not await workloads.create(ctl, sync, gate.queue):
        return Result(requeue_after=1.0)  # another integration's Workload: the next reconcile leaves it be
    if gate.workload is not None:
        await workloads.follow_job(ctl, sync, gate.workload, gate.queue)
    sync.builder.queued(decision.reason, decision.message)
    pods = sync.view.all_pods()
    result = await sync.stop()
    if decision.phase is Phase.EVICTED and not pods and gate.workload is not None:
        await _hand_back(ctl, sync, gate.workload)
    return result


async def _hand_back(ctl: JobContract[Any], sync: JobSync[Any], workload: Obj) -> None:
    """After an eviction, once no pod is left: the Workload's quota back to Kueue (logged once)."""
    if await workloads.patch_status(ctl, workload, wlstatus.requeue(workload, ctl.clock.now())) is not None:
        log.info("%s: no pod left after the eviction; the quota of Workload %s is handed back to Kueue",
                 sync.writer.request, objects.name(workload))  # fmt: skip


async def after_run(ctl: JobContract[Any], sync: JobSync[Any], gate: Admission) -> None:
    """Tell the admitted job's Workload whether its pods run, and which finished their work."""
    workload = gate.workload
    if sync.finished:  # this reconcile ended the job
        await finished(ctl, sync, gate)
        return
    if workload is None:
        return
    status = sync.builder.status
    if ctl.queueing is not None and ctl.queueing.integration.pods_ready:
        running = any(c.type == "Running" and c.status == "True" for c in status.conditions or ())
        patch = wlstatus.pods_ready(workload, running, ctl.clock.now())
        workload = await workloads.patch_status(ctl, workload, patch) or workload
    done = {podset_name(t): rs.succeeded or 0 for t, rs in (status.replica_statuses or {}).items()}
    await workloads.patch_status(ctl, workload, wlstatus.reclaimable(workload, done))


async def finished(ctl: JobContract[Any], sync: JobSync[Any], gate: Admission) -> None:
    """Tell the Workload of a finished job that it finished (Succeeded or Failed)."""
    if gate.workload is None:
        return
    ended = [
        c
        for c in sync.builder.status.conditions or ()
        if c.type in ("Succeeded", "Failed") and c.status == "True"
    ]
    if ended:
        succeeded, message = ended[-1].type == "Succeeded", ended[-1].message or ""
        await workloads.patch_status(
            ctl,
            gate.workload,
            wlstatus.finished(gate.workload, succeeded=succeeded, message=message, now=ctl.clock.now()),
        )


# placement -------------------------------------------------------------------------------------------
async def _place(ctl: JobContract[Any], sync: JobSync[Any], gate: Admission) -> None:
    """Give the renderer each replica type's placement, checked against its template; a conflict fails
    the job (`<Kind>AdmissionConflict`), as Kueue fails such a Workload. Worked out once per Workload
    version and job generation (`Queueing.placed`), not on every reconcile of a running job."""
    workload, queueing = gate.workload or {}, ctl.queueing
    assert queueing is not None
    request = objects.request_for(sync.raw)
    key = (objects.uid(workload), objects.resource_version(workload), objects.generation(sync.raw))
    known = queueing.placed.get(request)
    if known is None or known[0] != key:
        known = queueing.placed[request] = (key, await _placements(ctl, sync, workload))
    if isinstance(known[1], str):
        sync.builder.failed(known[1], "AdmissionConflict")
        return
    sync.render.placements = known[1]
    if sync.builder.admitted():
        cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        sync.writer.event(EventType.NORMAL, "Started", f"Admitted by clusterQueue {cq}")


async def _placements(ctl: JobContract[Any], sync: JobSync[Any], workload: Obj) -> dict[str, Placement] | str:
    """Each replica type's placement, or the message of the conflict with its template."""
    assert ctl.queueing is not None
    names = sorted(assigned_flavors(workload))
    flavors = {name: await ctl.queueing.objects.get(RESOURCE_FLAVORS, name) for name in names}
    try:
        by_podset = placements(workload, flavors)
        by_rtype = {t: by_podset.get(podset_name(t), Placement()) for t in ctl.replica_types(sync.job)}
        for rtype, placed in by_rtype.items():
            template = sync.job.replica_specs[rtype].template.to_wire()
            place_pod(template, placed, where=f"spec.{ctl.kind.replica_specs_field}[{rtype}].template")
    except PlacementConflict as err:
        return str(err)
    return by_rtype
