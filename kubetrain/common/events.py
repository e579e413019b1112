"""Kubernetes Events for the decisions a user wants to see in `kubectl describe`, without spamming etcd.

`record()` never blocks and never raises into a reconcile: it queues the event, and `run()` writes it.
The same (object, type, reason, message) within the aggregation window bumps `count` and
`lastTimestamp` on the existing Event with a patch instead of creating a new one. A per-object token
bucket (burst 25, one more every 5 minutes) drops the excess of a restart storm. Write errors are
logged and dropped: an Event is a courtesy, not state. What the recorder remembers per object (the
aggregation records and the token buckets) is kept in order of last use and forgotten from the oldest end
once it can no longer matter (a record after the window; a bucket once it would have refilled), so memory
stays bounded by the recent objects and each event costs O(1), however many jobs the operator has seen.
Nothing is dropped silently: `dropped` counts by reason (`spam`, `backlog`, `error`, and `shutdown` for
those still waiting when the operator stops), and so does the
optional `on_drop(reason)` callback (the operator feeds its `kubetrain_events_dropped_total` metric with
it). Up to `writers` Events are written at a time (one at a time wrote 7-10 a second on a loaded machine,
so a burst of new jobs left hundreds waiting, late for `kubectl describe`); two of the same key are never
in flight together, so a repeat still bumps the one Event. The operator gives the recorder an API client
of its own, with its own rate limit, as client-go's event broadcaster has: Events never wait behind, nor
delay, the pod and Service writes of the reconciles.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol, final

from kubetrain.common.clock import Clock
from kubetrain.common.errors import NotFound
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import EVENTS, Obj
from kubetrain.common.ratelimit import TokenBucket

__all__ = ["EventRecorder", "EventType", "KubeEventRecorder", "ObjectRef"]

log = logging.getLogger(__name__)


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@final
@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object an Event is about (`involvedObject`)."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        return cls(
            str(obj.get("apiVersion", "")),
            str(obj.get("kind", "")),
            objects.namespace(obj),
            objects.name(obj),
            objects.uid(obj),
        )


class EventRecorder(Protocol):
    """Records an Event about an object. Contract: returns at once, never raises, may drop or merge events."""

    def record(
        self, obj: Mapping[str, Any] | ObjectRef, event_type: EventType, reason: str, message: str
    ) -> None: ...


@dataclass(slots=True)
class _Seen:
    event_name: str
    count: int
    last: float


_Key = tuple[ObjectRef, EventType, str, str]


class KubeEventRecorder:
    """Writes core/v1 Events through an ApiClient. Run `run()` as a task; `flush()` waits for the backlog."""

    def __init__(
        self,
        api: ApiClient,
        *,
        component: str,
        clock: Clock,
        instance: str = "",
        aggregation_window: float = 600.0,
        burst: int = 25,
        refill_seconds: float = 300.0,
        max_pending: int = 1000,
        writers: int = 4,
        on_drop: Callable[[str], None] | None = None,
    ) -> None:
        self._api = api
        self._component = component
        self._instance = instance
        self._clock = clock
        self._window = aggregation_window
        self._bucket_args = (1.0 / refill_seconds, burst)
        self._bucket_rest = refill_seconds * burst
        """Unused this long, a bucket is full again: forgetting it is the same as keeping it."""
        self._buckets: OrderedDict[ObjectRef, tuple[TokenBucket, float]] = OrderedDict()
        """By last use, oldest first: each bucket with the time it was last used."""
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        """By `last`, oldest first."""
        self._pending: asyncio.Queue[tuple[_Key, datetime]] = asyncio.Queue(max_pending)
        self.dropped: Counter[str] = Counter()
        self._on_drop = on_drop
        self._writers = max(writers, 1)
        self._in_flight: dict[_Key, asyncio.Event] = {}
        """Keys being written now, each with the Event set when its write is done."""

    def record(
        self, obj: Mapping[str, Any] | ObjectRef, event_type: EventType, reason: str, message: str
    ) -> None:
        ref = obj if isinstance(obj, ObjectRef) else ObjectRef.of(obj)
        log.info("%s %s/%s: %s %s", ref.kind, ref.namespace, ref.name, reason, message)
        if not self._bucket(ref).try_take():
            self._drop("spam")
            return
        try:
            self._pending.put_nowait(((ref, event_type, reason, message[:1024]), self._clock.now()))
        except asyncio.QueueFull:
            self._drop("backlog")

    def _bucket(self, ref: ObjectRef) -> TokenBucket:
        """`ref`'s token bucket, marked as used now; buckets at rest are forgotten first."""
        now = self._clock.monotonic()
        while self._buckets:
            oldest, (_, used) = next(iter(self._buckets.items()))
            if now - used < self._bucket_rest:
                break
            del self._buckets[oldest]
        entry = self._buckets.pop(ref, None)
        bucket = entry[0] if entry is not None else TokenBucket(*self._bucket_args, clock=self._clock)
        self._buckets[ref] = (bucket, now)
        return bucket

    def _drop(self, why: str) -> None:
        self.dropped[why] += 1
        if self._on_drop is not None:
            self._on_drop(why)

    async def run(self) -> None:
        """Write queued events until cancelled; those still waiting or in flight then are counted as
        `shutdown` drops."""
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(self._writers):
                    group.create_task(self._write_queued())
        except asyncio.CancelledError:
            for _ in range(self._pending.qsize()):
                self._pending.get_nowait()
                self._pending.task_done()
                self._drop("shutdown")
            raise

    async def _write_queued(self) -> None:
        while True:
            key, when = await self._pending.get()
            try:
                await self._write_alone(key, when)
            except asyncio.CancelledError:
                self._drop("shutdown")
                raise
            except Exception as err:  # an Event is never worth a crash
                self._drop("error")
                log.warning(
                    "could not write event %s for %s/%s: %s", key[2], key[0].namespace, key[0].name, err
                )
            finally:
                self._pending.task_done()

    async def flush(self) -> None:
        """Wait until every queued event has been written (or dropped). Needs `run()` to be running."""
        await self._pending.join()

    async def _write_alone(self, key: _Key, when: datetime) -> None:
        """`_write`, once no other writer holds the same key (its Event must exist before a bump)."""
        while (busy := self._in_flight.get(key)) is not None:
            await busy.wait()
        done = self._in_flight[key] = asyncio.Event()
        try:
            await self._write(key, when)
        finally:
            del self._in_flight[key]
            done.set()

    async def _write(self, key: _Key, when: datetime) -> None:
        self._expire()
        seen = self._seen.get(key)
        if seen is not None:
            try:
                await self._bump(key, seen, when)
                return
            except NotFound:
                del self._seen[key]
        name = f"{key[0].name}.{secrets.token_hex(8)}"
        body = self._event_body(name, key, when)
        await self._api.create(EVENTS, key[0].namespace or "default", body, read_back=False)
        self._seen[key] = _Seen(name, 1, self._clock.monotonic())

    async def _bump(self, key: _Key, seen: _Seen, when: datetime) -> None:
        ref = key[0]
        patch = {"count": seen.count + 1, "lastTimestamp": _ts(when)}
        await self._api.patch(EVENTS, ref.namespace or "default", seen.event_name, patch)
        seen.count += 1
        seen.last = self._clock.monotonic()
        self._seen.move_to_end(key)

    def _expire(self) -> None:
        horizon = self._clock.monotonic() - self._window
        while self._seen:
            key, seen = next(iter(self._seen.items()))
            if seen.last >= horizon:
                break
            del self._seen[key]

    def _event_body(self, name: str, key: _Key, when: datetime) -> Obj:
        ref, event_type, reason, message = key
        involved = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "namespace": ref.namespace,
        }
        if ref.uid:
            involved["uid"] = ref.uid
        return {
            "metadata": {"name": name, "namespace": ref.namespace or "default"},
            "involvedObject": involved,
            "type": str(event_type),
            "reason": reason,
            "message": message,
            "count": 1,
            "firstTimestamp": _ts(when),
            "lastTimestamp": _ts(when),
            "source": {"component": self._component},
            "reportingComponent": self._component,
            "reportingInstance": self._instance,
        }


def _ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")
