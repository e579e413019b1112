"""One HTTP/1.1 exchange's response, as `kubetrain.common.kube.http` reads it off a pooled connection.

The bytes are parsed by httptools (llhttp, Node.js's parser, in C): status line, header fields and the
body's framing (`Content-Length`, chunked) are its work, and it refuses what RFC 9112 refuses (signed or
non-decimal lengths, `Content-Length` beside `Transfer-Encoding`, bare LF, a status of other than three
digits, a body where none belongs). Measured against the parser it replaced and h11 in
bench/http_parsers.py. What is left here is the connection's side of it:

- the head must arrive within `HEAD_LIMIT` bytes and at most `MAX_INTERIM` 1xx answers;
- a transfer coding other than chunked is refused (we never offer one);
- a body without framing ends when the server closes, unless we closed the connection ourselves (the
  watchdog): then it is an error, not a short body;
- bytes past the end of the response (a body on a 204, say) mean the connection is not reused;
- the watchdog drops a streamed body gone quiet.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httptools

from kubetrain.common.errors import TransportError

__all__ = ["BROKEN", "HEAD_LIMIT", "Conn", "Response", "describe", "read_response"]

BUFFER = 2**18  # the most read off the socket at once
HEAD_LIMIT = 2**20  # status line and header fields, 1xx answers included
MAX_INTERIM = 8
BROKEN = (OSError, EOFError, asyncio.IncompleteReadError, ValueError, httptools.HttpParserError)
"""What a broken connection or a malformed message raises while it is read."""


@dataclass(eq=False)
class Conn:
    """One connection to the server; `reused` once it has served a request before this one.

    `idle_since`: the loop time it went back to the pool. `dropped`: closed by us (the watchdog, the
    client's close), so an end of stream seen afterwards is not the server's doing.
    """

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False
    idle_since: float = 0.0
    dropped: bool = False

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception())

    def close(self) -> None:
        """Close at once (see `kubetrain.common.kube.http`); the socket goes on the loop's next turn."""
        self.dropped = True
        self.writer.transport.abort()


class _Message:
    """The httptools callbacks for one response: its head, the body pieces not yet taken, its end."""

    def __init__(self, *, head_only: bool) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.head_only = head_only
        self.status = 0
        self.headers: dict[str, str] = {}
        self.head_done = False
        self.done = False
        self.trailing = False  # bytes after the end: the connection cannot be reused
        self.keep_alive = False
        self.pieces: list[bytes] = []
        self._interim = 0
        self._seen = 0

    def feed(self, data: bytes) -> None:
        if not self.head_done:
            self._seen += len(data)
            if self._seen > HEAD_LIMIT:
                raise ValueError(f"response head larger than {HEAD_LIMIT} bytes")
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as err:  # one of ours refused the message: say why
            raise (err.__context__ if isinstance(err.__context__, ValueError) else err) from None
        except httptools.HttpParserError:
            if not self.done:
                raise
            self.trailing = True  # garbage after a complete response

    def on_message_begin(self) -> None:
        if self.done:
            self.trailing = True

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.done:
            return
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        if self.done:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200:
            self._interim += 1
            if self._interim > MAX_INTERIM:
                raise ValueError(f"more than {MAX_INTERIM} interim (1xx) responses")
            self.headers = {}
            return
        coding = self.headers.get("transfer-encoding")
        if coding is not None and coding.lower() != "chunked":
            raise ValueError(f"transfer coding {coding!r}: only chunked is accepted")
        self.status, self.head_done = status, True
        self.keep_alive = self.parser.should_keep_alive() and not self.head_only
        if self.head_only:
            self.done = True  # HEAD: no body whatever the head says; any bytes after it are trailing

    def on_body(self, body: bytes) -> None:
        if not self.done:
            self.pieces.append(body)
        else:
            self.trailing = True

    def on_message_complete(self) -> None:
        if self.head_done and not self.done:
            self.done = True
            self.keep_alive = self.parser.should_keep_alive()

    @property
    def to_eof(self) -> bool:
        """The body has no framing: it ends when the server closes the connection."""
        return not ("content-length" in self.headers or "transfer-encoding" in self.headers)

    def take(self) -> bytes | None:
        if not self.pieces:
            return None
        data = self.pieces[0] if len(self.pieces) == 1 else b"".join(self.pieces)
        self.pieces.clear()
        return data


async def read_response(conn: Conn, *, head_only: bool, what: str) -> Response:
    """Read a response's head off `conn` (1xx answers skipped); its body is left for the Response."""
    message = _Message(head_only=head_only)
    while not message.head_done:
        data = await conn.reader.read(BUFFER)
        if not data:
            raise asyncio.IncompleteReadError(b"", None)
        message.feed(data)
    return Response(message, conn, what=what)


class Response:
    """A response whose head is read. Read its body once: whole with `read()`, or with `chunks()`."""

    def __init__(self, message: _Message, conn: Conn, *, what: str) -> None:
        self.status = message.status
        self.headers = message.headers
        """Lower-cased names; a repeated field's values joined with ", "."""
        self.read_timeout: float | None = None
        """Seconds the body may go without a chunk before its connection is dropped (None: no limit)."""
        self._message = message
        self._conn = conn
        self._what = what

    @property
    def complete(self) -> bool:
        """The body was read to its end."""
        return self._message.done

    @property
    def keep_alive(self) -> bool:
        """The connection may carry the next request once the body is read."""
        return self._message.keep_alive and not self._message.trailing

    @property
    def connection(self) -> Conn:
        """The connection it is read from (pooled or closed by the client once the response is done)."""
        return self._conn

    async def read(self) -> bytes:
        """The whole body (`b""` when none)."""
        if self._message.done:  # it came with the head, as most answers do
            return self._message.take() or b""
        return b"".join([chunk async for chunk in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        idle = _Watchdog(self._conn, self.read_timeout) if self.read_timeout is not None else None
        try:
            async for chunk in self._body():
                if idle is not None:
                    idle.touch()
                yield chunk
        except BROKEN as err:
            if idle is not None and idle.fired:
                raise TransportError(f"{self._what}: nothing received for {self.read_timeout} s") from err
            raise TransportError(f"{self._what}: body: {describe(err)}") from err
        finally:
            if idle is not None:
                idle.cancel()

    async def _body(self) -> AsyncIterator[bytes]:
        message, reader = self._message, self._conn.reader
        if (first := message.take()) is not None:
            yield first
        while not message.done:
            data = await reader.read(BUFFER)
            if not data:
                if message.to_eof and not self._conn.dropped:
                    message.done, message.keep_alive = True, False
                    return
                raise asyncio.IncompleteReadError(b"", None)
            message.feed(data)
            if (chunk := message.take()) is not None:
                yield chunk


class _Watchdog:
    """Aborts a connection that received nothing for `seconds`.

    A watch reads thousands of chunks; a timer per read would cost more than the read. This keeps one
    timer, moved only when it fires.
    """

    def __init__(self, conn: Conn, seconds: float) -> None:
        self._loop = asyncio.get_running_loop()
        self._conn = conn
        self._seconds = seconds
        self._last = self._loop.time()
        self.fired = False
        self._timer = self._loop.call_later(seconds, self._check)

    def touch(self) -> None:
        self._last = self._loop.time()

    def cancel(self) -> None:
        self._timer.cancel()

    def _check(self) -> None:
        quiet = self._loop.time() - self._last
        if quiet < self._seconds:
            self._timer = self._loop.call_later(self._seconds - quiet, self._check)
            return
        self.fired = True
        self._conn.close()


def describe(err: BaseException) -> str:
    if isinstance(err, asyncio.IncompleteReadError):
        return "connection closed before the end of the message"
    return str(err) or type(err).__name__
