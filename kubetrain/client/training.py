"""`TrainingClient`: create, read, wait for, read the logs of, and delete every kind of training job.

The method names follow the Kubeflow v1 SDK (`create_job`, `get_job`, `list_jobs`,
`wait_for_job_conditions`, `get_job_pods`, `get_job_logs`, `delete_job`) so that its users feel at home;
what differs: jobs are validated by `kubetrain.api` before anything is sent, results are typed models,
the kind is found by name when not given (several kinds with that name: `AmbiguousJobError`), and every
failure is one of the named errors of `kubetrain.client.errors`, whose message says what to do.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator
from typing import Literal, overload

from kubernetes.client import CoreV1Event, V1DeleteOptions, V1Pod
from kubernetes.client.exceptions import ApiException

from kubetrain.api import AnyJob, FieldError, InvalidJobError, KindInfo, TrainerStatus, kind_info
from kubetrain.client.creating import describe, plan
from kubetrain.client.errors import (
    CRDNotInstalledError,
    JobExistsError,
    JobNotFoundError,
    NamespaceNotFoundError,
    PartialSubmitError,
    TrainingClientError,
)
from kubetrain.client.jobs import JobSource, read_jobs
from kubetrain.client.kinds import resolve_kinds
from kubetrain.client.kube import access_error, invalid_job, is_missing_resource
from kubetrain.client.logs import LogLine
from kubetrain.client.pods import follow_logs, job_selector, read_logs, sort_pods
from kubetrain.client.reading import JobReader, KindArg, Obj
from kubetrain.client.waiting import Waiter, check_expected

__all__ = ["TrainingClient"]


class TrainingClient(JobReader):
    """A client of one cluster.

    `TrainingClient(kubeconfig=None, context=None, namespace=None, *, request_timeout=30.0)`: the kubeconfig
    and context as kubectl finds them; `namespace` defaults to the context's (else `default`).
    """

    def __enter__(self) -> TrainingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ create
    def create_job(self, job: JobSource, namespace: str | None = None) -> AnyJob:
        """Validate and create one job; returns it as stored. The source must hold exactly one job."""
        jobs = read_jobs(job)
        if len(jobs) != 1:
            fix = "use create_jobs() (CLI: `kubetrain submit`) for several"
            raise InvalidJobError([FieldError("", f"holds {len(jobs)} jobs; create_job takes one", fix)])
        return self.create_jobs(jobs, namespace)[0]

    def create_jobs(
        self, jobs: Iterable[JobSource], namespace: str | None = None, *, dry_run: bool = False
    ) -> list[AnyJob]:
        """Validate every job, dry-run every create on the server, and only then create them all.

        So a bad job, a name that is taken or a missing permission creates nothing; only a change on the
        server between the dry run and the creates can leave some created (`PartialSubmitError`).
        `dry_run=True` stops after the server's dry run and returns the jobs as the server would store them.
        """
        loaded = [job for source in jobs for job in read_jobs(source)]
        targets = plan(loaded, namespace, self.namespace)
        checked = [self._post(job, target, dry_run=True) for job, target in targets]
        if dry_run:
            return checked
        created: list[AnyJob] = []
        for job, target in targets:
            try:
                created.append(self._post(job, target, dry_run=False))
            except TrainingClientError as error:
                if not created:
                    raise
                raise PartialSubmitError([describe(j) for j in created], describe(job), error) from None
        return created

    def _post(self, job: AnyJob, namespace: str, *, dry_run: bool) -> AnyJob:
        info = kind_info(job)
        body = job.to_wire()
        body.setdefault("metadata", {})["namespace"] = namespace
        try:
            stored = self._call(
                lambda: self._custom.create_namespaced_custom_object(
                    info.group,
                    info.version,
                    namespace,
                    info.plural,
                    body,
                    dry_run="All" if dry_run else None,
                    field_validation="Strict",
                    _request_timeout=self._timeout,
                )
            )
        except ApiException as error:
            raise self._create_error(error, info, job, namespace) from None
        return self._parse(stored)

    def _create_error(self, error: ApiException, info: KindInfo, job: AnyJob, namespace: str) -> Exception:
        if error.status == 409:
            return JobExistsError(info.kind, job.name or str(job.metadata.generate_name), namespace)
        if error.status in (400, 422):
            return invalid_job(error, describe(job))
        if is_missing_resource(error):
            return CRDNotInstalledError([info.kind])
        if error.status == 404:
            return NamespaceNotFoundError(namespace)
        return access_error(error, self._conn.server)

    # ------------------------------------------------------------------ read
    def get_job(self, name: str, kind: KindArg = None, namespace: str | None = None) -> AnyJob:
        """The job named `name` (of `kind`, or of whichever kind has one)."""
        return self._parse(self._find(name, kind, namespace)[1])

    def get_job_progress(
        self, name: str, kind: KindArg = None, namespace: str | None = None
    ) -> TrainerStatus | None:
        """The trainer's latest report (`status.trainerStatus`: percentage, ETA, metrics), or None."""
        job = self.get_job(name, kind, namespace)
        return job.status.trainer_status if job.status is not None else None

    def list_jobs(
        self, kind: KindArg = None, namespace: str | None = None, all_namespaces: bool = False
    ) -> list[AnyJob]:
        """Every job of `kind` (default: all kinds) in the namespace, or in all namespaces."""
        kinds = resolve_kinds(kind)
        objects: list[Obj] = []
        missing: list[str] = []
        for info in kinds:
            try:
                objects.extend(self._list(info, None if all_namespaces else namespace or self.namespace))
            except CRDNotInstalledError:
                missing.append(info.kind)
        if len(missing) == len(kinds):
            raise CRDNotInstalledError(missing)
        jobs = [self._parse(obj) for obj in objects]
        return sorted(jobs, key=lambda job: (job.namespace, job.name, job.kind))

    # ------------------------------------------------------------------ wait
    def wait_for_job_conditions(
        self,
        name: str,
        kind: KindArg = None,
        namespace: str | None = None,
        *,
        expected: Collection[str] = ("Succeeded",),
        timeout: float = 600.0,
        polling_interval: float = 15.0,
        callback: Callable[[AnyJob], None] | None = None,
    ) -> AnyJob:
        """Block until one of `expected` is a True condition of the job; returns the job then.

        Raises `JobFailedError` when the job fails (unless Failed is expected), `WaitTimeoutError` after
        `timeout` seconds, `JobNotFoundError` if the job is (or gets) deleted. Changes are watched; the job
        is read again at least every `polling_interval` seconds. `callback` sees every new version.
        """
        wanted = check_expected(expected)
        info, obj = self._find(name, kind, namespace)
        waiter = Waiter(self._custom, info, obj, call=self._call, parse=self._parse, server=self._conn.server)
        return waiter.run(wanted, timeout=timeout, polling_interval=polling_interval, callback=callback)

    # ------------------------------------------------------------------ pods, logs, events
    def get_job_pods(
        self,
        name: str,
        kind: KindArg = None,
        namespace: str | None = None,
        *,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> list[V1Pod]:
        """The job's pods (optionally of one replica type and index), in replica order."""
        info, obj = self._find(name, kind, namespace)
        return self._pods(info, obj, replica_type, replica_index)

    def _pods(self, info: KindInfo, obj: Obj, rtype: str | None, index: int | None) -> list[V1Pod]:
        meta = obj.get("metadata") or {}
        selector = job_selector(info, str(meta.get("name")), rtype, index)
        try:
            pods = self._call(
                lambda: self._core.list_namespaced_pod(
                    str(meta.get("namespace")), label_selector=selector, _request_timeout=self._timeout
                )
            )
        except ApiException as error:
            raise access_error(error, self._conn.server) from None
        return sort_pods(info, pods.items or [])

    @overload
    def get_job_logs(
        self,
        name: str,
        kind: KindArg = ...,
        namespace: str | None = ...,
        *,
        replica_type: str | None = ...,
        replica_index: int | None = ...,
        follow: Literal[False] = ...,
        container: str | None = ...,
    ) -> dict[str, str]: ...

    @overload
    def get_job_logs(
        self,
        name: str,
        kind: KindArg = ...,
        namespace: str | None = ...,
        *,
        replica_type: str | None = ...,
        replica_index: int | None = ...,
        follow: Literal[True],
        container: str | None = ...,
    ) -> Iterator[LogLine]: ...

    @overload
    def get_job_logs(
        self,
        name: str,
        kind: KindArg = ...,
        namespace: str | None = ...,
        *,
        replica_type: str | None = ...,
        replica_index: int | None = ...,
        follow: bool,
        container: str | None = ...,
    ) -> dict[str, str] | Iterator[LogLine]: ...

    def get_job_logs(
        self,
        name: str,
        kind: KindArg = None,
        namespace: str | None = None,
        *,
        replica_type: str | None = None,
        replica_index: int | None = None,
        follow: bool = False,
        container: str | None = None,
    ) -> dict[str, str] | Iterator[LogLine]:
        """Logs per pod (`{pod name: text}`, replica order); with `follow=True`, an iterator of `LogLine`s
        of every selected pod merged as they come (each pod waited for until it starts)."""
        info, obj = self._find(name, kind, namespace)
        pods = self._pods(info, obj, replica_type, replica_index)
        job = str((obj.get("metadata") or {}).get("name"))
        if follow:
            return follow_logs(self._core, info, job, pods, container)
        return self._call(lambda: read_logs(self._core, info, job, pods, container))

    def get_job_events(
        self, name: str, kind: KindArg = None, namespace: str | None = None
    ) -> list[CoreV1Event]:
        """The Kubernetes Events about the job itself, oldest first."""
        info, obj = self._find(name, kind, namespace)
        meta = obj.get("metadata") or {}
        selector = f"involvedObject.name={meta.get('name')},involvedObject.kind={info.kind}"
        try:
            events = self._call(
                lambda: self._core.list_namespaced_event(
                    str(meta.get("namespace")), field_selector=selector, _request_timeout=self._timeout
                )
            )
        except ApiException as error:
            raise access_error(error, self._conn.server) from None
        return sorted(events.items or [], key=_event_time)

    # ------------------------------------------------------------------ delete
    def delete_job(
        self,
        name: str,
        kind: KindArg = None,
        namespace: str | None = None,
        *,
        propagation_policy: Literal["Background", "Foreground", "Orphan"] = "Background",
    ) -> AnyJob:
        """Delete the job; its pods and Services go with it (garbage collection, `propagation_policy`).

        Returns the job as it was just before (its kind tells which one was found)."""
        info, obj = self._find(name, kind, namespace)
        job = self._parse(obj)
        target = str((obj.get("metadata") or {}).get("namespace"))
        options = V1DeleteOptions(propagation_policy=propagation_policy)
        try:
            self._call(
                lambda: self._custom.delete_namespaced_custom_object(
                    info.group,
                    info.version,
                    target,
                    info.plural,
                    name,
                    body=options,
                    _request_timeout=self._timeout,
                )
            )
        except ApiException as error:
            if error.status == 404:
                raise JobNotFoundError(name, target, [info.kind]) from None
            raise access_error(error, self._conn.server) from None
        return job


def _event_time(event: CoreV1Event) -> float:
    when = event.last_timestamp or event.event_time or event.first_timestamp
    return when.timestamp() if when is not None else 0.0
