"""`HttpClient`: the HTTP/1.1 client under `KubeApiClient`, on asyncio streams and httptools.

Why not a general client (aiohttp, httpx): the API server is the one peer we talk to, nearly all of an
operator's CPU goes into this request path, and a general client spent several times our reconcile logic
on each request and took about 9 MiB at rest. The protocol itself is not ours: responses are parsed by
httptools (llhttp), see `kubetrain.common.kube.httpmessage`. Requests are few fixed shapes; their head is
assembled here from validated parts (h11 would validate and assemble the same bytes at about 40 times
the cost: bench/http_parsers.py).

What it does:
- Keep-alive connections, pooled per client (the last returned is reused first; at most `limit` open
  for requests). A connection given back while others wait for a slot goes straight to a waiter.
- Streams (`stream=True`: watches) hold a connection not counted against `limit`, so any number of
  watches never starve requests: an idle pooled one when there is one, else a new one; it goes back to
  the pool when the stream ends cleanly and a slot is free (`kubetrain.common.kube.httppool`).
- A pooled connection idle for `idle_timeout_s`, or one the server has closed, is never reused. TCP
  keepalive probes every 30 s keep a long-quiet connection (a watch) alive through middleboxes and find
  a dead peer.
- An idempotent request (GET, HEAD, PUT, DELETE, OPTIONS) that fails on a reused connection before its
  answer starts is sent once more on a new connection, as Go's transport does; POST and PATCH are not
  replayed (the caller's retry decides).
- TLS with a server name of our choosing; http and https proxies (CONNECT for an https server,
  absolute-form requests for an http one), from the kubeconfig or the environment (`proxy`).
- Header names must be tokens and values field values (no CR, LF or NUL; Latin-1): anything else is
  refused before a byte is sent, naming the header.

Every failure is raised as a `TransportError` that names the request. A connection is closed at once,
without TLS's close_notify exchange: the framing already says where each answer ends, and a graceful
close waits for the server's reply, which a busy or stuck server may never send.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import socket
import ssl
from asyncio import sslproto
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import TypeVar
from urllib.parse import quote, urlencode, urlsplit

from kubetrain.common.errors import TransportError
from kubetrain.common.kube.httpmessage import BROKEN, Conn, Response, describe, read_response
from kubetrain.common.kube.httppool import Pool
from kubetrain.common.kube.proxy import Proxy

__all__ = ["TLS_READ_BUFFER", "HttpClient", "Response", "use_small_tls_buffers"]

T = TypeVar("T")

_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")  # RFC 9110 5.1 field-name
_FIELD_VALUE = re.compile(r"[\t\x20-\x7e\x80-\xff]*")  # RFC 9110 5.5, as Latin-1
_REPLAYABLE = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
KEEPALIVE_S = 30
_LIMIT = 2**21  # a StreamReader's buffer before reading pauses


async def _timed(awaitable: Awaitable[T], seconds: float | None) -> T:
    if seconds is None:
        return await awaitable
    async with asyncio.timeout(seconds):
        return await awaitable


TLS_READ_BUFFER = 64 * 1024


def use_small_tls_buffers(size: int = TLS_READ_BUFFER) -> None:
    """Make every asyncio TLS connection of this process read into `size` bytes instead of 256 KiB.

    asyncio gives each TLS connection a read buffer of `SSLProtocol.max_size` (256 KiB), filled with zeros,
    so resident from the start. An idle operator holds a connection per watch (about 24): 6 MiB of
    buffers for records of at most 16 KiB. A process-wide setting of asyncio's, so it is the process's
    entry point that calls this (`kubetrain operator` does), never an import."""
    sslproto.SSLProtocol.max_size = size


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _head(method: str, target: str, fields: Mapping[str, str]) -> bytes:
    """A request head: the one piece of HTTP/1.1 written here rather than by a library. h11 would cost
    about 4x as much per request on the operator's hottest path (bench/http_parsers.py, bench/README.md);
    the body's framing is a Content-Length the caller puts in `fields`."""
    return (f"{method} {target} HTTP/1.1\r\n" + "".join(_header_lines(fields)) + "\r\n").encode("latin-1")


def _header_lines(headers: Mapping[str, str]) -> list[str]:
    return [_header_line(name, value) for name, value in headers.items()]


@functools.lru_cache(maxsize=256)
def _header_line(name: str, value: str) -> str:
    """One header line, checked; remembered, since most are the same on every request (the token, the
    agent, the types), and a refused one raises again each time."""
    if not _TOKEN.fullmatch(name):
        raise ValueError(f"header {name!r}: the name must be an RFC 9110 token")
    if not _FIELD_VALUE.fullmatch(value):
        raise ValueError(
            f"header {name!r}: the value holds CR, LF, NUL or a character outside Latin-1; "
            "check where it comes from (a token file, an exec credential plugin)"
        )
    return f"{name}: {value.strip()}\r\n"


@functools.lru_cache(maxsize=64)
def _query(items: tuple[tuple[str, str], ...]) -> str:
    """A query string; remembered, since most requests send the same one (the field manager)."""
    return urlencode(items)


def _keepalive(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is None:
        return
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    probes = (("TCP_KEEPIDLE", KEEPALIVE_S), ("TCP_KEEPINTVL", KEEPALIVE_S // 2), ("TCP_KEEPCNT", 9))
    for name, value in probes:
        if hasattr(socket, name):
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


class HttpClient:
    """Requests to one server (`base`: scheme, host, port and an optional path prefix).

    `ssl_context` is used for https (and an https proxy); `server_name` is the name TLS checks the
    certificate against (the base's host when None); `proxy` is an `http(s)://[user:password@]host:port`
    URL or a `Proxy`.
    """

    def __init__(
        self,
        base: str,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_name: str | None = None,
        proxy: str | Proxy | None = None,
        limit: int = 100,
        idle_timeout_s: float = 90.0,
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
        self._proxy = Proxy.parse(proxy) if isinstance(proxy, str) else proxy
        self._proxy_tls = (ssl_context or ssl.create_default_context()) if self._proxy else None
        self._pool = Pool(limit, idle_timeout_s)
        self._streams: set[Conn] = set()
        self._closed = False

    async def close(self) -> None:
        """Close every connection, idle or in use. Idempotent."""
        self._closed = True
        for conn in [*self._pool.close(), *self._streams]:
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
        stream: bool = False,
    ) -> AsyncIterator[Response]:
        """Send one request; yield its response once the head is read (within `head_timeout_s` seconds).

        `stream`: a long body read as it arrives (a watch), on a connection of its own.
        The connection goes back to the pool when the body was read to its end, else it is closed.
        """
        resp = await self._send(
            method, path, query=query, headers=headers, body=body, head_timeout_s=head_timeout_s,
            stream=stream,
        )  # fmt: skip
        try:
            yield resp
        finally:
            self._done(resp)

    async def fetch(
        self, method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], body: bytes | None
    ) -> tuple[Response, bytes]:
        """Send one request and read its whole answer: `open()` and `read()` in one call, for the many
        short requests, which then pay for no context managers."""
        resp = await self._send(
            method, path, query=query, headers=headers, body=body, head_timeout_s=None, stream=False
        )
        try:
            data = await resp.read()
        finally:
            self._done(resp)
        return resp, data

    # plumbing ---------------------------------------------------------------------------------------
    async def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None,
        headers: Mapping[str, str] | None,
        body: bytes | None,
        head_timeout_s: float | None,
        stream: bool,
    ) -> Response:
        what = f"{method} {path}"
        try:
            request = self._encode(method, path, query or {}, headers or {}, body)
        except ValueError as err:
            raise TransportError(f"{what}: {err}") from None
        return await self._exchange(method, what, request, head_timeout_s, stream=stream)

    async def _exchange(
        self, method: str, what: str, request: bytes, seconds: float | None, *, stream: bool
    ) -> Response:
        while True:
            conn = await (self._open_stream(what, seconds) if stream else self._acquire(what, seconds))
            try:
                return await _timed(self._roundtrip(conn, method, what, request), seconds)
            except (*BROKEN, TimeoutError) as err:
                self._drop(conn)
                if conn.reused and method in _REPLAYABLE and not isinstance(err, TimeoutError):
                    continue  # the server closed it while idle; a fresh connection is not "reused"
                raise TransportError(f"{what}: {describe(err)}") from err
            except BaseException:
                self._drop(conn)
                raise

    async def _roundtrip(self, conn: Conn, method: str, what: str, request: bytes) -> Response:
        conn.writer.write(request)
        await conn.writer.drain()
        return await read_response(conn, head_only=method == "HEAD", what=what)

    def _encode(
        self, method: str, path: str, query: Mapping[str, str], headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        target = self._prefix + quote(path, safe=_PATH_SAFE)
        if query:
            target += "?" + _query(tuple(query.items()))
        if self._proxy is not None and self._tls is None:
            target = f"http://{self._netloc}{target}"
        fields = {"Host": self._netloc, **headers}
        if self._proxy is not None and self._tls is None and self._proxy.authorization:
            fields["Proxy-Authorization"] = self._proxy.authorization
        if body is not None:
            fields["Content-Length"] = str(len(body))
        return _head(method, target, fields) + (body or b"")

    async def _acquire(self, what: str, seconds: float | None) -> Conn:
        if self._closed:
            raise TransportError(f"{what}: the client is closed")
        if (conn := await self._pool.take()) is not None:
            return conn
        try:
            conn = await self._new_conn(what, seconds)
        except BaseException:
            self._pool.free_slot()
            raise
        self._pool.add(conn)
        return conn

    async def _open_stream(self, what: str, seconds: float | None) -> Conn:
        if self._closed:
            raise TransportError(f"{what}: the client is closed")
        conn = self._pool.detach() or await self._new_conn(what, seconds)
        self._streams.add(conn)
        return conn

    async def _new_conn(self, what: str, seconds: float | None) -> Conn:
        try:
            reader, writer = await _timed(self._connect(), seconds)
        except (*BROKEN, TimeoutError, ssl.SSLError) as err:
            raise TransportError(f"{what}: cannot connect to {self._netloc}: {describe(err)}") from err
        _keepalive(writer)
        return Conn(reader, writer)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self._proxy is None:
            name = self._server_name if self._tls else None
            return await asyncio.open_connection(
                self._host, self._port, ssl=self._tls, server_hostname=name, limit=_LIMIT
            )
        proxy = self._proxy
        reader, writer = await asyncio.open_connection(
            proxy.host, proxy.port, ssl=self._proxy_tls if proxy.tls else None,
            server_hostname=proxy.host if proxy.tls else None, limit=_LIMIT,
        )  # fmt: skip
        if self._tls is not None:
            try:
                await self._tunnel(reader, writer, proxy)
                await writer.start_tls(self._tls, server_hostname=self._server_name)
            except BaseException:
                writer.transport.abort()
                raise
        return reader, writer

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proxy: Proxy) -> None:
        target = _hostport(self._host, self._port)
        fields = {"Host": target}
        if proxy.authorization:
            fields["Proxy-Authorization"] = proxy.authorization
        writer.write(_head("CONNECT", target, fields))
        resp = await read_response(Conn(reader, writer), head_only=True, what=f"CONNECT {target}")
        if resp.status != 200:
            raise ConnectionError(f"the proxy answered {resp.status} to CONNECT {target}")

    def _done(self, resp: Response) -> None:
        """`resp`'s connection goes back to the pool when its body was read to the end, else it is closed."""
        conn = resp.connection
        reusable = resp.complete and resp.keep_alive and not self._closed and conn.usable()
        if conn in self._streams:
            self._streams.discard(conn)
            if not (reusable and self._pool.adopt(conn)):
                conn.close()
        elif reusable:
            self._pool.give_back(conn)
        else:
            self._drop(conn)

    def _drop(self, conn: Conn) -> None:
        self._streams.discard(conn)
        self._pool.drop(conn)
