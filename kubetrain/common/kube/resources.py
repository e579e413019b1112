"""Names of the API resources we touch, as values: group, version, plural, kind, scope.

A `Resource` is all the client needs to build a URL, so our CRDs and third-party ones (Volcano,
scheduler-plugins PodGroups) are built from the same class as Pods. Objects themselves stay plain
JSON dicts (`Obj`); only our own CRDs are parsed into pydantic models, by the job layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, final

__all__ = [
    "CONFIGMAPS",
    "EVENTS",
    "HPAS",
    "JOBS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "SCHED_PODGROUPS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "VOLCANO_PODGROUPS",
    "Obj",
    "Resource",
]

Obj = dict[str, Any]
"""A Kubernetes object as decoded JSON. Objects read from a cache are shared: treat them as read-only."""


@final
@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: `group` is "" for the core API; `plural` is the URL segment."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """The `apiVersion` of the objects: "v1" for core, else "group/version"."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path; `namespace=None` (or a cluster-scoped resource) gives the cluster-wide collection."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


PODS = Resource("", "v1", "pods", "Pod")
SERVICES = Resource("", "v1", "services", "Service")
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
EVENTS = Resource("", "v1", "events", "Event")
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
JOBS = Resource("batch", "v1", "jobs", "Job")
HPAS = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
VOLCANO_PODGROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
SCHED_PODGROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
