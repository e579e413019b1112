"""The kubelet's probes cannot be starved, and /metrics is guarded and rendered off the event loop.

Issue 22, defects 6 and 7. The kubelet probes from its node's address; a pod floods from its own. On
loopback the two are 127.0.0.2 (the probe) and 127.0.0.1 (the flood). Bounded: 3,000 connections.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http import HTTPStatus

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from test_httpserver import Connection, closed_by_server, exchange, get, serving

from kubetrain.common.httpserver import HealthServer

FLOOD = 3000
PER_PEER = 8  # connections the server keeps from one address
PROBE_TIMEOUT = 1.0  # the kubelet's default timeoutSeconds


async def probe_from(server: HealthServer, address: str) -> Connection:
    return await asyncio.open_connection("127.0.0.1", server.port, local_addr=(address, 0))


async def test_probes_are_answered_while_a_pod_holds_thousands_of_connections() -> None:
    loop = asyncio.get_running_loop()
    async with serving(per_peer=PER_PEER) as server:
        kept = await probe_from(server, "127.0.0.2")  # a probe connection opened before the flood
        flood: list[Connection] = []
        try:
            for n in range(FLOOD):
                flood.append(await asyncio.open_connection("127.0.0.1", server.port))
                if n % 500 == 499:  # probes during the flood: on the kept connection and on new ones
                    started = loop.time()
                    assert (await exchange(*kept, get("/healthz"))).status == 200
                    fresh = await probe_from(server, "127.0.0.3")
                    assert (await exchange(*fresh, get("/readyz"))).status == 200
                    fresh[1].close()
                    assert loop.time() - started < PROBE_TIMEOUT
            await assert_only_the_newest_are_kept(flood)
        finally:
            for writer in [*(w for _, w in flood), kept[1]]:
                writer.close()


async def assert_only_the_newest_are_kept(flood: list[Connection]) -> None:
    """The flood reached the server and was capped: it closed every connection of the flooding address but
    the newest PER_PEER, which it still serves."""
    closed = await asyncio.gather(*(closed_by_server(reader) for reader, _ in flood[:-PER_PEER]))
    assert closed.count(False) == 0, f"{closed.count(False)} of the oldest connections are still open"
    for reader, writer in flood[-PER_PEER:]:
        assert (await exchange(reader, writer, get("/healthz"))).status == 200


class ThreadRecorder(Collector):
    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.threads.append(threading.current_thread())
        yield GaugeMetricFamily("kubetrain_test_rendered", "renders seen", value=len(self.threads))


async def test_metrics_are_rendered_off_the_event_loop_thread() -> None:
    async with serving() as server:
        recorder = ThreadRecorder()
        server._registry.register(recorder)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        with contextlib.closing(writer):
            reply = await exchange(reader, writer, get("/metrics"))
        assert reply.status == 200 and b"kubetrain_test_rendered" in reply.body
        assert recorder.threads and threading.main_thread() not in recorder.threads


async def test_metrics_are_served_only_past_the_guard() -> None:
    seen: list[tuple[str | None, str]] = []

    async def guard(authorization: str | None, path: str) -> HTTPStatus | None:
        seen.append((authorization, path))
        return None if authorization == "Bearer good" else HTTPStatus.FORBIDDEN

    async with serving(guard=guard) as server:  # type: ignore[arg-type]
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        with contextlib.closing(writer):
            refused = await exchange(reader, writer, get("/metrics", "GET", "Authorization: Bearer bad"))
            assert await closed_by_server(reader), "a refusal closes its connection"
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        with contextlib.closing(writer):
            served = await exchange(reader, writer, get("/metrics", "GET", "Authorization: Bearer good"))
            probe = await exchange(reader, writer, get("/healthz"))
    assert (refused.status, refused.headers["connection"], served.status, probe.status) == (
        403,
        "close",
        200,
        200,
    )
    assert b"kubetrain_test_pings_total" in served.body and b"kubetrain" not in refused.body
    assert seen == [("Bearer bad", "/metrics"), ("Bearer good", "/metrics")], "probes are not guarded"


async def test_a_probe_listener_beside_a_guarded_metrics_one_does_not_serve_metrics() -> None:
    async with serving(serve_metrics=False) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        with contextlib.closing(writer):
            assert (await exchange(reader, writer, get("/metrics"))).status == 404
            assert (await exchange(reader, writer, get("/healthz"))).status == 200


class ManySeries(Collector):
    """A registry's worth of series: an answer larger than the socket buffers between the two sides."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("kubetrain_test_series", "many series", labels=["n"])
        for n in range(SERIES):
            family.add_metric([f"series-{n:06d}"], float(n))
        yield family


SERIES = 150_000


async def test_a_large_answer_over_tls_arrives_whole_before_the_connection_closes() -> None:
    """A scraper that asks to close (`Connection: close`) and reads slowly gets every byte over HTTPS: the
    server closes only once its buffers have drained (on the real node, a 96 KiB answer was cut at 64 KiB)."""
    import socket  # noqa: PLC0415
    import ssl  # noqa: PLC0415
    import time  # noqa: PLC0415

    from kubetrain.common.servingcert import serving_context  # noqa: PLC0415

    async with serving(ssl_context=await serving_context(None)) as server:
        server._registry.register(ManySeries())
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        port = server.port

        def scrape() -> bytes:
            raw = socket.socket()
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a slow, narrow reader
            raw.connect(("127.0.0.1", port))
            with insecure.wrap_socket(raw) as tls:
                tls.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                time.sleep(1.0)  # the server has written all it can by now
                chunks = []
                while chunk := tls.recv(65536):
                    chunks.append(chunk)
                return b"".join(chunks)

        reply = await asyncio.to_thread(scrape)
        head, _, body = reply.partition(b"\r\n\r\n")
        length = int(
            next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
        )
        assert (len(body), length > 4 * 1024 * 1024) == (length, True)
        assert body.rstrip().endswith(
            f'kubetrain_test_series{{n="series-{SERIES - 1:06d}"}} {SERIES - 1}.0'.encode()
        )
