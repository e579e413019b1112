"""A running ToyJob operator over the in-memory API server, on virtual time, and the test playing kubelet.

The tests play the kubelet: they move pods through their phases by patching pod status. A pod on a
lost node is simulated with a finalizer that only a force delete (grace period 0) removes, which is what
a real API server does for a pod whose kubelet never confirms.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CollectorRegistry

from kubetrain.common.job import GangScheduling, add_job_controller
from kubetrain.common.kube import objects
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import PODS, SERVICES, Obj
from kubetrain.common.manager import Manager
from kubetrain.common.metrics import Metrics
from kubetrain.common.testing import FakeClock, MemoryEventRecorder

from .toyjob import ToyJobController

TOY = ToyJobController.job_resource()
LOST_NODE = "test.kubetrain/lost-node"


class ClusterApi(InMemoryApiClient):
    """The dumb in-memory server, plus what a force delete does to a pod whose node is gone."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.force_deleted: list[str] = []

    async def delete(self, res: Any, namespace: str | None, name: str, **kwargs: Any) -> None:
        if kwargs.get("grace_period_seconds") == 0 and res == PODS:
            self.force_deleted.append(name)
            current = await self.get(res, namespace, name)
            if LOST_NODE in (current["metadata"].get("finalizers") or []):
                await self.patch(res, namespace, name, {"metadata": {"finalizers": None}})
                return
        await super().delete(res, namespace, name, **kwargs)


class Operator:
    """One operator process: a Manager running the ToyJob controller."""

    def __init__(
        self, api: ClusterApi, clock: FakeClock, gang: GangScheduling | None = None, **options: Any
    ) -> None:
        self.events = MemoryEventRecorder()
        self.metrics = Metrics(CollectorRegistry())
        self.manager = Manager(api, clock=clock, metrics=self.metrics, http_address=None)
        self.controller = add_job_controller(
            self.manager, ToyJobController, recorder=self.events, gang=gang, **options
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self.manager.run())

    async def stop(self, clock: FakeClock) -> None:
        self.manager.stop()
        await clock.advance(0)
        if self.task is not None:
            await asyncio.wait_for(self.task, 5)

    def counter(self, name: str, namespace: str = "ns", **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(
            f"{name}_total", {"job_namespace": namespace, "framework": "toy", **labels}
        )
        return value or 0.0


class Cluster:
    """The API server, the clock, and the operator currently running against them."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = ClusterApi(clock=self.clock, status_subresources=[TOY])
        self.operator: Operator | None = None

    @property
    def op(self) -> Operator:
        assert self.operator is not None
        return self.operator

    async def start_operator(self, **options: Any) -> Operator:
        self.operator = Operator(self.api, self.clock, **options)
        self.operator.start()
        await self.step()
        return self.operator

    async def restart_operator(self, **options: Any) -> Operator:
        await self.op.stop(self.clock)
        return await self.start_operator(**options)

    async def step(self, seconds: float = 0.0) -> None:
        """Let virtual time pass (and everything that can run, run)."""
        await self.clock.advance(seconds)
        await self.clock.advance(0.1)  # rate-limited retries of a failed reconcile are due after ms

    # the job ------------------------------------------------------------------------------------------
    async def submit(self, body: Obj) -> Obj:
        created = await self.api.create(TOY, objects.namespace(body), body)
        await self.step()
        return created

    async def job(self, name: str = "toy") -> Obj:
        return await self.api.get(TOY, "ns", name)

    async def conditions(self, name: str = "toy") -> list[tuple[str, str, str]]:
        status = (await self.job(name)).get("status") or {}
        return [(c["type"], c["status"], c["reason"]) for c in status.get("conditions") or []]

    async def condition(self, ctype: str, name: str = "toy") -> dict[str, Any] | None:
        status = (await self.job(name)).get("status") or {}
        return next((c for c in status.get("conditions") or [] if c["type"] == ctype), None)

    async def is_true(self, ctype: str, name: str = "toy") -> bool:
        cond = await self.condition(ctype, name)
        return cond is not None and cond["status"] == "True"

    # the kubelet ----------------------------------------------------------------------------------------
    async def pods(self) -> dict[str, Obj]:
        return {objects.name(p): p for p in (await self.api.list(PODS, "ns")).items}

    async def services(self) -> dict[str, Obj]:
        return {objects.name(s): s for s in (await self.api.list(SERVICES, "ns")).items}

    async def set_phase(
        self, name: str, phase: str, *, exit_code: int | None = None, restarts: int = 0, ready: bool = False
    ) -> None:
        """Move a pod to `phase`; `exit_code` terminates its container with that code."""
        state: dict[str, Any] = {"running": {}}
        if exit_code is not None:
            state = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}
        status = {
            "phase": phase,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "toy", "restartCount": restarts, "state": state}],
        }
        await self.api.patch(PODS, "ns", name, {"status": status})
        await self.step()

    async def run_all(self, phase: str = "Running") -> None:
        for name in sorted(await self.pods()):
            await self.set_phase(name, phase, exit_code=0 if phase == "Succeeded" else None, ready=True)

    async def lose_node(self, name: str) -> None:
        """The pod's node stops answering: its deletion will never be confirmed but by a force delete."""
        await self.api.patch(PODS, "ns", name, {"metadata": {"finalizers": [LOST_NODE]}})
