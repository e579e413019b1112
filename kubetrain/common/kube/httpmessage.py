"""One HTTP/1.1 exchange's response, as `kubetrain.common.kube.http` reads it off a pooled connection.

Also the header-field rules both sides of HTTP share: `parse_fields`, `keeps_alive` (the health server's
requests use them too).

The head's parsing, the body's framing (`Content-Length`, chunked, or until the server closes), and the
watchdog that drops a streamed body gone quiet. Kept apart from the client's pooling and proxying so
that each reads on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass

from kubetrain.common.errors import TransportError

__all__ = [
    "BROKEN",
    "Conn",
    "Response",
    "describe",
    "keeps_alive",
    "parse_fields",
    "parse_head",
    "response_framing",
]

BUFFER = 2**21  # what a connection buffers before reading pauses; also the largest header block taken
_MAX_CHUNK_LINE = 1024
BROKEN = (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError)
"""What a broken connection or a malformed message raises while it is read."""


@dataclass(eq=False)
class Conn:
    """One connection to the server; `reused` once it has served a request before this one."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    reused: bool = False

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing() or self.reader.exception())

    def close(self) -> None:
        """Close at once (see `kubetrain.common.kube.http`); the socket goes on the loop's next turn."""
        self.writer.transport.abort()


@dataclass(frozen=True)
class Framing:
    """How the body ends: after `length` bytes, at the last chunk, or when the server closes."""

    length: int = 0
    chunked: bool = False
    to_eof: bool = False

    @property
    def empty(self) -> bool:
        return not (self.length or self.chunked or self.to_eof)

    async def chunks(self, reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
        if self.chunked:
            while size := await _chunk_size(reader):
                yield (await reader.readexactly(size + 2))[:-2]
            while (await reader.readline()).strip():  # trailers, up to the empty line
                pass
            return
        left = self.length
        while left or self.to_eof:
            data = await reader.read(min(left, BUFFER) if left else BUFFER)
            if not data:
                if self.to_eof:
                    return
                raise asyncio.IncompleteReadError(b"", left)
            left -= len(data)
            yield data


async def _chunk_size(reader: asyncio.StreamReader) -> int:
    line = await reader.readline()
    if not line.endswith(b"\n") or len(line) > _MAX_CHUNK_LINE:
        raise ValueError(f"bad chunk-size line {line[:40]!r}")
    return int(line.split(b";", 1)[0].strip(), 16)


class Response:
    """A response whose head is read. Read its body once: whole with `read()`, or with `chunks()`."""

    def __init__(
        self, status: int, headers: dict[str, str], framing: Framing, conn: Conn, *, keep: bool, what: str
    ) -> None:
        self.status = status
        self.headers = headers
        """Lower-cased names; a repeated header keeps its last value."""
        self.read_timeout: float | None = None
        """Seconds the body may go without a chunk before its connection is dropped (None: no limit)."""
        self._framing = framing
        self._conn = conn
        self._what = what
        self.complete = framing.empty
        self.keep_alive = keep and not framing.to_eof

    @property
    def connection(self) -> Conn:
        """The connection it is read from (pooled or closed by the client once the response is done)."""
        return self._conn

    async def read(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive."""
        idle = _Watchdog(self._conn, self.read_timeout) if self.read_timeout is not None else None
        try:
            async for chunk in self._framing.chunks(self._conn.reader):
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
        self.complete = True


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


def parse_head(head: bytes) -> tuple[int, dict[str, str], bool]:
    """Status, headers (lower-cased names) and whether the connection may be kept, from a response head."""
    status_line, *lines = head[:-4].decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise ValueError(f"not an HTTP/1.x response: {status_line[:80]!r}")
    headers = parse_fields(lines)
    return int(rest[:3]), headers, keeps_alive(version, headers)


def parse_fields(lines: list[str]) -> dict[str, str]:
    """Header fields by lower-cased name, a repeated field's values joined with ", " (RFC 9110, 5.3).

    ValueError for a line without a name, with whitespace in or around it, or folded (obsolete, refused)."""
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or name.split() != [name]:
            raise ValueError(f"malformed header line {line[:80]!r}")
        key, value = name.lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return headers


def keeps_alive(version: str, headers: Mapping[str, str]) -> bool:
    """Whether a message leaves its connection open: HTTP/1.1 unless `close`, 1.0 only with `keep-alive`."""
    tokens = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    return "close" not in tokens if version == "HTTP/1.1" else "keep-alive" in tokens


def response_framing(method: str, status: int, headers: Mapping[str, str]) -> Framing:
    if method == "HEAD" or status in (204, 304):
        return Framing()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        return Framing(chunked=True)
    if "content-length" in headers:
        return Framing(length=int(headers["content-length"]))
    return Framing(to_eof=True)
