"""What the cache shows about one job: its pods, Services, PodGroup and extra objects, grouped for deciding.

Children are found through the cache's controller-uid index, so only objects this job controls count.
Pods and Services labelled with a replica index are the template's (one per replica), and so is the
Service named like the job (`ServiceMode.JOB`); other owned objects of the same resources belong to the
framework's `extra_objects`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from kubetrain.api import RestartPolicy, TrainingJob
from kubetrain.common.job.facts import Observed, PodFacts
from kubetrain.common.job.labels import is_template_child, job_labels, label_key
from kubetrain.common.job.ledger import Ledger
from kubetrain.common.job.policy import ReplicaPlan, is_stuck, plan_replica
from kubetrain.common.kube import objects
from kubetrain.common.kube.resources import PODS, SERVICES, Obj, Resource
from kubetrain.common.kube.store import INDEX_CONTROLLER_UID

if TYPE_CHECKING:
    from kubetrain.common.job.contract import JobContract

__all__ = ["JobView"]


class JobView:
    """A snapshot of one job's children, taken from the cache at the start of a reconcile."""

    def __init__(self, ctl: JobContract[Any], job: TrainingJob[Any], uid: str) -> None:
        self._ctl = ctl
        self._job = job
        self._timeout = ctl.terminating_timeout
        self.rtypes: list[str] = ctl.replica_types(job)
        by_lower = {t.lower(): t for t in self.rtypes}
        self.pods: dict[str, list[PodFacts]] = {t: [] for t in self.rtypes}
        self.orphans: list[PodFacts] = []
        """Replica pods of replica types the job no longer has."""
        main, prefix = ctl.kind.default_container_name, ctl.kind.label_prefix
        for pod in _owned(ctl, PODS, uid):
            if not _is_replica(pod, prefix):
                continue
            facts = PodFacts.of(pod, main_container=main, prefix=prefix)
            rtype = by_lower.get(objects.labels(pod).get(label_key("replica-type", prefix), ""))
            (self.pods[rtype] if rtype is not None else self.orphans).append(facts)
        self.services: dict[str, Obj] = {
            objects.name(s): s for s in _owned(ctl, SERVICES, uid) if is_template_child(s, prefix=prefix)
        }
        self._podgroup = next(iter(_owned(ctl, ctl.gang.resource, uid)), None) if ctl.gang else None
        self.extras: dict[Resource, dict[str, Obj]] = {
            res: {objects.name(o): o for o in _owned(ctl, res, uid) if not _template_child(res, o, prefix)}
            for res in ctl.extra_resources
        }

    @classmethod
    def of(cls, ctl: JobContract[Any], raw: Obj, job: TrainingJob[Any]) -> JobView:
        return cls(ctl, job, objects.uid(raw))

    def plans(self, ledger: Ledger, now: datetime) -> dict[str, ReplicaPlan]:
        """The restart/create/delete plan of every replica type, in the kind's order."""
        plans = {}
        for rtype in self.rtypes:
            spec = self._job.replica_specs[rtype]
            plans[rtype] = plan_replica(
                replicas=spec.replicas or 0,
                policy=spec.restart_policy or RestartPolicy.NEVER,
                pods=self.pods[rtype],
                now=now,
                terminating_timeout=self._timeout,
                succeeded_before=ledger.indices(rtype),
                started_before=ledger.started_indices(rtype),
                counted_before=ledger.counted,
            )
        return plans

    def observed(self, plans: Mapping[str, ReplicaPlan], created: frozenset[str] = frozenset()) -> Observed:
        extras = {res: MappingProxyType(dict(by_name)) for res, by_name in self.extras.items()}
        return Observed(
            replicas=MappingProxyType({rtype: plan.counts for rtype, plan in plans.items()}),
            extras=MappingProxyType(extras),
            created=created,
        )

    def selectors(self) -> dict[str, dict[str, str]]:
        """The label selector of each replica type's pods (for `replicaStatuses`)."""
        prefix = self._ctl.kind.label_prefix
        base = job_labels(self._ctl.kind.operator_name, self._job.name, prefix=prefix)
        return {rtype: {**base, label_key("replica-type", prefix): rtype.lower()} for rtype in self.rtypes}

    def all_pods(self) -> list[PodFacts]:
        return [*(p for pods in self.pods.values() for p in pods), *self.orphans]

    def podgroup(self) -> Obj | None:
        return self._podgroup

    def service_names(self) -> set[str]:
        return set(self.services)

    def services_except(self, kept: Iterable[str]) -> list[str]:
        """Names of the replica Services, but those in `kept`."""
        keep = set(kept)
        return sorted(name for name in self.services if name not in keep)

    def stuck(self, pod: PodFacts, now: datetime) -> bool:
        return is_stuck(pod, now, self._timeout)

    def terminating_recheck(self, pods: Sequence[PodFacts], now: datetime) -> float | None:
        """Seconds until the first of `pods` that is Terminating (but not stuck yet) becomes stuck."""
        waits = [
            (p.deletion - now).total_seconds() + self._timeout
            for p in pods
            if p.deletion is not None and not self.stuck(p, now)
        ]
        return max(min(waits), 0.0) if waits else None


def _owned(ctl: JobContract[Any], resource: Resource, uid: str) -> list[Obj]:
    return ctl.cache[resource].by_index(INDEX_CONTROLLER_UID, uid)


def _is_replica(obj: Obj, prefix: str) -> bool:
    return label_key("replica-index", prefix) in objects.labels(obj)


def _template_child(resource: Resource, obj: Obj, prefix: str) -> bool:
    # an HPA or ConfigMap may be named like its job: only a Service so named is the template's
    return is_template_child(obj, prefix=prefix) if resource == SERVICES else _is_replica(obj, prefix)
