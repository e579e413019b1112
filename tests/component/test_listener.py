"""The connection loop every listener shares (kubetrain.common.listener), over real sockets: the work of a
request whose client went away is cancelled, heads with too many fields are refused, a refusal closes its
connection, and the caps hold per peer (several loopback addresses are several peers)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from http import HTTPStatus

from test_httpserver import closed_by_server, exchange, get, read_reply

from kubetrain.common.listener import Limits, Listener, Reply, Request
from kubetrain.common.servingcert import serving_context


class Work:
    """A handler whose /slow requests wait for ever (a TokenReview that never answers): counts them."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0

    async def __call__(self, request: Request) -> Reply:
        if request.path == "/refuse":
            return Reply(HTTPStatus.UNAUTHORIZED, b"no", close=True)
        if request.path != "/slow":
            return Reply(HTTPStatus.OK, b"ok")
        self.started += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return Reply(HTTPStatus.OK, b"never")


@asynccontextmanager
async def listening(
    work: Work, tls: ssl.SSLContext | None = None, **limits: float
) -> AsyncIterator[Listener]:
    listener = Listener(work, Limits(**limits), ssl_context=tls)  # type: ignore[arg-type]
    await listener.start("127.0.0.1", 0)
    try:
        yield listener
    finally:
        await listener.stop()


async def until(condition: object, within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


async def test_the_work_of_a_request_is_cancelled_when_its_client_goes_away() -> None:
    """Issue 35, defect 2: a dropped request's TokenReview stayed queued (shielded from cancellation)."""
    work = Work()
    async with listening(work) as listener:
        _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.write(get("/slow"))
        await until(lambda: work.started == 1)
        writer.close()  # the client gives up
        await until(lambda: work.cancelled == 1)
        await until(lambda: listener.connections == 0)


async def test_an_evicted_connection_takes_its_work_with_it() -> None:
    """One peer past its cap closes its own oldest connection, and the work that connection started."""
    work = Work()
    async with listening(work, per_peer=2) as listener:
        writers = []
        for _ in range(3):
            _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
            writer.write(get("/slow"))
            writers.append(writer)
            count = len(writers)
            await until(lambda: work.started == count)  # noqa: B023
        await until(lambda: work.cancelled == 1)
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", listener.port, local_addr=("127.0.0.2", 0)
        )
        with contextlib.closing(writer):
            assert (await exchange(reader, writer, get("/healthz"))).status == 200, "another peer is served"
        assert work.cancelled == 1, "the other peer's connection closed no one else's"
        for writer in writers:
            writer.close()


async def test_a_head_with_too_many_fields_is_refused_with_431_and_closed() -> None:
    async with listening(Work(), max_headers=8) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        with contextlib.closing(writer):
            fine = await exchange(reader, writer, get("/", "GET", *[f"X-{n}: v" for n in range(7)]))
            flood = await exchange(reader, writer, get("/", "GET", *[f"X-{n}: v" for n in range(8)]))
            assert (fine.status, flood.status, flood.headers["connection"]) == (200, 431, "close")
            assert await closed_by_server(reader)


async def test_a_refusal_closes_its_connection_at_once() -> None:
    async with listening(Work(), idle_timeout=120) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        with contextlib.closing(writer):
            refused = await exchange(reader, writer, get("/refuse"))
            assert (refused.status, refused.headers["connection"]) == (401, "close")
            assert await closed_by_server(reader, within=2.0), "not kept for the keep-alive period"


async def test_a_connection_makes_at_most_max_requests_the_last_answer_closing_it() -> None:
    """A client that pipelines thousands of requests and never reads is served `max_requests` of them, not
    all: the hostile tier's slow readers (8 connections of 2,000) took about 2 s of the loop's CPU at once,
    and a kubelet probe waited behind them."""
    async with listening(Work(), max_requests=5) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        with contextlib.closing(writer):
            writer.write(get("/") * 50)  # pipelined, all at once
            answers = [await read_reply(reader) for _ in range(5)]
            assert [a.status for a in answers] == [200] * 5
            assert [a.headers["connection"] for a in answers] == ["keep-alive"] * 4 + ["close"]
            assert await closed_by_server(reader), "nothing more is answered on it"
        # the bound is per connection: the next one is served afresh
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        with contextlib.closing(writer):
            assert (await exchange(reader, writer, get("/"))).status == 200


async def test_a_slow_head_is_cut_at_the_head_timeout_with_408() -> None:
    """Slowloris: a byte of header now and then never completes a head; the head has `head_timeout`."""
    async with listening(Work(), head_timeout=0.5, request_timeout=30) as listener:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        with contextlib.closing(writer):
            writer.write(b"GET / HTTP/1.1\r\n")
            started = asyncio.get_running_loop().time()
            answer = b""
            while not answer and asyncio.get_running_loop().time() - started < 5:
                writer.write(b"X")  # a byte of header every 0.1 s, until the server answers
                with contextlib.suppress(TimeoutError):
                    answer = await asyncio.wait_for(reader.read(100), 0.1)
            assert answer.startswith(b"HTTP/1.1 408 ")
            assert asyncio.get_running_loop().time() - started < 2.0


async def test_a_tls_handshake_never_begun_counts_against_its_peers_cap() -> None:
    """Silent TCP connections to a TLS listener: each holds a slot from its first byte, so one peer's loop
    of them closes its own oldest, not ten seconds later when its handshake times out."""
    async with listening(Work(), await serving_context(None), per_peer=2, head_timeout=10) as listener:
        silent = [await asyncio.open_connection("127.0.0.1", listener.port) for _ in range(3)]
        try:
            assert await closed_by_server(silent[0][0], within=2.0), "the oldest handshake was closed"
            await until(lambda: listener.connections == 2)
            silent[1][1].transport.abort()  # a client that leaves mid-handshake
            await until(lambda: listener.connections == 1)
        finally:
            for _, writer in silent:
                writer.close()
