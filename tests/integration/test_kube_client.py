"""KubeApiClient, Informer and LeaderElector on a real kube-apiserver: what no fake can vouch for.

Error mapping (404, 409 AlreadyExists vs Conflict, 422), watch from a resourceVersion with bookmarks,
410 Gone on a too-old version, the informer's streaming list (one request where client-go's informers
make one too: no list) and its relist, and a real Lease with two candidates.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import time
import urllib.request
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any

import pytest

from kubetrain.common.clock import SystemClock
from kubetrain.common.errors import AlreadyExists, Conflict, Gone, Invalid, NotFound, TransportError
from kubetrain.common.kube import jsonwire
from kubetrain.common.kube.client import PatchType, WatchEvent, WatchEventType
from kubetrain.common.kube.credentials import load_credentials
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import CONFIGMAPS, EVENTS, LEASES, PODS, SECRETS, SERVICES, Obj, Resource
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.leader import LeaderElectionConfig, LeaderElector

pytestmark = pytest.mark.integration


@pytest.fixture
async def api(control_plane: Any) -> AsyncIterator[KubeApiClient]:
    client = await KubeApiClient.connect(str(control_plane.kubeconfig))
    yield client
    await client.close()


def cm(name: str, value: str = "1", **labels: str) -> Obj:
    return {"metadata": {"name": name, "labels": labels}, "data": {"v": value}}


async def eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_crud_round_trip_and_error_mapping(api: KubeApiClient, namespace: str) -> None:
    created = await api.create(CONFIGMAPS, namespace, cm("a", team="x"))
    assert created["metadata"]["uid"] and created["kind"] == "ConfigMap"
    with pytest.raises(AlreadyExists):
        await api.create(CONFIGMAPS, namespace, cm("a"))
    got = await api.get(CONFIGMAPS, namespace, "a")
    assert got["data"] == {"v": "1"}
    patched = await api.patch(CONFIGMAPS, namespace, "a", {"data": {"v": "2"}})
    assert patched["data"]["v"] == "2"
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}, "data": {"v": "3"}}
    with pytest.raises(Conflict):
        await api.patch(CONFIGMAPS, namespace, "a", stale)
    with pytest.raises(Conflict):
        await api.replace(CONFIGMAPS, namespace, "a", {**created, "data": {"v": "3"}})
    with pytest.raises(Conflict):
        await api.delete(CONFIGMAPS, namespace, "a", uid_precondition="00000000-0000-0000-0000-000000000000")
    listed = await api.list(CONFIGMAPS, namespace, label_selector={"team": "x"})
    assert [o["metadata"]["name"] for o in listed.items] == ["a"] and listed.resource_version
    assert all(o["kind"] == "ConfigMap" for o in listed.items)
    await api.delete(CONFIGMAPS, namespace, "a", uid_precondition=created["metadata"]["uid"])
    with pytest.raises(NotFound):
        await api.get(CONFIGMAPS, namespace, "a")
    with pytest.raises(NotFound):
        await api.delete(CONFIGMAPS, namespace, "a")


async def test_invalid_objects_are_422_with_the_field_named(api: KubeApiClient, namespace: str) -> None:
    bad_pod = {"metadata": {"name": "p"}, "spec": {"containers": []}}
    with pytest.raises(Invalid) as caught:
        await api.create(PODS, namespace, bad_pod)
    assert caught.value.status == 422
    assert "spec.containers" in str(caught.value)


async def test_json_and_apply_patches(api: KubeApiClient, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ssa"}, "data": {"v": "1"}}
    applied = await api.patch(
        CONFIGMAPS, namespace, "ssa", body, patch_type=PatchType.APPLY, field_manager="test"
    )
    assert applied["data"] == {"v": "1"}
    ops = [{"op": "replace", "path": "/data/v", "value": "2"}]
    assert (await api.patch(CONFIGMAPS, namespace, "ssa", ops, patch_type=PatchType.JSON))["data"]["v"] == "2"
    with pytest.raises(Conflict):  # another manager now owns data.v: a non-forced apply conflicts
        await api.patch(CONFIGMAPS, namespace, "ssa", body, patch_type=PatchType.APPLY, field_manager="test")
    forced = await api.patch(
        CONFIGMAPS, namespace, "ssa", body, patch_type=PatchType.APPLY, field_manager="test", force=True
    )
    assert forced["data"]["v"] == "1"


async def collect(
    stream: AsyncGenerator[WatchEvent, None], until: Callable[[list[WatchEvent]], bool]
) -> list[WatchEvent]:
    seen: list[WatchEvent] = []
    try:
        async for event in stream:
            seen.append(event)
            if until(seen):
                break
    finally:
        await stream.aclose()
    return seen


async def test_watch_from_a_resource_version_replays_and_bookmarks(
    api: KubeApiClient, namespace: str
) -> None:
    await api.create(CONFIGMAPS, namespace, cm("before"))
    since = (await api.list(CONFIGMAPS, namespace)).resource_version
    await api.create(CONFIGMAPS, namespace, cm("after"))
    await api.patch(CONFIGMAPS, namespace, "after", {"data": {"v": "2"}})
    await api.delete(CONFIGMAPS, namespace, "after")
    stream = api.watch(CONFIGMAPS, namespace, resource_version=since, timeout_seconds=5)
    events = await asyncio.wait_for(
        collect(stream, lambda seen: any(e.type is WatchEventType.BOOKMARK for e in seen)), 30
    )
    # kube-controller-manager puts `kube-root-ca.crt` into every new namespace when it gets to it, which on a
    # loaded machine can be after `since`: only this test's own objects count
    ours = {"before", "after"}
    changes = [
        (e.type, e.object["metadata"]["name"])
        for e in events
        if e.type is not WatchEventType.BOOKMARK and e.object["metadata"]["name"] in ours
    ]
    kinds = [WatchEventType.ADDED, WatchEventType.MODIFIED, WatchEventType.DELETED]
    assert changes == [(kind, "after") for kind in kinds]
    bookmark = events[-1]
    assert int(bookmark.object["metadata"]["resourceVersion"]) >= int(since)


_LEAN_CASES = [
    pytest.param(CONFIGMAPS, {"data": {"v": "1"}, "immutable": False}, {"data": {"v": "2"}}, id="configmap"),
    pytest.param(SECRETS, {"type": "Opaque", "stringData": {"k": "v"}}, {"data": {"k": "djI="}}, id="secret"),
    pytest.param(
        SERVICES,
        {"spec": {"clusterIP": "None", "selector": {"a": "b"}}},
        {"spec": {"selector": {"a": "c"}}},
        id="service",
    ),
    pytest.param(
        PODS,
        {"spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}},  # Pending
        {"metadata": {"annotations": {"v": "2"}}},
        id="pod",
    ),
    pytest.param(  # an Event's members are not `_Object`'s: decoded the general way
        EVENTS,
        {
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "{namespace}"},
            "reason": "Test",
            "message": "m",
            "type": "Normal",
        },
        {"message": "m2"},
        id="event",
    ),
]


@pytest.mark.parametrize(("resource", "body", "change"), _LEAN_CASES)
async def test_watch_and_list_can_leave_managed_fields_out(
    api: KubeApiClient, namespace: str, resource: Resource, body: Obj, change: Obj, monkeypatch: Any
) -> None:
    """What an informer asks for: the server's objects, less `metadata.managedFields` and nothing else, for
    each kind of object an operator watches (and one it does not, which takes the general path)."""
    general = []  # the objects decoded the general (slower) way
    split = jsonwire._without_managed_fields
    monkeypatch.setattr(jsonwire, "_without_managed_fields", lambda obj: general.append(obj) or split(obj))
    since = (await api.list(resource, namespace)).resource_version
    body = json.loads(json.dumps(body).replace("{namespace}", namespace))
    await api.create(resource, namespace, {"metadata": {"name": "m", "labels": {"team": "x"}}, **body})
    await api.patch(resource, namespace, "m", change)

    def mine(events: list[WatchEvent]) -> list[WatchEvent]:
        return [e for e in events if e.object["metadata"].get("name") == "m"]

    full, lean = [
        mine(
            await asyncio.wait_for(
                collect(
                    api.watch(resource, namespace, resource_version=since, managed_fields=keep),
                    lambda seen: len(mine(seen)) == 2,
                ),
                30,
            )
        )
        for keep in (True, False)
    ]
    assert all(e.object["metadata"]["managedFields"] for e in full), "the server does send them"
    for with_fields, without in zip(full, lean, strict=True):
        assert "managedFields" not in without.object["metadata"]
        del with_fields.object["metadata"]["managedFields"]
        assert without == with_fields
    listed = (await api.list(resource, namespace, label_selector={"team": "x"}, managed_fields=False)).items
    assert listed == [lean[-1].object]
    assert bool(general) == (resource is EVENTS), "only objects of other shapes are decoded the general way"


def compact_etcd(control_plane: Any, revision: str) -> None:
    """Compact etcd at `revision`, as kube-apiserver does every 5 minutes, so older versions are gone.

    The plane does not publish etcd's address; the first line of the apiserver log is its command line.
    """
    argv = control_plane.logs()["kube-apiserver"].read_text().splitlines()[0]
    found = re.search(r"--etcd-servers=(http://\S+)", argv)
    if found is None:
        pytest.fail(f"cannot find --etcd-servers in the apiserver command line: {argv[:200]}")
    body = json.dumps({"revision": revision, "physical": True}).encode()
    request = urllib.request.Request(f"{found.group(1)}/v3/kv/compaction", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def event(name: str, namespace: str) -> Obj:
    # Events are the one kind kube-apiserver watches straight from etcd (no watch cache), so a compacted
    # version really is gone for them; cached kinds keep serving old versions from memory.
    return {
        "metadata": {"name": name, "labels": {"v": "1"}},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": namespace},
        "reason": "Test",
        "message": name,
    }


async def test_a_compacted_resource_version_is_gone(
    api: KubeApiClient, control_plane: Any, namespace: str
) -> None:
    created = await api.create(EVENTS, namespace, event("e", namespace))
    await api.patch(EVENTS, namespace, "e", {"message": "changed"})
    await api.create(
        EVENTS, namespace, event("f", namespace)
    )  # the first event after `created` is compacted too
    compact_etcd(control_plane, (await api.list(EVENTS, namespace)).resource_version)
    with pytest.raises(Gone):
        stream = api.watch(EVENTS, namespace, resource_version=created["metadata"]["resourceVersion"])
        await asyncio.wait_for(collect(stream, lambda _seen: True), 30)


class Unplugged:
    """The real client, with a switch that cuts every watch (open ones break, new ones fail), counting
    lists, streaming lists and plain watches."""

    def __init__(self, api: KubeApiClient) -> None:
        self.api = api
        self.cut = asyncio.Event()
        self.lists = self.streaming_lists = self.watches = 0
        self.resets = 0
        """Open watches the switch broke: proof that the informer saw the network go down."""

    def __getattr__(self, name: str) -> Any:
        return getattr(self.api, name)

    async def list(self, *args: Any, **kwargs: Any) -> Any:
        self.lists += 1
        return await self.api.list(*args, **kwargs)

    async def watch(self, *args: Any, **kwargs: Any) -> AsyncGenerator[WatchEvent, None]:
        streaming = bool(kwargs.get("send_initial_events"))
        self.streaming_lists += streaming
        self.watches += not streaming
        if self.cut.is_set():
            raise TransportError("test: network down")
        stream = self.api.watch(*args, **kwargs)
        try:
            while True:
                step = asyncio.ensure_future(anext(stream))
                cut = asyncio.ensure_future(self.cut.wait())
                await asyncio.wait({step, cut}, return_when=asyncio.FIRST_COMPLETED)
                cut.cancel()
                if not step.done():
                    step.cancel()
                    await asyncio.gather(step, return_exceptions=True)
                    self.resets += 1
                    raise TransportError("test: connection reset")
                try:
                    yield step.result()
                except StopAsyncIteration:
                    return
        finally:
            await stream.aclose()


async def test_informer_tracks_changes_and_relists_after_gone(
    api: KubeApiClient, control_plane: Any, namespace: str
) -> None:
    for name in ("same", "changed", "removed"):
        await api.create(EVENTS, namespace, event(name, namespace))
    client = Unplugged(api)
    informer = Informer(client, EVENTS, clock=SystemClock(), namespace=namespace)  # type: ignore[arg-type]
    log: list[tuple[str, str]] = []

    class Handler:
        def on_add(self, obj: Obj) -> None:
            log.append(("add", obj["message"]))

        def on_update(self, old: Obj, new: Obj) -> None:
            log.append(("update", f"{old['message']}->{new['message']}"))

        def on_delete(self, obj: Obj) -> None:
            log.append(("delete", obj["message"]))

    informer.add_handler(Handler())
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 15)
        await api.create(EVENTS, namespace, event("live", namespace))
        await eventually(lambda: ("add", "live") in log)
        client.cut.set()  # the watch breaks; while it is down, things change and etcd compacts
        await eventually(lambda: client.resets >= 1)
        await api.create(EVENTS, namespace, event("added", namespace))
        await api.patch(EVENTS, namespace, "changed", {"message": "changed!"})
        await api.delete(EVENTS, namespace, "removed")
        compact_etcd(control_plane, (await api.list(EVENTS, namespace)).resource_version)
        client.cut.clear()
        await eventually(lambda: informer.relists >= 2 and ("delete", "removed") in log)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert sorted(log[4:]) == [("add", "added"), ("delete", "removed"), ("update", "changed->changed!")]
    assert sorted(log[:4]) == [("add", "changed"), ("add", "live"), ("add", "removed"), ("add", "same")]
    assert sorted(o["message"] for o in informer.store) == ["added", "changed!", "live", "same"]
    assert client.lists == 0, "the first sync and the relist after Gone were streaming lists"


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def on_add(self, obj: Obj) -> None:
        self.events.append(("add", obj["metadata"]["name"]))

    def on_update(self, old: Obj, new: Obj) -> None:
        self.events.append(("update", f"{new['metadata']['name']}={new['data']['v']}"))

    def on_delete(self, obj: Obj) -> None:
        self.events.append(("delete", obj["metadata"]["name"]))


async def test_an_informer_starts_with_one_streaming_list_and_no_list(
    api: KubeApiClient, namespace: str
) -> None:
    for name in ("a", "b"):
        await api.create(CONFIGMAPS, namespace, cm(name, app="x"))
    await api.create(CONFIGMAPS, namespace, cm("other", app="y"))
    client = Unplugged(api)
    informer = Informer(
        client,  # type: ignore[arg-type]
        CONFIGMAPS,
        clock=SystemClock(),
        namespace=namespace,
        label_selector={"app": "x"},
    )
    log = Log()
    informer.add_handler(log)
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 15)
        assert sorted(log.events) == [("add", "a"), ("add", "b")], "exactly what the selector selects"
        assert sorted(o["metadata"]["name"] for o in informer.store) == ["a", "b"]
        await api.create(CONFIGMAPS, namespace, cm("c", app="x"))
        await api.patch(CONFIGMAPS, namespace, "a", {"data": {"v": "2"}})
        await api.delete(CONFIGMAPS, namespace, "b")
        await api.create(CONFIGMAPS, namespace, cm("ignored", app="y"))
        await eventually(lambda: ("delete", "b") in log.events)
        assert (client.lists, client.streaming_lists, client.watches) == (0, 1, 0), (
            "one request: the streaming list, whose watch then carried the changes"
        )
        client.cut.set()  # the connection breaks: a watch resumes from the last version seen
        await eventually(lambda: client.resets >= 1)
        await api.create(CONFIGMAPS, namespace, cm("d", app="x"))
        client.cut.clear()
        await eventually(lambda: ("add", "d") in log.events)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert log.events[2:] == [("add", "c"), ("update", "a=2"), ("delete", "b"), ("add", "d")]
    assert sorted(o["metadata"]["name"] for o in informer.store) == ["a", "c", "d"]
    assert client.lists == 0 and client.streaming_lists == 1 and client.watches >= 1
    assert informer.streaming_list and informer.relists == 1, "no refill after a broken connection"


async def test_informer_sees_adds_updates_and_deletes(api: KubeApiClient, namespace: str) -> None:
    informer = Informer(
        api, CONFIGMAPS, clock=SystemClock(), namespace=namespace, label_selector={"app": "x"}
    )
    names = Log()
    informer.add_handler(names)
    log = names.events
    task = asyncio.ensure_future(informer.run())
    try:
        await asyncio.wait_for(informer.wait_synced(), 15)
        await api.create(CONFIGMAPS, namespace, cm("ignored"))  # not selected by the label selector
        await api.create(CONFIGMAPS, namespace, cm("a", app="x"))
        await api.patch(CONFIGMAPS, namespace, "a", {"data": {"v": "2"}})
        await api.delete(CONFIGMAPS, namespace, "a")
        await eventually(lambda: ("delete", "a") in log)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert log == [("add", "a"), ("update", "a=2"), ("delete", "a")]
    assert len(informer.store) == 0


async def test_leader_election_on_a_real_lease(control_plane: Any, namespace: str) -> None:
    clients = [await KubeApiClient.connect(str(control_plane.kubeconfig)) for _ in range(2)]
    working: dict[str, bool] = {"a": False, "b": False}

    def candidate(name: str, client: KubeApiClient) -> asyncio.Task[None]:
        config = LeaderElectionConfig(
            namespace, "kubetrain", name, lease_duration=4, renew_deadline=3, retry_period=0.5
        )

        async def lead() -> None:
            working[name] = True
            try:
                await asyncio.Event().wait()
            finally:
                working[name] = False

        return asyncio.ensure_future(LeaderElector(client, config, clock=SystemClock()).run(lead))

    try:
        a = candidate("a", clients[0])
        await eventually(lambda: working["a"])
        b = candidate("b", clients[1])
        await asyncio.sleep(2)
        assert working == {"a": True, "b": False}
        lease = await clients[1].get(LEASES, namespace, "kubetrain")
        assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 4
        started = time.monotonic()
        a.cancel()
        await asyncio.gather(a, return_exceptions=True)
        await eventually(lambda: working["b"], timeout=10)
        assert time.monotonic() - started < 2.5, (
            "a released lease is taken at the next retry, not after expiry"
        )
        lease = await clients[1].get(LEASES, namespace, "kubetrain")
        assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] >= 1
        b.cancel()
        await asyncio.gather(b, return_exceptions=True)
    finally:
        for client in clients:
            await client.close()


async def test_requests_and_watches_go_through_an_http_connect_proxy(
    control_plane: Any, namespace: str
) -> None:
    """A kubeconfig's proxy-url: TLS to the API server inside a CONNECT tunnel, as client-go does."""
    tunnels: list[bytes] = []
    writers: list[asyncio.StreamWriter] = []

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        head = await reader.readuntil(b"\r\n\r\n")
        tunnels.append(head.split(b"\r\n")[0])
        host, port = head.split(b" ")[1].decode().rsplit(":", 1)
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        writers.append(up_writer)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(proxy, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    creds = dataclasses.replace(
        await load_credentials(str(control_plane.kubeconfig)), proxy=f"http://127.0.0.1:{port}"
    )
    api = KubeApiClient(creds)
    try:
        created = await api.create(CONFIGMAPS, namespace, cm("via-proxy"))
        events = api.watch(CONFIGMAPS, namespace, resource_version=created["metadata"]["resourceVersion"])
        await api.patch(CONFIGMAPS, namespace, "via-proxy", {"data": {"v": "2"}})
        event = await asyncio.wait_for(anext(events), 15)
        assert (event.type, event.object["data"]) == (WatchEventType.MODIFIED, {"v": "2"})
        await events.aclose()
    finally:
        await api.close()
        server.close()
        for writer in writers:  # the tunnels' both ends: a test leaves no socket behind
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
        await server.wait_closed()
    api_host = creds.host.split("://", 1)[1].encode()
    assert tunnels and all(t == b"CONNECT " + api_host + b" HTTP/1.1" for t in tunnels), tunnels
