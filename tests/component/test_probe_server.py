"""ProbeServer over real sockets: the kubelet's probes are answered on a thread of their own while the
operator's loop is busy, and fail once that loop has stalled (the liveness signal)."""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.error
import urllib.request

import pytest

from kubetrain.common.httpserver import ProbeServer

WAIT = 5.0


def fetch(url: str) -> tuple[int, bytes, float]:
    """(status, body, seconds taken) of a GET by urllib, a real client; status 0: no answer."""
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as r:
            return r.status, r.read(), time.monotonic() - started
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.read(), time.monotonic() - started
    except OSError as err:
        return 0, str(err).encode(), time.monotonic() - started


async def probe_while_held(url: str, after: float, held: float) -> tuple[int, bytes, float]:
    """A probe sent `after` seconds into `held` seconds during which this (the operator's) loop runs
    nothing (it sleeps in a callback, as a loop working through a backlog, or wedged, would); returned
    once answered, the loop running again."""
    answer: list[tuple[int, bytes, float]] = []

    def probe() -> None:
        time.sleep(after)
        answer.append(fetch(url))

    prober = threading.Thread(target=probe)
    prober.start()
    time.sleep(held)
    await asyncio.to_thread(prober.join)
    return answer[0]


async def test_a_probe_is_answered_at_once_while_the_operators_loop_is_held() -> None:
    server = ProbeServer(lambda: True, stall_after=2.0)
    await server.start("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.port}"
        await asyncio.sleep(0.1)  # the heartbeat's first mark
        status, body, took = await probe_while_held(f"{base}/healthz", after=0.2, held=1.0)
        # answered long before the loop runs again (a probe on the loop itself would wait the whole 1 s)
        assert (status, body) == (200, b"ok") and took < 0.5, (status, body, took)
        status, body, _ = await probe_while_held(f"{base}/readyz", after=0.2, held=0.5)
        assert (status, body) == (200, b"ok")
    finally:
        await server.stop()


async def test_once_the_operators_loop_has_stalled_healthz_fails_and_recovers_with_it() -> None:
    server = ProbeServer(lambda: True, stall_after=1.0)
    await server.start("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.port}"
        await asyncio.sleep(0.1)
        status, body, _ = await probe_while_held(f"{base}/healthz", after=1.6, held=1.8)
        assert status == 500 and body.startswith(b"the operator's event loop has not run for "), body
        status, body, _ = await probe_while_held(f"{base}/readyz", after=1.6, held=1.8)
        assert status == 503 and b"has not run for" in body, body
        await asyncio.sleep(0.1)  # the loop runs: its heartbeat marks at once
        assert (await asyncio.to_thread(fetch, f"{base}/healthz"))[:2] == (200, b"ok")
    finally:
        await server.stop()


async def test_readyz_reads_the_managers_answer_on_the_probe_thread() -> None:
    ready = False
    server = ProbeServer(lambda: ready)
    await server.start("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert (await asyncio.to_thread(fetch, f"{base}/readyz"))[0] == 503
        ready = True
        assert (await asyncio.to_thread(fetch, f"{base}/readyz"))[:2] == (200, b"ok")
        assert (await asyncio.to_thread(fetch, f"{base}/metrics"))[0] == 404, "never /metrics here"
    finally:
        await server.stop()


async def test_a_port_in_use_is_raised_by_start_and_leaves_no_thread() -> None:
    first = ProbeServer(lambda: True)
    await first.start("127.0.0.1", 0)
    try:
        threads = threading.active_count()
        second = ProbeServer(lambda: True)
        with pytest.raises(OSError):
            await second.start("127.0.0.1", first.port or 0)
        await second.stop()
        assert threading.active_count() == threads
    finally:
        await first.stop()
    assert not [t for t in threading.enumerate() if t.name == "probes"], "stop ends the probe thread"
