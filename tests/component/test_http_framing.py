"""What HttpClient does with answers a well-behaved API server never sends: each is refused, never misread.

Issue 22, defects 3 and 4: header values that would inject headers, and malformed or ambiguous framing.
A malformed answer is a TransportError naming the request, and its connection is never reused, so it
cannot corrupt the next answer.
"""

from __future__ import annotations

import asyncio

import pytest
from httpscript import Server, client_of, get, keep_answering, ok

from kubetrain.common.errors import TransportError

CHUNKED = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"


def answering_once(answer: bytes) -> object:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(answer)
        await writer.drain()
        await reader.read()

    return script


@pytest.mark.parametrize(
    "answer",
    [
        CHUNKED + b"-1\r\n",
        CHUNKED + b"+a\r\nhelloworld\r\n0\r\n\r\n",
        CHUNKED + b"0x10\r\n",
        CHUNKED + b"1_0\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nabc",
        b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1_0\r\n\r\n0123456789",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-A: a\nX-B: b\r\nContent-Length: 2\r\n\r\nhi",
        b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nhi",
    ],
    ids=[
        "chunk-negative", "chunk-plus", "chunk-0x", "chunk-underscore", "length-negative", "length-plus",
        "length-underscore", "gzip-chunked", "length-and-chunked", "bare-lf", "status-2000",
    ],
)  # fmt: skip
async def test_malformed_framing_is_a_transport_error(answer: bytes) -> None:
    async with client_of(answering_once(answer)) as (_srv, client):  # type: ignore[arg-type]
        with pytest.raises(TransportError, match="GET /api"):
            async with asyncio.timeout(5):  # a misread length would wait for bytes that never come
                await get(client)


async def test_interim_responses_are_bounded() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        for _ in range(10_000):
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        writer.write(ok())
        await reader.read()

    async with client_of(script) as (_srv, client):
        with pytest.raises(TransportError, match="interim"):
            await get(client, head_timeout_s=20)


@pytest.mark.parametrize(
    ("method", "first"),
    [
        ("GET", b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello"),
        ("GET", b"HTTP/1.1 304 Not Modified\r\n\r\nstray"),
        ("HEAD", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"),
    ],
    ids=["204", "304", "HEAD"],
)
async def test_a_body_where_none_belongs_does_not_corrupt_the_next_answer(method: str, first: bytes) -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 0:
            await me.read_request(reader)
            writer.write(first)
            await writer.drain()
        while True:
            await me.read_request(reader)
            writer.write(ok())
            await writer.drain()

    async with client_of(script) as (_srv, client):
        async with client.open(method, "/api") as resp:
            assert (resp.status, await resp.read()) == (int(first[9:12]), b"")
        async with client.open("PATCH", "/api", body=b"{}") as resp:  # a PATCH is never replayed
            assert (resp.status, await resp.read()) == (200, b'{"ok":true}')


async def test_a_read_to_close_body_cut_by_the_read_timeout_is_an_error_not_a_short_body() -> None:
    async def script(me: Server, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _n: int) -> None:
        await me.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\n\r\npart of it")
        await writer.drain()
        await reader.read()  # then silence

    async with client_of(script) as (_srv, client), client.open("GET", "/api") as resp:
        resp.read_timeout = 0.2
        with pytest.raises(TransportError, match="nothing received"):
            await resp.read()
        assert not resp.complete


@pytest.mark.parametrize(
    "value", ["Bearer a\r\nX-Injected: 1", "Bearer a\nX-Injected: 1", "Bearer a\x00", "Bearer ä€"]
)
async def test_a_header_value_that_is_not_a_field_value_is_refused_naming_the_header(value: str) -> None:
    async with client_of(keep_answering(ok())) as (srv, client):
        with pytest.raises(TransportError, match=r"header 'Authorization'.*token"):
            await get(client, headers={"Authorization": value})
        assert srv.requests == [], "nothing reaches the server"


async def test_a_header_name_that_is_not_a_token_is_refused() -> None:
    async with client_of(keep_answering(ok())) as (srv, client):
        with pytest.raises(TransportError, match="header 'X Bad'"):
            await get(client, headers={"X Bad": "1"})
        assert srv.requests == []
