"""Keeps a `Store` in step with the API server and tells handlers what changed.

The cache is filled by a streaming list (KEP-3157 "WatchList", what client-go's informers do): one watch
with `sendInitialEvents=true` and `resourceVersionMatch=NotOlderThan`, on which the server first sends
every current object as ADDED, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"`, and then
carries on as an ordinary watch. So an informer's start costs one request, not a list and a watch. The
objects before that bookmark are collected and the cache is replaced with them at the bookmark (the
informer is synced only then). A server that refuses it (the WatchList feature gate off: 422 naming
sendInitialEvents; an old server whose stream ends without that bookmark) gets a list, then a watch from
the list's resourceVersion, and this informer does not ask again.

Either way, every later watch resumes from the last resourceVersion seen (bookmarks on, so a quiet watch
still advances). When the server says the version is too old (410 Gone / Expired), the cache is filled
again the same way and the difference against it is emitted: adds, updates, and deletes carrying the last
known state, so no change is lost or doubled while the watch was down. Network errors (and 429) reconnect
from the last seen version with backoff; any other error from the server fills the cache again after the
backoff, as client-go does. There is no periodic full resync: controllers are level-triggered and requeue
themselves for deadlines.

With `sync_patience`, an informer that cannot fill its cache the first time gives up instead of retrying:
`run()` raises `CacheSyncError` (the resource, the namespace and the server's answer) at once for an answer
that retrying will not change (NotFound: no such CRD; Forbidden; Unauthorized; an unreachable server), and
after `sync_patience` seconds of busy answers (429, 5xx, timeouts: a CRD created a moment ago answers 429
"storage is (re)initializing"). An operator's start-up turns it into one clear line.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from typing import Protocol

from kubetrain.common.clock import Clock
from kubetrain.common.errors import (
    ApiError,
    Gone,
    KubetrainError,
    ServerError,
    Timeout,
    TooManyRequests,
    TransportError,
)
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient, WatchEvent, WatchEventType
from kubetrain.common.kube.resources import Obj, Resource
from kubetrain.common.kube.store import Store

__all__ = ["CacheSyncError", "ControllerKind", "Informer", "ResourceEventHandler", "strip_managed_fields"]

log = logging.getLogger(__name__)

_INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the BOOKMARK that ends a streaming list's initial objects."""
_Stream = AsyncGenerator[WatchEvent, None]
ControllerKind = tuple[str, str]
"""(API group, kind) of a controlling owner, e.g. ("kubeflow.org", "MPIJob"): see `Informer.add_handler`."""
_BUSY = (TooManyRequests, ServerError, Timeout)
"""Answers worth waiting out before the first sync (with `sync_patience`); any other error is final."""


class CacheSyncError(KubetrainError):
    """An informer with `sync_patience` could not fill its cache: `error` is the server's last answer."""

    def __init__(self, resource: Resource, namespace: str | None, error: ApiError) -> None:
        where = f"namespace {namespace}" if namespace else "all namespaces"
        super().__init__(f"cannot read {resource} in {where}: {error}")
        self.resource = resource
        self.namespace = namespace
        self.error = error


class _NoStreamingList(Exception):
    """The server does not stream lists (the message says how it showed it)."""


class ResourceEventHandler(Protocol):
    """Receives cache changes, after the store has been updated.

    Handlers are synchronous and must be quick (typically: map to Requests and enqueue). They never
    see an event twice for the same resourceVersion, but may miss intermediate versions. `on_delete`
    gets the last known state, which may be older than the real final state after a relist. An
    exception in a handler is logged and does not stop the informer or the other handlers.
    """

    def on_add(self, obj: Obj) -> None: ...

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj) -> None: ...


def strip_managed_fields(obj: Obj) -> Obj:
    """The default transform: drop `metadata.managedFields` (often half an object; we never read it)."""
    obj.get("metadata", {}).pop("managedFields", None)
    return obj


class Informer:
    """One (streaming) list and watch of one Resource (optionally scoped by namespace and selectors), shared
    by controllers.

    Run `run()` as a task; read `store` once `has_synced`. `transform` may trim each object before it is
    cached (default: `strip_managed_fields`; cache memory grows with what is kept, failure-modes §C4).
    `streaming_list=False` lists instead of asking for a streaming list; `sync_patience` (seconds; None:
    retry for ever) makes a first sync that fails raise `CacheSyncError` (see the module docstring)."""

    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        *,
        clock: Clock,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        watch_timeout_seconds: int = 300,
        initial_backoff: float = 0.8,
        max_backoff: float = 30.0,
        streaming_list: bool = True,
        sync_patience: float | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store = Store()
        self._transform = transform or strip_managed_fields
        # The default drops managedFields: asked of the client, which then need not decode it at all.
        self._managed_fields = transform is not None
        self._clock = clock
        self._watch_timeout = watch_timeout_seconds
        self._backoff = (initial_backoff, max_backoff)
        self._handlers: list[tuple[ControllerKind | None, ResourceEventHandler]] = []
        self._routes: dict[ControllerKind | None, list[ResourceEventHandler]] = {}  # by kind, from _handlers
        self._routed = False  # whether any handler is routed by controller kind
        self._synced = asyncio.Event()
        self._failures = 0  # consecutive; reset by any event, so backoff restarts after a healthy stream
        self._patience = sync_patience
        self._resume: str | None = None  # the resourceVersion the next watch starts from; None: fill first
        self.streaming_list = streaming_list
        """Whether the cache is filled by a streaming list; turns False when the server refuses one."""
        self.relists = 0
        """How many times the cache was filled (1 after the first sync): for tests and diagnostics."""

    @property
    def has_synced(self) -> bool:
        """True once the first (streaming) list has been stored and its events delivered."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def add_handler(
        self, handler: ResourceEventHandler, *, controlled_by: ControllerKind | None = None
    ) -> None:
        """Register a handler; if the cache is already filled, it first gets `on_add` for every object.

        `controlled_by=(group, kind)`: the handler is told only of objects whose controlling owner (the
        ownerReference with `controller: true`) is of that kind, before or after the change. The informer
        looks up the owner once per event for all such handlers, so an informer shared by many kinds'
        controllers does not have each of them look at every other kind's objects."""
        self._handlers.append((controlled_by, handler))
        self._routes = {}
        self._routed = self._routed or controlled_by is not None
        if self.has_synced:
            for obj in self.store:
                if controlled_by is None or _controller_kind(obj) == controlled_by:
                    self._call(handler.on_add, obj)

    async def run(self) -> None:
        """Fill the cache and watch until cancelled. Never returns otherwise; API errors are retried with
        backoff (before the first sync with `sync_patience`: CacheSyncError, as the module docstring says)."""
        started = self._clock.monotonic()
        while True:
            try:
                if self._resume is None:
                    self._resume, stream = await self._fill()
                else:
                    stream = self._open(self._resume)
                await self._follow(stream)
                self._failures = 0
            except Gone:
                log.info("watch of %s expired; listing again", self.resource)
                self._resume = None
            except (TransportError, TooManyRequests) as err:  # the server never answered, or asked us to wait
                self._give_up_before_sync(err, started)
                await self._back_off(err)
            except ApiError as err:  # the server answered with an error: do not insist on that version
                self._give_up_before_sync(err, started)
                await self._back_off(err)
                self._resume = None

    def _give_up_before_sync(self, err: ApiError, started: float) -> None:
        if self._patience is None or self.has_synced:
            return
        if not isinstance(err, _BUSY) or self._clock.monotonic() - started >= self._patience:
            raise CacheSyncError(self.resource, self.namespace, err) from err

    async def _back_off(self, err: ApiError) -> None:
        delay = min(self._backoff[0] * 2**self._failures, self._backoff[1])
        self._failures = min(self._failures + 1, 32)
        log.warning("list/watch of %s failed (%s); retrying in %.1f s", self.resource, err, delay)
        await self._clock.sleep(delay)

    async def _fill(self) -> tuple[str, _Stream]:
        """Fill (or refill) the cache: its resourceVersion, and the watch that goes on from there."""
        if self.streaming_list:
            try:
                return await self._stream_list()
            except _NoStreamingList as why:
                self.streaming_list = False
                log.info("the API server does not stream lists of %s (%s); listing", self.resource, why)
        listed = await self.api.list(
            self.resource,
            self.namespace,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            managed_fields=self._managed_fields,
        )
        self._replace(listed.items)
        return listed.resource_version, self._open(listed.resource_version)

    async def _stream_list(self) -> tuple[str, _Stream]:
        """A watch that sends the current objects first; the cache is replaced with them at the bookmark
        that ends them, and the watch is handed on, open, for the changes that follow."""
        initial: dict[tuple[str, str], Obj] = {}
        stream = None
        try:
            stream = self._open("", initial_events=True)  # "": the state as of now, read consistently
            async for event in stream:
                if _ends_initial_events(event):
                    self._replace(initial.values())
                    handed, stream = stream, None
                    return objects.resource_version(event.object), handed
                if event.type is not WatchEventType.BOOKMARK:
                    _collect(initial, event)
        except ApiError as err:
            if _refuses_streaming(err):
                raise _NoStreamingList(f"{err.status} {err}") from err
            raise
        finally:
            if stream is not None:
                await stream.aclose()
        raise _NoStreamingList("the watch ended before the bookmark that ends the initial objects")

    def _replace(self, items: Iterable[Obj]) -> None:
        """Make the cache hold exactly `items`, telling handlers the difference; the informer is synced."""
        self.relists += 1
        seen = set()
        for obj in items:
            seen.add(objects.request_for(obj))
            self._apply(obj)
        for key in self.store.list_keys():
            if key not in seen:
                self._removed(key.namespace, key.name, None)
        self._synced.set()

    def _open(self, resource_version: str, *, initial_events: bool = False) -> _Stream:
        return self.api.watch(
            self.resource,
            self.namespace,
            resource_version=resource_version,
            label_selector=self.label_selector,
            field_selector=self.field_selector,
            timeout_seconds=self._watch_timeout,
            send_initial_events=initial_events,
            managed_fields=self._managed_fields,
        )

    async def _follow(self, stream: _Stream) -> None:
        """Apply `stream`'s events until the server ends it, each moving the resume point on (so that a
        broken connection resumes after the last event applied, and none is told twice)."""
        try:
            async for event in stream:
                self._resume = self._handle(event) or self._resume
        finally:
            await stream.aclose()

    def _handle(self, event: WatchEvent) -> str:
        self._failures = 0
        if event.type is WatchEventType.DELETED:
            self._removed(objects.namespace(event.object), objects.name(event.object), event.object)
        elif event.type is not WatchEventType.BOOKMARK:
            self._apply(event.object)
        return objects.resource_version(event.object)

    def _apply(self, obj: Obj) -> None:
        obj = self._transform(obj)
        old = self.store.get(objects.namespace(obj), objects.name(obj))
        if old is not None and objects.resource_version(old) == objects.resource_version(obj):
            return
        self.store.upsert(obj)
        if old is None:
            for h in self._handlers_for(obj):
                self._call(h.on_add, obj)
        else:
            for h in self._handlers_for(obj, old):
                self._call(h.on_update, old, obj)

    def _removed(self, namespace: str, name: str, final: Obj | None) -> None:
        old = self.store.remove(namespace, name)
        last = final if final is not None else old
        if last is None:
            return
        for h in self._handlers_for(last):
            self._call(h.on_delete, last)

    def _handlers_for(self, obj: Obj, old: Obj | None = None) -> list[ResourceEventHandler]:
        """The handlers to tell of a change to `obj` (from `old`), in the order they were added: the
        unrouted ones, and those routed to the kind that controls it, now or before. Read-only."""
        kind = _controller_kind(obj) if self._routed else None
        if old is not None and self._routed and (was := _controller_kind(old)) != kind:
            return [h for route, h in self._handlers if route in (None, kind, was)]  # changed owner: rare
        if kind not in self._routes:
            self._routes[kind] = [h for route, h in self._handlers if route in (None, kind)]
        return self._routes[kind]

    def _call(self, fn: Callable[..., None], *args: Obj) -> None:
        try:
            fn(*args)
        except Exception:
            log.exception("event handler for %s failed", self.resource)


def _controller_kind(obj: Obj) -> ControllerKind | None:
    ref = objects.controller_of(obj)
    if ref is None:
        return None
    return str(ref.get("apiVersion", "")).rpartition("/")[0], str(ref.get("kind", ""))


def _refuses_streaming(err: ApiError) -> bool:
    """The server's answer names the parameter it will not take (422 Invalid with the feature gate off)."""
    return not isinstance(err, TransportError) and "sendInitialEvents" in err.message


def _ends_initial_events(event: WatchEvent) -> bool:
    annotations = event.object.get("metadata", {}).get("annotations") or {}
    return event.type is WatchEventType.BOOKMARK and annotations.get(_INITIAL_EVENTS_END) == "true"


def _collect(initial: dict[tuple[str, str], Obj], event: WatchEvent) -> None:
    """An event before the end of the initial objects: only the last state of each object counts."""
    key = (objects.namespace(event.object), objects.name(event.object))
    if event.type is WatchEventType.DELETED:
        initial.pop(key, None)
    else:
        initial[key] = event.object
