"""The HTTP/1.1 of one connection, on h11: a request read within bounds, an answer written, and the
watch for a client that goes away while its request is being answered.

`kubetrain.common.listener` runs connections with these; they are apart so that each module says one thing.
h11 (python-hyper's sans-IO HTTP/1.1) does the parsing, bodies (Content-Length and chunked), keep-alive rules
and response framing; what it lets through and we refuse is `Listener`'s (see its `_check`).
"""

from __future__ import annotations

import asyncio
import email.utils
from dataclasses import dataclass
from http import HTTPStatus
from urllib.parse import urlsplit

import h11

__all__ = [
    "READ",
    "TEXT",
    "Refused",
    "Reply",
    "Request",
    "read_body",
    "read_head",
    "send",
    "text_refusal",
    "until_gone",
]

TEXT = "text/plain; charset=utf-8"
READ = 65536
"""Bytes asked of a socket at a time."""


@dataclass(frozen=True)
class Request:
    method: bytes
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    """Names in lower case (h11's)."""
    body: bytes

    @property
    def path(self) -> str:
        """The path of an origin-form (`/readyz?verbose`) or absolute-form (`http://host/readyz`) target."""
        try:
            return urlsplit(self.target.decode("ascii")).path
        except ValueError:  # not ASCII, or e.g. an unclosed [ in the host of an absolute-form target
            return ""

    def header(self, name: bytes) -> str | None:
        return next((v.decode("latin-1") for k, v in self.headers if k == name), None)


@dataclass(frozen=True)
class Reply:
    status: HTTPStatus
    body: bytes
    content_type: str = TEXT
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False
    """Close the connection after this answer (a refusal)."""


def text_refusal(status: HTTPStatus) -> Reply:
    return Reply(status, f"{status.value}: {status.phrase}".encode(), close=True)


class Refused(Exception):
    def __init__(self, status: HTTPStatus) -> None:
        super().__init__(status.phrase)
        self.status = status


async def read_head(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    while True:
        event = _next_event(conn)
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ))  # b"": the end of the stream
        elif isinstance(event, h11.Request):
            return event
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def read_body(conn: h11.Connection, reader: asyncio.StreamReader, limit: int) -> bytes:
    body = bytearray()
    while True:
        event = _next_event(conn)
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(READ))
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > limit:  # a chunked body: no Content-Length said so before
                raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        elif isinstance(event, h11.EndOfMessage):
            return bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            raise Refused(HTTPStatus.BAD_REQUEST)


def _next_event(conn: h11.Connection) -> object:
    try:
        return conn.next_event()
    except h11.RemoteProtocolError as err:
        raise Refused(HTTPStatus(err.error_status_hint)) from err


async def until_gone(conn: h11.Connection, reader: asyncio.StreamReader, limit: int) -> None:
    """Returns when the client closes or resets the connection. What it sends meanwhile (a pipelined request)
    is kept for h11, up to `limit` bytes; past that, nothing more is read until the answer is sent."""
    try:
        while len(conn.trailing_data[0]) <= limit:
            data = await reader.read(READ)
            if not data:
                return
            conn.receive_data(data)
    except OSError:
        return
    await asyncio.Event().wait()


async def send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply, *, head_only: bool) -> None:
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return  # nothing can be said on this connection any more
    headers = [
        ("Date", email.utils.formatdate(usegmt=True)),
        ("Content-Type", reply.content_type),
        ("Content-Length", str(len(reply.body))),
        *reply.headers,
        ("Connection", "close" if reply.close else "keep-alive"),  # h11 says close when it must
    ]
    data = conn.send(
        h11.Response(status_code=reply.status.value, headers=headers, reason=reply.status.phrase)
    )
    if not head_only:
        data += conn.send(h11.Data(data=reply.body))
    data += conn.send(h11.EndOfMessage())
    writer.write(data)
    await writer.drain()
