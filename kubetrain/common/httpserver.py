"""The operator's HTTP endpoints for the kubelet and Prometheus: /healthz, /readyz, /metrics.

`ProbeServer` serves the kubelet's probes on a thread and event loop of its own, so that a probe is
answered at once however much work waits on the operator's loop: a flood of TLS handshakes and junk
tokens on /metrics or the progress endpoint (tests/hostile) made it wait behind them, past the kubelet's
timeout on a loaded node. Liveness is still the operator loop's: that loop marks a heartbeat every half
second, and `/healthz` answers 500 once it has not for `stall_after` seconds (a wedged loop), else 200.
`/readyz` answers 200 once the manager says it is ready and the loop is not stalled, else 503.
`HealthServer` answers the same paths on the loop it runs on (the metrics listener does). `/metrics` is the
Prometheus text exposition of the injected registry, rendered in a thread of its own so that a scrape
never holds up reconciles; with a `guard`, each scrape must pass it first (see
`kubetrain.common.kube.authn.BearerGuard`: TokenReview and SubjectAccessReview, as controller-runtime).
A refused scrape (401, 403, or 503 while the reviews are saturated) closes its connection.

Why a server of our own on asyncio streams rather than aiohttp.web: the operator must stay under 50 MiB
of RSS at rest, and aiohttp's modules take about 9 MiB of it. The connections, their limits and the
protocol (h11) are `kubetrain.common.listener`'s: heads within 16 KiB and 64 fields (431), bodies read and
dropped (413 past 64 KiB), each request and its answer within `timeout` seconds, at most 100 requests on
a connection, at most `per_peer` connections from one address and `max_connections` in all (the newest
is served and the peer holding most loses its oldest). The kubelet probes from its node's address with a
connection or two, so a pod that opens connections in a loop only ever closes its own
(tests/component/test_httpserver_flood.py).
Other paths get 404 and other methods 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from kubetrain.common.listener import Limits, Listener, Reply, Request

if TYPE_CHECKING:  # imported at the first scrape: a thread pool is not needed at rest
    from concurrent.futures import ThreadPoolExecutor

__all__ = ["STALL_AFTER", "Guard", "HealthServer", "ProbeServer"]

NOT_READY = "not ready: caches syncing or shutting down"
STALL_AFTER = 5.0
"""Seconds without a heartbeat of the operator's loop after which `ProbeServer`'s /healthz answers 500:
the shipped Deployment's probe timeout, what a probe answered on that loop would have waited at most."""
_BEAT = 0.5
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
    `serve_metrics`: False for a probe listener (/metrics is then 404). `stalled`: why the process is not
    live (/healthz 500, /readyz 503), or None.
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
        stalled: Callable[[], str | None] = lambda: None,
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._stalled = stalled
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
        stalled = self._stalled() if path in ("/healthz", "/readyz") else None
        if path == "/healthz":
            return _text("ok") if stalled is None else _text(stalled, HTTPStatus.INTERNAL_SERVER_ERROR)
        if path == "/readyz":
            if stalled is not None:
                return _text(stalled, HTTPStatus.SERVICE_UNAVAILABLE)
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


class ProbeServer:
    """/healthz and /readyz for the kubelet, served by a thread with an event loop of its own (see the
    module docstring); `start` and `stop` are called on the operator's loop, the one whose heartbeat
    /healthz reports. `ready` is called on the probe thread: it must only read state."""

    def __init__(self, ready: Callable[[], bool], *, stall_after: float = STALL_AFTER) -> None:
        self._stall_after = stall_after
        self._beat = time.monotonic()
        self._server = HealthServer(CollectorRegistry(), ready, serve_metrics=False, stalled=self._stalled)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._heart: asyncio.Task[None] | None = None

    @property
    def port(self) -> int | None:
        return self._server.port

    def _stalled(self) -> str | None:
        late = time.monotonic() - self._beat
        if late <= self._stall_after:
            return None
        return f"the operator's event loop has not run for {late:.1f} s"

    async def _heartbeat(self) -> None:
        while True:
            self._beat = time.monotonic()
            await asyncio.sleep(_BEAT)

    async def start(self, host: str, port: int) -> None:
        """Listen on the probe thread; OSError (e.g. the port in use) is raised here, the thread stopped."""
        self._beat = time.monotonic()
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=loop.run_forever, name="probes", daemon=True)
        self._thread.start()
        try:
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._server.start(host, port), loop))
        except BaseException:
            self._end_thread()
            raise
        self._heart = asyncio.ensure_future(self._heartbeat())

    async def stop(self) -> None:
        """Close the listener and its connections on the probe thread, then end the thread."""
        if self._heart is not None:
            self._heart.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heart
            self._heart = None
        if self._loop is None:
            return
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._server.stop(), self._loop))
        self._end_thread()

    def _end_thread(self) -> None:
        loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is None or thread is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()
