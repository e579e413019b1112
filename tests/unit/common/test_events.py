"""Events: repeats are merged (count++), floods are cut per object, failures never reach the caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubetrain.common.errors import ServerError
from kubetrain.common.events import EventType, KubeEventRecorder, ObjectRef
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import EVENTS, Obj, Resource
from kubetrain.common.testing import FakeClock

JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
}


@pytest.fixture
async def setup() -> AsyncIterator[tuple[FakeClock, InMemoryApiClient, KubeEventRecorder]]:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    recorder = KubeEventRecorder(api, component="kubetrain", clock=clock)
    task = asyncio.ensure_future(recorder.run())
    yield clock, api, recorder
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


async def events(api: InMemoryApiClient) -> list[dict]:
    return (await api.list(EVENTS, "ns")).items


class _SlowServer(InMemoryApiClient):
    """Answers an Event create only when the test lets it: shows how many writes are in flight at once."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock=clock)
        self.in_flight = 0
        self.most_in_flight = 0
        self.go = asyncio.Event()

    async def create(self, res: Resource, namespace: str | None, body: Obj, *, read_back: bool = True) -> Obj:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await self.go.wait()
        self.in_flight -= 1
        return await super().create(res, namespace, body)


async def test_an_event_is_written_with_the_involved_object(setup) -> None:
    _, api, recorder = setup
    recorder.record(JOB, EventType.NORMAL, "SuccessfulCreatePod", "Created pod: j-worker-0")
    await recorder.flush()
    [event] = await events(api)
    assert event["involvedObject"] == {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "j", "namespace": "ns", "uid": "u1",
    }  # fmt: skip
    assert (event["type"], event["reason"], event["count"]) == ("Normal", "SuccessfulCreatePod", 1)
    assert event["message"] == "Created pod: j-worker-0"
    assert event["source"] == {"component": "kubetrain"}
    assert event["firstTimestamp"] == event["lastTimestamp"] == "2025-01-01T00:00:00Z"


async def test_the_same_event_within_the_window_bumps_the_count(setup) -> None:
    clock, api, recorder = setup
    recorder.record(JOB, EventType.WARNING, "Restarting", "pod j-worker-0 failed")
    await recorder.flush()
    await clock.advance(60)
    recorder.record(JOB, EventType.WARNING, "Restarting", "pod j-worker-0 failed")
    recorder.record(
        JOB, EventType.WARNING, "Restarting", "pod j-worker-1 failed"
    )  # another message: new Event
    await recorder.flush()
    evs = sorted(await events(api), key=lambda e: e["message"])
    assert [(e["message"], e["count"]) for e in evs] == [
        ("pod j-worker-0 failed", 2),
        ("pod j-worker-1 failed", 1),
    ]
    assert evs[0]["lastTimestamp"] == "2025-01-01T00:01:00Z"
    assert evs[0]["firstTimestamp"] == "2025-01-01T00:00:00Z"


async def test_after_the_window_a_new_event_is_created(setup) -> None:
    clock, api, recorder = setup
    recorder.record(JOB, EventType.NORMAL, "R", "m")
    await recorder.flush()
    await clock.advance(601)
    recorder.record(JOB, EventType.NORMAL, "R", "m")
    await recorder.flush()
    assert [e["count"] for e in await events(api)] == [1, 1]


async def test_a_flood_about_one_object_is_cut_and_refills_slowly(setup) -> None:
    clock, api, recorder = setup
    for i in range(30):
        recorder.record(JOB, EventType.WARNING, "R", f"message {i}")
    other = ObjectRef("v1", "Pod", "ns", "p", "u2")
    recorder.record(other, EventType.NORMAL, "R", "other object is not limited")
    await recorder.flush()
    assert len(await events(api)) == 26
    assert recorder.dropped == {"spam": 5}
    await clock.advance(300)
    recorder.record(JOB, EventType.WARNING, "R", "after refill")
    await recorder.flush()
    assert len(await events(api)) == 27


async def test_write_failures_are_swallowed_and_later_events_still_go_out(setup) -> None:
    _, api, recorder = setup
    api.fail("create", ServerError("etcd down"), resource=EVENTS)
    recorder.record(JOB, EventType.NORMAL, "First", "lost")  # must not raise
    await recorder.flush()
    recorder.record(JOB, EventType.NORMAL, "Second", "kept")
    await recorder.flush()
    assert [e["reason"] for e in await events(api)] == ["Second"]
    assert recorder.dropped == {"error": 1}


async def test_every_drop_is_counted_by_reason_and_reported() -> None:
    clock = FakeClock()
    api = InMemoryApiClient(clock=clock)
    reported: list[str] = []
    recorder = KubeEventRecorder(api, component="c", clock=clock, max_pending=2, on_drop=reported.append)
    for i in range(3):  # nothing writes yet: the third finds the backlog full
        recorder.record(JOB, EventType.NORMAL, "R", f"m{i}")
    assert recorder.dropped == {"backlog": 1}
    assert reported == ["backlog"]


async def test_a_deleted_event_is_recreated_instead_of_patched(setup) -> None:
    _, api, recorder = setup
    recorder.record(JOB, EventType.NORMAL, "R", "m")
    await recorder.flush()
    [event] = await events(api)
    await api.delete(EVENTS, "ns", event["metadata"]["name"])
    recorder.record(JOB, EventType.NORMAL, "R", "m")
    await recorder.flush()
    assert [e["count"] for e in await events(api)] == [1]


async def test_a_merged_event_stays_mergeable_while_older_ones_expire(setup) -> None:
    """Expiry goes by last use: an Event bumped recently outlives one written after it but not since."""
    clock, api, recorder = setup
    recorder.record(JOB, EventType.NORMAL, "A", "a")
    await recorder.flush()
    await clock.advance(10)
    recorder.record(JOB, EventType.NORMAL, "B", "b")
    await recorder.flush()
    await clock.advance(490)
    recorder.record(JOB, EventType.NORMAL, "A", "a")  # A's last use: t=500
    await recorder.flush()
    await clock.advance(150)  # t=650: B (last used at t=10) is out of the window, A is not
    recorder.record(JOB, EventType.NORMAL, "B", "b")
    recorder.record(JOB, EventType.NORMAL, "A", "a")
    await recorder.flush()
    got = sorted((e["reason"], e["count"]) for e in await events(api))
    assert got == [("A", 3), ("B", 1), ("B", 1)]


async def test_a_quiet_objects_bucket_is_kept_until_it_would_have_refilled(setup) -> None:
    clock, api, recorder = setup
    for i in range(25):
        recorder.record(JOB, EventType.WARNING, "R", f"first {i}")
    await clock.advance(900)  # past the aggregation window; 3 tokens back, not 25
    for i in range(10):
        recorder.record(JOB, EventType.WARNING, "R", f"second {i}")
    await recorder.flush()
    assert len(await events(api)) == 28
    assert recorder.dropped == {"spam": 7}


async def test_what_is_remembered_per_object_is_forgotten_once_it_cannot_matter(setup) -> None:
    """An operator that has seen 1,000 jobs come and go keeps nothing of them (memory stays bounded)."""
    clock, _, recorder = setup
    for i in range(1000):
        recorder.record(ObjectRef("v1", "Pod", "ns", f"p{i}", f"u{i}"), EventType.NORMAL, "R", "m")
    await recorder.flush()
    assert (len(recorder._seen), len(recorder._buckets)) == (1000, 1000)
    await clock.advance(25 * 300)  # the aggregation window and a full refill
    recorder.record(JOB, EventType.NORMAL, "R", "m")
    await recorder.flush()
    assert (len(recorder._seen), len(recorder._buckets)) == (1, 1)


async def test_events_still_waiting_or_in_flight_when_the_recorder_stops_are_counted_as_dropped() -> None:
    clock = FakeClock()
    drops: list[str] = []
    api = _SlowServer(clock)  # never answers: the writes stay in flight
    recorder = KubeEventRecorder(api, component="kubetrain", clock=clock, writers=4, on_drop=drops.append)
    task = asyncio.ensure_future(recorder.run())
    for index in range(6):
        recorder.record(JOB, EventType.NORMAL, "SuccessfulCreatePod", f"Created pod: j-worker-{index}")
    for _ in range(100):  # until the writers have taken their Events (a few yields)
        if api.in_flight == 4:
            break
        await asyncio.sleep(0)
    assert api.in_flight == 4
    task.cancel()  # the operator stopping: 4 writes in flight, 2 Events waiting
    await asyncio.gather(task, return_exceptions=True)
    assert recorder.dropped["shutdown"] == 6 and drops == ["shutdown"] * 6


async def test_events_are_written_a_few_at_a_time_and_a_repeat_waits_to_bump_its_event() -> None:
    clock = FakeClock()
    api = _SlowServer(clock)
    recorder = KubeEventRecorder(api, component="kubetrain", clock=clock, writers=4)
    task = asyncio.ensure_future(recorder.run())
    try:
        for name in ("a", "b", "c"):
            job = {**JOB, "metadata": {**JOB["metadata"], "name": name}}
            recorder.record(job, EventType.NORMAL, "MPIJobCreated", f"{name} is created.")
        recorder.record(JOB, EventType.NORMAL, "R", "m")
        recorder.record(JOB, EventType.NORMAL, "R", "m")  # the same Event: a bump once the first exists
        for _ in range(100):  # until the writers have taken their Events (a few yields)
            if api.most_in_flight == 4:
                break
            await asyncio.sleep(0)
        assert api.most_in_flight == 4, "a slow server does not hold the other Events back"
        api.go.set()
        await recorder.flush()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    counts = sorted((e["metadata"]["name"].split(".")[0], e["count"]) for e in await events(api))
    assert counts == [("a", 1), ("b", 1), ("c", 1), ("j", 2)]
