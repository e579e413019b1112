"""The progress endpoint over HTTPS: the pods' own helper (`kubetrain.runtimes.progress`) reports through it
with the CA and a token file, as in a pod; oversized bodies, other methods and connections past the cap are
refused without the body being read or anything written."""

from __future__ import annotations

import asyncio
import http.client
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubetrain.api import PYTORCHJOB
from kubetrain.common.progress.server import ProgressServer
from kubetrain.runtimes.progress import Reporter, http_sender
from kubetrain.testing.certs import ServingTls, make_serving_tls

from .test_status_endpoint import PATH, Plane, _body


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> ServingTls:
    return make_serving_tls(tmp_path_factory.mktemp("tls"), "progress-test")


async def _start(
    tls: ServingTls, *, max_connections: int = 4, idle_timeout: float = 120.0, per_peer: int = 32
) -> tuple[Plane, ProgressServer]:
    """A served endpoint whose one job mnist has the pod mnist-master-0."""
    plane = Plane()
    job = await plane.job(PYTORCHJOB, "team-a", "mnist")
    plane.pod(job, "mnist-master-0")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls.crt, tls.key)
    server = ProgressServer(
        plane.endpoint,
        ssl_context=context,
        max_connections=max_connections,
        idle_timeout=idle_timeout,
        per_peer=per_peer,
    )
    await server.start("127.0.0.1", 0)
    return plane, server


@pytest.fixture
async def served(tls: ServingTls) -> AsyncIterator[tuple[Plane, ProgressServer]]:
    plane, server = await _start(tls)
    yield plane, server
    await server.stop()


def _post(port: int, ca: Path, body: bytes, *, method: str = "POST", length: int | None = None) -> int:
    connection = http.client.HTTPSConnection(
        "127.0.0.1", port, context=ssl.create_default_context(cafile=str(ca)), timeout=5
    )
    headers = {"Content-Length": str(len(body) if length is None else length)}
    connection.request(method, PATH, body=body, headers=headers)
    status = connection.getresponse().status
    connection.close()
    return status


async def test_the_runtime_helper_reports_over_https_with_its_token_file(
    served: tuple[Plane, ProgressServer], tls: ServingTls, tmp_path: Path
) -> None:
    plane, server = served
    token = tmp_path / "token"
    token.write_text(plane.tokens.issue("good", "team-a", "mnist-master-0").removeprefix("Bearer "))
    url = f"https://127.0.0.1:{server.port}{PATH}"
    reporter = Reporter(http_sender(url, ca_cert=str(tls.ca_crt), token_path=str(token)), min_interval=0)
    reporter.report(step=3, total=4, loss=0.25)
    assert await asyncio.to_thread(reporter.flush, 10)
    assert reporter.sent == 1
    await plane.coalescer.write_due()
    assert (await plane.stored_progress())["progressPercentage"] == 75


async def test_an_oversized_body_is_refused_from_its_length_and_other_methods_are_not_served(
    served: tuple[Plane, ProgressServer], tls: ServingTls
) -> None:
    plane, server = served
    assert await asyncio.to_thread(_post, server.port, tls.ca_crt, b"", length=10**9) == 413
    assert await asyncio.to_thread(_post, server.port, tls.ca_crt, b"", method="GET") == 405
    assert await asyncio.to_thread(_post, server.port, tls.ca_crt, _body()) == 401  # no token
    await plane.coalescer.write_due()
    assert await plane.stored_progress() is None


async def test_past_the_cap_a_new_connection_is_served_and_the_oldest_one_goes(
    served: tuple[Plane, ProgressServer], tls: ServingTls
) -> None:
    """Connections held open (here 4 at the cap of 4) cannot lock the pods out: the newest is served, and
    the oldest of the peer holding most is closed."""
    _, server = served
    client = ssl.create_default_context(cafile=str(tls.ca_crt))
    held = [await asyncio.open_connection("127.0.0.1", server.port, ssl=client) for _ in range(4)]
    try:
        assert await asyncio.to_thread(_post, server.port, tls.ca_crt, b"{}") == 401  # served past the cap
        assert await asyncio.wait_for(held[0][0].read(), 5) == b"", "the oldest was closed"
    finally:
        for _, writer in held:
            writer.close()


async def test_a_pods_reports_share_one_connection_until_it_idles_out(
    tls: ServingTls, tmp_path: Path
) -> None:
    plane, server = await _start(tls, idle_timeout=0.5)
    token = tmp_path / "token"
    token.write_text(plane.tokens.issue("good", "team-a", "mnist-master-0").removeprefix("Bearer "))
    url = f"https://127.0.0.1:{server.port}{PATH}"
    send = http_sender(url, ca_cert=str(tls.ca_crt), token_path=str(token))
    try:
        waits = [await asyncio.to_thread(send, _body(progressPercentage=p)) for p in (10, 20, 30)]
        assert send.connections == 1, "one TLS handshake for every report"
        assert waits[0] == 10 and waits[-1] == 10  # Retry-After: the job's next write
        async with asyncio.timeout(5):  # the server closes the idle connection after its 0.5 s
            while server.connections:
                await asyncio.sleep(0.05)
        await asyncio.to_thread(send, _body(progressPercentage=40))
        assert send.connections == 2
        await plane.clock.advance(10)
        await plane.coalescer.write_due()
        assert (await plane.stored_progress())["progressPercentage"] == 40
    finally:
        send.close()
        await server.stop()


async def test_a_refused_report_closes_its_connection_at_once(
    served: tuple[Plane, ProgressServer], tls: ServingTls
) -> None:
    """Issue 35, defect 4: a 401 was kept alive for the 120 s of a reporting pod's connection."""
    _, server = served
    client = ssl.create_default_context(cafile=str(tls.ca_crt))
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port, ssl=client)
    try:
        writer.write(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        answer = await asyncio.wait_for(reader.read(), 5)  # the whole answer, then the end of the stream
        assert answer.startswith(b"HTTP/1.1 401 ") and b"connection: close" in answer.lower()
    finally:
        writer.close()


async def test_one_peer_past_its_cap_closes_only_its_own_connections(tls: ServingTls) -> None:
    """Issue 35, defect 4: with no per-peer cap, one address could hold all of the endpoint's slots."""
    _, server = await _start(tls, max_connections=8, per_peer=2)
    client = ssl.create_default_context(cafile=str(tls.ca_crt))
    other = await asyncio.open_connection("127.0.0.1", server.port, ssl=client, local_addr=("127.0.0.2", 0))
    try:
        mine = [await asyncio.open_connection("127.0.0.1", server.port, ssl=client) for _ in range(3)]
        assert await asyncio.wait_for(mine[0][0].read(), 5) == b"", "its own oldest was closed"
        other[1].write(b"POST " + PATH.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        assert (await asyncio.wait_for(other[0].read(), 5)).startswith(b"HTTP/1.1 401 "), (
            "the other peer's is served"
        )
        for _, writer in mine:
            writer.close()
    finally:
        other[1].close()
        await server.stop()
