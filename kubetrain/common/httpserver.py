"""The operator's HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz, /metrics.

`/healthz` answers 200 while the event loop is alive (a wedged loop cannot answer: that is the
liveness signal). `/readyz` answers 200 once the manager says it is ready, else 503. `/metrics` is the
Prometheus text exposition of the injected registry.

Why a server of our own on asyncio streams rather than aiohttp.web: the operator must stay under 60 MiB
of RSS at rest, and aiohttp's modules take about 9 MiB of it. Three GET endpoints need none of that
machinery; with the API client on `kubetrain.common.kube.http`, the operator loads no aiohttp at all.

A small HTTP/1.1 server, enough for kubelets, Prometheus and curl: the request line and headers are
bounded (431 past 16 KiB), other paths get 404 and other methods 405 (`Allow: GET, HEAD`), HEAD gets the
headers only, the query string is ignored, a request body (Content-Length only) is read and dropped,
every response has a Content-Length, and connections are kept alive as HTTP/1.1 and 1.0 say. Each request
and its response, the idle time before the request included, must fit in `timeout` seconds, so a slow or
silent client cannot hold a connection. A request it cannot read is answered 400 (or 413, 501, 505) and
its connection closed. At most `max_connections` are open at once: a new connection closes the one held
longest, so clients that hold on can neither lock the kubelet's probes out nor grow memory without bound.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubetrain.common.kube.httpmessage import keeps_alive, parse_fields

__all__ = ["HealthServer"]

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024  # request line and headers, both CRLFs included
MAX_BODY = 64 * 1024  # read and dropped: none of the endpoints takes a body
TEXT = "text/plain; charset=utf-8"
NOT_READY = "not ready: caches syncing or shutting down"


class _Refused(Exception):
    """A request that cannot be served: answered with `status`, then its connection is closed."""

    def __init__(self, status: HTTPStatus) -> None:
        super().__init__(status.phrase)
        self.status = status


@dataclass(frozen=True)
class _Request:
    method: str
    path: str  # without the query
    version: str  # HTTP/1.0 or HTTP/1.1
    headers: dict[str, str]  # names in lower case; a repeated field's values joined with ", "

    @property
    def keep_alive(self) -> bool:
        return keeps_alive(self.version, self.headers)


@dataclass(frozen=True)
class _Response:
    status: HTTPStatus
    body: bytes
    content_type: str = TEXT
    allow: str | None = None

    def encode(self, *, head_only: bool, keep_alive: bool) -> bytes:
        lines = [
            f"HTTP/1.1 {self.status.value} {self.status.phrase}",
            f"Date: {email.utils.formatdate(usegmt=True)}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
        ]
        if self.allow:
            lines.append(f"Allow: {self.allow}")
        head = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"
        return head if head_only else head + self.body


def _text(text: str, status: HTTPStatus = HTTPStatus.OK) -> _Response:
    return _Response(status, text.encode())


def _error(status: HTTPStatus) -> _Response:
    allow = "GET, HEAD" if status is HTTPStatus.METHOD_NOT_ALLOWED else None
    return _Response(status, f"{status.value}: {status.phrase}".encode(), allow=allow)


async def _send(
    writer: asyncio.StreamWriter, response: _Response, *, head_only: bool = False, keep_alive: bool = False
) -> None:
    writer.write(response.encode(head_only=head_only, keep_alive=keep_alive))
    await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> _Request:
    """The next request, its body read and dropped. IncompleteReadError if the client closes first."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as err:  # no blank line within the reader's limit (MAX_HEAD)
        raise _Refused(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE) from err
    request = _parse_head(head[:-4].decode("latin-1"))
    await reader.readexactly(_body_length(request.headers))
    return request


def _parse_head(head: str) -> _Request:
    """The request line and the header fields; _Refused if they are not HTTP/1.x."""
    request_line, *fields = head.split("\r\n")
    parts = request_line.split(" ")
    if len(parts) != 3 or not all(parts):
        raise _Refused(HTTPStatus.BAD_REQUEST)
    method, target, version = parts
    if version not in ("HTTP/1.0", "HTTP/1.1"):
        bad_version = version.startswith("HTTP/")
        raise _Refused(HTTPStatus.HTTP_VERSION_NOT_SUPPORTED if bad_version else HTTPStatus.BAD_REQUEST)
    return _Request(method, _path_of(target), version, _parse_fields(fields))


def _path_of(target: str) -> str:
    """The path of an origin-form (`/readyz?verbose`) or absolute-form (`http://host/readyz`) target."""
    try:
        return urlsplit(target).path
    except ValueError as err:  # e.g. an unclosed [ in the host of an absolute-form target
        raise _Refused(HTTPStatus.BAD_REQUEST) from err


def _parse_fields(lines: list[str]) -> dict[str, str]:
    try:
        return parse_fields(lines)
    except ValueError as err:
        raise _Refused(HTTPStatus.BAD_REQUEST) from err


def _body_length(headers: dict[str, str]) -> int:
    if "transfer-encoding" in headers:  # a chunked body: its end could not be found without decoding it
        raise _Refused(HTTPStatus.NOT_IMPLEMENTED)
    value = headers.get("content-length", "0")
    if not (value.isascii() and value.isdigit()):  # also two different values, joined with ", "
        raise _Refused(HTTPStatus.BAD_REQUEST)
    if len(value) > 9 or int(value) > MAX_BODY:
        raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
    return int(value)


class HealthServer:
    """/healthz, /readyz and /metrics over HTTP/1.1; `start(host, 0)` picks a free port, read as `port`.

    `timeout`: the seconds one request and its response may take on a connection, idle time included.
    `max_connections`: how many may be open at once; a new one past it closes the one held longest.
    """

    def __init__(
        self,
        registry: CollectorRegistry,
        ready: Callable[[], bool],
        *,
        timeout: float = 30.0,
        max_connections: int = 64,
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._timeout = timeout
        self._max_connections = max_connections
        self._routes: dict[str, Callable[[], _Response]] = {
            "/healthz": lambda: _text("ok"),
            "/readyz": self._readyz,
            "/metrics": self._metrics,
        }
        self._server: asyncio.Server | None = None
        self._stopping = False
        self._connections: dict[asyncio.Task[Any], asyncio.StreamWriter] = {}
        self.port: int | None = None

    async def start(self, host: str, port: int) -> None:
        self._stopping = False
        self._server = await asyncio.start_server(self._serve, host, port, limit=MAX_HEAD)
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection: requests answered in turn until one of the two sides closes it, or it times out."""
        task = asyncio.current_task()
        assert task is not None
        live = [w for w in self._connections.values() if not w.transport.is_closing()]  # oldest first
        if len(live) >= self._max_connections:
            live[0].transport.abort()  # its handler sees the connection lost, and returns
        self._connections[task] = writer
        try:
            while not self._stopping and await self._exchange(reader, writer):
                pass
            writer.close()
            async with asyncio.timeout(self._timeout):
                await writer.wait_closed()  # the last response is flushed
        except OSError:  # reset by the client, or TimeoutError: it was too slow (to send or to read)
            pass
        finally:
            writer.transport.abort()  # nothing once closed; a stalled (or cancelled) connection goes at once
            del self._connections[task]

    async def _exchange(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; whether the connection stays open for the next."""
        async with asyncio.timeout(self._timeout):
            try:
                request = await _read_request(reader)
            except asyncio.IncompleteReadError:  # the client closed the connection
                return False
            except _Refused as refused:
                await _send(writer, _error(refused.status))
                return False
            response = self._route(request)
            await _send(writer, response, head_only=request.method == "HEAD", keep_alive=request.keep_alive)
            return request.keep_alive

    def _route(self, request: _Request) -> _Response:
        endpoint = self._routes.get(request.path)
        if endpoint is None:
            return _error(HTTPStatus.NOT_FOUND)
        if request.method not in ("GET", "HEAD"):
            return _error(HTTPStatus.METHOD_NOT_ALLOWED)
        try:
            return endpoint()
        except Exception:  # a failing collector, say: the client gets a 500, the log the traceback
            log.exception("%s %s failed", request.method, request.path)
            return _error(HTTPStatus.INTERNAL_SERVER_ERROR)

    def _readyz(self) -> _Response:
        if self._ready():
            return _text("ok")
        return _text(NOT_READY, HTTPStatus.SERVICE_UNAVAILABLE)

    def _metrics(self) -> _Response:
        return _Response(HTTPStatus.OK, generate_latest(self._registry), content_type=CONTENT_TYPE_LATEST)
