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


def probe_while_held(url: str, held: float) -> tuple[int, bytes, float]:
    """Hold this (the operator's) loop, running nothing, for `held` seconds, as a loop working through a
    backlog or wedged would; then, still holding it, probe `url` from another thread and wait up to WAIT
    seconds for the answer. The answer must come while the loop is held."""
    answer: list[tuple[int, bytes, float]] = []
    time.sleep(held)
    prober = threading.Thread(target=lambda: answer.append(fetch(url)), daemon=True)
    prober.start()
    prober.join(WAIT)
    assert answer, f"no answer to {url} within {WAIT:g} s while the operator's loop was held"
    return answer[0]


async def until_live(base: str) -> None:
    """Probe /healthz until it answers 200 (the loop ran and marked its heartbeat), at most WAIT s."""
    deadline = time.monotonic() + WAIT
    while (answer := await asyncio.to_thread(fetch, f"{base}/healthz"))[0] != 200:
        assert time.monotonic() < deadline, f"/healthz still {answer} after the loop ran again"


async def test_a_probe_is_answered_at_once_while_the_operators_loop_is_held() -> None:
    server = ProbeServer(lambda: True, stall_after=2.0)
    await server.start("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.port}"  # start() marked the heartbeat
        # answered while the loop is held (a probe served on that loop would wait until it runs again)
        assert probe_while_held(f"{base}/healthz", held=0.2)[:2] == (200, b"ok")
        await until_live(base)  # a fresh heartbeat before holding the loop again
        assert probe_while_held(f"{base}/readyz", held=0.2)[:2] == (200, b"ok")
    finally:
        await server.stop()


async def test_once_the_operators_loop_has_stalled_healthz_fails_and_recovers_with_it() -> None:
    server = ProbeServer(lambda: True, stall_after=1.0)
    await server.start("127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.port}"
        # the heartbeat marks every 0.5 s: held 1.5 s, it is at least 1.5 s old
        status, body, _ = probe_while_held(f"{base}/healthz", held=1.5)
        assert status == 500 and body.startswith(b"the operator's event loop has not run for "), body
        status, body, _ = probe_while_held(f"{base}/readyz", held=1.5)
        assert status == 503 and b"has not run for" in body, body
        await until_live(base)  # the loop runs again: its heartbeat marks, /healthz recovers
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
