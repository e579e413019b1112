"""OwnedObjectHandler: which changes of a job's children reconcile the job at once, which after the delay."""

from __future__ import annotations

import asyncio
from typing import Any

from kubetrain.common.controller import Controller
from kubetrain.common.expectations import Expectations
from kubetrain.common.job.labels import REPLICA_INDEX_LABEL
from kubetrain.common.job.wiring import OwnedObjectHandler
from kubetrain.common.kube.resources import Obj
from kubetrain.common.reconcile import Request
from kubetrain.common.testing import FakeClock

JOB = Request("ns", "toy")
DELAY = 0.25


def pod(name: str, phase: str = "Pending", *, deleting: bool = False) -> Obj:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "labels": {REPLICA_INDEX_LABEL: name[-1]},
        "ownerReferences": [
            {"apiVersion": "toy.kubetrain.test/v1", "kind": "ToyJob", "name": "toy", "controller": True}
        ],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def wired() -> tuple[FakeClock, Controller, Expectations, OwnedObjectHandler]:
    clock = FakeClock()
    controller = Controller("toy", reconciler=None, clock=clock)  # type: ignore[arg-type]  # never run
    expectations = Expectations(clock)
    handler = OwnedObjectHandler(
        controller, expectations, kind="ToyJob", group="toy.kubetrain.test", expect="pods", delay=DELAY
    )
    return clock, controller, expectations, handler


async def queued_after(clock: FakeClock, controller: Controller) -> float | None:
    """Seconds of virtual time until the job comes out of the queue (None: not within a second)."""
    got = asyncio.ensure_future(controller.queue.get())
    waited = 0.0
    while waited <= 1.0:
        await clock.advance(0)
        if got.done():
            assert got.result() == JOB
            controller.queue.done(JOB)
            return waited
        await clock.advance(0.05)
        waited = round(waited + 0.05, 2)
    got.cancel()
    return None


async def test_pod_changes_within_the_delay_cost_one_reconcile() -> None:
    clock, controller, _, handler = wired()
    handler.on_update(pod("toy-worker-0"), pod("toy-worker-0", "Running"))
    await clock.advance(0.1)
    handler.on_update(pod("toy-worker-1"), pod("toy-worker-1", "Running"))
    assert len(controller.queue) == 0, "not at once"
    assert await queued_after(clock, controller) == DELAY - 0.1, "due one delay after the first change"
    assert await queued_after(clock, controller) is None, "the second change rode on the same reconcile"


async def test_the_creation_that_completes_the_expectations_reconciles_at_once() -> None:
    _, controller, expectations, handler = wired()
    expectations.expect(JOB, "pods", adds=2)
    handler.on_add(pod("toy-worker-0"))
    assert len(controller.queue) == 0, "one of two created pods seen: the job still waits"
    handler.on_add(pod("toy-worker-1"))
    assert len(controller.queue) == 1, "both seen: the next batch need not wait"
    assert expectations.satisfied(JOB)


async def test_deletions_the_job_waits_for_reconcile_at_once() -> None:
    _, controller, expectations, handler = wired()
    expectations.expect(JOB, "pods", deletes=1)
    handler.on_update(pod("toy-worker-0", "Failed"), pod("toy-worker-0", "Failed", deleting=True))
    assert len(controller.queue) == 1
    controller.queue.add(JOB)  # still waiting: no second entry
    assert len(controller.queue) == 1


async def test_a_pod_that_vanishes_reconciles_at_once() -> None:
    _, controller, _, handler = wired()
    handler.on_delete(pod("toy-worker-0", "Running"))
    assert len(controller.queue) == 1


async def test_no_delay_is_the_library_default() -> None:
    clock = FakeClock()
    controller = Controller("toy", reconciler=None, clock=clock)  # type: ignore[arg-type]
    handler = OwnedObjectHandler(
        controller, Expectations(clock), kind="ToyJob", group="toy.kubetrain.test", expect="pods"
    )
    handler.on_update(pod("toy-worker-0"), pod("toy-worker-0", "Running"))
    assert len(controller.queue) == 1
