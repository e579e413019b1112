"""Never act on a job the cache shows older than our own last write to it.

The job informer and the pod informer are separate streams: right after the operator writes a job's
status (say, Succeeded), a pod event can trigger a reconcile while the cache still holds the job as it
was before that write. Acting on that stale view would recreate the pods of a job that has just finished
(the Kubeflow bug of completed jobs rerunning). So the controller remembers the resourceVersion each of
its own writes produced, and the versions it knows to be older: the one its first write was based on
(every write is conditional on it) and those of its own earlier writes. A reconcile whose cached job
shows one of those older versions waits for the watch event, which is on its way: no request needed.
Only a cached version the fence has never seen (someone else wrote, before or after us: versions are
opaque and cannot be ordered) costs one GET to tell which. When the cache has caught up (or someone
else changed the job since), the record is dropped.

The watch event of our own write (its echo) shows the job exactly as that write left it, which the
reconcile that wrote it has already acted on: `own_echo` tells the job's event handler to let it pass
without a reconcile (a no-op one per status or ledger write otherwise), unless a reconcile has been put
off waiting for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubetrain.common.errors import NotFound
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.reconcile import Request

__all__ = ["WriteFence"]


@dataclass(frozen=True, slots=True)
class _Written:
    latest: str
    older: frozenset[str]
    """Versions known to precede `latest`: what the first write was based on, and our earlier writes."""


class WriteFence:
    """The resourceVersions of our last write per job, until the cache has shown them."""

    def __init__(self) -> None:
        self._written: dict[Request, _Written] = {}
        self._waiting: set[Request] = set()
        """Jobs whose reconcile was put off until the cache shows our write: its echo must enqueue them."""

    def wrote(self, request: Request, resource_version: str, *, based_on: str = "") -> None:
        """Our write to the job, conditional on version `based_on`, produced `resource_version`."""
        if not resource_version:
            return
        before = self._written.get(request)
        older = before.older | {before.latest} if before is not None else frozenset()
        self._written[request] = _Written(resource_version, older | ({based_on} if based_on else set()))

    def forget(self, request: Request) -> None:
        self._written.pop(request, None)
        self._waiting.discard(request)

    def own_echo(self, request: Request, resource_version: str) -> bool:
        """True when `resource_version` is one our own writes produced and no reconcile waits for it: the
        watch event carrying it tells the controller nothing it did not decide itself."""
        written = self._written.get(request)
        if written is None or request in self._waiting:
            return False
        return resource_version == written.latest or resource_version in written.older

    async def caught_up(self, api: ApiClient, resource: Resource, request: Request, cached: Obj) -> bool:
        """False when the API server holds a newer job than `cached` since our last write."""
        written = self._written.get(request)
        cached_version = objects.resource_version(cached)
        if written is None or written.latest == cached_version:
            self.forget(request)
            return True
        if cached_version in written.older:
            self._waiting.add(request)
            return False
        try:
            current = await api.get(resource, request.namespace, request.name)
        except NotFound:
            self.forget(request)
            return False
        if objects.resource_version(current) != cached_version:
            self._waiting.add(request)
            return False
        self.forget(request)  # the cache shows the latest version: someone wrote after us
        return True
