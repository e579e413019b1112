"""The seam between the operator and the API server: a Protocol over the few verbs we use.

Production uses `KubeApiClient` (kubetrain.common.kube.rest); component tests use the dumb
`InMemoryApiClient` (kubetrain.common.kube.fake). Both raise the same `kubetrain.common.errors` types.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, final

from kubetrain.common.kube.resources import Obj, Resource

__all__ = [
    "DEFAULT_FIELD_MANAGER",
    "ApiClient",
    "JsonPatch",
    "LabelSelector",
    "ObjectList",
    "PatchType",
    "Propagation",
    "WatchEvent",
    "WatchEventType",
]

DEFAULT_FIELD_MANAGER = "kubetrain"

JsonPatch = list[Obj]
"""An RFC 6902 patch: a list of operations."""

LabelSelector = str | Mapping[str, str]
"""A label selector in Kubernetes syntax ("a=b,c in (x,y),!d") or a mapping of equalities."""


class PatchType(StrEnum):
    """The patch flavours of the API server, by Content-Type."""

    MERGE = "application/merge-patch+json"
    JSON = "application/json-patch+json"
    STRATEGIC = "application/strategic-merge-patch+json"
    APPLY = "application/apply-patch+yaml"


class Propagation(StrEnum):
    """`propagationPolicy` of a delete: what happens to the dependents (by ownerReferences)."""

    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


class WatchEventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"


@final
@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event. For BOOKMARK, `object` carries only `metadata.resourceVersion` (and the kind)."""

    type: WatchEventType
    object: Obj


@final
@dataclass(frozen=True, slots=True)
class ObjectList:
    """The result of a list: the items and the collection's resourceVersion to watch from."""

    items: list[Obj] = field(default_factory=list)
    resource_version: str = ""


class ApiClient(Protocol):
    """The verbs of the API server we use, on plain JSON dicts, for any `Resource` (CRDs included).

    Conventions for every method:
    - `namespace` is the object's namespace; pass None for cluster-scoped resources. For `list` and
      `watch`, None on a namespaced resource means all namespaces.
    - Returned objects are fresh dicts owned by the caller.
    - Failures raise `kubetrain.common.errors.ApiError` subclasses: NotFound, AlreadyExists, Conflict,
      Invalid, Forbidden, ...; an unreachable server raises TransportError. Nothing else escapes
      except `asyncio.CancelledError`.
    - Implementations may throttle requests client-side (QPS/burst); a call then waits, it never fails
      because of the local limiter.
    """

    async def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        """The object, or NotFound."""
        ...

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector | None = None,
        field_selector: str | None = None,
        managed_fields: bool = True,
    ) -> ObjectList:
        """All matching objects (pagination is handled inside) and the list's resourceVersion.
        `managed_fields=False`: the objects come without `metadata.managedFields`."""
        ...

    async def create(self, res: Resource, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        """Create `body` (apiVersion/kind are filled from `res` when absent); the stored object is returned.

        AlreadyExists when the name is taken (callers that use deterministic names count it as success);
        Invalid when the server rejects the body; NotFound when the namespace does not exist.
        `read_back=False`: the caller ignores the answer (a pod it will see through its informer, an Event),
        so the client may leave it undecoded and return `{}`; errors are raised all the same.
        """
        ...

    async def replace(
        self, res: Resource, namespace: str | None, name: str, body: Obj, *, subresource: str | None = None
    ) -> Obj:
        """PUT the whole object. With `metadata.resourceVersion` set, a stale version raises Conflict."""
        ...

    async def patch(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        body: Obj | JsonPatch,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str = DEFAULT_FIELD_MANAGER,
        force: bool = False,
        read_back: bool = True,
    ) -> Obj:
        """Patch and return the stored object.

        - MERGE (RFC 7386): a `metadata.resourceVersion` inside the patch is a precondition: stale ->
          Conflict. Without it the patch applies to whatever is current (last writer wins per field).
        - JSON (RFC 6902): `body` is a list of operations; a failed `test` op raises Invalid/Conflict.
        - APPLY: server-side apply as `field_manager`; `force=True` takes fields owned by others,
          otherwise ownership clashes raise Conflict.
        - `subresource="status"` writes only the status (needed for CRDs with a status subresource).
        NotFound when the object does not exist (a patch never creates, except APPLY).
        `read_back=False`: the caller reads only the stored object's metadata (its new resourceVersion), so
        the client may decode only that and return `{"metadata": {...}}`.
        """
        ...

    async def delete(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        *,
        propagation: Propagation = Propagation.BACKGROUND,
        uid_precondition: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Request deletion. NotFound when the object is already gone (callers usually ignore it).

        `uid_precondition` deletes only that incarnation of the name: Conflict if the current object has
        another uid (it was recreated meanwhile). With finalizers, the object lingers with
        `deletionTimestamp` set until they are removed.
        """
        ...

    def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str,
        label_selector: LabelSelector | None = None,
        field_selector: str | None = None,
        timeout_seconds: int = 300,
        allow_bookmarks: bool = True,
        send_initial_events: bool = False,
        managed_fields: bool = True,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events strictly after `resource_version` (from a list, or the last event/bookmark seen).

        - `managed_fields=False`: the objects come without `metadata.managedFields` (what an informer
          drops: the client may then skip decoding it).

        - `send_initial_events=True` asks for a streaming list (KEP-3157): the stream starts with an ADDED
          event for every object that matches, as of `resource_version` or newer ("": as of now, read
          consistently), then a BOOKMARK whose `metadata.annotations["k8s.io/initial-events-end"]` is
          "true", then goes on as any watch (bookmarks are on whatever `allow_bookmarks` says). A server
          without the feature raises Invalid naming sendInitialEvents (the in-memory fake always does).
        - The iterator ends normally when the server closes the stream (after about `timeout_seconds`);
          the caller watches again from the last resourceVersion it saw.
        - A `resource_version` too old for the server (compacted) raises Gone, when the watch starts or
          as an in-stream ERROR event: the caller must list again.
        - BOOKMARK events only advance the resourceVersion; they are sent only when `allow_bookmarks`.
        - Network failures raise TransportError. Close the generator (`aclose()`) to stop early.
        """
        ...

    async def close(self) -> None:
        """Release connections. Idempotent."""
        ...
