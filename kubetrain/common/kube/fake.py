"""A dumb in-memory `ApiClient` for component tests: a dict of objects with resourceVersions and watches.

What it does: uid, resourceVersion (one global counter), creationTimestamp and generation;
AlreadyExists, NotFound, and Conflict on a stale resourceVersion (replace, or a merge patch that
carries one) or a failed uid precondition; label and field selectors; merge and JSON patches; the
status subresource for resources named in `status_subresources`; `deletionTimestamp` only while
finalizers remain; watches that replay from a resourceVersion, bookmarks on demand, and Gone once
history has been compacted. Failures can be injected per verb (`fail`). Every call is logged in `calls`.

What it does not do, on purpose: garbage collection, admission, defaulting, validation, namespaces
as objects, server-side apply, pods that run, streaming lists (a watch with `send_initial_events` is
refused as a server with the WatchList feature gate off refuses it, so informers list instead).
Anything about real Kubernetes behaviour is tested on the real API server (tests/integration), never
re-implemented here.
"""

from __future__ import annotations

import copy
import secrets
import uuid
from collections.abc import AsyncGenerator, Collection
from dataclasses import dataclass
from typing import Any

from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.errors import AlreadyExists, ApiError, Conflict, Gone, Invalid, NotFound
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import (
    DEFAULT_FIELD_MANAGER,
    JsonPatch,
    LabelSelector,
    ObjectList,
    PatchType,
    Propagation,
    WatchEvent,
    WatchEventType,
)
from kubetrain.common.kube.fake_watch import EventKey, WatchHub
from kubetrain.common.kube.informer import strip_managed_fields
from kubetrain.common.kube.patches import json_patch, merge_patch
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.kube.selectors import Matcher, field_matcher, label_matcher

__all__ = ["Call", "InMemoryApiClient"]

_Key = EventKey


@dataclass(frozen=True, slots=True)
class Call:
    verb: str
    resource: Resource
    namespace: str | None
    name: str | None = None


@dataclass(slots=True)
class _Failure:
    verb: str
    resource: Resource | None
    error: ApiError
    times: int


class InMemoryApiClient:
    """See the module docstring. `clock` stamps creationTimestamp/deletionTimestamp and times watches out."""

    def __init__(
        self,
        *,
        clock: Clock | None = None,
        status_subresources: Collection[Resource] = (),
        history: int = 10_000,
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        self._objects: dict[_Key, Obj] = {}
        self._rv = 1000
        self._watch = WatchHub(self._clock, history=history)
        self._failures: list[_Failure] = []
        self._status_sub = {(r.group, r.plural) for r in status_subresources}
        self.calls: list[Call] = []

    # test controls ----------------------------------------------------------------------------------
    def fail(self, verb: str, error: ApiError, *, resource: Resource | None = None, times: int = 1) -> None:
        """Make the next `times` calls of `verb` (on `resource`, or any) raise `error`, doing nothing."""
        self._failures.append(_Failure(verb, resource, error, times))

    def compact(self) -> None:
        """Forget the watch history: a watch from any resourceVersion seen so far now raises Gone."""
        self._watch.compact(self._rv)

    def expire_watches(self) -> None:
        """Compact, and end every open watch with Gone (what a long disconnection looks like)."""
        self.compact()
        self._watch.end_all(Gone("too old resource version", reason="Expired"))

    def break_watches(self, error: ApiError | None = None) -> None:
        """End every open watch: with `error` (e.g. TransportError), or normally when None."""
        self._watch.end_all(error)

    def send_bookmarks(self) -> None:
        """Send a BOOKMARK at the current resourceVersion to every watch that allows bookmarks."""
        self._watch.bookmark(self._rv)

    def count(self, verb: str, resource: Resource | None = None) -> int:
        """How many calls of `verb` (on `resource`) were made."""
        return sum(1 for c in self.calls if c.verb == verb and (resource is None or c.resource == resource))

    # reads ------------------------------------------------------------------------------------------
    async def get(self, res: Resource, namespace: str | None, name: str) -> Obj:
        self._enter("get", res, namespace, name)
        return copy.deepcopy(self._require(res, namespace, name))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector | None = None,
        field_selector: str | None = None,
        managed_fields: bool = True,
    ) -> ObjectList:
        self._enter("list", res, namespace)
        match = _matcher(label_selector, field_selector)
        items = [
            _trimmed(copy.deepcopy(o), managed_fields)
            for k, o in sorted(self._objects.items())
            if (k[0], k[1]) == (res.group, res.plural) and namespace in (None, k[2]) and match(o)
        ]
        return ObjectList(items, str(self._rv))

    # writes -----------------------------------------------------------------------------------------
    async def create(self, res: Resource, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        self._enter("create", res, namespace, objects.name(body))
        obj = copy.deepcopy(body)
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        if not meta.get("name"):
            raise Invalid("metadata.name: Required value", reason="Invalid")
        ns = self._ns(res, namespace)
        if meta.get("namespace") not in (None, "", ns):
            raise Invalid(
                "the namespace of the object does not match the namespace on the request", reason="BadRequest"
            )
        key = (res.group, res.plural, ns, meta["name"])
        if key in self._objects:
            raise AlreadyExists(f'{res} "{meta["name"]}" already exists', reason="AlreadyExists")
        if ns:
            meta["namespace"] = ns
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=_ts(self._clock), generation=1)
        for transient in ("resourceVersion", "deletionTimestamp"):
            meta.pop(transient, None)
        return self._commit(key, obj, WatchEventType.ADDED)

    async def replace(
        self, res: Resource, namespace: str | None, name: str, body: Obj, *, subresource: str | None = None
    ) -> Obj:
        self._enter("replace", res, namespace, name)
        old = self._require(res, namespace, name)
        rv = objects.resource_version(body)
        if rv and rv != objects.resource_version(old):
            raise _stale(res, name)
        return self._update(res, old, copy.deepcopy(body), subresource)

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
        self._enter("patch", res, namespace, name)
        old = self._require(res, namespace, name)
        if patch_type is PatchType.JSON and isinstance(body, list):
            new = json_patch(old, body)
        elif patch_type in (PatchType.MERGE, PatchType.STRATEGIC) and isinstance(body, dict):
            rv = objects.resource_version(body)
            if rv and rv != objects.resource_version(old):
                raise _stale(res, name)
            uid = objects.uid(body)
            if uid and uid != objects.uid(old):
                raise Conflict(f"Precondition failed: UID in precondition: {uid}", reason="Conflict")
            new = merge_patch(old, body)
        else:
            raise NotImplementedError(
                f"InMemoryApiClient does not implement {patch_type.name} patches of {body!r}"
            )
        return self._update(res, old, new, subresource)

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
        self._enter("delete", res, namespace, name)
        old = self._require(res, namespace, name)
        if uid_precondition and uid_precondition != objects.uid(old):
            raise Conflict(f"Precondition failed: UID in precondition: {uid_precondition}", reason="Conflict")
        if old["metadata"].get("finalizers"):
            if not objects.is_deleting(old):
                new = copy.deepcopy(old)
                new["metadata"]["deletionTimestamp"] = _ts(self._clock)
                self._commit(_key(res, old), new, WatchEventType.MODIFIED)
            return
        self._remove(_key(res, old), old)

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
        self._enter("watch", res, namespace)
        if send_initial_events:  # dumb: as a server with the WatchList feature gate off answers
            raise Invalid(
                "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the "
                "WatchList feature gate is enabled",
                reason="Invalid",
            )
        since = int(resource_version) if resource_version not in ("", "0") else self._rv
        match = _matcher(label_selector, field_selector)
        stream = self._watch.open(
            (res.group, res.plural),
            namespace,
            since=since,
            match=match,
            bookmarks=allow_bookmarks,
            timeout=float(timeout_seconds),
        )
        return stream if managed_fields else _trimmed_events(stream)

    async def close(self) -> None:
        self.break_watches()

    # internals --------------------------------------------------------------------------------------
    def _enter(self, verb: str, res: Resource, namespace: str | None, name: str | None = None) -> None:
        self.calls.append(Call(verb, res, namespace, name))
        for f in self._failures:
            if f.verb == verb and f.resource in (None, res) and f.times > 0:
                f.times -= 1
                raise copy.copy(f.error)

    def _ns(self, res: Resource, namespace: str | None) -> str:
        if res.namespaced and not namespace:
            raise Invalid(f"{res} is namespaced: a namespace is required", reason="BadRequest")
        return (namespace or "") if res.namespaced else ""

    def _require(self, res: Resource, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get((res.group, res.plural, self._ns(res, namespace), name))
        if obj is None:
            raise NotFound(f'{res} "{name}" not found', reason="NotFound")
        return obj

    def _update(self, res: Resource, old: Obj, new: Obj, subresource: str | None) -> Obj:
        new = copy.deepcopy(new)  # a merge result shares unchanged branches with `old`, which history holds
        if subresource == "status":
            new = {**copy.deepcopy(old), "status": new.get("status")}
        elif (res.group, res.plural) in self._status_sub:
            new["status"] = copy.deepcopy(old.get("status"))
        if new.get("status") is None:
            new.pop("status", None)
        meta = new.setdefault("metadata", {})
        for fixed in ("uid", "name", "namespace", "creationTimestamp", "deletionTimestamp", "generation"):
            if fixed in old["metadata"]:
                meta[fixed] = old["metadata"][fixed]
            else:
                meta.pop(fixed, None)
        if _spec(new) != _spec(old):
            meta["generation"] = objects.generation(old) + 1
        if objects.is_deleting(new) and not meta.get("finalizers"):
            return self._remove(_key(res, old), new)
        return self._commit(_key(res, old), new, WatchEventType.MODIFIED)

    def _commit(self, key: _Key, obj: Obj, kind: WatchEventType) -> Obj:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        self._objects[key] = obj
        self._publish(key, WatchEvent(kind, obj))
        return copy.deepcopy(obj)

    def _remove(self, key: _Key, final: Obj) -> Obj:
        self._rv += 1
        gone = copy.deepcopy(final)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        del self._objects[key]
        self._publish(key, WatchEvent(WatchEventType.DELETED, gone))
        return copy.deepcopy(gone)

    def _publish(self, key: _Key, event: WatchEvent) -> None:
        self._watch.publish(self._rv, key, event)


def _matcher(label_selector: LabelSelector | None, field_selector: str | None) -> Matcher:
    by_label, by_field = label_matcher(label_selector), field_matcher(field_selector)
    return lambda obj: by_label(obj) and by_field(obj)


def _key(res: Resource, obj: Obj) -> _Key:
    return (res.group, res.plural, objects.namespace(obj), objects.name(obj))


def _spec(obj: Obj) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _stale(res: Resource, name: str) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {res} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        reason="Conflict",
    )


def _ts(clock: Clock) -> str:
    return clock.now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _trimmed(obj: Obj, managed_fields: bool) -> Obj:
    return obj if managed_fields else strip_managed_fields(obj)


async def _trimmed_events(stream: AsyncGenerator[WatchEvent, None]) -> AsyncGenerator[WatchEvent, None]:
    try:
        async for event in stream:  # each event is the watcher's own copy
            yield WatchEvent(event.type, strip_managed_fields(event.object))
    finally:
        await stream.aclose()
