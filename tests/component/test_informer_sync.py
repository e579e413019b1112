"""How an informer fills its cache when the server cannot stream lists, and when its first sync fails.

The streaming list itself is the real API server's (tests/integration/test_informer_streaming.py); here
the in-memory fake refuses it, as a server with the WatchList feature gate off does, and the informer
must list instead, once for good. With `sync_patience` (what the operator's start-up uses), a first sync
that cannot succeed raises CacheSyncError, naming the resource, the namespace and the server's answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from kubetrain.common.errors import Forbidden, NotFound, TooManyRequests, TransportError
from kubetrain.common.kube.client import WatchEvent, WatchEventType
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.informer import CacheSyncError, Informer
from kubetrain.common.kube.multinamespace import MultiNamespaceInformer
from kubetrain.common.kube.resources import CONFIGMAPS, Obj
from kubetrain.common.manager import Manager
from kubetrain.common.testing import FakeClock, settle


def cm(name: str, v: str = "1") -> Obj:
    return {"metadata": {"name": name}, "data": {"v": v}}


class Names:
    def __init__(self) -> None:
        self.added: list[str] = []

    def on_add(self, obj: Obj) -> None:
        self.added.append(obj["metadata"]["name"])

    def on_update(self, old: Obj, new: Obj) -> None: ...

    def on_delete(self, obj: Obj) -> None: ...


class Streams:
    """The fake, counting the streaming lists asked for; with `unended` objects, it answers them (instead
    of refusing) with those objects and no end bookmark, as a server that ignores the parameter would."""

    def __init__(self, api: InMemoryApiClient) -> None:
        self.api = api
        self.asked = 0
        self.unended: list[Obj] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    def watch(self, *args: Any, send_initial_events: bool = False, **kwargs: Any) -> Any:
        self.asked += send_initial_events
        if send_initial_events and self.unended is not None:
            return self._added_then_end(self.unended)
        return self.api.watch(*args, send_initial_events=send_initial_events, **kwargs)

    async def _added_then_end(self, objs: list[Obj]) -> AsyncGenerator[WatchEvent, None]:
        for obj in objs:
            yield WatchEvent(WatchEventType.ADDED, obj)


async def run_until_synced(informer: Informer) -> asyncio.Task[None]:
    task = asyncio.ensure_future(informer.run())
    await asyncio.wait_for(informer.wait_synced(), 1)
    return task


async def stop(task: asyncio.Future[Any]) -> None:
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


@pytest.mark.parametrize("unended", [False, True], ids=["refused", "ends-without-bookmark"])
async def test_a_server_without_streaming_lists_gets_a_list_and_a_watch_once_for_good(unended: bool) -> None:
    clock = FakeClock()
    fake = InMemoryApiClient(clock=clock)
    api = Streams(fake)
    before = await fake.create(CONFIGMAPS, "ns", cm("before"))
    api.unended = [before] if unended else None
    informer = Informer(api, CONFIGMAPS, clock=clock, namespace="ns")  # type: ignore[arg-type]
    names = Names()
    informer.add_handler(names)
    task = await run_until_synced(informer)
    try:
        assert names.added == ["before"] and fake.count("list") == 1
        await fake.create(CONFIGMAPS, "ns", cm("live"))
        await settle()
        assert names.added == ["before", "live"], "the watch from the list's resourceVersion runs"
        fake.expire_watches()  # 410 Gone: the cache is filled again
        await settle()
        assert informer.relists == 2 and fake.count("list") == 2
        assert api.asked == 1, "a server that cannot stream lists is not asked again"
        assert not informer.streaming_list
    finally:
        await stop(task)


async def test_a_final_answer_on_the_first_sync_raises_naming_resource_and_namespace() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    api.fail("watch", Forbidden('configmaps is forbidden: cannot watch resource "configmaps"'))
    informer = Informer(api, CONFIGMAPS, clock=clock, namespace="ns", sync_patience=30)
    with pytest.raises(CacheSyncError) as raised:
        await asyncio.wait_for(informer.run(), 1)
    assert raised.value.resource == CONFIGMAPS and raised.value.namespace == "ns"
    assert isinstance(raised.value.error, Forbidden)
    assert api.count("watch") == 1 and api.count("list") == 0, "no retry, no list of its own"


async def test_busy_answers_are_waited_out_for_the_patience_then_raised() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    busy = TooManyRequests("storage is (re)initializing")
    api.fail("watch", busy, times=2)
    api.fail("list", busy, times=1)
    patient = Informer(api, CONFIGMAPS, clock=clock, namespace="ns", sync_patience=30)
    task = asyncio.ensure_future(patient.run())
    await settle()
    await clock.advance(0.8 + 1.6)  # the streaming list refused twice (busy), then refused, then a busy list
    await settle()
    await clock.advance(3.2)
    await settle()
    assert patient.has_synced, "a CRD created a moment ago is waited for"
    await stop(task)

    api.fail("watch", busy, times=1000)
    hasty = Informer(api, CONFIGMAPS, clock=clock, namespace="ns", sync_patience=30)
    began = clock.monotonic()
    task = asyncio.ensure_future(hasty.run())
    for _ in range(10):
        await clock.advance(10)
        await settle()
        if task.done():
            break
    assert isinstance(task.exception(), CacheSyncError) and clock.monotonic() - began >= 30
    assert not hasty.has_synced


async def test_without_patience_the_informer_retries_for_ever() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    api.fail("watch", TransportError("connection refused"), times=3)
    informer = Informer(api, CONFIGMAPS, clock=clock, namespace="ns")
    task = asyncio.ensure_future(informer.run())
    await clock.advance(0.8 + 1.6 + 3.2)
    await settle()
    assert informer.has_synced and not task.done()
    await stop(task)


async def test_a_manager_with_patience_raises_the_members_error_as_it_is() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    api.fail("list", NotFound("the server could not find the requested resource"))
    manager = Manager(api, clock=clock, namespace=["a", "b"], http_address=None, sync_patience=30)
    informer = manager.informer(CONFIGMAPS)
    assert isinstance(informer, MultiNamespaceInformer)
    with pytest.raises(CacheSyncError) as raised:
        await asyncio.wait_for(manager.run(), 1)
    assert raised.value.namespace in ("a", "b") and isinstance(raised.value.error, NotFound)
    assert not manager.is_ready()
