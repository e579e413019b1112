"""HttpClient's pool: watches apart from requests, idle connections retired, dead ones replayed when safe.

Issue 22, defects 1 (watches filled the pool) and 2 (no idle timeout, no TCP keepalive).
"""

from __future__ import annotations

import asyncio
import socket

import pytest
from httpscript import Server, client_of, get, keep_answering, ok

from kubetrain.common.errors import TransportError


async def test_more_watches_than_slots_do_not_starve_requests() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        while True:
            request = await me.read_request(reader)
            if b"watch=true" in request:
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
                await writer.drain()
                await reader.read()  # held open, as the API server holds a watch
                return
            writer.write(ok())
            await writer.drain()

    async with client_of(script, limit=2) as (_srv, client):
        watches = [client.open("GET", "/pods", query={"watch": "true"}, stream=True) for _ in range(4)]
        for watch in watches:
            resp = await watch.__aenter__()
            assert await anext(resp.chunks()) == b"{}"
        try:
            results = await asyncio.gather(*(get(client, head_timeout_s=5) for _ in range(3)))
            assert [code for code, _ in results] == [200] * 3
        finally:
            for watch in watches:
                await watch.__aexit__(None, None, None)


async def test_a_connection_idle_past_the_idle_timeout_is_not_reused() -> None:
    async with client_of(keep_answering(ok()), idle_timeout_s=0.2) as (srv, client):
        assert await get(client) == (200, b'{"ok":true}')
        assert await get(client) == (200, b'{"ok":true}')
        assert srv.connections == 1
        await asyncio.sleep(0.3)  # past the idle timeout: what is asserted is a new connection
        assert await get(client) == (200, b'{"ok":true}')
        assert srv.connections == 2


async def test_pooled_connections_have_tcp_keepalive() -> None:
    async with client_of(keep_answering(ok())) as (_srv, client), client.open("GET", "/api") as resp:
        sock = resp.connection.writer.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) <= 30
        await resp.read()


def dropping_first_request_on_connection(n_drop: int = 1) -> object:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await me.read_request(reader)
        writer.write(ok())
        await writer.drain()
        if n < n_drop:  # connection 0: the server drops it after its first answer, unseen by the client
            await me.read_request(reader)
            writer.transport.abort()
            return
        while True:
            await me.read_request(reader)
            writer.write(ok())
            await writer.drain()

    return script


@pytest.mark.parametrize("method", ["PUT", "DELETE"])
async def test_an_idempotent_write_on_a_dead_reused_connection_is_sent_once_more(method: str) -> None:
    async with client_of(dropping_first_request_on_connection()) as (srv, client):  # type: ignore[arg-type]
        assert await get(client) == (200, b'{"ok":true}')
        async with client.open(method, "/api/x", body=b"{}") as resp:
            assert resp.status == 200
            await resp.read()
    assert srv.connections == 2
    assert [r.split(b" ")[0] for r in srv.requests] == [b"GET", method.encode(), method.encode()]


@pytest.mark.parametrize("method", ["POST", "PATCH"])
async def test_a_write_that_is_not_idempotent_is_not_replayed(method: str) -> None:
    async with client_of(dropping_first_request_on_connection()) as (srv, client):  # type: ignore[arg-type]
        assert await get(client) == (200, b'{"ok":true}')
        with pytest.raises(TransportError, match=f"{method} /api/x"):
            async with client.open(method, "/api/x", body=b"{}"):
                pass
    assert srv.connections == 1
