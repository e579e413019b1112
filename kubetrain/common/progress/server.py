"""The HTTPS listener of the training-progress endpoint: POSTs in, `StatusReports` decides, JSON answers out.

The connections, their limits and the protocol (h11) are `kubetrain.common.listener`'s, with the bounds
of this endpoint (`progress_limits`), so that no pod and no stranger can make the operator hold more than
a little memory or time:
- a request head of at most 16 KiB and 64 fields (431), a body of at most `MAX_BODY_BYTES` (413, known
  from Content-Length before any of it is read; a chunked body is cut off there too);
- `timeout` seconds for each request and its answer, its head within 10 s of the connection (or of its
  first byte on a kept connection);
- a connection kept open between accepted reports (the pods' helper sends each report on the same one, so
  a report costs no TLS handshake) is closed after `idle_timeout` seconds without a request: longer than
  the write interval a job is asked to report at, so a pod reporting steadily keeps its connection;
- any refusal (4xx, 503) closes the connection: a caller without a valid token never holds a slot;
- at most `per_peer` connections from one address and `max_connections` in all: one past a cap closes
  the oldest of that peer (or of the peer holding most), never a pod's single kept connection first;
- a request whose client goes away is dropped with the work it started (its TokenReview).
Only POST is served (405). The TLS context is the caller's: the operator's own serving certificate. An
answer with `retry_after` carries a `Retry-After` header (whole seconds).
"""

from __future__ import annotations

import json
import math
import ssl
from http import HTTPStatus

from kubetrain.common.listener import Limits, Listener, Reply, Request
from kubetrain.common.progress.endpoint import Answer, StatusReports
from kubetrain.podcontract.progress import MAX_BODY_BYTES

__all__ = ["ProgressServer", "progress_limits"]

JSON = "application/json"


def progress_limits(
    *, timeout: float = 10.0, idle_timeout: float = 120.0, max_connections: int = 1024, per_peer: int = 32
) -> Limits:
    """The endpoint's bounds (see the module docstring and docs/progress.md, "Limits")."""
    return Limits(
        max_connections=max_connections,
        per_peer=per_peer,
        head_timeout=min(timeout, 10.0),
        request_timeout=timeout,
        idle_timeout=idle_timeout,
        max_body=MAX_BODY_BYTES,
    )


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
        per_peer: int = 32,
    ) -> None:
        self._reports = reports
        limits = progress_limits(
            timeout=timeout, idle_timeout=idle_timeout, max_connections=max_connections, per_peer=per_peer
        )
        self._listener = Listener(self._answer, limits, ssl_context=ssl_context, refusal=_refusal)

    @property
    def connections(self) -> int:
        """Connections open now (idle kept ones included)."""
        return self._listener.connections

    @property
    def port(self) -> int:
        assert self._listener.port is not None
        return self._listener.port

    async def start(self, host: str, port: int) -> None:
        await self._listener.start(host, port)

    async def stop(self) -> None:
        """Stop listening and close every connection (their handlers end at once)."""
        await self._listener.stop()

    async def _answer(self, request: Request) -> Reply:
        if request.method != b"POST":
            return _reply(Answer(HTTPStatus.METHOD_NOT_ALLOWED, "only POST", "refused"))
        answer = await self._reports.handle(request.path, request.header(b"authorization"), request.body)
        return _reply(answer)


def _reply(answer: Answer) -> Reply:
    headers: tuple[tuple[str, str], ...] = ()
    if answer.retry_after is not None:
        headers = (("Retry-After", str(max(1, math.ceil(answer.retry_after)))),)
    return Reply(answer.status, answer.body(), JSON, headers, close=answer.status >= 400)


def _refusal(status: HTTPStatus) -> Reply:
    return Reply(status, json.dumps({"message": status.phrase}).encode(), JSON, close=True)
