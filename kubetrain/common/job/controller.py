"""JobController[JobT]: the reconcile template of every replica-based training job.

A framework is a subclass that states its identity (`kind`, a `KindInfo`; `framework`, the metrics
label) and overrides a few pure, synchronous, typed hooks. It never overrides `reconcile()`, which
reads as the list of steps every kind shares:

1. get the job from the informer cache; skip it if it is gone, being deleted, or managed by another
   controller (`runPolicy.managedBy`, e.g. Kueue MultiKueue), or if the cache has not yet caught up with
   our own last write to it (`fence.WriteFence`);
2. parse it, apply defaults in memory and validate it (an invalid job gets `Failed/<Kind>FailedValidation`);
   the parsed and defaulted spec is reused while the spec is unchanged (`parsed.ParsedJobs`);
3. finished (Succeeded/Failed)? clean up by cleanPodPolicy, then delete the job once its TTL expires;
4. suspended? delete pods, Services and the PodGroup; condition Suspended;
5. otherwise, when the cache has caught up with our own writes (expectations): enforce backoffLimit and
   activeDeadlineSeconds, replace failed pods, create what is missing, delete what is surplus, ask the
   framework for its verdict, and patch the status if it changed;
6. return the next moment something is due (deadline, TTL, a stuck pod) as `requeue_after`.

The steps themselves live in `sync.JobSync`, one instance per reconcile.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar, cast, final

from pydantic import ValidationError

from kubetrain.api import FieldError, KindInfo, TrainingJob, apply_defaults, validate
from kubetrain.api.wire_errors import from_validation_error
from kubetrain.common.clock import Clock
from kubetrain.common.errors import ApiError, Conflict, TerminalError
from kubetrain.common.events import EventRecorder
from kubetrain.common.expectations import DEFAULT_EXPECTATIONS_TTL, Expectations
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.job.crash import ErrorBudget, failing_hook
from kubetrain.common.job.extras import ExtraObject
from kubetrain.common.job.facts import Observed
from kubetrain.common.job.failurepolicy import FAILURE_POLICY_ANNOTATION, policy_errors
from kubetrain.common.job.fence import WriteFence
from kubetrain.common.job.gang import GangScheduling
from kubetrain.common.job.labels import replica_name
from kubetrain.common.job.ledger import Unwritten
from kubetrain.common.job.limits import oversized
from kubetrain.common.job.parsed import ParsedJobs
from kubetrain.common.job.policy import DEFAULT_TERMINATING_TIMEOUT
from kubetrain.common.job.queueing import Queueing, admission, after_run, finished, hold
from kubetrain.common.job.restartmode import GangRestartChooser
from kubetrain.common.job.services import SERVICE_MODE_ANNOTATION, ServiceMode, replica_address
from kubetrain.common.job.sync import JobSync, reject
from kubetrain.common.job.verdict import Verdict, default_verdict
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import PODS, SERVICES, Obj, Resource
from kubetrain.common.kube.store import Store
from kubetrain.common.kueue import WORKLOADS, KueueIntegration
from kubetrain.common.metrics import SKIP_MANAGED_BY, Metrics
from kubetrain.common.progress.inject import ProgressInjection
from kubetrain.common.reconcile import Request, Result

__all__ = ["CONFLICT_RETRY", "JobController", "JobT"]

log = logging.getLogger(__name__)

CONFLICT_RETRY = 1.0
"""Seconds before a job whose write hit a 409 Conflict is looked at again, if no watch event comes first."""

JobT = TypeVar("JobT", bound=TrainingJob[Any])


class JobController(Generic[JobT]):
    """The template. Subclasses set `kind` and `framework` and may override the hooks below."""

    kind: ClassVar[KindInfo]
    """Identity of the job kind: group/version/plural, replica types in order, default container and port,
    label values, managedBy values. `kind.model` parses the job."""
    framework: ClassVar[str]
    """Value of the `framework` label of the job metrics, e.g. `tensorflow`."""
    extra_resources: ClassVar[tuple[Resource, ...]] = ()
    """Resources of the objects `extra_objects` returns; owned objects of these are observed and synced."""
    service_modes: ClassVar[tuple[ServiceMode, ...]] = (ServiceMode.REPLICA, ServiceMode.JOB)
    """The `ServiceMode`s the kind supports, the one it falls back to first (the mpi-operator's MPIJob,
    for one, only ever had the job's Service)."""
    podset_order: ClassVar[tuple[str, ...] | None] = None
    """The order of the replica types in the job's Kueue Workload, when it is not `kind.replica_types`: that
    of Kueue's own integration of the kind, so that both make the same Workload."""

    def __init__(
        self,
        *,
        api: ApiClient,
        cache: Mapping[Resource, Store],
        clock: Clock,
        recorder: EventRecorder,
        metrics: Metrics | None = None,
        expectations: Expectations | None = None,
        gang: GangScheduling | None = None,
        terminating_timeout: float = DEFAULT_TERMINATING_TIMEOUT,
        service_mode: ServiceMode | None = None,
        progress: ProgressInjection | None = None,
        kueue: KueueIntegration | None = None,
        gang_restart: GangRestartMode = GangRestartMode.AUTO,
    ) -> None:
        """`cache` holds an informer store for each of `resources()`; `gang` enables gang scheduling;
        `service_mode` picks how pods get DNS names, among the kind's `service_modes` (else its first);
        `progress` gives new pods the env and volume to report training progress to the operator; `kueue`
        admits the queued jobs of the kinds it manages through Kueue (`kubetrain.common.job.queueing`);
        `gang_restart` says how the gangs of new jobs with a failure policy restart (`restartmode`)."""
        missing = [str(r) for r in self.resources_for(gang, kueue) if r not in cache]
        if missing:
            raise ValueError(f"{type(self).__name__} needs cached stores of: {', '.join(missing)}")
        self.api = api
        self.cache = cache
        self.clock = clock
        self.recorder = recorder
        self.metrics = metrics
        self.expectations = expectations if expectations is not None else Expectations(clock)
        self.gang = gang
        self.terminating_timeout = terminating_timeout
        self.service_mode = service_mode if service_mode in self.service_modes else self.service_modes[0]
        self.progress = progress
        self.queueing = (
            Queueing(kueue, api=api, clock=clock) if kueue is not None and kueue.manages(self.kind) else None
        )
        self.gang_restart = GangRestartChooser(gang_restart, api, clock)
        self.fence = WriteFence()
        self.unwritten = Unwritten()
        self.parsed: ParsedJobs[JobT] = ParsedJobs(cast("type[JobT]", self.kind.model), clock)
        """Each job's spec, parsed and defaulted, reused while unchanged (`kubetrain.common.job.parsed`)."""
        self._checked: dict[
            Request, tuple[tuple[str, int, tuple[str | None, str | None]], list[FieldError]]
        ] = {}
        """`job_errors` of each job, by its uid, generation, service-mode and failure-policy annotations."""
        self.errors = ErrorBudget()
        """Unexpected errors of each job in a row: after `errors.attempts`, the job fails naming the error."""
        if metrics is not None:  # the family exists before the first error, so alerts on its rate work
            metrics.hook_errors.labels(self.framework, "reconcile")

    # identity -----------------------------------------------------------------------------------------
    @classmethod
    def job_resource(cls) -> Resource:
        """The REST resource of the job kind itself."""
        return Resource(cls.kind.group, cls.kind.version, cls.kind.plural, cls.kind.kind)

    @classmethod
    def resources_for(
        cls, gang: GangScheduling | None = None, kueue: KueueIntegration | None = None
    ) -> tuple[Resource, ...]:
        """Every resource this controller reads from a cache (and so must watch), the job kind first."""
        podgroups = (gang.resource,) if gang is not None else ()
        workloads = (WORKLOADS,) if kueue is not None and kueue.manages(cls.kind) else ()
        # dict.fromkeys: an extra resource may also be one of the template's (e.g. a Service of the job)
        owned = (PODS, SERVICES, *podgroups, *workloads, *cls.extra_resources)
        return tuple(dict.fromkeys((cls.job_resource(), *owned)))

    def resources(self) -> tuple[Resource, ...]:
        return self.resources_for(self.gang, self.queueing.integration if self.queueing else None)

    def service_mode_of(self, job: JobT) -> ServiceMode:
        """The job's `kubetrain.io/service-mode` when it names one of the kind's modes, else `service_mode`.
        (The template sets it, in memory, to the mode the job's existing Services show.)"""
        chosen = (job.metadata.annotations or {}).get(SERVICE_MODE_ANNOTATION)
        return ServiceMode(chosen) if chosen in self.service_modes else self.service_mode

    def replica_address(self, job: JobT, rtype: str, index: int) -> str:
        """The DNS name, relative to the job's namespace, by which replica `rtype`/`index` is reached
        (`{pod}` or `{pod}.{job}`, by `service_mode_of`): what env such as TF_CONFIG or MASTER_ADDR names."""
        return replica_address(job.name, replica_name(job.name, rtype, index), self.service_mode_of(job))

    def replica_types(self, job: JobT) -> list[str]:
        """The job's replica types in the kind's order (creation and status order)."""
        present = job.replica_specs
        return [t for t in self.kind.replica_types if t in present] + sorted(
            t for t in present if t not in self.kind.replica_types
        )

    def podset_types(self, job: JobT) -> list[str]:
        """The job's replica types in the order of its Kueue Workload's pod sets (`podset_order`)."""
        order = self.podset_order or self.kind.replica_types
        present = self.replica_types(job)
        return [t for t in order if t in present] + [t for t in present if t not in order]

    # hooks: pure, synchronous, no I/O ------------------------------------------------------------------
    def default(self, job: JobT) -> JobT:
        """The job with defaults applied (in memory only). Default: `kubetrain.api.apply_defaults` with
        `self.kind` (replicas, restart policies, the default port, cleanPodPolicy, suspend); override it
        to add your kind's own defaults to `super().default(job)`. Called when the job's spec, labels or
        annotations change; the reconciles in between reuse the spec it returned (`self.parsed`), unless it
        also changed the metadata or status."""
        return apply_defaults(job, kind=self.kind)

    def validate(self, job: JobT) -> Sequence[FieldError]:
        """Problems of the defaulted job; any problem fails the job. Default: `kubetrain.api.validate`
        with `self.kind` (names, replica types known and required, counts, containers, ports, owned env);
        override it to add your kind's rules to `super().validate(job)`."""
        return validate(job, kind=self.kind)

    def configure_pod(self, job: JobT, rtype: str, index: int, pod: Obj) -> Obj:
        """Framework specifics of one pod (env, init containers, volumes). `pod` is a fresh dict: change
        and return it. Name, labels, owner, restartPolicy and gang fields are already set."""
        return pod

    def verdict(self, job: JobT, observed: Observed) -> Verdict:
        """The framework's success rule. Default: `default_verdict` (all replicas are peers)."""
        return default_verdict(observed.replicas, self.replica_types(job))

    def is_master(self, job: JobT, rtype: str, index: int) -> bool:
        """Whether the pod gets `training.kubeflow.org/job-role=master`. Default: the kind's master types."""
        return rtype in self.kind.master_types

    def wants_service(self, job: JobT, rtype: str) -> bool:
        """Whether the replicas of `rtype` get DNS names (a Service each, or their hostname and subdomain
        under the job's Service, by `service_mode`). Default: yes."""
        return True

    def ready_to_create(self, job: JobT, rtype: str, observed: Observed) -> bool:
        """Whether the missing pods of `rtype` may be created now (e.g. an MPI launcher waiting for its
        workers to be Ready). Default: always."""
        return True

    def gang_members(self, job: JobT, rtype: str) -> int:
        """How many pods of `rtype` the PodGroup's default minMember counts: those that must be placed
        together. A type whose pods are created only once others run (an MPI launcher waiting for Ready
        workers) must count 0, or the gang never forms. Default: every replica."""
        return job.replica_specs[rtype].replicas or 0

    def restarts_with_gang(self, job: JobT, rtype: str) -> bool:
        """Whether the pods of `rtype` must restart when the gang restarts in place: an in-place gang
        restart waits for them (`kubetrain.common.job.gangcascade`). Default: every type."""
        return True

    def extra_objects(self, job: JobT, observed: Observed) -> Sequence[ExtraObject]:
        """Other objects the job needs while running or suspended (of `extra_resources`). Default: none."""
        return ()

    # the template ---------------------------------------------------------------------------------------
    @final
    async def reconcile(self, request: Request) -> Result:
        try:
            result = await self._reconcile(request)
        except (ApiError, TerminalError):  # the server's answer, or a decision: the queue handles them
            raise
        except Exception as err:  # a bug in a hook or a step: retried, then shown on the job
            return await self._unexpected(request, err)
        self.errors.forget(request)
        return result

    async def _unexpected(self, request: Request, err: Exception) -> Result:
        hook = failing_hook(err, self)
        if self.metrics is not None:
            self.metrics.hook_errors.labels(self.framework, hook).inc()
        raw = self.cache[self.job_resource()].get(request.namespace, request.name)
        if not self.errors.failed(request) or raw is None:
            raise err  # retried with the queue's backoff; the controller logs the traceback
        if _finished(raw):  # its outcome stands; a watch event of the job brings it back
            log.error("%s raised on finished %s; leaving it as it is", hook, request, exc_info=err)
            return Result()
        log.error("%s raised on %s %d times in a row: failing the job", hook, request, self.errors.attempts,
                  exc_info=err)  # fmt: skip
        message = (
            f"{hook} raised {type(err).__name__}: {err} ({self.errors.attempts} tries; the operator's log "
            "has the traceback)"
        )
        return await reject(self, raw, message, suffix="ReconcileError")

    async def _reconcile(self, request: Request) -> Result:
        raw = self.cache[self.job_resource()].get(request.namespace, request.name)
        if raw is None:
            self.expectations.forget(request)
            self.parsed.forget(request)
            self.fence.forget(request)
            self.unwritten.forget((request.namespace, request.name))
            self._checked.pop(request, None)
            if self.queueing is not None:
                self.queueing.forget(request)
            return Result()
        if objects.is_deleting(raw):
            return Result()
        if (other := self._other_manager(raw)) is not None:
            return self._leave_alone(request, other)
        if not await self.fence.caught_up(self.api, self.job_resource(), request, raw):
            return Result(requeue_after=CONFLICT_RETRY)  # the newer job's watch event is on its way
        try:
            job = self.parsed.job(request, raw, self.default)  # default() runs when the spec is new
        except ValidationError as err:
            return await reject(
                self, raw, "; ".join(str(e) for e in from_validation_error(err, self.kind.model))
            )
        sync = JobSync(self, raw, job)
        try:
            return await self._sync(request, sync)
        except Conflict:
            # The job changed since the cache showed it (often: the cache has not caught up with our own
            # last write). Its watch event re-enqueues it at once; the delay is only a safety net.
            log.debug("%s changed meanwhile; looking again with fresh data", request)
            return Result(requeue_after=CONFLICT_RETRY)
        finally:
            sync.writer.announce()  # children created on a path that told no one, an error's included

    @final
    def job_errors(self, job: JobT) -> list[FieldError]:
        """Every rule the operator fails a defaulted job for (`<Kind>FailedValidation`), and the only place
        such rules are applied: `kubetrain submit`, `run --local` and `TrainingClient` call this too
        (`kubetrain.controllers.checks`), so a job they accept is never failed here for its spec.

        The rules read the spec, the name and the service-mode annotation: a stored job's answer is kept
        until its generation (bumped by every spec change) or that annotation changes, so that the
        reconciles of an unchanged job (each status change costs one) do not check it again."""
        meta = job.metadata
        notes = meta.annotations or {}
        read = (notes.get(SERVICE_MODE_ANNOTATION), notes.get(FAILURE_POLICY_ANNOTATION))
        key = (meta.uid or "", meta.generation or 0, read)
        request = Request(meta.namespace or "", meta.name or "")
        known = self._checked.get(request)
        if known is not None and known[0] == key:
            return list(known[1])
        errors = oversized(self.kind, job) or self._mode_errors(job) or list(self.validate(job))
        errors += policy_errors(meta.annotations, self.replica_types(job))
        if key[0] and key[1]:  # a stored job (a job checked before submission has neither)
            self._checked[request] = (key, errors)
        return list(errors)

    async def _sync(self, request: Request, sync: JobSync[JobT]) -> Result:
        errors = self.job_errors(sync.job)
        if errors:
            return await sync.invalid(errors)
        gate = await admission(self, sync)  # None: not queued through kubetrain's Kueue integration
        if sync.finished:
            self.parsed.forget(request)  # rarely reconciled again: keep no parsed spec for it
            if gate is not None:
                await finished(self, sync, gate)
            return await sync.finish()
        if gate is not None and not gate.admitted:
            return await hold(self, sync, gate)
        if gate is None and sync.job.run_policy.suspend:  # under kubetrain's Kueue integration, Kueue's
            return await sync.suspend()  # Workload is the switch, as `suspend` is under Kueue's own
        if not self.expectations.satisfied(request):
            return Result(requeue_after=DEFAULT_EXPECTATIONS_TTL)  # our own writes will enqueue us sooner
        result = await sync.run()
        if gate is not None:
            await after_run(self, sync, gate)
        return result

    def _mode_errors(self, job: JobT) -> list[FieldError]:
        chosen = (job.metadata.annotations or {}).get(SERVICE_MODE_ANNOTATION)
        if chosen is None or chosen in self.service_modes:
            return []
        modes = " or ".join(f"'{m}'" for m in self.service_modes)
        return [
            FieldError(
                f"metadata.annotations[{SERVICE_MODE_ANNOTATION}]",
                f"is {chosen!r}, not a service mode of {self.kind.kind}",
                f"write {modes}, or remove the annotation to use the operator's --service-mode",
            )
        ]

    def _other_manager(self, raw: Obj) -> str | None:
        """The controller a job names in `runPolicy.managedBy` when it is not us (e.g. Kueue MultiKueue)."""
        managed_by = ((raw.get("spec") or {}).get("runPolicy") or {}).get("managedBy")
        return None if managed_by in (None, "", self.kind.controller_name) else str(managed_by)

    def _leave_alone(self, request: Request, manager: str) -> Result:
        """Another controller's job: neither its pods nor its status are ours. Logged and counted, so that
        "left alone" is something one can see, not only the absence of pods."""
        log.debug("%s is managed by %s; leaving it alone", request, manager)
        if self.metrics is not None:
            self.metrics.jobs_skipped.labels(request.namespace, self.framework, SKIP_MANAGED_BY).inc()
        return Result()


def _finished(raw: Obj) -> bool:
    conditions = (raw.get("status") or {}).get("conditions") or []
    return any(c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True" for c in conditions)
