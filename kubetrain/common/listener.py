"""One HTTP/1.1 connection loop for every listener of the operator, bounded against hostile clients.

The probes, /metrics and the training-progress endpoint are reachable by anyone on the pod network, so no
client may make the operator hold much memory, time or work: not a slow one (slowloris), not one sending
a flood of headers, not one opening connections in a loop from one address or from many. `Limits` holds
the bounds, and `Listener` applies them to each connection before the listener's own `Handler` sees a
request:

- connections: at most `per_peer` from one address and `max_connections` in all. One past a peer's cap
  closes that peer's oldest; one past the overall cap closes the oldest of the peer holding most, and
  among equals of the one that connected last. So a client that opens connections in a loop, from one
  address or from many, only ever closes its own or its like, and a kubelet or a pod with one connection
  opened before the flood keeps it;
- a request head (request line and headers) within `max_head` bytes and `max_headers` fields (431), read
  within `head_timeout` seconds; a body within `max_body` bytes (413, known from Content-Length before any
  of it is read); the whole exchange, the answer's drain included, within `request_timeout` (a client that
  reads its answer too slowly is cut off there); a kept-alive connection waits `idle_timeout` for the next
  request, and makes at most `max_requests` (pipelined ones included); a TLS handshake gets
  `head_timeout`, and counts against the caps from the moment it is accepted (the listener accepts
  connections itself, then starts their TLS: a server that ran the handshake before its handler would
  leave handshakes never finished outside the caps);
- a refusal (a malformed or oversized request, and any answer the handler marks `close`: 401, 403, 429,
  503) closes the connection, so that a stranger never holds a slot for a keep-alive period;
- the handler's work is cancelled when its client goes away (EOF or reset, or its connection evicted by
  the caps): a dropped request takes what it queued (a TokenReview) with it.

The protocol is h11's (python-hyper's sans-IO HTTP/1.1), read and written by `kubetrain.common.http11`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus

import h11

from kubetrain.common.http11 import (
    READ,
    TEXT,
    Refused,
    Reply,
    Request,
    read_body,
    read_head,
    send,
    text_refusal,
    until_gone,
)

__all__ = ["TEXT", "Handler", "Limits", "Listener", "Reply", "Request", "text_refusal"]

Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]
_BACKLOG = 1024
"""Connections the kernel holds before they are accepted (accepting is quick: admission and a task)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Limits:
    """The bounds of one listener (see the module docstring); the defaults are the probe listener's."""

    max_connections: int = 64
    """Connections open at once, in all."""
    per_peer: int = 8
    """Connections open at once from one address."""
    head_timeout: float = 10.0
    """Seconds for a TLS handshake, and for a request's head (from the connection, or from its first byte)."""
    request_timeout: float = 30.0
    """Seconds for a whole exchange: the request read, answered, and the answer drained."""
    idle_timeout: float = 30.0
    """Seconds a kept-alive connection waits for the next request."""
    max_head: int = 16 * 1024
    """Bytes of a request head (request line and header fields)."""
    max_headers: int = 64
    """Header fields of a request."""
    max_body: int = 64 * 1024
    """Bytes of a request body."""
    close_grace: float = 5.0
    """Seconds a closing connection may take to send what it still buffers."""
    max_requests: int = 100
    """Requests one connection may make; the answer to the last one closes it. Without a bound, one client
    that pipelines thousands of requests and never reads the answers has them all served at once, as fast
    as the kernel's socket buffers take the answers (8 such connections: 16,000 requests, about 2 s of the
    loop's CPU, which every other client of the process waits behind). The kubelet opens a connection per
    probe, and Prometheus makes one request per scrape, so neither meets it."""

    def __post_init__(self) -> None:
        if self.max_requests < 1:
            raise ValueError(f"Limits.max_requests must be at least 1, not {self.max_requests}")


Handler = Callable[[Request], Awaitable[Reply]]
"""A listener's requests, one at a time per connection; an exception becomes a logged 500."""
Refusal = Callable[[HTTPStatus], Reply]
"""The answer to a request refused before the handler saw it (its format is the listener's)."""


class _Peers:
    """Open connections (their handlers' tasks) by peer address, oldest first, with the caps described in
    the module docstring. An evicted connection's handler is cancelled: it closes its connection, and the
    work it was waiting for goes with it (a TLS handshake under way included)."""

    def __init__(self, per_peer: int, total: int) -> None:
        self._per_peer = per_peer
        self._total = total
        self.by_peer: dict[str, list[asyncio.Task[None]]] = {}
        self.count = 0
        self._admitted = 0
        self._latest: dict[str, int] = {}  # per peer, when it last opened a connection (admission number)

    def admit(self, peer: str, task: asyncio.Task[None]) -> None:
        mine = self.by_peer.setdefault(peer, [])
        if len(mine) >= self._per_peer:
            self._evict(mine)
        elif self.count >= self._total:
            # the peer holding most; among equals the one that connected last: a flood from many addresses
            # ties at a connection or two each, and a pod that opened its one connection before it is kept
            self._evict(
                self.by_peer[max(self.by_peer, key=lambda p: (len(self.by_peer[p]), self._latest.get(p, 0)))]
            )
        mine.append(task)
        self.count += 1
        self._admitted += 1
        self._latest[peer] = self._admitted

    def _evict(self, tasks: list[asyncio.Task[None]]) -> None:
        tasks.pop(0).cancel()
        self.count -= 1

    def leave(self, peer: str, task: asyncio.Task[None]) -> None:
        mine = self.by_peer.get(peer, [])
        if task in mine:
            mine.remove(task)
            self.count -= 1
        if not mine:
            self.by_peer.pop(peer, None)
            self._latest.pop(peer, None)


def _listening(host: str, port: int) -> socket.socket:
    """A listening socket on `host` (every address when empty: IPv6 and IPv4 where it can) and `port`."""
    if not host:
        if socket.has_dualstack_ipv6():
            return socket.create_server(
                ("::", port), family=socket.AF_INET6, dualstack_ipv6=True, backlog=_BACKLOG
            )
        host = "0.0.0.0"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    return socket.create_server((host, port), family=family, backlog=_BACKLOG)


class Listener:
    """Serves `handler` within `limits` on `start(host, port)`; `port` is the bound one (for port 0)."""

    def __init__(
        self,
        handler: Handler,
        limits: Limits,
        *,
        ssl_context: ssl.SSLContext | None = None,
        refusal: Refusal = text_refusal,
    ) -> None:
        self._handler, self._limits, self._ssl, self._refusal = handler, limits, ssl_context, refusal
        self._peers = _Peers(limits.per_peer, limits.max_connections)
        self._open: set[asyncio.Task[None]] = set()
        self._socket: socket.socket | None = None
        self._acceptor: asyncio.Future[None] | None = None
        self._stopping = False
        self.port: int | None = None

    @property
    def connections(self) -> int:
        """Connections open now (idle kept ones, and TLS handshakes under way, included)."""
        return len(self._open)

    async def start(self, host: str, port: int) -> None:
        self._stopping = False
        listening = _listening(host, port)
        listening.setblocking(False)
        self.port = int(listening.getsockname()[1])
        self._socket = listening
        self._acceptor = asyncio.ensure_future(self._accept(listening))

    async def stop(self) -> None:
        """Close the listening socket and every open connection; return once their handlers are done."""
        self._stopping = True
        acceptor, self._acceptor = self._acceptor, None
        if acceptor is None:
            return
        acceptor.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await acceptor
        if self._socket is not None:
            self._socket.close()
        for task in self._open:
            task.cancel()  # its connection is aborted: no goodbye, an idle client would not answer it
        if self._open:
            await asyncio.wait(list(self._open), timeout=self._limits.close_grace)

    async def _accept(self, listening: socket.socket) -> None:
        """Accept connections for ever. Each is admitted by the caps before a byte of it is read (its TLS
        handshake included), so that a handshake never begun counts against its peer's cap too."""
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, address = await loop.sock_accept(listening)
            except OSError as err:  # e.g. out of file descriptors: try again in a moment
                log.warning("cannot accept a connection on port %s: %s", self.port, err)
                await asyncio.sleep(0.1)
                continue
            peer = str(address[0]) if isinstance(address, tuple) else str(address)
            task = asyncio.ensure_future(self._serve(connection))
            self._open.add(task)
            self._peers.admit(peer, task)
            task.add_done_callback(functools.partial(self._left, peer, connection))

    def _left(self, peer: str, connection: socket.socket, task: asyncio.Task[None]) -> None:
        self._peers.leave(peer, task)
        self._open.discard(task)
        connection.close()  # closed already, unless the handler was cancelled before it began
        if not task.cancelled() and task.exception() is not None:
            log.error("a connection's handler failed", exc_info=task.exception())

    async def _serve(self, connection: socket.socket) -> None:
        """One connection: requests answered in turn until a side closes it, a limit ends it, or a refusal."""
        writer: asyncio.StreamWriter | None = None
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self._limits.max_head)
        try:
            streams = await self._streams(connection)
            if streams is None:
                return
            reader, writer = streams
            left = self._limits.max_requests
            while not self._stopping and await self._exchange(conn, reader, writer, last=left == 1):
                left -= 1
                conn.start_next_cycle()
                if not await self._next_request(conn, reader):
                    break
        except (OSError, h11.ProtocolError, ssl.SSLError):  # reset, or TimeoutError: too slow
            pass
        except asyncio.CancelledError:  # evicted by the caps, or stop(): the connection ends here
            pass
        finally:
            if writer is not None:
                await self._close(writer)

    async def _streams(self, connection: socket.socket) -> Connection | None:
        """The connection's reader and writer, over TLS on a TLS listener (the handshake within
        `head_timeout`); None when the handshake failed or the client left during it."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        protocol = asyncio.StreamReaderProtocol(reader)
        handshake = self._limits.head_timeout if self._ssl else None
        try:
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, connection, ssl=self._ssl, ssl_handshake_timeout=handshake
            )
        except (OSError, ssl.SSLError, TimeoutError):
            return None
        return reader, asyncio.StreamWriter(transport, protocol, reader, loop)

    async def _close(self, writer: asyncio.StreamWriter) -> None:
        """Close politely: send what is still buffered, then TLS's close_notify or the FIN (an abort at once
        would drop the tail of a large answer). A peer that neither reads nor closes is cut after the grace;
        with nothing left to send, after 1 s (a TLS close waits for the peer's close_notify, which an idle
        client may never send). An evicted connection, or any while stopping, is aborted at once."""
        task = asyncio.current_task()
        if self._stopping or (task is not None and task.cancelling()):
            writer.transport.abort()
            return
        grace = self._limits.close_grace if writer.transport.get_write_buffer_size() else 1.0
        writer.close()
        try:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), grace)
        finally:
            writer.transport.abort()

    async def _next_request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> bool:
        """Wait up to `idle_timeout` for the next request's first bytes; False when none came."""
        if conn.trailing_data[0] or conn.trailing_data[1]:
            return True  # already received (pipelined), or the end of the stream (h11 says so next)
        try:
            async with asyncio.timeout(self._limits.idle_timeout):
                data = await reader.read(READ)
        except TimeoutError:
            return False
        conn.receive_data(data)
        return bool(data)

    async def _exchange(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, last: bool
    ) -> bool:
        """Read one request and answer it (`last`: with Connection: close); whether the connection stays open
        for the next."""
        async with asyncio.timeout(self._limits.request_timeout):
            try:
                request = await self._read(conn, reader)
            except Refused as refused:
                await send(conn, writer, self._refusal(refused.status), head_only=False)
                return False
            if request is None:  # the client closed the connection
                return False
            reply = await self._answer(conn, reader, request)
            if reply is None:  # the client went away while its request was being answered
                return False
            if last:
                reply = dataclasses.replace(reply, close=True)
            await send(conn, writer, reply, head_only=request.method == b"HEAD")
            return not reply.close and conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _read(self, conn: h11.Connection, reader: asyncio.StreamReader) -> Request | None:
        """The next request (its head within `head_timeout`), or None when the client closed first."""
        try:
            async with asyncio.timeout(self._limits.head_timeout):
                head = await read_head(conn, reader)
        except TimeoutError as err:
            raise Refused(HTTPStatus.REQUEST_TIMEOUT) from err
        if head is None:
            return None
        self._check(head)
        body = await read_body(conn, reader, self._limits.max_body)
        return Request(head.method, head.target, tuple(head.headers), body)

    def _check(self, head: h11.Request) -> None:
        """_Refused for what h11 lets through and we refuse: HTTP/2+, big heads, many fields, big bodies."""
        if head.http_version not in (b"1.0", b"1.1"):
            raise Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED)
        size = len(head.target) + sum(len(k) + len(v) + 4 for k, v in head.headers)
        if len(head.headers) > self._limits.max_headers or size > self._limits.max_head:
            raise Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
        if any(k == b"content-length" and int(v) > self._limits.max_body for k, v in head.headers):
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)

    async def _answer(
        self, conn: h11.Connection, reader: asyncio.StreamReader, request: Request
    ) -> Reply | None:
        """The handler's reply, or None when the client went away first (the handler is then cancelled)."""
        work = asyncio.ensure_future(self._handle(request))
        gone = asyncio.ensure_future(until_gone(conn, reader, self._limits.max_head))
        try:
            await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gone, work):
                if not task.done():
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
        return work.result() if not work.cancelled() else None

    async def _handle(self, request: Request) -> Reply:
        try:
            return await self._handler(request)
        except Exception:  # a failing collector or check: a 500, the traceback in the log
            log.exception("%s %s failed", request.method.decode(), request.target.decode("latin-1"))
            return Reply(HTTPStatus.INTERNAL_SERVER_ERROR, b"500: Internal Server Error")
