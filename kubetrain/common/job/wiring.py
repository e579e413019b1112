"""Connecting a JobController to the cache: which informers it needs and which events enqueue which job.

The job's own changes enqueue the job, except the echo of the operator's own write (a status or ledger patch
whose resulting version the write fence knows): the reconcile that wrote it has acted on that state already,
so a reconcile for it would decide nothing new. Changes of the objects it controls (pods, Services,
PodGroups, extra objects) enqueue their controlling job, and, for replica pods and Services, tell the
expectations what the cache has now seen: an object appearing is an observed creation; an object starting to
terminate, or vanishing without having been seen terminating, is an observed deletion (once per object). A
child's change may enqueue its job after a delay (`child_event_delay`; the operator's default 0.25 s, the
library's 0), so that the changes of a job's pods within it cost one reconcile and one status write; a
change that completes the job's expectations (the pods its last reconcile created or deleted) enqueues it at
once, so that slow-start batches and replacements do not wait.
Owned-object informers are scoped by the `operator-name` label, so the operator caches its own pods,
not every pod of the cluster; the controllers of all kinds share them (`Manager.labelled_informer`: one
informer of pods for every kind, selecting `operator-name in (...)`). Each kind's handler is added routed
to its kind (`controlled_by`), so the informer tells it only of the objects its kind controls, having
looked up the owner once per event for all kinds; the handler still checks the owner itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kubetrain.common.controller import Controller
from kubetrain.common.events import EventRecorder
from kubetrain.common.expectations import Expectations
from kubetrain.common.handlers import for_controller_owner
from kubetrain.common.job.fence import WriteFence
from kubetrain.common.job.labels import KUBEFLOW_PREFIX, is_template_child, label_key
from kubetrain.common.kube import objects
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import PODS, SERVICES, Obj, Resource
from kubetrain.common.manager import Manager
from kubetrain.common.reconcile import Request

if TYPE_CHECKING:
    from kubetrain.common.job.controller import JobController
    from kubetrain.common.job.gang import GangScheduling
    from kubetrain.common.kueue import KueueIntegration

__all__ = ["JobHandler", "OwnedObjectHandler", "add_job_controller", "watch_job_resources"]

_EXPECTATION_KINDS = {PODS: "pods", SERVICES: "services"}
"""The expectation kinds the template raises (see `sync.JobSync`), by the resource they are about."""


class JobHandler:
    """Informer handler for the jobs themselves: enqueue the job on each change but our own writes' echoes."""

    def __init__(self, controller: Controller, fence: WriteFence) -> None:
        self._controller = controller
        self._fence = fence

    def on_add(self, obj: Obj) -> None:
        self._controller.enqueue(objects.request_for(obj))

    def on_update(self, old: Obj, new: Obj) -> None:
        request = objects.request_for(new)
        if not self._fence.own_echo(request, objects.resource_version(new)):
            self._controller.enqueue(request)

    def on_delete(self, obj: Obj) -> None:
        self._controller.enqueue(objects.request_for(obj))


class OwnedObjectHandler:
    """Informer handler for objects controlled by jobs of one kind: enqueue the job, observe expectations."""

    def __init__(
        self,
        controller: Controller,
        expectations: Expectations,
        *,
        kind: str,
        group: str,
        expect: str | None,
        delay: float = 0.0,
        prefix: str = KUBEFLOW_PREFIX,
    ) -> None:
        """`prefix`: the label prefix of the kind (`KindInfo.label_prefix`)."""
        self._controller = controller
        self._prefix = prefix
        self._delay = delay
        self._expectations = expectations
        self._owner = for_controller_owner(kind, group)
        self._expect = expect
        self._terminating: set[str] = set()

    def on_add(self, obj: Obj) -> None:
        template_child = is_template_child(obj, prefix=self._prefix)
        for job in self._owner(obj):
            if self._expect and template_child:
                self._expectations.creation_observed(job, self._expect)
                if objects.is_deleting(obj):
                    self._deleting(obj)
            self._enqueue(job, observed=bool(self._expect) and template_child)

    def on_update(self, old: Obj, new: Obj) -> None:
        jobs = {*self._owner(old), *self._owner(new)}
        if not jobs:  # another kind's (the informer is shared): none of its bookkeeping is ours
            return
        started_deleting = objects.is_deleting(new) and not objects.is_deleting(old)
        if self._expect and started_deleting and is_template_child(new, prefix=self._prefix):
            self._deleting(new)
        for job in jobs:
            self._enqueue(job, observed=started_deleting)

    def on_delete(self, obj: Obj) -> None:
        jobs = tuple(self._owner(obj))
        if not jobs:
            return
        if (
            self._expect
            and is_template_child(obj, prefix=self._prefix)
            and objects.uid(obj) not in self._terminating
        ):
            self._deleting(obj)
        self._terminating.discard(objects.uid(obj))
        for job in jobs:
            self._enqueue(job, observed=True)

    def _enqueue(self, job: Request, *, observed: bool) -> None:
        """At once when this event completes what the job's reconcile waits for (its expectations: the
        next batch of pods goes out without delay), else after the delay, merged with the job's other
        children's changes within it."""
        at_once = observed and self._expectations.satisfied(job)
        self._controller.enqueue(job, 0.0 if at_once else self._delay)

    def _deleting(self, obj: Obj) -> None:
        uid = objects.uid(obj)
        if uid in self._terminating:
            return
        self._terminating.add(uid)
        for job in self._owner(obj):
            self._expectations.deletion_observed(job, self._expect or "")


def watch_job_resources(
    controller: Controller,
    job_controller: JobController[Any],
    informers: Mapping[Resource, Informer],
    *,
    child_event_delay: float = 0.0,
) -> None:
    """Feed `controller` from `informers` (one per `job_controller.resources()`).

    A change of an owned object enqueues its job after `child_event_delay` seconds, so that the changes
    of a job's pods within that window (a gang starting, a batch created) cost one reconcile, not one each.
    """
    job_resource = job_controller.job_resource()
    controller.observe(informers[job_resource], JobHandler(controller, job_controller.fence))
    for resource in job_controller.resources():
        if resource == job_resource:
            continue
        handler = OwnedObjectHandler(
            controller,
            job_controller.expectations,
            kind=job_controller.kind.kind,
            group=job_controller.kind.group,
            expect=_EXPECTATION_KINDS.get(resource),
            delay=child_event_delay,
            prefix=job_controller.kind.label_prefix,
        )
        kind = job_controller.kind
        controller.observe(informers[resource], handler, controlled_by=(kind.group, kind.kind))


def add_job_controller(
    manager: Manager,
    cls: type[JobController[Any]],
    *,
    recorder: EventRecorder,
    workers: int = 1,
    gang: GangScheduling | None = None,
    kueue: KueueIntegration | None = None,
    child_event_delay: float = 0.0,
    **options: Any,
) -> JobController[Any]:
    """Build `cls` on the manager's client, clock, metrics and shared informers, and run it there.

    `options` go to the JobController (e.g. `terminating_timeout`). With `kueue` managing the kind, the
    job's Workloads are watched too (those with the kind's operator-name label: the ones it makes). The
    controller is named `<singular>-controller`, e.g. `tfjob-controller`.
    """
    key, value = label_key("operator-name", cls.kind.label_prefix), cls.kind.operator_name
    job_resource = cls.job_resource()
    informers = {
        res: manager.informer(res)
        if res == job_resource
        else manager.labelled_informer(res, key=key, value=value)
        for res in cls.resources_for(gang, kueue)
    }
    job_controller = cls(
        api=manager.api,
        cache={res: informer.store for res, informer in informers.items()},
        clock=manager.clock,
        recorder=recorder,
        metrics=manager.metrics,
        gang=gang,
        kueue=kueue,
        **options,
    )
    controller = manager.controller(f"{cls.kind.singular}-controller", job_controller, workers=workers)
    watch_job_resources(controller, job_controller, informers, child_event_delay=child_event_delay)
    return job_controller
