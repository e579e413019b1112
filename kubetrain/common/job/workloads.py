"""The Workload of a job queued through kubetrain's Kueue integration: found in the informer cache, made in
Kueue's shape (or taken over from Kueue's own integration), moved with its job to another LocalQueue, and
its status patched (`kubetrain.common.kueue.wlstatus` says what). The steps of `queueing` use these.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kubetrain.api import TrainingJob
from kubetrain.common.errors import AlreadyExists
from kubetrain.common.events import EventType
from kubetrain.common.job.compare import contains
from kubetrain.common.job.labels import label_key
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kube.store import INDEX_CONTROLLER_UID
from kubetrain.common.kueue.decide import is_true
from kubetrain.common.kueue.lookup import resolve_priority
from kubetrain.common.kueue.names import QUOTA_RESERVED, RESOURCE_IN_USE, WORKLOADS, workload_name
from kubetrain.common.kueue.workload import PodSetSource, build_workload, priority_class_name, render_podsets

if TYPE_CHECKING:
    from kubetrain.common.job.contract import JobContract
    from kubetrain.common.job.sync import JobSync

__all__ = ["cached_workload", "create", "follow_job", "name_of", "patch_status", "podsets_of"]

log = logging.getLogger(__name__)


def cached_workload(ctl: JobContract[Any], raw: Obj) -> Obj | None:
    name = name_of(ctl, raw)
    found = ctl.cache[WORKLOADS].by_index(INDEX_CONTROLLER_UID, objects.uid(raw))
    return next((w for w in found if objects.name(w) == name), None)


def name_of(ctl: JobContract[Any], raw: Obj) -> str:
    return workload_name(
        kind=ctl.kind.kind, group=ctl.kind.group, job_name=objects.name(raw), job_uid=objects.uid(raw)
    )


def podsets_of(ctl: JobContract[Any], sync: JobSync[Any]) -> list[PodSetSource]:
    job: TrainingJob[Any] = sync.job
    specs = (sync.raw.get("spec") or {}).get(ctl.kind.replica_specs_field) or {}
    return [
        PodSetSource(
            rtype, job.replica_specs[rtype].replicas or 0, (specs.get(rtype) or {}).get("template") or {}
        )
        for rtype in ctl.podset_types(job)
    ]


async def create(ctl: JobContract[Any], sync: JobSync[Any], queue: str) -> bool:
    """Create the job's Workload; False when one made by another integration is there already."""
    raw, podsets = sync.raw, podsets_of(ctl, sync)
    assert ctl.queueing is not None
    priority = await resolve_priority(
        ctl.queueing.objects, objects.labels(raw), priority_class_name(raw, podsets)
    )
    operator = {label_key("operator-name", ctl.kind.label_prefix): ctl.kind.operator_name}
    body = build_workload(name=name_of(ctl, raw), raw_job=raw, owner=sync.owner, queue=queue, podsets=podsets,
                          priority=priority, labels=operator)  # fmt: skip
    try:
        await ctl.api.create(WORKLOADS, objects.namespace(raw), body, read_back=False)
    except AlreadyExists:
        existing = await ctl.api.get(WORKLOADS, objects.namespace(raw), name_of(ctl, raw))
        if all(objects.labels(existing).get(k) == v for k, v in operator.items()):
            return True  # ours: the cache had not caught up
        if await _adopt(ctl, sync, existing, operator):
            return True
        ctl.queueing.foreign[objects.request_for(raw)] = objects.uid(raw)
        told = f"Workload {objects.name(existing)} was made by Kueue's own integration; leaving the job to it"
        sync.writer.event(EventType.NORMAL, "WorkloadOfKueue", told)
        return False
    sync.writer.event(
        EventType.NORMAL, "CreatedWorkload", f"Created Workload: {objects.namespace(raw)}/{name_of(ctl, raw)}"
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
    # Kueue's integrations put their finalizer on a Workload and take it off when the job finishes or goes;
    # kubetrain's Workloads have none (the garbage collector deletes them with their job), so neither
    # does one it takes over: no integration would be left to take it off.
    kept = [f for f in existing["metadata"].get("finalizers") or () if f != RESOURCE_IN_USE]
    patch = {"metadata": {"resourceVersion": objects.resource_version(existing), "labels": labels,
                          "finalizers": kept or None}}  # fmt: skip
    await ctl.api.patch(
        WORKLOADS, objects.namespace(existing), objects.name(existing), patch, read_back=False
    )
    told = f"Took over Workload {objects.name(existing)}, made by Kueue's own integration of this kind before"
    sync.writer.event(EventType.NORMAL, "AdoptedWorkload", told)
    return True


async def follow_job(ctl: JobContract[Any], sync: JobSync[Any], workload: Obj, queue: str) -> None:
    """A queued job moved to another LocalQueue, or whose replicas or templates changed: its Workload
    follows, as Kueue's integrations update a Workload that holds no quota yet. Once Kueue reserved quota
    for it the Workload is left as it is (the admission policy keeps an admitted job's counts)."""
    if is_true(workload, QUOTA_RESERVED):
        return
    spec = workload.get("spec") or {}
    desired = render_podsets(podsets_of(ctl, sync))
    change: Obj = {}
    if spec.get("queueName") != queue:
        change["queueName"] = queue
    if not contains(spec.get("podSets"), desired):
        change["podSets"] = desired
    if change:
        patch = {"metadata": {"resourceVersion": objects.resource_version(workload)}, "spec": change}
        name = objects.name(workload)
        await ctl.api.patch(WORKLOADS, objects.namespace(workload), name, patch, read_back=False)
        log.info("%s: Workload %s follows the job (%s)", sync.writer.request, name, ", ".join(sorted(change)))


async def patch_status(ctl: JobContract[Any], workload: Obj, patch: Obj | None) -> Obj | None:
    """Apply a `wlstatus` patch; the Workload as it is afterwards (None when there was nothing to do)."""
    if patch is None:
        return None
    stored = await ctl.api.patch(
        WORKLOADS, objects.namespace(workload), objects.name(workload), patch, subresource="status"
    )
    return stored
