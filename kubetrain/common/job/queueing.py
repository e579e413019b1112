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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, final

from kubetrain.api import TrainingJob
from kubetrain.common.errors import AlreadyExists
from kubetrain.common.events import EventType
from kubetrain.common.job.labels import label_key
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kube.store import INDEX_CONTROLLER_UID
from kubetrain.common.kueue import wlstatus
from kubetrain.common.kueue.decide import Decision, Phase, decide
from kubetrain.common.kueue.integration import KueueIntegration
from kubetrain.common.kueue.lookup import ClusterObjects, resolve_priority
from kubetrain.common.kueue.names import QUEUE_LABEL, RESOURCE_FLAVORS, WORKLOADS, podset_name, workload_name
from kubetrain.common.kueue.placement import (
    Placement,
    PlacementConflict,
    assigned_flavors,
    place_pod,
    placements,
)
from kubetrain.common.kueue.workload import PodSetSource, build_workload, priority_class_name
from kubetrain.common.reconcile import Request, Result

if TYPE_CHECKING:
    from kubetrain.common.clock import Clock
    from kubetrain.common.job.contract import JobContract
    from kubetrain.common.job.sync import JobSync
    from kubetrain.common.kube.client import ApiClient

__all__ = ["Admission", "Queueing", "admission"]


class Queueing:
    """The Kueue integration of one job kind's controller: its setting and what it remembers."""

    def __init__(self, integration: KueueIntegration, *, api: ApiClient, clock: Clock) -> None:
        self.integration = integration
        self.objects = ClusterObjects(api, clock)
        self.foreign: dict[Request, str] = {}
        """The jobs (and their uids) whose Workload another integration (Kueue's own) made."""

    def forget(self, request: Request) -> None:
        self.foreign.pop(request, None)


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
    workload = _workload(ctl, raw)
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
    if decision.phase is Phase.CREATE and not await _create(ctl, sync, gate.queue):
        return Result(requeue_after=1.0)  # another integration's Workload: the next reconcile leaves it be
    if gate.workload is not None:
        await _follow_queue(ctl, gate.workload, gate.queue)
    sync.builder.queued(decision.reason, decision.message)
    pods = sync.view.all_pods()
    result = await sync.stop()
    if decision.phase is Phase.EVICTED and not pods and gate.workload is not None:
        await _patch(ctl, gate.workload, wlstatus.requeue(gate.workload, ctl.clock.now()))
    return result


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
        workload = await _patch(ctl, workload, patch) or workload
    done = {podset_name(t): rs.succeeded or 0 for t, rs in (status.replica_statuses or {}).items()}
    await _patch(ctl, workload, wlstatus.reclaimable(workload, done))


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
        await _patch(
            ctl,
            gate.workload,
            wlstatus.finished(gate.workload, succeeded=succeeded, message=message, now=ctl.clock.now()),
        )


# the Workload ----------------------------------------------------------------------------------------
def _workload(ctl: JobContract[Any], raw: Obj) -> Obj | None:
    name = _name(ctl, raw)
    found = ctl.cache[WORKLOADS].by_index(INDEX_CONTROLLER_UID, objects.uid(raw))
    return next((w for w in found if objects.name(w) == name), None)


def _name(ctl: JobContract[Any], raw: Obj) -> str:
    return workload_name(
        kind=ctl.kind.kind, group=ctl.kind.group, job_name=objects.name(raw), job_uid=objects.uid(raw)
    )


def _podsets(ctl: JobContract[Any], sync: JobSync[Any]) -> list[PodSetSource]:
    job: TrainingJob[Any] = sync.job
    specs = (sync.raw.get("spec") or {}).get(ctl.kind.replica_specs_field) or {}
    return [
        PodSetSource(
            rtype, job.replica_specs[rtype].replicas or 0, (specs.get(rtype) or {}).get("template") or {}
        )
        for rtype in ctl.podset_types(job)
    ]


async def _create(ctl: JobContract[Any], sync: JobSync[Any], queue: str) -> bool:
    """Create the job's Workload; False when one made by another integration is there already."""
    raw, podsets = sync.raw, _podsets(ctl, sync)
    assert ctl.queueing is not None
    priority = await resolve_priority(
        ctl.queueing.objects, objects.labels(raw), priority_class_name(raw, podsets)
    )
    operator = {label_key("operator-name", ctl.kind.label_prefix): ctl.kind.operator_name}
    body = build_workload(name=_name(ctl, raw), raw_job=raw, owner=sync.owner, queue=queue, podsets=podsets,
                          priority=priority, labels=operator)  # fmt: skip
    try:
        await ctl.api.create(WORKLOADS, objects.namespace(raw), body, read_back=False)
    except AlreadyExists:
        existing = await ctl.api.get(WORKLOADS, objects.namespace(raw), _name(ctl, raw))
        if all(objects.labels(existing).get(k) == v for k, v in operator.items()):
            return True  # ours: the cache had not caught up
        if await _adopt(ctl, sync, existing, operator):
            return True
        ctl.queueing.foreign[objects.request_for(raw)] = objects.uid(raw)
        told = f"Workload {objects.name(existing)} was made by Kueue's own integration; leaving the job to it"
        sync.writer.event(EventType.NORMAL, "WorkloadOfKueue", told)
        return False
    sync.writer.event(
        EventType.NORMAL, "CreatedWorkload", f"Created Workload: {objects.namespace(raw)}/{_name(ctl, raw)}"
    )
    return True


async def _adopt(ctl: JobContract[Any], sync: JobSync[Any], existing: Obj, labels: dict[str, str]) -> bool:
    """Take over the job's Workload that Kueue's own integration made, when Kueue no longer integrates the
    kind (`KueueIntegration.adopt`): it gets the operator-name label, and the cache then shows it."""
    owner = objects.controller_of(existing)
    if (
        ctl.queueing is None
        or not ctl.queueing.integration.adopt
        or (owner or {}).get("uid") != objects.uid(sync.raw)
    ):
        return False
    patch = {"metadata": {"resourceVersion": objects.resource_version(existing), "labels": labels}}
    await ctl.api.patch(
        WORKLOADS, objects.namespace(existing), objects.name(existing), patch, read_back=False
    )
    told = f"Took over Workload {objects.name(existing)}, made by Kueue's own integration of this kind before"
    sync.writer.event(EventType.NORMAL, "AdoptedWorkload", told)
    return True


async def _follow_queue(ctl: JobContract[Any], workload: Obj, queue: str) -> None:
    """A job moved to another LocalQueue while not admitted: so does its Workload (as Kueue does)."""
    if (workload.get("spec") or {}).get("queueName") != queue:
        patch = {
            "metadata": {"resourceVersion": objects.resource_version(workload)},
            "spec": {"queueName": queue},
        }
        await ctl.api.patch(
            WORKLOADS, objects.namespace(workload), objects.name(workload), patch, read_back=False
        )


async def _patch(ctl: JobContract[Any], workload: Obj, patch: Obj | None) -> Obj | None:
    """Apply a `wlstatus` patch; the Workload as it is afterwards (None when there was nothing to do)."""
    if patch is None:
        return None
    stored = await ctl.api.patch(
        WORKLOADS, objects.namespace(workload), objects.name(workload), patch, subresource="status"
    )
    return stored


# placement -------------------------------------------------------------------------------------------
async def _place(ctl: JobContract[Any], sync: JobSync[Any], gate: Admission) -> None:
    """Give the renderer each replica type's placement, checked against its template; a conflict fails
    the job (`<Kind>AdmissionConflict`), as Kueue fails such a Workload."""
    workload = gate.workload or {}
    assert ctl.queueing is not None
    flavors = {
        name: await ctl.queueing.objects.get(RESOURCE_FLAVORS, name)
        for name in sorted(assigned_flavors(workload))
    }
    try:
        by_podset = placements(workload, flavors)
        by_rtype = {
            rtype: by_podset.get(podset_name(rtype), Placement()) for rtype in ctl.replica_types(sync.job)
        }
        for rtype, placed in by_rtype.items():
            template = sync.job.replica_specs[rtype].template.to_wire()
            place_pod(template, placed, where=f"spec.{ctl.kind.replica_specs_field}[{rtype}].template")
    except PlacementConflict as err:
        sync.builder.failed(str(err), "AdmissionConflict")
        return
    sync.render.placements = by_rtype
    if sync.builder.admitted():
        cq = ((workload.get("status") or {}).get("admission") or {}).get("clusterQueue")
        sync.writer.event(EventType.NORMAL, "Started", f"Admitted by clusterQueue {cq}")
