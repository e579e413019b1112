"""The HTTPS listener of the training-progress endpoint: POSTs in, `StatusReports` decides, JSON answers out.

The protocol is h11's (as the health server's, `kubetrain.common.httpserver`). Bounds, so that no pod can
make the operator hold more than a little memory or time:
- a request head of at most 16 KiB (431), a body of at most `MAX_BODY_BYTES` (413, known from
  Content-Length before any of it is read; a chunked body is cut off there too);
- `timeout` seconds for each request (a new connection's first request: from the connection on);
- a connection kept open between requests (the pods' helper sends each report on the same one, so a report
  costs no TLS handshake) is closed after `idle_timeout` seconds without a request: longer than the
  write interval a job is asked to report at, so a pod reporting steadily keeps its connection;
- at most `max_connections` at once: one past the cap is closed at once, unanswered.
Only POST is served (405). The TLS context is the caller's: the operator's own serving certificate. An
answer with `retry_after` carries a `Retry-After` header (whole seconds).
"""

from __future__ import annotations

import asyncio
import logging
import math
import ssl
from http import HTTPStatus
from urllib.parse import urlsplit

import h11

from kubetrain.common.progress.endpoint import Answer, StatusReports
from kubetrain.podcontract.progress import MAX_BODY_BYTES

__all__ = ["ProgressServer"]

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024


class _Refused(Exception):
    def __init__(self, status: HTTPStatus) -> None:
        super().__init__(status.phrase)
        self.status = status


class ProgressServer:
    """Serves `reports` on `start(host, port)`; `port` is the bound port (for port 0)."""

    def __init__(
        self,
        reports: StatusReports,
        *,
        ssl_context: ssl.SSLContext | None,
        timeout: float = 10.0,
        idle_timeout: float = 120.0,
        max_connections: int = 1024,
    ) -> None:
        self._reports, self._ssl, self._timeout = reports, ssl_context, timeout
        self._idle = idle_timeout
        self._max = max_connections
        self._open: dict[asyncio.StreamWriter, asyncio.Task[None] | None] = {}
        """The connections served, and their handlers (closed by `stop`: kept ones would wait for long)."""
        self._server: asyncio.Server | None = None

    @property
    def connections(self) -> int:
        """Connections open now (idle kept ones included)."""
        return len(self._open)

    @property
    def port(self) -> int:
        assert self._server is not None and self._server.sockets
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._serve, host, port, ssl=self._ssl)

    async def stop(self) -> None:
        """Stop listening and close every connection (their handlers end at once, not cancelled)."""
        if self._server is not None:
            self._server.close()
            for writer in list(self._open):
                writer.transport.abort()  # no TLS goodbye: an idle client would not answer it
            handlers = [task for task in self._open.values() if task is not None]
            if handlers:
                await asyncio.wait(handlers, timeout=self._timeout)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._open) >= self._max:
            writer.close()
            return
        self._open[writer] = asyncio.current_task()
        try:
            conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
            while await self._exchange(conn, reader, writer):
                conn.start_next_cycle()
                if not await self._next_request(conn, reader):
                    break
        except (ConnectionError, TimeoutError, h11.ProtocolError, ssl.SSLError):
            pass
        finally:
            del self._open[writer]
            writer.close()
            try:  # a TLS close waits for the peer's answer, which an idle client may never send
                async with asyncio.timeout(1.0):
                    await writer.wait_closed()
            except (ConnectionError, ssl.SSLError, TimeoutError):
                writer.transport.abort()

    async def _next_request(self, conn: h11.Connection, reader: asyncio.StreamReader) -> bool:
        """Wait up to `idle_timeout` for the next request's first bytes; False when none came."""
        if conn.trailing_data[0]:
            return True  # already received (pipelined)
        try:
            async with asyncio.timeout(self._idle):
                data = await reader.read(65536)
        except TimeoutError:
            return False
        conn.receive_data(data)
        return bool(data)

    async def _exchange(
        self, conn: h11.Connection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """One request and its answer; False when the connection is to end."""
        try:
            async with asyncio.timeout(self._timeout):
                got = await _read(conn, reader)
                if got is None:
                    return False
                request, body = got
                answer = await self._answer(request, body)
        except _Refused as refused:
            await _send(conn, writer, Answer(refused.status, refused.status.phrase, "refused"), close=True)
            return False
        await _send(conn, writer, answer, close=False)
        return conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _answer(self, request: h11.Request, body: bytes) -> Answer:
        if request.method != b"POST":
            return Answer(HTTPStatus.METHOD_NOT_ALLOWED, "only POST", "refused")
        authorization = next((v.decode("latin-1") for k, v in request.headers if k == b"authorization"), None)
        path = urlsplit(request.target.decode("ascii", "replace")).path
        return await self._reports.handle(path, authorization, body)


async def _read(conn: h11.Connection, reader: asyncio.StreamReader) -> tuple[h11.Request, bytes] | None:
    request: h11.Request | None = None
    body = bytearray()
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as err:
            raise _Refused(HTTPStatus(err.error_status_hint)) from err
        if event is h11.NEED_DATA:
            conn.receive_data(await reader.read(65536))
        elif isinstance(event, h11.Request):
            request = event
            if any(k == b"content-length" and int(v) > MAX_BODY_BYTES for k, v in event.headers):
                raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_BODY_BYTES:
                raise _Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, bytes(body)
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, answer: Answer, *, close: bool) -> None:
    if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
        return
    payload = answer.body()
    headers = [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(payload))),
        ("Connection", "close" if close else "keep-alive"),
    ]
    if answer.retry_after is not None:
        headers.append(("Retry-After", str(max(1, math.ceil(answer.retry_after)))))
    data = conn.send(
        h11.Response(status_code=answer.status.value, headers=headers, reason=answer.status.phrase)
    )
    data += conn.send(h11.Data(data=payload)) + conn.send(h11.EndOfMessage())
    writer.write(data)
    await writer.drain()
