"""The few cluster-scoped Kueue and scheduling objects a queued job needs, read when needed and kept a
short while: ResourceFlavors (where admitted pods go), WorkloadPriorityClasses and PriorityClasses (the
priority of a new Workload). They change rarely and are few, so a minute-long memory costs nothing and
saves a read per job; no informer is needed for them, and none is started on a cluster without Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubetrain.common.clock import Clock
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.kueue.names import PRIORITY_CLASS_LABEL, PRIORITY_CLASSES, WORKLOAD_PRIORITY_CLASSES
from kubetrain.common.kueue.workload import Priority

__all__ = ["ClusterObjects", "resolve_priority"]

TTL = 60.0
"""Seconds an object read is reused."""


class ClusterObjects:
    """Cluster-scoped objects by resource and name, read through `api` and kept `ttl` seconds."""

    def __init__(self, api: ApiClient, clock: Clock, ttl: float = TTL) -> None:
        self._api = api
        self._clock = clock
        self._ttl = ttl
        self._kept: dict[tuple[Resource, str], tuple[float, Any]] = {}

    async def get(self, resource: Resource, name: str) -> Obj:
        """The object (NotFound and other ApiErrors propagate, and are not kept)."""
        found = self._fresh((resource, name))
        if found is None:
            found = await self._api.get(resource, None, name)
            self._kept[(resource, name)] = (self._clock.monotonic(), found)
        return dict(found)

    async def list(self, resource: Resource) -> list[Obj]:
        found = self._fresh((resource, ""))
        if found is None:
            found = (await self._api.list(resource, managed_fields=False)).items
            self._kept[(resource, "")] = (self._clock.monotonic(), found)
        return list(found)

    def _fresh(self, key: tuple[Resource, str]) -> Any:
        kept = self._kept.get(key)
        if kept is None or self._clock.monotonic() - kept[0] > self._ttl:
            return None
        return kept[1]


async def resolve_priority(objects: ClusterObjects, labels: Mapping[str, str], class_name: str) -> Priority:
    """The Workload's priority as Kueue resolves it (`jobframework.ExtractPriority`): the job's
    WorkloadPriorityClass label first, else the pod PriorityClass `class_name`, else the cluster's global
    default PriorityClass (the lowest, if several), else 0."""
    wpc = labels.get(PRIORITY_CLASS_LABEL)
    if wpc:
        found = await objects.get(WORKLOAD_PRIORITY_CLASSES, wpc)
        return Priority(int(found.get("value") or 0), "kueue.x-k8s.io", "WorkloadPriorityClass", wpc)
    if class_name:
        found = await objects.get(PRIORITY_CLASSES, class_name)
        return Priority(int(found.get("value") or 0), "scheduling.k8s.io", "PriorityClass", class_name)
    defaults = [pc for pc in await objects.list(PRIORITY_CLASSES) if pc.get("globalDefault")]
    if not defaults:
        return Priority(0)
    lowest = min(defaults, key=lambda pc: int(pc.get("value") or 0))
    name = str((lowest.get("metadata") or {}).get("name"))
    return Priority(int(lowest.get("value") or 0), "scheduling.k8s.io", "PriorityClass", name)
