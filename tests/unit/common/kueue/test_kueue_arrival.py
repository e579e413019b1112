"""An operator started without Kueue's Workload API looks for it again and stops once it is served
(`kubetrain.common.kueue.arrival`), over the dumb in-memory API client."""

from __future__ import annotations

import logging

import pytest

from kubetrain.common.errors import NotFound, ServerError
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kueue import RESOURCE_FLAVORS, arrival
from kubetrain.common.kueue.arrival import KueueServed, restart_when_served


async def test_absent_then_unavailable_then_served_stops_the_operator(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(arrival, "RECHECK_SECONDS", 0.0)
    api = InMemoryApiClient()
    api.fail("list", NotFound("the server could not find the requested resource"), resource=RESOURCE_FLAVORS)
    api.fail("list", ServerError("the server is currently unable to handle the request"), times=1)
    with (
        caplog.at_level(logging.INFO, logger="kubetrain.kueue"),
        pytest.raises(KueueServed, match="served now"),
    ):
        await restart_when_served(api, "auto")
    assert api.count("list", RESOURCE_FLAVORS) == 3, "absent, unavailable, served: one list each"
    assert "jobs labelled kueue.x-k8s.io/queue-name are not queued" in caplog.text


async def test_served_already_stops_at_once() -> None:
    with pytest.raises(KueueServed):
        await restart_when_served(InMemoryApiClient(), "PyTorchJob")
