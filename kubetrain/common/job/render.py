"""The desired children of one job: pods, headless Services and the PodGroup, with the framework's hooks.

Pure apart from Events for the two Kubeflow warnings (a template restartPolicy or schedulerName that
the operator overrides or keeps).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kubetrain.api import RestartPolicy, TrainingJob
from kubetrain.common.events import EventType
from kubetrain.common.job import gang as gangs
from kubetrain.common.job.children import ChildWriter
from kubetrain.common.job.containers import main_container
from kubetrain.common.job.inplace import with_restart_rule
from kubetrain.common.job.labels import (
    job_labels,
    label_key,
    replica_index,
    replica_labels,
    replica_name,
)
from kubetrain.common.job.pods import desired_pod
from kubetrain.common.job.services import ServiceMode, desired_service, job_service, service_ports
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import Obj
from kubetrain.common.kueue.placement import Placement, place_pod
from kubetrain.common.progress.inject import opted_out

if TYPE_CHECKING:
    from kubetrain.common.job.contract import JobContract

__all__ = ["Renderer"]

JobT = TypeVar("JobT", bound=TrainingJob[Any])


class Renderer(Generic[JobT]):
    """Builds the desired children of `job`, owned by `owner` (an ownerReference to the job)."""

    def __init__(self, ctl: JobContract[JobT], job: JobT, owner: Obj, writer: ChildWriter) -> None:
        self._ctl = ctl
        self._job = job
        self._owner = owner
        self._writer = writer
        self._operator = ctl.kind.operator_name
        self._prefix = ctl.kind.label_prefix
        self._templates: dict[str, Obj] = {}  # each replica type's template, in wire form, read once
        self.placements: Mapping[str, Placement] = {}
        """Where Kueue's admission puts each replica type's pods (`kubetrain.common.job.queueing`)."""
        self.restart_rules: Mapping[str, Obj] = {}
        """Per replica type, the `RestartAllContainers` rule of its main container, for a job whose gang
        restarts in place (`kubetrain.common.job.gangcascade`)."""

    def _template(self, rtype: str) -> Obj:
        if rtype not in self._templates:
            self._templates[rtype] = self._job.replica_specs[rtype].template.to_wire()
        return self._templates[rtype]

    def pod(self, rtype: str, index: int) -> Obj:
        """The pod of replica `rtype`/`index`, after the framework's `configure_pod`."""
        job, spec = self._job, self._job.replica_specs[rtype]
        master = self._ctl.is_master(job, rtype, index)
        pod, warning = desired_pod(
            template=self._template(rtype),
            name=replica_name(job.name, rtype, index),
            namespace=job.namespace,
            labels=replica_labels(self._operator, job.name, rtype, index, master=master, prefix=self._prefix),
            owner=self._owner,
            restart_policy=spec.restart_policy or RestartPolicy.NEVER,
        )
        if warning:
            self._writer.event(EventType.WARNING, "SetPodTemplateRestartPolicy", warning)
        if rtype in self.placements:
            where = f"spec.{self._ctl.kind.replica_specs_field}[{rtype}].template"
            place_pod(pod, self.placements[rtype], where=where)
        if self._ctl.service_mode_of(job) is ServiceMode.JOB and self._ctl.wants_service(job, rtype):
            pod["spec"]["hostname"] = pod["metadata"]["name"]  # `{pod}.{job}` under the job's Service
            pod["spec"]["subdomain"] = job.name
        if self._ctl.gang is not None:
            other = gangs.decorate_pod(self._ctl.gang, pod, job_name=job.name, rtype=rtype)
            if other:
                self._writer.event(EventType.WARNING, "SetPodTemplateSchedulerName", other)
        pod = self._ctl.configure_pod(job, rtype, index, pod)
        main = main_container(pod, self._ctl.kind)
        if rtype in self.restart_rules and main is not None:
            pod = with_restart_rule(pod, main, dict(self.restart_rules[rtype]))
        injection = self._ctl.progress
        if injection is None or opted_out(job.metadata.annotations):
            return pod
        info = self._ctl.kind
        return injection.apply(pod, api_version=info.api_version, plural=info.plural, namespace=job.namespace,
                               name=job.name)  # fmt: skip

    async def before_pods(self) -> None:
        """What must exist before the job's pods are created: the progress CA ConfigMap they mount."""
        injection, job = self._ctl.progress, self._job
        if injection is not None and not opted_out(job.metadata.annotations):
            await injection.prepare(job.namespace)

    def services(self) -> dict[str, Callable[[], Obj]]:
        """The Services the job wants, by name, each with the function that renders its body (called only
        for the missing ones, a batch at a time): the job's own, or one per replica, by `service_mode_of`."""
        job, wanted = self._job, {}
        rtypes = [t for t in self._ctl.replica_types(job) if self._ctl.wants_service(job, t)]
        if self._ctl.service_mode_of(job) is ServiceMode.JOB:
            return {job.name: self._job_service} if rtypes else {}
        for rtype in rtypes:
            for index in range(job.replica_specs[rtype].replicas or 0):
                wanted[replica_name(job.name, rtype, index)] = _bind(self.service, rtype, index)
        return wanted

    def keeps(self, service: Obj) -> bool:
        """Whether an existing Service of the job may stay although not wanted: the job's own, or a present
        replica's, whatever the mode. So a job that began under the other mode (an operator whose mode
        changed, a job adopted from Kubeflow's operator) keeps the names its running pods use. Read from
        the Service's labels: no reconcile lists every replica name twice."""
        job, name = self._job, objects.name(service)
        if name == job.name:
            return True
        labels = objects.labels(service)
        index = replica_index(labels, prefix=self._prefix)
        shown = labels.get(label_key("replica-type", self._prefix))
        rtype = next((t for t in job.replica_specs if t.lower() == shown), None)
        if rtype is None or index is None:
            return False
        return index < (job.replica_specs[rtype].replicas or 0) and name == replica_name(
            job.name, rtype, index
        )

    def service(self, rtype: str, index: int) -> Obj:
        """The headless Service of replica `rtype`/`index`, named like its pod."""
        job = self._job
        spec = job.replica_specs[rtype]
        ports = service_ports(spec.template.spec.to_wire(), self._ctl.kind.default_container_name)
        return desired_service(
            name=replica_name(job.name, rtype, index),
            namespace=job.namespace,
            labels=replica_labels(self._operator, job.name, rtype, index, prefix=self._prefix),
            owner=self._owner,
            ports=ports,
        )

    def _job_service(self) -> Obj:
        name = self._job.name
        labels = job_labels(self._operator, name, prefix=self._prefix)
        return job_service(name=name, namespace=self._job.namespace, labels=labels, owner=self._owner)

    def podgroup(self, gang: gangs.GangScheduling, raw_job: Mapping[str, Any], existing: Obj | None) -> Obj:
        """The job's PodGroup for `gang`."""
        job = self._job
        policy = job.run_policy.scheduling_policy
        sized = [(spec.replicas or 0, spec.template.spec.to_wire()) for spec in self._specs()]
        total = sum(replicas for replicas, _ in sized)
        together = sum(self._ctl.gang_members(job, rtype) for rtype in self._ctl.replica_types(job))
        # minResources covers every pod by default, also those the gang does not wait for (they come later)
        return gangs.render_podgroup(
            gang,
            job=raw_job,
            owner=self._owner,
            policy=policy,
            members=gangs.min_member(policy, together),
            resources=gangs.min_resources(sized, gangs.min_member(policy, total)),
            labels=job_labels(self._operator, job.name, prefix=self._prefix),
            existing=existing,
        )

    def _specs(self) -> list[Any]:
        return [self._job.replica_specs[t] for t in self._ctl.replica_types(self._job)]


def _bind(render: Callable[[str, int], Obj], rtype: str, index: int) -> Callable[[], Obj]:
    return lambda: render(rtype, index)
