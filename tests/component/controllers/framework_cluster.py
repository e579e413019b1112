"""A framework controller running over the in-memory API server on virtual time, with the test as kubelet.

`FrameworkCluster(TFJobController)` starts an `InProcessOperator` for one kind; the test submits jobs,
moves pods through their phases by patching pod status (the main container's exit code included, which
is what the restart policies read), and looks at the job's conditions and the objects it owns.
"""

from __future__ import annotations

from typing import Any

from kubetrain.common.kube import objects
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.resources import PODS, Obj, Resource
from kubetrain.common.testing import FakeClock
from kubetrain.controllers.settings import ConfiguredJobController, ControllerSettings
from kubetrain.testing.operator import InProcessOperator

NAMESPACE = "ns"


class FrameworkCluster:
    """The API server, the clock and an operator running `controller` (see the module docstring)."""

    def __init__(
        self, controller: type[ConfiguredJobController[Any]], settings: ControllerSettings | None = None
    ) -> None:
        self.clock = FakeClock()
        self.kind = controller.kind
        self.resource = controller.job_resource()
        self.api = InMemoryApiClient(clock=self.clock, status_subresources=[self.resource])
        self.operator = InProcessOperator(self.api, [controller], settings=settings, clock=self.clock)

    async def __aenter__(self) -> FrameworkCluster:
        self.operator.start()
        await self.step()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.operator.manager.stop()
        await self.clock.advance(0.1)
        await self.operator.stop()

    async def step(self, seconds: float = 0.0) -> None:
        """Let virtual time pass, and everything that can run, run (a few reconciles)."""
        await self.clock.advance(seconds)
        for _ in range(3):
            await self.clock.advance(0.1)

    # the job ------------------------------------------------------------------------------------------
    async def submit(self, body: Obj) -> Obj:
        created = await self.api.create(self.resource, NAMESPACE, body)
        await self.step()
        return created

    async def patch_spec(self, spec: dict[str, Any], name: str = "job") -> None:
        await self.api.patch(self.resource, NAMESPACE, name, {"spec": spec})
        await self.step()

    async def job(self, name: str = "job") -> Obj:
        return await self.api.get(self.resource, NAMESPACE, name)

    async def condition(self, ctype: str, name: str = "job") -> dict[str, Any] | None:
        conditions = ((await self.job(name)).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == ctype and c["status"] == "True"), None)

    async def reason(self, ctype: str, name: str = "job") -> str | None:
        """The reason of condition `ctype` when it is True, else None."""
        cond = await self.condition(ctype, name)
        return None if cond is None else str(cond["reason"])

    def events(self, reason: str) -> list[str]:
        """Messages of the Events recorded with `reason` (e.g. `TFJobRestarting`), oldest first."""
        return [e.message for e in self.operator.events.events if e.reason == reason]

    # what the job owns ---------------------------------------------------------------------------------
    async def names(self, resource: Resource) -> list[str]:
        """Names of the live (not terminating) objects of `resource` in the namespace."""
        items = (await self.api.list(resource, NAMESPACE)).items
        return sorted(objects.name(o) for o in items if not objects.is_deleting(o))

    async def pod(self, name: str) -> Obj:
        return await self.api.get(PODS, NAMESPACE, name)

    async def env(self, pod: str) -> dict[str, str]:
        """The plain env values of the pod's first container (`valueFrom` entries left out)."""
        container = (await self.pod(pod))["spec"]["containers"][0]
        return {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}

    # the kubelet ----------------------------------------------------------------------------------------
    async def set_phase(self, name: str, phase: str, *, exit_code: int | None = None) -> None:
        """Move pod `name` to `phase`; `exit_code` terminates its main container with that code."""
        container = str(self.kind.default_container_name)
        state: dict[str, Any] = {"running": {}}
        if exit_code is not None:
            state = {"terminated": {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}}
        status = {
            "phase": phase,
            "containerStatuses": [{"name": container, "restartCount": 0, "state": state}],
        }
        await self.api.patch(PODS, NAMESPACE, name, {"status": status})
        await self.step()

    async def run(self, *names: str) -> None:
        for name in names:
            await self.set_phase(name, "Running")

    async def succeed(self, *names: str) -> None:
        for name in names:
            await self.set_phase(name, "Succeeded", exit_code=0)

    async def fail(self, name: str, exit_code: int = 1) -> None:
        await self.set_phase(name, "Failed", exit_code=exit_code)
