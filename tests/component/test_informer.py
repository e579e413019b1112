"""The informer keeps its cache equal to the server's and reports every change, across watch failures."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubetrain.common.errors import ServerError, TransportError
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import CONFIGMAPS, PODS, Obj
from kubetrain.common.testing import FakeClock, settle


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def on_add(self, obj: Obj) -> None:
        self.events.append(("add", obj["metadata"]["name"], obj.get("data", {}).get("v", "")))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.events.append(("update", new["metadata"]["name"], f"{old['data']['v']}->{new['data']['v']}"))

    def on_delete(self, obj: Obj) -> None:
        self.events.append(("delete", obj["metadata"]["name"], obj.get("data", {}).get("v", "")))

    def take(self) -> list[tuple[str, str, str]]:
        out, self.events = sorted(self.events), []
        return out


def cm(name: str, v: str) -> Obj:
    return {"metadata": {"name": name}, "data": {"v": v}}


@pytest.fixture
async def world() -> AsyncIterator[tuple[FakeClock, InMemoryApiClient, Informer, Log]]:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    informer = Informer(api, CONFIGMAPS, clock=clock, namespace="ns")
    log = Log()
    informer.add_handler(log)
    await api.create(CONFIGMAPS, "ns", cm("before", "1"))
    await api.create(CONFIGMAPS, "elsewhere", cm("out-of-scope", "1"))
    task = asyncio.ensure_future(informer.run())
    await asyncio.wait_for(informer.wait_synced(), 1)
    yield clock, api, informer, log
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def test_list_then_watch_reports_adds_updates_and_deletes(world) -> None:
    _, api, informer, log = world
    assert informer.has_synced
    assert log.take() == [("add", "before", "1")]
    await api.create(CONFIGMAPS, "ns", cm("new", "1"))
    await api.patch(CONFIGMAPS, "ns", "before", {"data": {"v": "2"}})
    await api.delete(CONFIGMAPS, "ns", "new")
    await settle()
    assert log.events == [("add", "new", "1"), ("update", "before", "1->2"), ("delete", "new", "1")]
    assert informer.store.get("ns", "before")["data"]["v"] == "2"  # type: ignore[index]
    assert informer.store.get("ns", "new") is None
    assert informer.store.get("elsewhere", "out-of-scope") is None, "the namespace scope holds"


async def test_relist_after_gone_emits_exactly_the_difference(world) -> None:
    clock, api, informer, log = world
    await api.create(CONFIGMAPS, "ns", cm("same", "1"))
    await api.create(CONFIGMAPS, "ns", cm("changed", "1"))
    await api.create(CONFIGMAPS, "ns", cm("removed", "1"))
    await settle()
    log.take()
    # the watch drops and cannot reconnect for a while; meanwhile things change and history is compacted
    api.fail("watch", TransportError("connection refused"))
    api.break_watches(TransportError("connection reset"))
    await settle()
    await api.create(CONFIGMAPS, "ns", cm("added", "1"))
    await api.patch(CONFIGMAPS, "ns", "changed", {"data": {"v": "2"}})
    await api.delete(CONFIGMAPS, "ns", "removed")
    api.compact()
    assert log.events == []
    await clock.advance(60)
    assert log.take() == [("add", "added", "1"), ("delete", "removed", "1"), ("update", "changed", "1->2")]
    assert informer.relists == 2
    assert sorted(o["metadata"]["name"] for o in informer.store) == ["added", "before", "changed", "same"]
    await api.create(CONFIGMAPS, "ns", cm("after", "1"))
    await settle()
    assert log.take() == [("add", "after", "1")], "the informer watches again after the relist"


async def test_gone_in_the_stream_relists(world) -> None:
    _, api, informer, log = world
    log.take()
    api.expire_watches()
    await settle()
    assert informer.relists == 2
    assert log.events == [], "nothing changed, so the relist reports nothing"


async def test_network_errors_reconnect_from_the_last_version_without_relisting(world) -> None:
    clock, api, informer, log = world
    log.take()
    watches = api.count("watch", CONFIGMAPS)
    api.fail("watch", TransportError("refused"), times=3)
    api.break_watches(TransportError("reset"))
    await api.create(CONFIGMAPS, "ns", cm("during", "1"))
    await clock.advance(0.8 + 1.6 + 3.2 + 6.4 + 0.1)  # backoff doubles between attempts
    assert log.take() == [("add", "during", "1")]
    assert informer.relists == 1
    assert api.count("watch", CONFIGMAPS) - watches == 4, "three refused, then one that works"


async def test_bookmarks_advance_the_resume_point(world) -> None:
    _, api, informer, _log = world
    await api.create(PODS, "ns", {"metadata": {"name": "unrelated"}})  # moves the global resourceVersion on
    api.send_bookmarks()
    await settle()
    api.compact()
    api.break_watches()  # a normal end of stream: resume from the bookmark, which is not too old
    await settle()
    assert informer.relists == 1


async def test_a_failing_handler_does_not_stop_the_others(world) -> None:
    _, api, informer, log = world

    class Broken:
        def on_add(self, obj: Obj) -> None:
            raise RuntimeError("bug")

        on_update = on_delete = on_add  # type: ignore[assignment]

    informer.add_handler(Broken())  # type: ignore[arg-type]
    log.take()
    await api.create(CONFIGMAPS, "ns", cm("x", "1"))
    await settle()
    assert log.take() == [("add", "x", "1")]


async def test_a_late_handler_first_gets_the_cache_as_adds(world) -> None:
    _, _api, informer, _log = world
    late = Log()
    informer.add_handler(late)
    assert late.take() == [("add", "before", "1")]


async def test_watch_timeouts_on_virtual_time_just_rewatch(world) -> None:
    clock, api, informer, log = world
    log.take()
    await clock.advance(301)  # the server closes the watch after timeout_seconds
    await api.create(CONFIGMAPS, "ns", cm("later", "1"))
    await settle()
    assert log.take() == [("add", "later", "1")]
    assert informer.relists == 1


async def test_managed_fields_are_not_cached(world) -> None:
    _, api, informer, _log = world
    body = cm("managed", "1")
    body["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:data": {}}}]
    await api.create(CONFIGMAPS, "ns", body)
    await settle()
    cached = informer.store.get("ns", "managed")
    assert cached is not None and "managedFields" not in cached["metadata"]


async def test_a_server_error_on_watch_lists_again_after_backoff(world) -> None:
    clock, api, informer, log = world
    log.take()
    api.fail("watch", ServerError("etcd event received with PrevKv=nil"))
    api.break_watches(ServerError("internal error"))
    await api.patch(CONFIGMAPS, "ns", "before", {"data": {"v": "2"}})
    await settle()
    assert informer.relists == 1, "no relist before the backoff"
    await clock.advance(0.8)
    assert informer.relists == 2, "an error answer is not retried on the same version forever"
    assert log.take() == [("update", "before", "1->2")]


async def test_a_broken_watch_resumes_after_the_last_event_and_tells_nothing_twice(world) -> None:
    clock, api, informer, log = world
    log.take()
    await api.delete(CONFIGMAPS, "ns", "before")
    await settle()
    api.break_watches(TransportError("connection reset"))
    await clock.advance(1)
    await api.create(CONFIGMAPS, "ns", cm("after", "1"))
    await settle()
    assert log.events == [("delete", "before", "1"), ("add", "after", "1")], "the delete told once"
    assert informer.relists == 1
