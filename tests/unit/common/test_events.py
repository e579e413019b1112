"""Events: repeats are merged (count++), floods are cut per object, failures never reach the caller."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from kubetrain.common.errors import ServerError
from kubetrain.common.events import EventType, KubeEventRecorder, ObjectRef
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import EVENTS
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
