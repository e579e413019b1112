"""The Controller applies the Result policy on virtual time and never runs one key on two workers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import pytest
from prometheus_client import CollectorRegistry

from kubetrain.common.clock import Clock
from kubetrain.common.controller import Controller
from kubetrain.common.errors import ServerError, TerminalError
from kubetrain.common.handlers import for_controller_owner
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import PODS
from kubetrain.common.metrics import Metrics
from kubetrain.common.reconcile import Request, Result
from kubetrain.common.testing import FakeClock, settle

A = Request("ns", "a")


class Recorder:
    """A reconciler whose behaviour per call is scripted; it logs (request, virtual time) of each call."""

    def __init__(self, clock: Clock, script: Callable[[Request, int], Result] | None = None) -> None:
        self.clock = clock
        self.calls: list[tuple[Request, float]] = []
        self.script = script or (lambda _r, _n: Result())
        self.running: set[Request] = set()
        self.overlaps = 0
        self.gate: asyncio.Event | None = None

    async def reconcile(self, request: Request) -> Result:
        if request in self.running:
            self.overlaps += 1
        self.running.add(request)
        try:
            self.calls.append((request, self.clock.monotonic()))
            if self.gate is not None:
                await self.gate.wait()
            return self.script(request, sum(1 for r, _ in self.calls if r == request))
        finally:
            self.running.discard(request)

    def times(self, request: Request = A) -> list[float]:
        return [round(t, 6) for r, t in self.calls if r == request]


@pytest.fixture
async def env() -> AsyncIterator[Callable[..., Controller]]:
    clock = FakeClock()
    tasks: list[asyncio.Task[None]] = []

    def start(reconciler: Recorder, **kwargs: object) -> Controller:
        controller = Controller("test", reconciler, clock=reconciler.clock, **kwargs)  # type: ignore[arg-type]
        tasks.append(asyncio.ensure_future(controller.run()))
        return controller

    start.clock = clock  # type: ignore[attr-defined]
    yield start
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_requeue_after_is_honoured_on_virtual_time(env) -> None:
    clock = env.clock
    rec = Recorder(clock, lambda _r, n: Result(requeue_after=30) if n < 3 else Result())
    controller = env(rec)
    controller.enqueue(A)
    await clock.advance(1000)
    assert rec.times() == [0.0, 30.0, 60.0]


async def test_errors_are_retried_with_exponential_backoff_then_succeed(env) -> None:
    clock = env.clock

    def script(_r: Request, n: int) -> Result:
        if n <= 4:
            raise ServerError("apiserver hiccup")
        return Result()

    registry = CollectorRegistry()
    rec = Recorder(clock, script)
    controller = env(rec, metrics=Metrics(registry))
    controller.enqueue(A)
    await clock.advance(10)
    assert rec.times() == [0.0, 0.005, 0.015, 0.035, 0.075]
    assert controller.queue.num_requeues(A) == 0, "success forgets the failure history"

    def sample(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, {"controller": "test", **labels})

    assert sample("controller_runtime_reconcile_total", result="error") == 4
    assert sample("controller_runtime_reconcile_total", result="success") == 1
    assert sample("controller_runtime_reconcile_errors_total") == 4
    assert sample("controller_runtime_terminal_reconcile_errors_total") == 0
    assert sample("controller_runtime_reconcile_total", result="requeue") == 0


async def test_a_bug_in_reconcile_does_not_kill_the_worker(env) -> None:
    clock = env.clock

    def script(r: Request, n: int) -> Result:
        if r == A and n == 1:
            raise ZeroDivisionError("bug")
        return Result()

    rec = Recorder(clock, script)
    controller = env(rec)  # a single worker
    controller.enqueue(A)
    controller.enqueue(Request("ns", "b"))
    await clock.advance(1)
    assert [str(r) for r, _ in rec.calls] == ["ns/a", "ns/b", "ns/a"]


async def test_a_non_result_return_is_an_error_not_a_crash(env) -> None:
    clock = env.clock
    rec = Recorder(clock, lambda _r, n: None if n == 1 else Result())  # type: ignore[arg-type,return-value]
    env(rec).enqueue(A)
    await clock.advance(1)
    assert rec.times() == [0.0, 0.005]


async def test_terminal_error_is_not_retried(env) -> None:
    clock = env.clock

    def script(_r: Request, _n: int) -> Result:
        raise TerminalError("spec can never work")

    rec = Recorder(clock, script)
    controller = env(rec)
    controller.enqueue(A)
    await clock.advance(3600)
    assert rec.times() == [0.0]
    controller.enqueue(A)  # a later change enqueues it again
    await clock.advance(1)
    assert rec.times() == [0.0, 3600.0]


async def test_a_key_is_never_reconciled_by_two_workers_at_once(env) -> None:
    clock = env.clock
    rec = Recorder(clock)
    rec.gate = asyncio.Event()
    controller = env(rec, workers=4)
    keys = [Request("ns", f"k{i}") for i in range(3)]
    for _ in range(5):
        for k in keys:
            controller.enqueue(k)
        await settle()
    assert sorted(str(r) for r in rec.running) == ["ns/k0", "ns/k1", "ns/k2"], "distinct keys run in parallel"
    rec.gate.set()
    await clock.advance(1)
    assert rec.overlaps == 0
    # each key: one run for the first add, one re-run for the adds that arrived while it was running
    assert sorted(str(r) for r, _ in rec.calls) == sorted([str(k) for k in keys] * 2)


async def test_stop_lets_inflight_reconciles_finish_then_takes_no_more_work(env) -> None:
    clock = env.clock
    rec = Recorder(clock)
    rec.gate = asyncio.Event()
    controller = env(rec)
    controller.enqueue(A)
    await settle()
    controller.enqueue(Request("ns", "b"))
    stopping = asyncio.ensure_future(controller.stop(grace=30))
    await clock.advance(10)
    assert not stopping.done()
    rec.gate.set()
    await settle()
    assert stopping.done()
    assert [str(r) for r, _ in rec.calls] == ["ns/a"], "queued work is not started after stop"


async def test_stop_cancels_reconciles_that_outlive_the_grace_period(env) -> None:
    clock = env.clock
    rec = Recorder(clock)
    rec.gate = asyncio.Event()  # never set: a stuck reconcile
    controller = env(rec)
    controller.enqueue(A)
    await settle()
    stopping = asyncio.ensure_future(controller.stop(grace=5))
    await clock.advance(5)
    await settle()
    assert stopping.done()
    assert rec.running == set(), "the stuck reconcile was cancelled"


async def test_reconcile_timeout_turns_a_hung_reconcile_into_a_retry(env) -> None:
    clock = env.clock
    rec = Recorder(clock)
    rec.gate = asyncio.Event()
    env(rec, reconcile_timeout=60).enqueue(A)
    await clock.advance(60.01)
    assert rec.times() == [0.0, 60.005]


async def test_owned_objects_enqueue_their_controlling_owner(env) -> None:
    clock = env.clock
    api = InMemoryApiClient(clock=clock)
    pods = Informer(api, PODS, clock=clock)
    rec = Recorder(clock)
    controller = env(rec)
    controller.watch(pods, for_controller_owner("TFJob", "kubeflow.org"))
    task = asyncio.ensure_future(pods.run())
    owner = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "a", "uid": "u", "controller": True}
    foreign = {**owner, "apiVersion": "other.io/v1"}
    await api.create(PODS, "ns", {"metadata": {"name": "a-worker-0", "ownerReferences": [owner]}})
    await api.create(PODS, "ns", {"metadata": {"name": "x", "ownerReferences": [foreign]}})
    await api.create(PODS, "ns", {"metadata": {"name": "lonely"}})
    await clock.advance(1)
    await api.delete(PODS, "ns", "a-worker-0")
    await clock.advance(1)
    task.cancel()
    assert rec.times() == [0.0, 1.0], "created and deleted: the owner is reconciled each time, others never"
