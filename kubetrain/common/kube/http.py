"""`HttpClient`: the HTTP/1.1 client under `KubeApiClient`, on asyncio streams and the standard library.

Why our own: the API server is the one peer we talk to, always HTTP/1.1 with JSON bodies framed by
`Content-Length` or chunks, and nearly all of an operator's CPU goes into that request path. A general
client (aiohttp) spent several times our reconcile logic on each request (URL objects, multidicts,
tracing hooks, cookie jars), and its modules alone were about 9 MiB of the operator's memory at rest.

What it does: keep-alive connections, pooled per client (the last returned is reused first; at most
`limit` open); TLS with a server name of our choosing; `http://` proxies (CONNECT for an https server,
absolute-form requests for an http one); `Content-Length`, chunked and read-until-close bodies, read
whole or as they arrive (watches). A pooled connection the server has closed is never reused. A GET that
fails on a reused connection before its answer starts is sent once more on a new connection, as Go's
transport does; other verbs are not replayed (the caller's retry decides). Every failure is raised as
a `TransportError` that names the request.

A connection is closed at once, without TLS's close_notify exchange: the HTTP framing already says where
each answer ends, and a graceful close waits for the server's reply, which a busy or stuck server may
never send, leaving the socket open past `close()` (and past the event loop).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ssl
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote, unquote, urlencode, urlsplit

from kubetrain.common.errors import TransportError
from kubetrain.common.kube.httpmessage import (
    BROKEN,
    BUFFER,
    Conn,
    Response,
    describe,
    parse_head,
    response_framing,
)

__all__ = ["HttpClient", "Response"]

T = TypeVar("T")

_PATH_SAFE = "/:@!$&'()*+,;=-._~"


async def _timed(awaitable: Awaitable[T], seconds: float | None) -> T:
    if seconds is None:
        return await awaitable
    async with asyncio.timeout(seconds):
        return await awaitable


@dataclass(frozen=True)
class _Proxy:
    host: str
    port: int
    authorization: str | None

    @classmethod
    def parse(cls, url: str) -> _Proxy:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"proxy-url {url!r}: only http://host:port proxies are supported")
        auth = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            auth = f"Basic {base64.b64encode(pair).decode()}"
        return cls(parts.hostname, parts.port or 80, auth)


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class HttpClient:
    """Requests to one server (`base`: scheme, host, port and an optional path prefix).

    `ssl_context` is used for https; `server_name` is the name TLS checks the certificate against (the
    base's host when None); `proxy` is an `http://[user:password@]host:port` URL.
    """

    def __init__(
        self,
        base: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
        proxy: str | None = None,
        limit: int = 100,
    ) -> None:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"server URL {base!r}: expected http(s)://host[:port]")
        tls = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if tls else 80)
        self._netloc = parts.netloc.rpartition("@")[2]  # the Host header: as written, brackets and port kept
        self._prefix = parts.path.rstrip("/")
        self._tls = (ssl_context or ssl.create_default_context()) if tls else None
        self._server_name = server_name or self._host
        self._proxy = _Proxy.parse(proxy) if proxy else None
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[Conn] = []
        self._open: set[Conn] = set()
        self._closed = False

    async def close(self) -> None:
        """Close every connection, idle or in use. Idempotent."""
        self._closed = True
        conns, self._idle = list(self._open), []
        for conn in conns:
            self._drop(conn)
        await asyncio.sleep(0)  # the transports release their sockets on the loop's next turn

    @contextlib.asynccontextmanager
    async def open(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        head_timeout_s: float | None = None,
    ) -> AsyncIterator[Response]:
        """Send one request; yield its response once the head is read (within `head_timeout_s` seconds).

        The connection goes back to the pool when the body was read to its end, else it is closed.
        """
        what = f"{method} {path}"
        request = self._encode(method, path, query or {}, headers or {}, body)
        resp = await self._exchange(method, what, request, head_timeout_s)
        try:
            yield resp
        finally:
            self._release(resp.connection, keep=resp.complete and resp.keep_alive)

    # plumbing ---------------------------------------------------------------------------------------
    async def _exchange(self, method: str, what: str, request: bytes, seconds: float | None) -> Response:
        while True:
            conn = await self._acquire(what, seconds)
            try:
                return await _timed(self._roundtrip(conn, method, what, request), seconds)
            except (*BROKEN, TimeoutError) as err:
                self._drop(conn)
                if conn.reused and method == "GET" and not isinstance(err, TimeoutError):
                    continue  # the server closed it while idle; a fresh connection is not "reused"
                raise TransportError(f"{what}: {describe(err)}") from err
            except BaseException:
                self._drop(conn)
                raise

    async def _roundtrip(self, conn: Conn, method: str, what: str, request: bytes) -> Response:
        conn.writer.write(request)
        await conn.writer.drain()
        while True:
            head = await conn.reader.readuntil(b"\r\n\r\n")
            status, headers, keep = parse_head(head)
            if not 100 <= status < 200:
                break
        return Response(
            status, headers, response_framing(method, status, headers), conn, keep=keep, what=what
        )

    def _encode(
        self, method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        target = self._prefix + quote(path, safe=_PATH_SAFE)
        if query:
            target += "?" + urlencode(query)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self._netloc}"]
        if self._proxy is not None and self._tls is None:
            lines[0] = f"{method} http://{self._netloc}{target} HTTP/1.1"
            if self._proxy.authorization:
                lines.append(f"Proxy-Authorization: {self._proxy.authorization}")
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b"")

    async def _acquire(self, what: str, seconds: float | None) -> Conn:
        if self._closed:
            raise TransportError(f"{what}: the client is closed")
        while self._idle:
            conn = self._idle.pop()
            if conn.usable():
                conn.reused = True
                return conn
            self._drop(conn)
        await self._slots.acquire()
        try:
            reader, writer = await _timed(self._connect(), seconds)
        except (*BROKEN, TimeoutError, ssl.SSLError) as err:
            self._slots.release()
            raise TransportError(f"{what}: cannot connect to {self._netloc}: {describe(err)}") from err
        except BaseException:
            self._slots.release()
            raise
        conn = Conn(reader, writer)
        self._open.add(conn)
        return conn

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._proxy is None:
            name = self._server_name if self._tls else None
            return await asyncio.open_connection(
                self._host, self._port, ssl=self._tls, server_hostname=name, limit=BUFFER
            )
        reader, writer = await asyncio.open_connection(self._proxy.host, self._proxy.port, limit=BUFFER)
        if self._tls is not None:
            try:
                await self._tunnel(reader, writer)
                await writer.start_tls(self._tls, server_hostname=self._server_name)
            except BaseException:
                writer.transport.abort()
                raise
        return reader, writer

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = _hostport(self._host, self._port)
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}"]
        if self._proxy is not None and self._proxy.authorization:
            lines.append(f"Proxy-Authorization: {self._proxy.authorization}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        status, _, _ = parse_head(await reader.readuntil(b"\r\n\r\n"))
        if status != 200:
            raise ConnectionError(f"the proxy answered {status} to CONNECT {target}")

    def _release(self, conn: Conn, *, keep: bool) -> None:
        # Kept only while nobody waits for a slot: a waiter is woken by a closed connection, not an idle one.
        if keep and not self._closed and conn.usable() and not self._slots.locked():
            self._idle.append(conn)
        else:
            self._drop(conn)

    def _drop(self, conn: Conn) -> None:
        if conn in self._open:
            self._open.discard(conn)
            self._slots.release()
        conn.close()
