"""The Manager: ready once synced, controllers only on the leader, clean hand-over and SIGTERM, /metrics."""

from __future__ import annotations

import asyncio
import os
import signal

import aiohttp
import pytest

from kubetrain.common.errors import LeadershipLost, ServerError, TransportError
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import LEASES, PODS
from kubetrain.common.leader import LeaderElectionConfig
from kubetrain.common.manager import Manager
from kubetrain.common.reconcile import Request, Result
from kubetrain.common.testing import FakeClock, settle


class Seen:
    def __init__(self) -> None:
        self.requests: list[Request] = []

    async def reconcile(self, request: Request) -> Result:
        self.requests.append(request)
        return Result()


def build(api: object, clock: FakeClock, identity: str | None = None, **kw: object) -> tuple[Manager, Seen]:
    election = LeaderElectionConfig("kube-system", "kubetrain", identity) if identity else None
    kw.setdefault("http_address", None)
    manager = Manager(api, clock=clock, leader_election=election, **kw)  # type: ignore[arg-type]
    seen = Seen()
    controller = manager.controller("pods", seen)
    controller.watch(manager.informer(PODS))
    return manager, seen


async def test_health_ready_and_metrics_endpoints() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    api.fail("list", ServerError("etcd is starting"))
    manager, seen = build(api, clock, http_address=("127.0.0.1", 0), metrics_address=("127.0.0.1", 0))
    task = asyncio.ensure_future(manager.run())
    for _ in range(100):
        await asyncio.sleep(0.01)
        if manager.http_port and manager.metrics_port:
            break
    base = f"http://127.0.0.1:{manager.http_port}"
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{base}/healthz") as r:
            assert r.status == 200
        async with http.get(f"{base}/readyz") as r:
            assert r.status == 503, "not ready before the caches have synced"
        await clock.advance(1)
        async with http.get(f"{base}/readyz") as r:
            assert r.status == 200
        await api.create(PODS, "ns", {"metadata": {"name": "p"}})
        await settle()
        async with http.get(f"{base}/metrics") as r:
            assert r.status == 404, "the probe port has no guard: it never serves /metrics"
        async with http.get(f"http://127.0.0.1:{manager.metrics_port}/metrics") as r:
            text = await r.text()
    assert seen.requests == [Request("ns", "p")]
    assert 'controller_runtime_reconcile_total{controller="pods",result="success"} 1.0' in text
    assert 'workqueue_adds_total{controller="pods",name="pods"} 1.0' in text
    manager.stop()
    await asyncio.wait_for(task, 5)


async def test_only_the_leader_reconciles_and_a_clean_stop_hands_over_quickly() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    a, seen_a = build(api, clock, "a")
    run_a = asyncio.ensure_future(a.run())
    await settle()
    b, seen_b = build(api, clock, "b")
    run_b = asyncio.ensure_future(b.run())
    await clock.advance(5)
    assert a.is_leader and not b.is_leader
    assert a.is_ready() and b.is_ready(), "a standby is ready too"
    assert [_master_status(m) for m in (a, b)] == [1.0, 0.0], "leader_election_master_status{name=lease}"
    await api.create(PODS, "ns", {"metadata": {"name": "p"}})
    await settle()
    assert seen_a.requests == [Request("ns", "p")] and seen_b.requests == []
    a.stop()
    await asyncio.wait_for(run_a, 5)
    assert (await api.get(LEASES, "kube-system", "kubetrain"))["spec"]["holderIdentity"] is None
    await clock.advance(2)
    assert b.is_leader
    assert [_master_status(m) for m in (a, b)] == [0.0, 1.0]
    assert seen_b.requests == [Request("ns", "p")], "the new leader starts from its warm cache"
    b.stop()
    await asyncio.wait_for(run_b, 5)


def _master_status(manager: Manager) -> float | None:
    return manager.registry.get_sample_value("leader_election_master_status", {"name": "kubetrain"})


async def test_losing_the_lease_stops_everything_and_raises() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    manager, _ = build(api, clock, "a")
    task = asyncio.ensure_future(manager.run())
    await clock.advance(3)
    assert manager.is_leader
    api.fail("get", TransportError("partition"), resource=LEASES, times=1000)
    await clock.advance(12)
    with pytest.raises(LeadershipLost):
        await asyncio.wait_for(task, 5)
    assert all(c.queue.shutting_down for c in manager.controllers), "controllers were stopped"
    assert not manager.is_leader


async def test_stop_while_standing_by_returns_without_touching_the_lease() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    a, _ = build(api, clock, "a")
    run_a = asyncio.ensure_future(a.run())
    await settle()
    b, _ = build(api, clock, "b")
    run_b = asyncio.ensure_future(b.run())
    await clock.advance(3)
    b.stop()
    await asyncio.wait_for(run_b, 5)
    assert (await api.get(LEASES, "kube-system", "kubetrain"))["spec"]["holderIdentity"] == "a"
    a.stop()
    await asyncio.wait_for(run_a, 5)


async def test_sigterm_drains_and_returns() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    manager, _ = build(api, clock)
    task = asyncio.ensure_future(manager.run(handle_signals=True))
    await settle()
    assert manager.is_ready()
    os.kill(os.getpid(), signal.SIGTERM)
    await asyncio.wait_for(task, 5)
    assert not manager.is_ready()


async def test_a_dead_background_task_stops_the_manager_and_is_reported() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    manager, _ = build(api, clock)

    async def broken() -> None:
        raise KeyError("bug in a runnable")

    manager.add_runnable(broken)
    with pytest.raises(RuntimeError, match="background task"):
        await asyncio.wait_for(manager.run(), 5)
