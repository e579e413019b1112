"""HttpClient against a scripted socket server: framing, keep-alive, stale connections, limits, proxies.

The server is dumb on purpose: each test hands it the exact bytes to answer, so what the client does with
chunked bodies, dropped connections and odd heads is fixed here, not by some server's habits.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto

import h11
import pytest
from httpscript import Server, client_of, get, keep_answering, ok, serving

from kubetrain.common.errors import TransportError
from kubetrain.common.kube.http import TLS_READ_BUFFER, HttpClient, use_small_tls_buffers
from kubetrain.testing.certs import make_serving_tls


async def test_requests_reuse_one_kept_alive_connection_and_send_what_was_asked() -> None:
    async with client_of(keep_answering(ok())) as (srv, client):
        for _ in range(3):
            assert await get(client) == (200, b'{"ok":true}')
        async with client.open(
            "POST", "/api/v1/namespaces/a b", query={"labelSelector": "x in (1,2)"}, body=b"{}",
            headers={"Authorization": "Bearer t"},
        ) as resp:  # fmt: skip
            await resp.read()
    assert srv.connections == 1
    post = srv.requests[-1]
    assert post.startswith(b"POST /api/v1/namespaces/a%20b?labelSelector=x+in+%281%2C2%29 HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in post and b"\r\nAuthorization: Bearer t\r\n" in post
    assert post.endswith(b"\r\nContent-Length: 2\r\n\r\n{}")


async def test_a_library_parser_reads_each_request_as_it_was_asked() -> None:
    """h11's server side reads the requests: the heads written here are well-formed HTTP/1.1."""
    async with client_of(keep_answering(ok())) as (srv, client), asyncio.timeout(5):
        assert await get(client) == (200, b'{"ok":true}')
        async with client.open(
            "PATCH", "/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/j/status", query={"fieldManager": "k"},
            body=b'{"status":{}}', headers={"Content-Type": "application/merge-patch+json"},
        ) as resp:  # fmt: skip
            await resp.read()
    server = h11.Connection(h11.SERVER)
    server.receive_data(b"".join(srv.requests))
    seen = []
    for _ in srv.requests:
        request, body = server.next_event(), b""
        while not isinstance(event := server.next_event(), h11.EndOfMessage):
            body += event.data
        assert isinstance(request, h11.Request)
        headers = {name.decode(): value.decode() for name, value in request.headers}
        seen.append((request.method, request.target, headers.get("content-type"), body))
        server.send(h11.Response(status_code=204, headers=[]))
        server.send(h11.EndOfMessage())
        server.start_next_cycle()
    assert seen == [
        (b"GET", b"/api", None, b""),
        (
            b"PATCH", b"/apis/kubeflow.org/v2beta1/namespaces/ns/mpijobs/j/status?fieldManager=k",
            "application/merge-patch+json", b'{"status":{}}',
        ),
    ]  # fmt: skip


async def test_chunked_body_with_extensions_and_trailers_split_across_writes() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        while True:
            await me.read_request(reader)
            for part in (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhel",
                         b"lo\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"):  # fmt: skip
                writer.write(part)
                await writer.drain()
                await asyncio.sleep(0.01)

    async with client_of(script) as (srv, client):
        async with client.open("GET", "/watch") as resp:
            assert b"".join([c async for c in resp.chunks()]) == b"hello world"
        assert await get(client) == (200, b"hello world")
    assert srv.connections == 1, "a chunked body read to its end leaves the connection reusable"


async def test_a_body_without_length_is_read_to_close_and_its_connection_not_reused() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")

    async with client_of(script) as (srv, client):
        assert await get(client) == (200, b"all of it")
        assert await get(client) == (200, b"all of it")
    assert srv.connections == 2


async def test_connection_close_from_the_server_is_honoured() -> None:
    async with client_of(keep_answering(ok(b"{}", "Connection: close"))) as (srv, client):
        await get(client)
        await get(client)
    assert srv.connections == 2


async def test_a_get_on_a_connection_the_server_dropped_is_sent_again_on_a_new_one() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await me.read_request(reader)
        if n == 0:
            writer.write(ok())
            await writer.drain()
            await me.read_request(reader)  # the second request arrives, then the line drops
            return
        writer.write(ok(b'{"second":1}'))

    async with client_of(script) as (srv, client):
        assert await get(client) == (200, b'{"ok":true}')
        assert await get(client) == (200, b'{"second":1}')
    assert srv.connections == 2 and len(srv.requests) == 3


async def test_a_post_on_a_dropped_connection_is_not_replayed() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await me.read_request(reader)
        writer.write(ok())
        await writer.drain()
        if n == 0:
            await me.read_request(reader)

    async with client_of(script) as (srv, client):
        await get(client)
        with pytest.raises(TransportError, match="POST /api"):
            async with client.open("POST", "/api", body=b"{}"):
                pass
    assert [r.split(b" ")[0] for r in srv.requests] == [b"GET", b"POST"]


async def test_an_idle_connection_closed_by_the_server_is_not_reused() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(ok())  # no "Connection: close", yet the server closes once it has answered

    async with client_of(script) as (srv, client):
        await get(client)
        await asyncio.sleep(0.05)
        async with client.open("POST", "/api", body=b"{}") as resp:
            assert resp.status == 200
            await resp.read()
    assert srv.connections == 2


async def test_a_silent_server_is_a_transport_error_within_the_head_timeout() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, _w: asyncio.StreamWriter, _n: int) -> None:
        await reader.read()

    async with client_of(script) as (_srv, client):
        started = asyncio.get_running_loop().time()
        with pytest.raises(TransportError, match="GET /api"):
            await get(client, head_timeout_s=0.2)
        assert asyncio.get_running_loop().time() - started < 2


@pytest.mark.parametrize(
    "answer",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"],
    ids=["not-http", "truncated-body"],
)
async def test_broken_answers_are_transport_errors(answer: bytes) -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(answer)

    async with client_of(script) as (_srv, client):
        with pytest.raises(TransportError, match="GET /api"):
            await get(client)


async def test_unreachable_server_is_a_transport_error_naming_it() -> None:
    async with serving(keep_answering(ok())) as srv:
        port = srv.port
    client = HttpClient(f"http://127.0.0.1:{port}")
    with pytest.raises(TransportError, match=f"cannot connect to 127.0.0.1:{port}"):
        await get(client)
    await client.close()


async def test_open_connections_never_exceed_the_limit() -> None:
    busy = 0
    most = 0

    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        nonlocal busy, most
        while True:
            await me.read_request(reader)
            busy += 1
            most = max(most, busy)
            await asyncio.sleep(0.05)
            busy -= 1
            writer.write(ok())
            await writer.drain()

    async with client_of(script, limit=2) as (srv, client):
        results = await asyncio.gather(*(get(client) for _ in range(6)))
    assert [code for code, _ in results] == [200] * 6
    assert most == 2
    assert srv.connections == 2, "a connection given back while requests wait goes to them, not closed"


async def test_close_ends_a_stream_in_progress_with_a_transport_error() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
        await writer.drain()
        await reader.read()

    async with client_of(script) as (_srv, client):
        async with client.open("GET", "/watch") as resp:
            chunks = resp.chunks()
            assert await anext(chunks) == b"{}"
            asyncio.get_running_loop().call_later(0.05, lambda: asyncio.ensure_future(client.close()))
            with pytest.raises(TransportError, match="GET /watch"):
                await anext(chunks)
        with pytest.raises(TransportError, match="closed"):
            await get(client)


async def test_http_proxy_gets_absolute_form_requests_with_its_credentials() -> None:
    async with serving(keep_answering(ok())) as proxy:
        client = HttpClient("http://api.internal:6443", proxy=f"http://user:p%40ss@127.0.0.1:{proxy.port}")
        try:
            assert await get(client, "/version") == (200, b'{"ok":true}')
        finally:
            await client.close()
    request = proxy.requests[0]
    assert request.startswith(b"GET http://api.internal:6443/version HTTP/1.1\r\nHost: api.internal:6443\r\n")
    assert b"\r\nProxy-Authorization: Basic dXNlcjpwQHNz\r\n" in request


def test_unsupported_proxy_and_server_urls_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"socks5://p:1080.*only http://host:port"):
        HttpClient("https://api:6443", proxy="socks5://p:1080")
    with pytest.raises(ValueError, match=r"'api:6443'.*http\(s\)://host"):
        HttpClient("api:6443")


async def test_the_host_header_is_the_server_as_written_ipv6_included() -> None:
    async with serving(keep_answering(ok())) as proxy:  # through a proxy: no IPv6 needed on this machine
        client = HttpClient("http://[fd00::1]:6443/prefix", proxy=f"http://127.0.0.1:{proxy.port}")
        try:
            assert await get(client, "/version") == (200, b'{"ok":true}')
        finally:
            await client.close()
    expected = b"GET http://[fd00::1]:6443/prefix/version HTTP/1.1\r\nHost: [fd00::1]:6443\r\n"
    assert proxy.requests[0].startswith(expected)


async def test_a_stream_that_goes_quiet_past_its_read_timeout_is_dropped() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
        for _ in range(3):  # chatty for 0.45 s: longer than the timeout, never quiet for as long
            await asyncio.sleep(0.15)
            writer.write(b"2\r\n[]\r\n")
            await writer.drain()
        await reader.read()  # then silent

    async with client_of(script) as (_srv, client), client.open("GET", "/watch") as resp:
        resp.read_timeout = 0.3
        got = []
        started = asyncio.get_running_loop().time()
        with pytest.raises(TransportError, match=r"GET /watch: nothing received for 0.3 s"):
            async for chunk in resp.chunks():
                got.append(chunk)
        assert got == [b"{}", b"[]", b"[]", b"[]"]
        assert 0.7 <= asyncio.get_running_loop().time() - started < 2


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """(server context, client context) for 127.0.0.1, from a throw-away CA."""
    pair = make_serving_tls(tmp_path_factory.mktemp("tls"), "http-client-test")
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(pair.crt, pair.key)
    return server, ssl.create_default_context(cafile=str(pair.ca_crt))


@pytest.mark.parametrize("when", ["stream left before close", "stream open at close"])
async def test_close_leaves_no_socket_open_even_when_the_tls_peer_never_says_goodbye(
    tls_pair: tuple[ssl.SSLContext, ssl.SSLContext], when: str
) -> None:
    """A graceful TLS close waits for the peer's close_notify, which a busy or stuck API server may never
    send. The client must not leave such sockets behind: not at an operator's shutdown, not when a test's
    event loop ends (they are reported as unclosed there, and leak a descriptor each)."""

    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        transport = writer.transport
        assert isinstance(transport, asyncio.ReadTransport)
        transport.pause_reading()  # from now on a close_notify from the client goes unanswered
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n")
        await writer.drain()
        await reader.read()

    server_tls, client_tls = tls_pair
    async with serving(script, ssl_context=server_tls) as srv:
        client = HttpClient(f"https://127.0.0.1:{srv.port}", ssl_context=client_tls)
        async with client.open("GET", "/watch") as resp:
            sock = resp.connection.writer.get_extra_info("socket")
            assert await anext(resp.chunks()) == b"{}"
            if when == "stream open at close":
                await client.close()
        started = asyncio.get_running_loop().time()
        await client.close()
        assert asyncio.get_running_loop().time() - started < 0.5
        assert sock.fileno() == -1, "the socket is closed, not left waiting on the server"


async def test_small_tls_read_buffers_still_read_a_large_answer_whole(
    tls_pair: tuple[ssl.SSLContext, ssl.SSLContext], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's 64 KiB TLS read buffers (use_small_tls_buffers) against a 3 MiB list in one write."""
    monkeypatch.setattr(sslproto.SSLProtocol, "max_size", sslproto.SSLProtocol.max_size)  # restored after
    use_small_tls_buffers()
    body = bytes(range(256)) * (3 * 4096)
    server_tls, client_tls = tls_pair
    async with serving(keep_answering(ok(body)), ssl_context=server_tls) as srv:
        client = HttpClient(f"https://127.0.0.1:{srv.port}", ssl_context=client_tls)
        try:
            async with asyncio.timeout(10):
                assert await get(client) == (200, body)
        finally:
            await client.close()
    assert sslproto.SSLProtocol.max_size == TLS_READ_BUFFER
