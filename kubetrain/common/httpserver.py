"""The operator's HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz, /metrics.

`/healthz` answers 200 while the event loop is alive (a wedged loop cannot answer: that is the
liveness signal). `/readyz` answers 200 once the manager says it is ready, else 503. `/metrics` is the
Prometheus text exposition of the injected registry, rendered in a thread of its own so that a scrape
never holds up reconciles; with a `guard`, each scrape must pass it first (see
`kubetrain.common.kube.authn.BearerGuard`: TokenReview and SubjectAccessReview, as controller-runtime).
A refused scrape (401, 403, or 503 while the reviews are saturated) closes its connection.

Why a server of our own on asyncio streams rather than aiohttp.web: the operator must stay under 50 MiB
of RSS at rest, and aiohttp's modules take about 9 MiB of it. The connections, their limits and the
protocol (h11) are `kubetrain.common.listener`'s: heads within 16 KiB and 64 fields (431), bodies read and
dropped (413 past 64 KiB), each request and its answer within `timeout` seconds, at most `per_peer`
connections from one address and `max_connections` in all (the newest is served and the peer holding
most loses its oldest). The kubelet probes from its node's address with a connection or two, so a pod
that opens connections in a loop only ever closes its own (tests/component/test_httpserver_flood.py).
Other paths get 404 and other methods 405.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubetrain.common.listener import Limits, Listener, Reply, Request

if TYPE_CHECKING:  # imported at the first scrape: a thread pool is not needed at rest
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["Guard", "HealthServer"]

NOT_READY = "not ready: caches syncing or shutting down"
_REFUSALS = (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN, HTTPStatus.SERVICE_UNAVAILABLE)

Guard = Callable[[str | None, str], Awaitable[HTTPStatus | None]]
"""(Authorization header or None, path) -> None to serve, or the status to refuse (401, 403, 500, 503)."""


def _text(text: str, status: HTTPStatus = HTTPStatus.OK) -> Reply:
    return Reply(status, text.encode())


def _error(status: HTTPStatus) -> Reply:
    headers = (("Allow", "GET, HEAD"),) if status is HTTPStatus.METHOD_NOT_ALLOWED else ()
    if status is HTTPStatus.SERVICE_UNAVAILABLE:
        headers = (("Retry-After", "1"),)
    body = f"{status.value}: {status.phrase}".encode()
    return Reply(status, body, headers=headers, close=status in _REFUSALS)


class HealthServer:
    """/healthz, /readyz and /metrics over HTTP/1.1; `start(host, 0)` picks a free port, read as `port`.

    `timeout`: the seconds one request and its response may take on a connection, idle time included.
    `max_connections` / `per_peer`: connections open at once, in all and from one address.
    `guard`: checked before /metrics is served (None: open). `ssl_context`: serve HTTPS.
    `serve_metrics`: False for a probe listener (/metrics is then 404).
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
        self._guard = guard
        self._paths = ("/healthz", "/readyz", "/metrics") if serve_metrics else ("/healthz", "/readyz")
        limits = Limits(
            max_connections=max_connections,
            per_peer=per_peer,
            head_timeout=min(timeout, Limits.head_timeout),
            request_timeout=timeout,
            idle_timeout=timeout,
        )
        self._listener = Listener(self._route, limits, ssl_context=ssl_context)
        self._renderer: ThreadPoolExecutor | None = None

    @property
    def port(self) -> int | None:
        return self._listener.port

    async def start(self, host: str, port: int) -> None:
        await self._listener.start(host, port)

    async def stop(self) -> None:
        """Close the listening socket and every open connection; return once their handlers are done."""
        await self._listener.stop()
        if self._renderer is not None:
            self._renderer.shutdown(wait=False)
            self._renderer = None

    async def _route(self, request: Request) -> Reply:
        path = request.path
        if path not in self._paths:
            return _error(HTTPStatus.NOT_FOUND)
        if request.method not in (b"GET", b"HEAD"):
            return _error(HTTPStatus.METHOD_NOT_ALLOWED)
        if path == "/healthz":
            return _text("ok")
        if path == "/readyz":
            return _text("ok") if self._ready() else _text(NOT_READY, HTTPStatus.SERVICE_UNAVAILABLE)
        return await self._metrics(request, path)

    async def _metrics(self, request: Request, path: str) -> Reply:
        if self._guard is not None:
            refused = await self._guard(request.header(b"authorization"), path)
            if refused is not None:
                return _error(refused)
        if self._renderer is None:
            from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

            self._renderer = ThreadPoolExecutor(1, thread_name_prefix="metrics")
        loop = asyncio.get_running_loop()  # one scrape rendered at a time, off the event loop
        body = await loop.run_in_executor(self._renderer, generate_latest, self._registry)
        return Reply(HTTPStatus.OK, body, content_type=CONTENT_TYPE_LATEST)
