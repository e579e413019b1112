"""One reconcile of one job: observe, decide, write. The steps behind `JobController.reconcile()`.

Write order matters and is fixed:
- the ledger (restarts, completed indices) is written before pods are deleted or recreated;
- a terminal condition is written before any cleanup deletes a pod, so a crash in between can never
  make a finished job look unfinished (and rerun its pods);
- the status is written even when creating children failed, with the API server's message in
  `Created=False`, before the reconcile raises to be retried with backoff.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kubetrain.api import CleanPodPolicy, FieldError, JobStatus, TrainingJob
from kubetrain.common.job import gang as gangs
from kubetrain.common.job.children import ChildWriter
from kubetrain.common.job.compare import contains
from kubetrain.common.job.extras import sync_extras
from kubetrain.common.job.facts import Observed, PodFacts
from kubetrain.common.job.gangpolicy import GangStep
from kubetrain.common.job.labels import job_labels
from kubetrain.common.job.ledger import LEDGER_ANNOTATION, Ledger
from kubetrain.common.job.limits import CREATES_PER_RECONCILE
from kubetrain.common.job.observe import JobView
from kubetrain.common.job.policy import (
    ReplicaPlan,
    deadline_exceeded,
    past_backoff_limit,
    pods_to_clean,
    seconds_until,
)
from kubetrain.common.job.render import Renderer
from kubetrain.common.job.report import Reporter
from kubetrain.common.job.services import SERVICE_MODE_ANNOTATION, service_mode_in_use
from kubetrain.common.job.status import StatusBuilder, is_finished, is_succeeded
from kubetrain.common.job.verdict import JobState, Verdict
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import PODS, SERVICES, Obj
from kubetrain.common.reconcile import Result

if TYPE_CHECKING:
    from kubetrain.common.job.contract import JobContract

__all__ = ["JobSync", "reject"]

JobT = TypeVar("JobT", bound=TrainingJob[Any])
Plans = dict[str, ReplicaPlan]


class JobSync(Generic[JobT]):
    """The state of one reconcile of one job; see the module docstring."""

    def __init__(self, ctl: JobContract[JobT], raw: Obj, job: JobT) -> None:
        self.ctl = ctl
        self.raw = raw
        self.now: datetime = ctl.clock.now()
        owner = objects.owner_reference(raw)
        self.writer = ChildWriter(api=ctl.api, recorder=ctl.recorder, expectations=ctl.expectations, job=raw)
        self.builder = _builder(ctl, raw, job.status, self.now)
        self.view = JobView.of(ctl, raw, job)
        self.job = job = _keep_service_mode(ctl, job, self.view.service_names())
        self.render = Renderer(ctl, job, owner, self.writer)
        self.report = Reporter(ctl, raw, job.status)
        self.ledger = Ledger.read(objects.annotations(raw))
        self._job_key = (objects.namespace(raw), objects.name(raw))
        self._unwritten = ctl.unwritten.get(self._job_key, objects.uid(raw)) - self.ledger.created
        self.owner = owner
        self._deleted: set[str] = set()
        self._deleted_services: set[str] = set()
        self.gang = GangStep(self)  # the job's failure policy, if any (kubetrain.common.job.gangpolicy)

    @property
    def finished(self) -> bool:
        return is_finished(self.builder.status)

    # entry points ---------------------------------------------------------------------------------------
    async def invalid(self, errors: Sequence[FieldError]) -> Result:
        """Failed with `<Kind>FailedValidation`; not retried (a spec change enqueues the job again)."""
        self.builder.invalid("; ".join(str(e) for e in errors))
        await self.report.write(self.builder)
        return Result()

    async def run(self) -> Result:
        """A job that is neither finished nor suspended."""
        b = self.builder
        b.resumed()
        b.created()
        b.started()
        plans = self.view.plans(self.ledger, self.now)
        acted = await self.gang.act(plans)
        if acted.result is not None:
            return acted.result
        observed = self.view.observed(plans, self._created)
        stop = acted.failed or self._enforce_limits(plans)
        if not stop:
            self._judge(self.ctl.verdict(self.job, observed), plans, hold=acted.restarting)
        if not self.finished:
            await self._write_ledger(plans)
            await self._converge(plans, observed)
        return self.gang.sooner(await self._conclude(plans, stop_active=stop))

    async def suspend(self) -> Result:
        """Delete every pod, Service and the PodGroup; Suspended=True; completed indices are forgotten."""
        self.builder.suspended()
        return await self.stop()

    async def stop(self) -> Result:
        """Delete every pod, Service and the PodGroup, with no restart counted; completed indices are
        forgotten. The caller has set the condition that says why (Suspended, Queued)."""
        self.builder.no_active(into_succeeded=False)
        await self.report.write(self.builder)
        await self._write_ledger_value(self.ledger.without_succeeded())
        pods = self.view.all_pods()
        await self._delete_pods(pods)
        await self._delete_services(self.view.services_except(()))
        await self._delete_podgroup()
        plans = self.view.plans(self.ledger, self.now)
        await self._sync_extras(self.view.observed(plans, self._created))
        return Result(requeue_after=self.view.terminating_recheck(pods, self.now))

    async def finish(self) -> Result:
        """Clean up a finished job by cleanPodPolicy; delete it once ttlSecondsAfterFinished has passed."""
        b = self.builder
        if is_succeeded(b.status):
            b.no_active(into_succeeded=True)
        b.completed()  # a job finished by another operator may lack completionTime
        await self.report.write(b)
        self.ctl.expectations.forget(self.writer.request)
        policy = self.job.run_policy.clean_pod_policy or CleanPodPolicy.NONE
        pods = self.view.all_pods()
        cleaned = pods_to_clean(policy, pods)
        await self._delete_pods(cleaned)
        if policy is not CleanPodPolicy.NONE:
            kept = {p.name for p in pods if p not in cleaned}
            kept |= {self.job.name} if kept else set()  # the job's Service names the pods kept
            await self._delete_services(self.view.services_except(kept))
        await self._delete_podgroup()
        return await self._expire(self.view.terminating_recheck(cleaned, self.now))

    # deciding ------------------------------------------------------------------------------------------
    def _enforce_limits(self, plans: Plans) -> bool:
        """backoffLimit, then activeDeadlineSeconds: True when one of them failed the job."""
        policy, b = self.job.run_policy, self.builder
        restarts = (
            self.ledger.restarts
            - self.ledger.gang.ignored
            + sum(p.restart_units + p.live_restarts for p in plans.values())
        )
        if past_backoff_limit(policy.backoff_limit, restarts):
            return b.backoff_limit_exceeded()
        if deadline_exceeded(b.status.start_time, policy.active_deadline_seconds, self.now):
            return b.deadline_exceeded()
        return False

    def _judge(self, verdict: Verdict, plans: Plans, *, hold: bool = False) -> None:
        """Conditions from the framework's verdict; Restarting (the template's) wins over Running, and
        `hold` keeps a gang restart's Restarting until it is over."""
        b = self.builder
        restarting = [rtype for rtype, plan in plans.items() if plan.counts.restarting > 0]
        if verdict.state is JobState.FAILED:
            if verdict.message or not verdict.replica_type:
                b.failed(
                    verdict.message or f"{b.kind} {b.namespace}/{b.name} has failed.", verdict.reason_suffix
                )
            else:
                b.failed_replicas(verdict.replica_type, verdict.failed, verdict.reason_suffix)
        elif verdict.state is JobState.SUCCEEDED:
            b.succeeded(verdict.reason_suffix, verdict.message)
        elif restarting:
            b.restarting(restarting[0])
        elif verdict.state is JobState.RUNNING and not hold:
            b.running(verdict.reason_suffix, verdict.message)

    # converging ----------------------------------------------------------------------------------------
    async def _converge(self, plans: Plans, observed: Observed) -> None:
        for plan in plans.values():
            await self._replace(plan)
        await self._delete_pods(self.view.orphans)
        admitted = await self._sync_podgroup()
        if admitted and any(plan.create for plan in plans.values()):
            await self.render.before_pods()
        for rtype, plan in plans.items():
            if admitted and plan.create and self.ctl.ready_to_create(self.job, rtype, observed):
                bodies = (self.render.pod(rtype, index) for index in plan.create)
                await self.writer.create_all(PODS, bodies, expect="pods")
        await self._sync_services()
        await self._sync_extras(observed)

    async def _replace(self, plan: ReplicaPlan) -> None:
        for pod in plan.restart:
            self.report.restarting_pod(self.writer, pod)
            await self.writer.delete(PODS, pod.name, uid=pod.uid, expect="pods")
        for pod in plan.remove:
            await self.writer.delete(PODS, pod.name, uid=pod.uid, expect="pods")
        for pod in plan.force:
            await self.writer.delete(PODS, pod.name, uid=pod.uid, force=True)
            self._deleted.add(pod.name)

    async def _sync_services(self) -> None:
        wanted = self.render.services()
        missing = islice((r for n, r in wanted.items() if n not in self.view.services), CREATES_PER_RECONCILE)
        await self.writer.create_all(SERVICES, (render() for render in missing), expect="services")
        for name, service in sorted(self.view.services.items()):
            if not self.render.keeps(service) and not objects.is_deleting(service):
                await self.writer.delete(SERVICES, name, uid=objects.uid(service), expect="services")

    async def _sync_podgroup(self) -> bool:
        """Create or update the PodGroup; True when pods may be created (Volcano: once it left Pending)."""
        gang = self.ctl.gang
        if gang is None:
            return True
        existing = self.view.podgroup()
        desired = self.render.podgroup(gang, self.raw, existing)
        if existing is None:
            await self.writer.create(gang.resource, desired)
        elif not contains(existing.get("spec"), desired["spec"]):
            await self.writer.patch(gang.resource, objects.name(existing), {"spec": desired["spec"]})
        return gangs.podgroup_admitted(gang, existing)

    async def _sync_extras(self, observed: Observed) -> None:
        labels = job_labels(self.ctl.kind.operator_name, self.job.name, prefix=self.ctl.kind.label_prefix)
        desired = self.ctl.extra_objects(self.job, observed)
        if not desired and not self.ctl.extra_resources:
            return
        made = await sync_extras(
            self.writer,
            desired,
            observed.extras,
            namespace=self.job.namespace,
            owner=self.owner,
            labels=labels,
        )
        new = made - self._created  # recorded with the next ledger write, not with one of its own
        if new:
            self.ctl.unwritten.add(self._job_key, objects.uid(self.raw), new)
            self._unwritten |= new

    # concluding ----------------------------------------------------------------------------------------
    async def _conclude(self, plans: Plans, *, stop_active: bool) -> Result:
        """Write the status (with any creation failure), then clean up, raise, or say when to look again."""
        b = self.builder
        b.replica_statuses({rtype: plan.counts for rtype, plan in plans.items()}, self.view.selectors())
        self.gang.into_status(b)
        failures = self.writer.failures
        if failures:
            b.creation_failed(failures[0].kind, failures[0].message)
        else:
            b.creation_succeeded()
        if is_succeeded(b.status):
            # as finish() will: the replicas still active count as succeeded, in this same status write
            b.no_active(into_succeeded=True)
        await self.report.write(b, children=self.writer)
        self.writer.announce()  # what the Created Event did not tell: one Event per kind
        if self.finished:
            if (
                stop_active
            ):  # backoff or deadline: nothing may keep running (Kubeflow also drops the Services)
                await self._delete_pods([p for p in self.view.all_pods() if not p.phase.terminal])
                await self._delete_services(self.view.services_except(()))
            return await self.finish()
        if failures:
            raise failures[0].error
        due = [seconds_until(b.status.start_time, self.job.run_policy.active_deadline_seconds, self.now)]
        due += [plan.recheck_after for plan in plans.values()]
        return Result(requeue_after=_earliest(due))

    async def _expire(self, recheck: float | None) -> Result:
        ttl = self.job.run_policy.ttl_seconds_after_finished
        remaining = seconds_until(self.builder.status.completion_time, ttl, self.now)
        if remaining is not None and remaining <= 0:
            await self.report.delete_job()
            return Result()
        return Result(requeue_after=_earliest([remaining, recheck]))

    # deleting ------------------------------------------------------------------------------------------
    async def _delete_pods(self, pods: Sequence[PodFacts]) -> None:
        """Delete pods once each; those stuck Terminating are deleted again without grace period."""
        for pod in pods:
            if pod.name in self._deleted:
                continue
            if not pod.deleting:
                await self.writer.delete(PODS, pod.name, uid=pod.uid)
            elif self.view.stuck(pod, self.now):
                await self.writer.delete(PODS, pod.name, uid=pod.uid, force=True)
            self._deleted.add(pod.name)

    async def _delete_services(self, names: Sequence[str]) -> None:
        for name in names:
            service = self.view.services[name]
            if not objects.is_deleting(service) and name not in self._deleted_services:
                await self.writer.delete(SERVICES, name, uid=objects.uid(service))
                self._deleted_services.add(name)

    async def _delete_podgroup(self) -> None:
        podgroup, gang = self.view.podgroup(), self.ctl.gang
        if gang is not None and podgroup is not None and not objects.is_deleting(podgroup):
            await self.writer.delete(gang.resource, objects.name(podgroup), uid=objects.uid(podgroup))

    # the ledger ----------------------------------------------------------------------------------------
    async def _write_ledger(self, plans: Plans) -> None:
        """Restarts with the UIDs they count, started and succeeded indices: all in one write, before any
        pod is deleted or recreated, so that a failed or repeated write never counts a pod twice."""
        ledger = self.ledger.with_restarts(sum(plan.restart_units for plan in plans.values()))
        ledger = ledger.with_counted(uid for plan in plans.values() for uid in plan.counted)
        for rtype, plan in plans.items():
            ledger = ledger.with_succeeded(rtype, plan.succeeded_indices)
            ledger = ledger.with_started(rtype, plan.started_indices)
        await self._write_ledger_value(ledger)

    @property
    def _created(self) -> frozenset[str]:
        return self.ledger.created | self._unwritten

    async def _write_ledger_value(self, ledger: Ledger) -> None:
        if ledger.render() != self.ledger.render():
            for key in self._unwritten:  # a write is due anyway: it carries the unwritten creations too
                ledger = ledger.with_created(key)
            await self.report.patch_metadata({"annotations": {LEDGER_ANNOTATION: ledger.render()}})
            self.ledger, self._unwritten = ledger, frozenset()
            self.ctl.unwritten.forget(self._job_key)


async def reject(
    ctl: JobContract[Any], raw: Obj, message: str, *, suffix: str = "FailedValidation"
) -> Result:
    """A job the model cannot parse, or whose hooks keep raising: Failed with `<Kind><suffix>`; no retry."""
    status = _parse_status(raw)
    builder = _builder(ctl, raw, status, ctl.clock.now())
    builder.failed(message, suffix)
    await Reporter(ctl, raw, status).write(builder)
    return Result()


def _builder(ctl: JobContract[Any], raw: Obj, status: JobStatus | None, now: datetime) -> StatusBuilder:
    # Timestamps are written with whole seconds, as Kubernetes does; sub-second noise would churn status.
    return StatusBuilder(
        kind=ctl.kind.kind,
        namespace=objects.namespace(raw),
        name=objects.name(raw),
        status=status,
        now=now.replace(microsecond=0),
    )


def _parse_status(raw: Obj) -> JobStatus | None:
    try:
        return JobStatus.model_validate(raw.get("status") or {})
    except ValueError:
        return None


def _earliest(delays: Sequence[float | None]) -> float | None:
    return min((d for d in delays if d is not None), default=None)


def _keep_service_mode(ctl: JobContract[JobT], job: JobT, services: set[str]) -> JobT:
    """`job`, its service-mode annotation set (in memory only) to the mode its existing Services show."""
    in_use = service_mode_in_use(job.name, services)
    if in_use is None or in_use not in ctl.service_modes or ctl.service_mode_of(job) is in_use:
        return job
    annotations = {**(job.metadata.annotations or {}), SERVICE_MODE_ANNOTATION: in_use.value}
    return job.model_copy(update={"metadata": job.metadata.model_copy(update={"annotations": annotations})})
