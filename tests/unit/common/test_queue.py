"""The work queue keeps client-go's promises: dedupe, one worker per key, re-add when dirty, delays, drain."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from kubetrain.common.metrics import Metrics
from kubetrain.common.queue import QueueShutDown, WorkQueue
from kubetrain.common.ratelimit import ItemExponentialRateLimiter
from kubetrain.common.testing import FakeClock, settle


def make(clock: FakeClock) -> WorkQueue[str]:
    return WorkQueue(clock=clock, name="test", rate_limiter=ItemExponentialRateLimiter(0.005, 1000.0))


async def test_items_come_out_in_order_and_duplicates_collapse() -> None:
    q = make(FakeClock())
    for item in ["a", "b", "a", "c", "b"]:
        q.add(item)
    assert len(q) == 3
    assert [await q.get() for _ in range(3)] == ["a", "b", "c"]


async def test_an_item_is_never_handed_to_two_workers_at_once() -> None:
    q = make(FakeClock())
    q.add("a")
    first = await q.get()
    q.add("a")  # changed while being processed
    assert len(q) == 0, "a key being processed must not be queued again until done"
    second = asyncio.ensure_future(q.get())
    await settle()
    assert not second.done()
    q.done(first)
    assert await asyncio.wait_for(second, 1) == "a", "done() re-queues an item that was added meanwhile"


async def test_done_without_readd_does_not_requeue() -> None:
    q = make(FakeClock())
    q.add("a")
    q.done(await q.get())
    assert len(q) == 0 and q.processing == 0


async def test_adds_while_processing_collapse_into_one_rerun() -> None:
    q = make(FakeClock())
    q.add("a")
    item = await q.get()
    q.add("a")
    q.add("a")
    q.done(item)
    assert len(q) == 1


async def test_add_after_waits_on_virtual_time_and_keeps_the_earliest_due_time() -> None:
    clock = FakeClock()
    q = make(clock)
    q.add_after("late", 10)
    q.add_after("early", 5)
    q.add_after("late", 20)  # a later due time for a waiting item is ignored
    getter = asyncio.ensure_future(q.get())
    await clock.advance(4.9)
    assert not getter.done()
    await clock.advance(0.1)
    assert await asyncio.wait_for(getter, 1) == "early"
    getter = asyncio.ensure_future(q.get())
    await clock.advance(4.9)
    assert not getter.done()
    await clock.advance(0.1)
    assert await asyncio.wait_for(getter, 1) == "late"
    await clock.advance(100)
    assert len(q) == 0 and q.delayed == 0, "the superseded later add must not fire a second time"


async def test_add_after_zero_adds_now() -> None:
    q = make(FakeClock())
    q.add_after("a", 0)
    assert len(q) == 1


async def test_rate_limited_adds_back_off_exponentially_until_forgotten() -> None:
    clock = FakeClock()
    q = make(clock)
    delays = []
    for _ in range(5):
        q.add_rate_limited("a")
        start = clock.monotonic()
        getter = asyncio.ensure_future(q.get())
        await clock.run_until_idle()
        item = await asyncio.wait_for(getter, 1)
        delays.append(round(clock.monotonic() - start, 6))
        q.done(item)
    assert delays == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert q.num_requeues("a") == 5
    q.forget("a")
    assert q.num_requeues("a") == 0


async def test_shutdown_hands_out_queued_items_then_raises_and_ignores_new_adds() -> None:
    q = make(FakeClock())
    q.add("a")
    q.add_after("later", 5)
    q.shut_down()
    q.add("b")
    assert await q.get() == "a"
    with pytest.raises(QueueShutDown):
        await q.get()
    assert q.delayed == 0


async def test_shutdown_wakes_a_waiting_get() -> None:
    q = make(FakeClock())
    getter = asyncio.ensure_future(q.get())
    await settle()
    q.shut_down()
    with pytest.raises(QueueShutDown):
        await asyncio.wait_for(getter, 1)


async def test_drain_waits_for_items_in_progress() -> None:
    q = make(FakeClock())
    q.add("a")
    item = await q.get()
    drain = asyncio.ensure_future(q.shut_down_with_drain())
    await settle()
    assert not drain.done(), "drain must wait for the item being processed"
    q.done(item)
    await asyncio.wait_for(drain, 1)


async def test_in_flight_gauges_show_work_not_yet_done() -> None:
    """workqueue_unfinished_work_seconds and _longest_running_processor_seconds, read at scrape time."""
    clock = FakeClock()
    registry = CollectorRegistry()
    q: WorkQueue[str] = WorkQueue(clock=clock, name="jobs", metrics=Metrics(registry).queue("jobs"))

    def gauge(name: str) -> float | None:
        return registry.get_sample_value(name, {"name": "jobs", "controller": "jobs"})

    q.add("a")
    q.add("b")
    first = await q.get()
    await clock.advance(3)
    second = await q.get()
    await clock.advance(1)
    assert gauge("workqueue_unfinished_work_seconds") == 5.0, "4 s of a plus 1 s of b"
    assert gauge("workqueue_longest_running_processor_seconds") == 4.0
    q.done(first)
    q.done(second)
    assert gauge("workqueue_unfinished_work_seconds") == 0.0
    assert gauge("workqueue_longest_running_processor_seconds") == 0.0
    assert gauge("workqueue_adds_total") == 2.0
    assert gauge("workqueue_depth") == 0.0
    assert (
        registry.get_sample_value(
            "workqueue_work_duration_seconds_count", {"name": "jobs", "controller": "jobs"}
        )
        == 2.0
    )
