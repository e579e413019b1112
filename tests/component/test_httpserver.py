"""HealthServer over real sockets: the three endpoints, HTTP/1.1 framing and keep-alive, and its limits.

Most tests speak raw HTTP through `asyncio.open_connection`, to see exactly what goes over the wire
(no body after HEAD, the connection closed or kept); one uses urllib, a real client, in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter

from kubetrain.common.httpserver import HealthServer

TEXT = "text/plain; charset=utf-8"
WAIT = 5.0  # seconds a test waits for an answer the server owes it at once

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


@dataclass(frozen=True)
class Reply:
    status: int
    headers: dict[str, str]  # names in lower case
    body: bytes


@asynccontextmanager
async def serving(ready: Callable[[], bool] = lambda: True, **kw: Any) -> AsyncIterator[HealthServer]:
    registry = CollectorRegistry()
    Counter("kubetrain_test_pings", "a counter the test reads back", registry=registry).inc(3)
    server = HealthServer(registry, ready, **kw)
    await server.start("127.0.0.1", 0)
    try:
        yield server
    finally:
        await server.stop()


@asynccontextmanager
async def connection(server: HealthServer) -> AsyncIterator[Connection]:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


def get(path: str, method: str = "GET", *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: test", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes, *, head: bool = False
) -> Reply:
    writer.write(request)
    await writer.drain()
    return await read_reply(reader, head=head)


async def read_reply(reader: asyncio.StreamReader, *, head: bool = False) -> Reply:
    """One response; a missing Content-Length fails (KeyError): every response must carry one."""
    raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), WAIT)
    status_line, *lines = raw[:-4].decode("latin-1").split("\r\n")
    headers = {name.lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    length = int(headers["content-length"])
    body = b"" if head else await asyncio.wait_for(reader.readexactly(length), WAIT)
    return Reply(int(status_line.split(" ")[1]), headers, body)


async def closed_by_server(reader: asyncio.StreamReader, within: float = WAIT) -> bool:
    """Whether the server closes the connection (EOF or a reset) within `within` seconds, sending nothing."""
    try:
        return await asyncio.wait_for(reader.read(), within) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


async def test_the_endpoints_answer_with_their_codes_bodies_and_content_types() -> None:
    ready = False
    async with serving(lambda: ready) as server, connection(server) as (reader, writer):
        health = await exchange(reader, writer, get("/healthz"))
        assert (health.status, health.body, health.headers["content-type"]) == (200, b"ok", TEXT)
        not_ready = await exchange(reader, writer, get("/readyz"))
        assert (not_ready.status, not_ready.headers["content-type"]) == (503, TEXT)
        assert not_ready.body == b"not ready: caches syncing or shutting down"
        ready = True
        assert (await exchange(reader, writer, get("/readyz"))).body == b"ok"
        metrics = await exchange(reader, writer, get("/metrics"))
        assert (metrics.status, metrics.headers["content-type"]) == (200, CONTENT_TYPE_LATEST)
        assert b"kubetrain_test_pings_total 3.0\n" in metrics.body


async def test_a_real_client_gets_the_same_answers_and_the_query_is_ignored() -> None:
    def fetch(url: str) -> tuple[int, str, bytes]:
        try:
            with urllib.request.urlopen(url, timeout=WAIT) as r:
                return r.status, r.headers["Content-Type"], r.read()
        except urllib.error.HTTPError as err:
            with err:
                return err.code, err.headers["Content-Type"], err.read()

    async with serving(lambda: False) as server:
        base = f"http://127.0.0.1:{server.port}"
        assert await asyncio.to_thread(fetch, f"{base}/healthz?verbose") == (200, TEXT, b"ok")
        status, _, body = await asyncio.to_thread(fetch, f"{base}/readyz?verbose=1&exclude=x")
        assert (status, body) == (503, b"not ready: caches syncing or shutting down")
        status, content_type, body = await asyncio.to_thread(fetch, f"{base}/metrics")
        assert (status, content_type) == (200, CONTENT_TYPE_LATEST) and b"kubetrain_test_pings_total" in body


async def test_an_endpoint_that_raises_is_a_500_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def ready() -> bool:
        raise RuntimeError("the manager is confused")

    async with serving(ready) as server, connection(server) as (reader, writer):
        reply = await exchange(reader, writer, get("/readyz"))
        assert (reply.status, reply.body) == (500, b"500: Internal Server Error")
        assert (await exchange(reader, writer, get("/healthz"))).body == b"ok", "the connection goes on"
    ours = [r for r in caplog.records if r.name == "kubetrain.common.listener"]
    logged = [str(r.exc_info[1]) for r in ours if r.exc_info]
    assert logged == ["the manager is confused"], "the traceback is logged"


async def test_an_unknown_path_is_404_and_the_connection_stays_usable() -> None:
    async with serving() as server, connection(server) as (reader, writer):
        for path in ("/", "/healthz/", "/metricsz", "/HEALTHZ"):
            reply = await exchange(reader, writer, get(path))
            assert (reply.status, reply.body) == (404, b"404: Not Found"), path
        assert (await exchange(reader, writer, get("/healthz"))).status == 200


async def test_other_methods_are_405_with_allow_and_their_body_is_read_and_dropped() -> None:
    async with serving() as server, connection(server) as (reader, writer):
        for method in ("POST", "PUT", "DELETE", "OPTIONS"):
            request = get("/metrics", method, "Content-Length: 5") + b"GET /"
            reply = await exchange(reader, writer, request)
            assert (reply.status, reply.headers["allow"]) == (405, "GET, HEAD"), method
        # had the 5 body bytes ("GET /") been taken for the next request, this one would be garbled
        assert (await exchange(reader, writer, get("/healthz"))).body == b"ok"


async def test_head_gets_the_headers_of_get_and_no_body() -> None:
    async with serving() as server, connection(server) as (reader, writer):
        got = await exchange(reader, writer, get("/metrics"))
        head = await exchange(reader, writer, get("/metrics", "HEAD"), head=True)
        assert head.status == 200 and head.headers["content-type"] == CONTENT_TYPE_LATEST
        assert head.headers["content-length"] == str(len(got.body))
        # a body after HEAD's headers would be read here as the start of the next response
        assert (await exchange(reader, writer, get("/healthz"))).body == b"ok"


async def test_two_requests_on_one_kept_alive_connection_and_pipelined_ones() -> None:
    async with serving() as server, connection(server) as (reader, writer):
        first = await exchange(reader, writer, get("/healthz"))
        second = await exchange(reader, writer, get("/readyz"))
        assert (first.status, second.status) == (200, 200)
        assert first.headers["connection"] == second.headers["connection"] == "keep-alive"
        writer.write(get("/healthz") + get("/metrics"))  # both at once: answered in order
        assert (await read_reply(reader)).body == b"ok"
        assert b"kubetrain_test_pings_total" in (await read_reply(reader)).body
        assert not await closed_by_server(reader, within=0.2)


@pytest.mark.parametrize(
    "request_line, connection_header, kept",
    [
        ("GET /healthz HTTP/1.1", "Connection: close", False),
        ("GET /healthz HTTP/1.1", "Connection: keep-alive, Close", False),
        ("GET /healthz HTTP/1.0", None, False),
        ("GET /healthz HTTP/1.0", "Connection: Keep-Alive", False),  # h11 keeps only HTTP/1.1 alive
        ("GET /healthz HTTP/1.1", "Connection: keep-alive", True),
    ],
)
async def test_connection_close_and_http_1_0_close(
    request_line: str, connection_header: str | None, kept: bool
) -> None:
    headers = ["Host: test", connection_header] if connection_header else ["Host: test"]
    raw = ("\r\n".join([request_line, *headers]) + "\r\n\r\n").encode()
    async with serving() as server, connection(server) as (reader, writer):
        reply = await exchange(reader, writer, raw)
        assert (reply.status, reply.body) == (200, b"ok")
        assert reply.headers["connection"] == ("keep-alive" if kept else "close")
        assert await closed_by_server(reader, within=WAIT if not kept else 0.2) is not kept


async def test_an_oversized_header_block_is_refused_with_431_and_closed() -> None:
    async with serving() as server, connection(server) as (reader, writer):
        small = await exchange(reader, writer, get("/healthz", "GET", "X-Filler: " + "a" * 15_000))
        assert small.status == 200, "a block under 16 KiB is fine"
        reply = await exchange(reader, writer, get("/healthz", "GET", "X-Filler: " + "a" * 17_000))
        assert reply.status == 431 and reply.headers["connection"] == "close"
        assert await closed_by_server(reader)


@pytest.mark.parametrize(
    "raw, status",
    [
        (b"GET /healthz\r\n\r\n", 400),
        (b"GET  /healthz HTTP/1.1\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nno colon\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nX-A: 1\r\n folded: x\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n", 413),
        (b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        (b"GET /healthz HTTP/1.1\r\n\r\n", 400),  # no Host
        (b"GET /healthz HTTP/2.0\r\n\r\n", 505),
        (b"GET /healthz FTP/1.0\r\n\r\n", 400),
    ],
)
async def test_a_malformed_request_is_answered_and_its_connection_closed(raw: bytes, status: int) -> None:
    async with serving() as server, connection(server) as (reader, writer):
        reply = await exchange(reader, writer, raw)
        assert (reply.status, reply.headers["connection"]) == (status, "close")
        assert await closed_by_server(reader)


async def test_a_silent_client_is_disconnected_after_the_timeout() -> None:
    async with serving(timeout=0.3) as server, connection(server) as (reader, _):
        started = time.monotonic()
        assert await closed_by_server(reader)
        assert 0.25 <= time.monotonic() - started < 2.0


async def test_a_client_dribbling_its_headers_is_cut_off_at_the_timeout() -> None:
    async with serving(timeout=0.5) as server, connection(server) as (reader, writer):
        started = time.monotonic()
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        for _ in range(30):  # a header byte every 0.05 s: never idle for long, never done
            if reader.at_eof() or reader.exception() is not None:
                break
            writer.write(b"X")
            await asyncio.sleep(0.05)
        assert await closed_by_server(reader, within=1.0)
        assert time.monotonic() - started < 1.4, "the timeout bounds the whole request, not each read"


async def test_an_idle_kept_alive_connection_is_closed_after_the_timeout() -> None:
    async with serving(timeout=0.3) as server, connection(server) as (reader, writer):
        assert (await exchange(reader, writer, get("/healthz"))).status == 200
        assert await closed_by_server(reader, within=2.0)


def handlers() -> list[asyncio.Task[object]]:
    """The server's connection handlers still running."""
    serving = "Listener._serve"
    return [t for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") == serving]


async def test_stop_with_connections_open_returns_promptly_and_closes_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with serving() as server, connection(server) as (idle_reader, idle_writer):
        assert (await exchange(idle_reader, idle_writer, get("/healthz"))).status == 200
        silent_reader, silent_writer = await asyncio.open_connection("127.0.0.1", server.port)
        await asyncio.sleep(0.05)
        assert len(handlers()) == 2
        # asyncio's callback on a handler's task, which logs how it ended if it raised or was cancelled, was
        # added when the task was made; ours, added now, run after it: once they have, it has spoken.
        ended: list[asyncio.Task[object]] = []
        for task in handlers():
            task.add_done_callback(ended.append)
        async with asyncio.timeout(1.0):  # not wait_for: its own task would give the handlers time to end
            await server.stop()
        assert handlers() == [], "stop() returns once the handlers are done"
        assert len(ended) == 2, "stop() returns once the handlers' callbacks have run"
        assert await closed_by_server(idle_reader, within=1.0)
        assert await closed_by_server(silent_reader, within=1.0)
        silent_writer.close()
        with contextlib.suppress(ConnectionError):
            await silent_writer.wait_closed()
        with pytest.raises(ConnectionRefusedError):
            await asyncio.open_connection("127.0.0.1", server.port)
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_past_the_connection_cap_a_new_connection_closes_the_oldest() -> None:
    """Connections that hold on (kept alive, or silent until their timeout) cannot lock the probes out,
    nor grow the operator's memory without bound: a new connection is served, the longest-held goes."""
    async with serving(max_connections=3) as server, contextlib.AsyncExitStack() as stack:
        held = [await stack.enter_async_context(connection(server)) for _ in range(3)]
        for reader, writer in held:
            assert (await exchange(reader, writer, get("/healthz"))).status == 200
        reader, writer = await stack.enter_async_context(connection(server))
        assert (await exchange(reader, writer, get("/readyz"))).status == 200
        assert await closed_by_server(held[0][0], within=1.0)
        for reader, writer in held[1:]:
            assert (await exchange(reader, writer, get("/healthz"))).status == 200
        assert len(handlers()) == 3
