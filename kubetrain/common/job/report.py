"""Writes to the job object itself (status, ledger annotation, TTL deletion) and reports what changed.

Status is sent as a JSON merge patch of the `status` subresource holding only what changed, and only
when something changed: an unchanged job, finished ones included, is never written, so a finished job
cannot loop. Every write carries the resourceVersion the decision was based on: if the job changed
meanwhile (a stale cache, another writer), the server answers 409 and the reconcile is retried on
fresh data instead of overwriting a newer status with an older view (e.g. a Succeeded job with a late
pod event). Nothing is lost: the status is recomputed from the cluster on every reconcile.

The status write that finishes a job (Succeeded or Failed) also carries the job's last training-progress
report, when one waits to be written (`ProgressInjection.reports`), replacing `trainerStatus` whole: no
reader ever sees the job finished with an older progress.

Each condition transition becomes one Event (the `Created` one also names the children its reconcile
created) and, for Created/Succeeded/Failed, one increment of the
Kubeflow job counters `training_operator_jobs_*_total{job_namespace, framework}`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubetrain.api import ConditionStatus, JobConditionType, JobStatus, TrainerStatus
from kubetrain.common.events import EventType
from kubetrain.common.job.children import ChildWriter
from kubetrain.common.job.compare import merge_diff
from kubetrain.common.job.facts import PodFacts
from kubetrain.common.job.status import StatusBuilder, Transition, condition
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.progress.coalesce import JobKey

if TYPE_CHECKING:
    from kubetrain.common.job.contract import JobContract

__all__ = ["Reporter"]

_WARNINGS = {JobConditionType.RESTARTING, JobConditionType.FAILED}
_VERDICTS = {JobConditionType.SUCCEEDED, JobConditionType.FAILED}


class Reporter:
    """The job-object writer of one reconcile."""

    def __init__(self, ctl: JobContract[Any], raw: Obj, status: JobStatus | None) -> None:
        self._ctl = ctl
        self._raw = raw
        self._namespace = objects.namespace(raw)
        self._name = objects.name(raw)
        self._rv = objects.resource_version(raw)
        self._status = status
        """The status as last written (or read): frozen, so an unchanged builder still holds this object."""
        self._written: Obj | None = None
        """Its wire form, made when first needed."""
        self._had_created = condition(status, JobConditionType.CREATED) is not None
        self._reported = 0
        self._final: TrainerStatus | None = None
        """The job's last progress report, once a write of this reconcile has finished the job."""

    async def write(self, builder: StatusBuilder, *, children: ChildWriter | None = None) -> None:
        """Patch the status if it differs from the last written one, then report its transitions.

        `children`: the reconcile's writer; a `Created` transition's Event also names what it created."""
        if builder.status is not self._status:  # else nothing changed, and there is nothing to compare
            written = self._written if self._written is not None else _wire(self._status)
            final = self._final_progress(builder)
            self._final = final or self._final  # later writes of this reconcile keep it
            status = builder.status
            if self._final is not None:
                status = status.model_copy(update={"trainer_status": self._final})
            new = status.to_wire()
            if new != written:
                patch = {"metadata": {"resourceVersion": self._rv}, "status": merge_diff(written, new)}
                stored = await self._ctl.api.patch(
                    self._ctl.job_resource(),
                    self._namespace,
                    self._name,
                    patch,
                    subresource="status",
                    read_back=False,  # only its resourceVersion is read
                )
                self._stored(stored)
                self._progress_written(final)
            self._status, self._written = builder.status, new
        for transition in builder.transitions[self._reported :]:
            self._report(transition, children)
        self._reported = len(builder.transitions)

    def _final_progress(self, builder: StatusBuilder) -> TrainerStatus | None:
        """The job's waiting progress report, when this write finishes the job (else None)."""
        reports = self._ctl.progress.reports if self._ctl.progress is not None else None
        finishing = any(
            t.type in _VERDICTS and t.status is ConditionStatus.TRUE
            for t in builder.transitions[self._reported :]
        )
        if reports is None or not finishing:
            return None
        return reports.pending(self._progress_key())

    def _progress_written(self, final: TrainerStatus | None) -> None:
        progress = self._ctl.progress
        if final is not None and progress is not None and progress.reports is not None:
            progress.reports.written(self._progress_key(), final)

    def _progress_key(self) -> JobKey:
        return JobKey(self._ctl.kind, self._namespace, self._name)

    async def patch_metadata(self, metadata: Obj) -> None:
        """Merge-patch the job's metadata (the ledger annotation), based on the version we read."""
        patch = {"metadata": {**metadata, "resourceVersion": self._rv}}
        stored = await self._ctl.api.patch(self._ctl.job_resource(), self._namespace, self._name, patch)
        self._stored(stored)

    def _stored(self, stored: Obj) -> None:
        based_on, self._rv = self._rv, objects.resource_version(stored) or self._rv
        self._ctl.fence.wrote(objects.request_for(self._raw), self._rv, based_on=based_on)

    async def delete_job(self) -> None:
        """ttlSecondsAfterFinished has passed: delete the job (its children go by garbage collection)."""
        await self._ctl.api.delete(
            self._ctl.job_resource(),
            self._namespace,
            self._name,
            uid_precondition=objects.uid(self._raw) or None,
        )
        self._event(EventType.NORMAL, "SuccessfulDeleteJob", f"Deleted job: {self._name}")
        self._count("jobs_deleted")

    def restarting_pod(self, writer: ChildWriter, pod: PodFacts) -> None:
        """A failed pod is about to be replaced: say why, and count the restart."""
        if pod.exit_code is not None:
            message = f"Pod: {self._namespace}.{pod.name} exited with code {pod.exit_code}"
            writer.event(EventType.NORMAL, "ExitedWithCode", message)
        self._count("jobs_restarted")

    def _report(self, transition: Transition, children: ChildWriter | None) -> None:
        if transition.type is JobConditionType.CREATE_FAILED:
            return  # the FailedCreate<Kind> Event was recorded by the writer
        warning = transition.type in _WARNINGS and transition.status is ConditionStatus.TRUE
        message = transition.message
        if transition.type is JobConditionType.CREATED and children is not None:
            # one Event for a new job and the children it got, where Kubeflow sends one per object
            told = children.summary()
            message = f"{message} Created {told}." if told else message
        self._event(EventType.WARNING if warning else EventType.NORMAL, transition.reason, message)
        if transition.status is not ConditionStatus.TRUE:
            return
        if transition.type is JobConditionType.CREATED and not self._had_created:
            self._had_created = True
            self._count("jobs_created")
        elif transition.type is JobConditionType.SUCCEEDED:
            self._count("jobs_successful")
        elif transition.type is JobConditionType.FAILED:
            self._count("jobs_failed")

    def _event(self, event_type: EventType, reason: str, message: str) -> None:
        self._ctl.recorder.record(self._raw, event_type, reason, message)

    def _count(self, counter: str) -> None:
        metrics = self._ctl.metrics
        if metrics is not None:
            getattr(metrics, counter).labels(self._namespace, self._ctl.framework).inc()


def _wire(status: JobStatus | None) -> Obj:
    return status.to_wire() if status is not None else {}
