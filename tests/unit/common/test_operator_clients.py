"""The operator's API clients: each concern gets a client with a rate limit of its own, so one never
queues behind another (reconciles, Events, leader election, progress writes, progress TokenReviews)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.operator import Clients, Operator, OperatorConfig
from kubetrain.common.progress.service import ProgressConfig
from kubetrain.controllers.pytorch import PyTorchJobController


class _Connected:
    def __init__(self, qps: float, burst: int) -> None:
        self.qps, self.burst = qps, burst

    async def close(self) -> None:
        pass


class _Stop(Exception):
    pass


class _Recording(Operator):
    clients: Clients | None = None

    async def prepare(self, clients: Clients) -> None:
        self.clients = clients
        raise _Stop


@pytest.fixture(autouse=True)
def no_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """`KubeApiClient.connect` hands out a record of the limit it was asked for."""

    async def connect(*args: Any, qps: float, burst: int, **kw: Any) -> _Connected:
        return _Connected(qps, burst)

    monkeypatch.setattr(KubeApiClient, "connect", connect)


async def test_progress_reviews_and_writes_have_limits_apart_from_each_other_and_the_reconciles() -> None:
    progress = ProgressConfig(
        host="127.0.0.1", port=0, url="https://op.ns.svc:8443", audience="kubetrain", interval=10.0,
        hosts=("op.ns.svc",),
    )  # fmt: skip
    operator = _Recording([PyTorchJobController], OperatorConfig(progress=progress))
    with pytest.raises(_Stop):
        await operator.serve()
    clients = operator.clients
    assert clients is not None
    used = [clients.api, clients.events, clients.progress, clients.reviews]
    assert all(c is not None for c in used)
    assert len({id(c) for c in used}) == len(used), "two concerns share one client (and its rate limit)"
    assert isinstance(clients.reviews, _Connected) and clients.reviews.qps > 0


async def test_without_the_progress_endpoint_no_progress_clients_are_opened() -> None:
    operator = _Recording([PyTorchJobController], OperatorConfig(progress=None))
    with pytest.raises(_Stop):
        await operator.serve()
    assert operator.clients is not None
    assert operator.clients.progress is None and operator.clients.reviews is None


async def test_a_secure_metrics_listener_reviews_tokens_on_the_reviews_client_not_the_controllers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 35, defect 2: each junk token on /metrics cost a TokenReview on the controllers' client."""
    seen: dict[str, Any] = {}

    async def metrics_security(*, secure: bool, cert_path: str | None, api: Any) -> None:
        seen.update(secure=secure, api=api)
        raise _Stop

    monkeypatch.setattr("kubetrain.common.operator.metrics_security", metrics_security)
    config = OperatorConfig(
        metrics_address=("127.0.0.1", 0), metrics_secure=True, progress=None, kueue_integration="none"
    )
    operator = _Watching([PyTorchJobController], config)
    with pytest.raises(_Stop):
        await operator.serve()
    clients = operator.clients
    assert seen["secure"] is True and clients is not None and clients.reviews is not None
    assert seen["api"] is clients.reviews and clients.reviews is not clients.api, "the reviews' own client"


class _Watching(Operator):
    clients: Clients | None = None

    async def prepare(self, clients: Clients) -> None:
        self.clients = clients
