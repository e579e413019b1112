"""KubeApiClient's HTTP plumbing against a scripted local server: error mapping, paging, watch, limits.

Real API-server behaviour (what it returns when) is covered in tests/integration/test_kube_client.py;
here the server only replays canned answers, to pin how the client reads them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry

from kubetrain.common import errors
from kubetrain.common.kube.client import PatchType, Propagation, WatchEventType
from kubetrain.common.kube.resources import PODS, Resource
from kubetrain.common.kube.rest import Credentials, KubeApiClient
from kubetrain.common.metrics import Metrics
from kubetrain.common.testing import FakeClock

Handler = Callable[[web.Request], Any]


class Server:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.seen: list[web.Request] = []
        self.bodies: list[Any] = []

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(request)
        self.bodies.append(json.loads(await request.text()) if request.can_read_body else None)
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return web.json_response(status_body(404, "NotFound", "no route"), status=404)
        return await handler(request)


def status_body(code: int, reason: str, message: str = "m", **extra: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason,
            "message": message, **extra}  # fmt: skip


@pytest.fixture
async def server() -> AsyncIterator[tuple[Server, Credentials]]:
    srv = Server()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", srv.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    cfg = Credentials(host=f"http://127.0.0.1:{runner.addresses[0][1]}", token="secret-token")
    yield srv, cfg
    await runner.cleanup()


@pytest.fixture
async def client(server) -> AsyncIterator[KubeApiClient]:
    c = KubeApiClient(server[1])
    yield c
    await c.close()


def reply(code: int, body: Any, headers: dict[str, str] | None = None) -> Handler:
    async def handler(_r: web.Request) -> web.Response:
        if isinstance(body, str):
            return web.Response(status=code, text=body, headers=headers)
        return web.json_response(body, status=code, headers=headers)

    return handler


POD_PATH = "/api/v1/namespaces/ns/pods/p"


@pytest.mark.parametrize(
    ("code", "body", "cls"),
    [
        (404, status_body(404, "NotFound"), errors.NotFound),
        (409, status_body(409, "AlreadyExists"), errors.AlreadyExists),
        (409, status_body(409, "Conflict"), errors.Conflict),
        (410, status_body(410, "Gone"), errors.Gone),
        (403, status_body(403, "Forbidden"), errors.Forbidden),
        (422, status_body(422, "Invalid", details={"causes": [{"field": "spec.x"}]}), errors.Invalid),
        (500, "internal error, not JSON", errors.ServerError),
    ],
)
async def test_http_errors_map_to_the_error_tree(server, client, code, body, cls) -> None:
    srv, _ = server
    srv.routes["GET", POD_PATH] = reply(code, body)
    with pytest.raises(cls) as caught:
        await client.get(PODS, "ns", "p")
    assert caught.value.status == code
    if isinstance(body, dict):
        assert caught.value.message == "m" and caught.value.reason == body["reason"]
        assert caught.value.details == body.get("details", {})


async def test_too_many_requests_carries_retry_after(server, client) -> None:
    srv, _ = server
    srv.routes["GET", POD_PATH] = reply(429, status_body(429, "TooManyRequests"), {"Retry-After": "3"})
    with pytest.raises(errors.TooManyRequests) as caught:
        await client.get(PODS, "ns", "p")
    assert caught.value.retry_after == 3.0


async def test_unreachable_server_is_a_transport_error() -> None:
    c = KubeApiClient(Credentials(host="http://127.0.0.1:9"))
    try:
        with pytest.raises(errors.TransportError):
            await c.get(PODS, "ns", "p")
    finally:
        await c.close()


async def test_list_follows_continue_tokens_and_fills_kind(server, client) -> None:
    srv, _ = server

    async def pages(request: web.Request) -> web.Response:
        assert request.query["labelSelector"] == "a=b"
        if "continue" not in request.query:
            return web.json_response(
                {"items": [{"metadata": {"name": "p1"}}], "metadata": {"continue": "tok"}}
            )
        assert request.query["continue"] == "tok"
        return web.json_response(
            {"items": [{"metadata": {"name": "p2"}}], "metadata": {"resourceVersion": "77"}}
        )

    srv.routes["GET", "/api/v1/pods"] = pages
    listed = await client.list(PODS, label_selector={"a": "b"})
    assert [i["metadata"]["name"] for i in listed.items] == ["p1", "p2"]
    assert listed.resource_version == "77"
    assert all(i["kind"] == "Pod" and i["apiVersion"] == "v1" for i in listed.items)


async def test_writes_send_the_right_verbs_bodies_and_headers(server, client) -> None:
    srv, _ = server
    crd = Resource("kubeflow.org", "v1", "tfjobs", "TFJob")
    base = "/apis/kubeflow.org/v1/namespaces/ns/tfjobs"
    srv.routes["POST", base] = reply(201, {"metadata": {"name": "j"}})
    srv.routes["PATCH", f"{base}/j/status"] = reply(200, {"metadata": {"name": "j"}})
    srv.routes["DELETE", f"{base}/j"] = reply(200, status_body(200, ""))
    await client.create(crd, "ns", {"metadata": {"name": "j"}})
    await client.patch(crd, "ns", "j", {"status": {}}, subresource="status")
    await client.patch(
        crd, "ns", "j", {"status": {}}, subresource="status", patch_type=PatchType.APPLY, force=True
    )
    await client.delete(crd, "ns", "j", propagation=Propagation.FOREGROUND, uid_precondition="u1")
    create, merge, apply, _delete = srv.seen
    assert srv.bodies[0] == {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "j"}}
    assert create.query["fieldManager"] == "kubetrain"
    assert create.headers["Authorization"] == "Bearer secret-token"
    assert merge.headers["Content-Type"] == "application/merge-patch+json" and "force" not in merge.query
    assert apply.headers["Content-Type"] == "application/apply-patch+yaml" and apply.query["force"] == "true"
    assert srv.bodies[3]["propagationPolicy"] == "Foreground"
    assert srv.bodies[3]["preconditions"] == {"uid": "u1"}


async def test_a_create_whose_answer_is_not_read_back_is_not_decoded(server, client) -> None:
    srv, _ = server
    base = "/api/v1/namespaces/ns/pods"
    srv.routes["POST", base] = reply(201, "{not JSON: a decode would fail")
    srv.routes["GET", POD_PATH] = reply(200, {"metadata": {"name": "p"}})
    assert await client.create(PODS, "ns", {"metadata": {"name": "p"}}, read_back=False) == {}
    assert (await client.get(PODS, "ns", "p"))["metadata"] == {"name": "p"}, "the next answer reads whole"
    srv.routes["POST", base] = reply(409, status_body(409, "AlreadyExists"))
    with pytest.raises(errors.AlreadyExists):
        await client.create(PODS, "ns", {"metadata": {"name": "p"}}, read_back=False)


async def test_a_patch_whose_answer_is_not_read_back_gives_its_metadata_only(server, client) -> None:
    """The Reporter reads only the new resourceVersion of its status patch: the rest is skipped."""
    srv, _ = server
    crd = Resource("kubeflow.org", "v1", "mpijobs", "MPIJob")
    path = "/apis/kubeflow.org/v1/namespaces/ns/mpijobs/j/status"
    stored = {
        "metadata": {"name": "j", "resourceVersion": "8", "managedFields": [{"manager": "kubetrain"}]},
        "spec": {"mpiReplicaSpecs": {}},
        "status": {"conditions": [{"type": "Created", "status": "True"}]},
    }
    srv.routes["PATCH", path] = reply(200, stored)
    answer = await client.patch(crd, "ns", "j", {"status": {}}, subresource="status", read_back=False)
    assert answer == {"metadata": {"name": "j", "resourceVersion": "8"}}
    assert await client.patch(crd, "ns", "j", {"status": {}}, subresource="status") == stored
    srv.routes["PATCH", path] = reply(409, status_body(409, "Conflict"))
    with pytest.raises(errors.Conflict):
        await client.patch(crd, "ns", "j", {"status": {}}, subresource="status", read_back=False)


async def test_watch_streams_events_across_chunk_boundaries_then_raises_gone(server, client) -> None:
    srv, _ = server

    async def stream(request: web.Request) -> web.StreamResponse:
        assert request.query["watch"] == "true"
        assert request.query["resourceVersion"] == "5"
        assert request.query["allowWatchBookmarks"] == "true"
        resp = web.StreamResponse()
        await resp.prepare(request)
        added = json.dumps({"type": "ADDED", "object": {"metadata": {"name": "p", "resourceVersion": "6"}}})
        await resp.write(added[:20].encode())
        await asyncio.sleep(0.01)
        await resp.write(added[20:].encode() + b"\n")
        bookmark = {"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}
        await resp.write(json.dumps(bookmark).encode() + b"\n")
        await resp.write(
            json.dumps({"type": "ERROR", "object": status_body(410, "Expired")}).encode() + b"\n"
        )
        return resp

    srv.routes["GET", "/api/v1/namespaces/ns/pods"] = stream
    seen = []
    with pytest.raises(errors.Gone):
        async for event in client.watch(PODS, "ns", resource_version="5"):
            seen.append((event.type, event.object["metadata"]["resourceVersion"]))
    assert seen == [(WatchEventType.ADDED, "6"), (WatchEventType.BOOKMARK, "9")]


async def test_client_side_rate_limit_holds_requests_beyond_the_burst(server) -> None:
    srv, cfg = server
    srv.routes["GET", POD_PATH] = reply(200, {"metadata": {"name": "p"}})
    clock = FakeClock()
    c = KubeApiClient(cfg, qps=1, burst=2, clock=clock)
    try:
        calls = [asyncio.ensure_future(c.get(PODS, "ns", "p")) for _ in range(3)]
        await asyncio.sleep(0.2)
        assert len(srv.seen) == 2, "the third request waits for a token"
        await clock.advance(1)
        await asyncio.wait_for(asyncio.gather(*calls), 5)
        assert len(srv.seen) == 3
    finally:
        await c.close()


async def test_every_request_is_counted_as_client_go_counts_it(server) -> None:
    """rest_client_requests_total{code,method,host}: answers by status, a watch once, no answer as <error>."""
    srv, cfg = server
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    c = KubeApiClient(cfg, metrics=metrics)
    srv.routes["GET", POD_PATH] = reply(200, {"metadata": {"name": "p"}})
    srv.routes["DELETE", POD_PATH] = reply(404, status_body(404, "NotFound"))
    srv.routes["GET", "/api/v1/namespaces/ns/pods"] = reply(200, {"type": "ADDED", "object": {}})
    try:
        await c.get(PODS, "ns", "p")
        await c.get(PODS, "ns", "p")
        with pytest.raises(errors.NotFound):
            await c.delete(PODS, "ns", "p")
        stream = c.watch(PODS, "ns", resource_version="1")
        await anext(stream)
        await stream.aclose()
    finally:
        await c.close()
    down = KubeApiClient(Credentials(host="http://127.0.0.1:9"), metrics=metrics)
    try:
        with pytest.raises(errors.TransportError):
            await down.get(PODS, "ns", "p")
    finally:
        await down.close()

    host = cfg.host.removeprefix("http://")

    def count(code: str, method: str, where: str = host) -> float | None:
        labels = {"code": code, "method": method, "host": where}
        return registry.get_sample_value("rest_client_requests_total", labels)

    assert count("200", "GET") == 3, "two gets and the watch"
    assert count("404", "DELETE") == 1
    assert count("<error>", "GET", "127.0.0.1:9") == 1
    for family in ("rest_client_request_duration_seconds", "rest_client_rate_limiter_duration_seconds"):
        samples = registry.get_sample_value(f"{family}_count", {"verb": "GET", "host": host})
        assert samples == 3, f"{family}: one observation per request"
