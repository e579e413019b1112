"""The operator's HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz, /metrics.

`/healthz` answers 200 while the event loop is alive (a wedged loop cannot answer: that is the
liveness signal). `/readyz` answers 200 once the manager says it is ready, else 503. `/metrics` is the
Prometheus text exposition of the injected registry, rendered in a thread of its own so that a scrape
never holds up reconciles; with a `guard`, each scrape must pass it first (see
`kubetrain.common.kube.authn.BearerGuard`: TokenReview and SubjectAccessReview, as controller-runtime).

Why a server of our own on asyncio streams rather than aiohttp.web: the operator must stay under 50 MiB
of RSS at rest, and aiohttp's modules take about 9 MiB of it. The protocol is h11's (python-hyper's
sans-IO HTTP/1.1, as uvicorn and httpx use it): request parsing, bodies (Content-Length and chunked),
keep-alive rules and response framing; these endpoints see a request every few seconds, so its cost
(tens of µs a request) does not matter here.

Limits: the request head is bounded (431 past 16 KiB), a body is read and dropped (413 past 64 KiB),
other paths get 404 and other methods 405, each request and its response (idle time before it
included) must fit in `timeout` seconds. Connections are capped per peer address and in all: a new one
past a peer's cap closes that peer's oldest, one past the overall cap closes the oldest of the peer
holding most. The kubelet probes from its node's address with a connection or two, so a pod that opens
connections in a loop only ever closes its own (tests/component/test_httpserver_flood.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import h11
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

if TYPE_CHECKING:  # imported at the first scrape: a thread pool is not needed at rest
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["Guard", "HealthServer"]

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024  # request line and headers
MAX_BODY = 64 * 1024  # read and dropped: none of the endpoints takes a body
CLOSE_GRACE = 5.0  # seconds a closing connection may take to send what it still buffers
TEXT = "text/plain; charset=utf-8"
NOT_READY = "not ready: caches syncing or shutting down"

Guard = Callable[[str | None, str], Awaitable[HTTPStatus | None]]
"""(Authorization header or None, path) -> None to serve, or the status to refuse with (401, 403, 500)."""


@dataclass(frozen=True)
class _Response:
    status: HTTPStatus
    body: bytes
    content_type: str = TEXT
    allow: str | None = None


def _text(text: str, status: HTTPStatus = HTTPStatus.OK) -> _Response:
    return _Response(status, text.encode())


def _error(status: HTTPStatus) -> _Response:
    allow = "GET, HEAD" if status is HTTPStatus.METHOD_NOT_ALLOWED else None
    return _Response(status, f"{status.value}: {status.phrase}".encode(), allow=allow)


class _Refused(Exception):
    def __init__(self, status: HTTPStatus) -> None:
        super().__init__(status.phrase)
        self.status = status


class _Peers:
    """Open connections by peer address, oldest first, with the caps described in the module docstring."""

    def __init__(self, per_peer: int, total: int) -> None:
        self._per_peer = per_peer
        self._total = total
        self.by_peer: dict[str, list[asyncio.StreamWriter]] = {}
        self.count = 0

    def admit(self, peer: str, writer: asyncio.StreamWriter) -> None:
        mine = self.by_peer.setdefault(peer, [])
        if len(mine) >= self._per_peer:
            self._evict(mine)
        elif self.count >= self._total:
            self._evict(max(self.by_peer.values(), key=len))
        mine.append(writer)
        self.count += 1

    def _evict(self, writers: list[asyncio.StreamWriter]) -> None:
        writers.pop(0).transport.abort()  # its handler sees the connection lost, closes it, and returns
        self.count -= 1

    def leave(self, peer: str, writer: asyncio.StreamWriter) -> None:
        mine = self.by_peer.get(peer, [])
        if writer in mine:
            mine.remove(writer)
            self.count -= 1
        if not mine:
            self.by_peer.pop(peer, None)


def _peer(writer: asyncio.StreamWriter) -> str:
    address = writer.get_extra_info("peername")
    return str(address[0]) if isinstance(address, tuple) else str(address)


class HealthServer:
    """/healthz, /readyz and /metrics over HTTP/1.1; `start(host, 0)` picks a free port, read as `port`.

    `timeout`: the seconds one request and its response may take on a connection, idle time included.
    `max_connections` / `per_peer`: connections open at once, in all and from one address.
    `guard`: checked before /metrics is served (None: open). `ssl_context`: serve HTTPS.
    `serve_metrics`: False for a probe listener beside a guarded metrics listener (/metrics is then 404).
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        *,
        timeout: float = 30.0,
        max_connections: int = 64,
        per_peer: int = 8,
        guard: Guard | None = None,
        ssl_context: ssl.SSLContext | None = None,
        serve_metrics: bool = True,
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._timeout = timeout
        self._guard = guard
        self._paths = ("/healthz", "/readyz", "/metrics") if serve_metrics else ("/healthz", "/readyz")
        self._ssl = ssl_context
        self._peers = _Peers(per_peer, max_connections)
        self._server: asyncio.Server | None = None
        self._stopping = False
        self._connections: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self._renderer: ThreadPoolExecutor | None = None
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        self._stopping = False
        handshake = self._timeout if self._ssl else None  # a silent TLS client goes within `timeout` too
        self._server = await asyncio.start_server(
            self._serve, host, port, ssl=self._ssl, ssl_handshake_timeout=handshake
        )
        self.port = int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        """Close the listening socket and every open connection; return once their handlers are done."""
        self._stopping = True
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for writer in self._connections.values():
            writer.transport.abort()  # its handler sees the connection lost, and returns
        await asyncio.gather(*self._connections.keys(), return_exceptions=True)
        await server.wait_closed()
        if self._renderer is not None:
            self._renderer.shutdown(wait=False)
            self._renderer = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests answered in turn until one of the two sides closes it, or it times out."""
        task = asyncio.current_task()
        assert task is not None
        peer = _peer(writer)
        self._peers.admit(peer, writer)
        self._connections[task] = writer
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
        try:
            while not self._stopping and await self._exchange(conn, reader, writer):
                conn.start_next_cycle()
        except (OSError, h11.LocalProtocolError):  # reset, or TimeoutError: too slow to send or to read
            pass
        finally:
            # close() sends what is still buffered, then TLS's close_notify or the FIN; an abort at once would
            # drop the buffered tail of a large answer (a slow scraper got a cut /metrics). A peer that
            # neither reads nor closes is cut after the grace.
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), CLOSE_GRACE)
            writer.transport.abort()
            self._peers.leave(peer, writer)
            del self._connections[task]

    async def _exchange(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Read one request and answer it; whether the connection stays open for the next."""
        async with asyncio.timeout(self._timeout):
            try:
                request = await _read_request(conn, reader)
            except _Refused as refused:
                await _send(conn, writer, _error(refused.status), head_only=False, close=True)
                return False
            if request is None:  # the client closed the connection
                return False
            try:
                response = await self._route(request)
            except Exception:  # a failing collector or readiness check: a 500, the traceback in the log
                log.exception("%s %s failed", request.method.decode(), request.target.decode("latin-1"))
                response = _error(HTTPStatus.INTERNAL_SERVER_ERROR)
            await _send(conn, writer, response, head_only=request.method == b"HEAD")
            return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _route(self, request: h11.Request) -> _Response:
        path = _path_of(request.target)
        if path not in self._paths:
            return _error(HTTPStatus.NOT_FOUND)
        if request.method not in (b"GET", b"HEAD"):
            return _error(HTTPStatus.METHOD_NOT_ALLOWED)
        if path == "/healthz":
            return _text("ok")
        if path == "/readyz":
            return _text("ok") if self._ready() else _text(NOT_READY, HTTPStatus.SERVICE_UNAVAILABLE)
        return await self._metrics(request, path)

    async def _metrics(self, request: h11.Request, path: str) -> _Response:
        if self._guard is not None:
            authorization = next(
                (v.decode("latin-1") for k, v in request.headers if k == b"authorization"), None
            )
            refused = await self._guard(authorization, path)
            if refused is not None:
                return _error(refused)
        if self._renderer is None:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

            self._renderer = ThreadPoolExecutor(1, thread_name_prefix="metrics")
        loop = asyncio.get_running_loop()  # one scrape rendered at a time, off the event loop
        body = await loop.run_in_executor(self._renderer, generate_latest, self._registry)
        return _Response(HTTPStatus.OK, body, content_type=CONTENT_TYPE_LATEST)


async def _read_request(conn: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    """The next request, its body read and dropped; None if the client closed the connection first."""
    request: h11.Request | None = None
    size = 0  # of the head until the request is parsed, then of the body
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as err:
            raise _Refused(HTTPStatus(err.error_status_hint)) from err
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            if request is None and (size := size + len(data)) > MAX_HEAD + 65536:
                raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
            conn.receive_data(data)  # b"": the end of the stream
        elif isinstance(event, h11.Request):
            request, size = event, 0
            _check(event)
        elif isinstance(event, h11.Data):
            size += len(event.data)
            if size > MAX_BODY:
                raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        elif isinstance(event, h11.EndOfMessage):
            return request
        elif isinstance(event, h11.ConnectionClosed):
            return None


def _check(request: h11.Request) -> None:
    """_Refused for what h11 lets through and we do not serve: HTTP/2+ request lines, big heads or bodies."""
    if request.http_version not in (b"1.0", b"1.1"):
        raise _Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED)
    head = len(request.target) + sum(len(k) + len(v) + 4 for k, v in request.headers)
    if head > MAX_HEAD:
        raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE)
    if any(k == b"content-length" and int(v) > MAX_BODY for k, v in request.headers):
        raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)


def _path_of(target: bytes) -> str:
    """The path of an origin-form (`/readyz?verbose`) or absolute-form (`http://host/readyz`) target."""
    try:
        return urlsplit(target.decode("ascii")).path
    except ValueError:  # e.g. an unclosed [ in the host of an absolute-form target
        return ""


async def _send(
    conn: h11.Connection,
    writer: asyncio.StreamWriter,
    response: _Response,
    *,
    head_only: bool,
    close: bool = False,
) -> None:
    headers = [
        ("Date", email.utils.formatdate(usegmt=True)),
        ("Content-Type", response.content_type),
        ("Content-Length", str(len(response.body))),
    ]
    if response.allow:
        headers.append(("Allow", response.allow))
    headers.append(("Connection", "close" if close else "keep-alive"))  # h11 says close when it must
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return  # nothing can be said on this connection any more
    data = conn.send(
        h11.Response(status_code=response.status.value, headers=headers, reason=response.status.phrase)
    )
    if not head_only:
        data += conn.send(h11.Data(data=response.body))
    data += conn.send(h11.EndOfMessage())
    writer.write(data)
    await writer.drain()
