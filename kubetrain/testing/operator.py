"""The operator in-process, for tests: a Manager running framework controllers against any ApiClient.

Component tests hand it the in-memory ApiClient and a FakeClock; integration tests hand it a
`KubeApiClient` connected with the control plane's kubeconfig. Either way the controllers are built the
one way the operator builds them (`kubetrain.controllers.settings.add_controller`), Events are kept in
memory for assertions, and nothing listens on a port.

    async with InProcessOperator(api, [TFJobController], namespace=ns) as op:
        ...  # submit jobs with kubectl or `api`, then look at what the controllers made

    async with on_control_plane(control_plane, [TFJobController], namespace=ns) as op:
        ...  # the same against the real API server; our CRDs are applied once per control plane

`job_manifest`, `replica_spec` and `container_spec` write the job a test submits, in its wire form, as a
user would: only the fields given, everything else left to the operator's defaulting.

Not imported by `kubetrain.testing` itself (which stays stdlib-only): import this module explicitly.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from types import TracebackType
from typing import Any

from prometheus_client import CollectorRegistry

from kubetrain.api import KINDS, KindInfo
from kubetrain.api.crd import custom_resource_definition
from kubetrain.common.clock import Clock
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.manager import Manager
from kubetrain.common.metrics import Metrics
from kubetrain.common.testing import MemoryEventRecorder
from kubetrain.controllers.settings import ConfiguredJobController, ControllerSettings, add_controller
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.kwok import Outcome

__all__ = [
    "STOP_TIMEOUT",
    "InProcessOperator",
    "container_spec",
    "install_crds",
    "job_manifest",
    "kubectl_apply",
    "on_control_plane",
    "replica_spec",
    "wait_until",
]

STOP_TIMEOUT = 60.0
"""Seconds a stopping Manager gets to finish its in-flight work (the real API server may be slow)."""


class InProcessOperator:
    """One operator process: a Manager with `controllers`, all built with `settings`.

    `namespace` scopes the informers (None: cluster-wide); `options` go to every JobController (e.g.
    `terminating_timeout`). The Manager runs as a task between `start()` and `stop()` (or `async with`).
    """

    def __init__(
        self,
        api: ApiClient,
        controllers: Sequence[type[ConfiguredJobController[Any]]],
        *,
        settings: ControllerSettings | None = None,
        clock: Clock | None = None,
        namespace: str | None = None,
        **options: Any,
    ) -> None:
        self.api = api
        self.settings = settings if settings is not None else ControllerSettings()
        self.events = MemoryEventRecorder()
        self.metrics = Metrics(CollectorRegistry())
        self.manager = Manager(api, clock=clock, metrics=self.metrics, namespace=namespace, http_address=None)
        self.controllers = {
            cls.kind.kind: add_controller(self.manager, cls, self.settings, recorder=self.events, **options)
            for cls in controllers
        }
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Run the Manager in the background (informers, controllers)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self.manager.run())

    async def stop(self) -> None:
        """Stop the Manager and wait for it (within `STOP_TIMEOUT` seconds); re-raises what made it crash."""
        self.manager.stop()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.wait_for(task, STOP_TIMEOUT)

    async def __aenter__(self) -> InProcessOperator:
        self.start()
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def job(self, namespace: str, name: str, *, kind: str | None = None) -> Obj:
        """The job `name` of `kind` (default: the kind of the first controller), read from the API server."""
        controller = self.controllers[kind] if kind else next(iter(self.controllers.values()))
        return await self.api.get(controller.job_resource(), namespace, name)

    async def condition(
        self, namespace: str, name: str, ctype: str, *, kind: str | None = None
    ) -> Obj | None:
        """The job's condition `ctype` when it is True, else None."""
        conditions = ((await self.job(namespace, name, kind=kind)).get("status") or {}).get(
            "conditions"
        ) or []
        found: Obj | None = next(
            (c for c in conditions if c["type"] == ctype and c["status"] == "True"), None
        )
        return found

    async def pods(self, namespace: str) -> dict[str, Obj]:
        """The pods of `namespace` that are not being deleted, by name."""
        items = (await self.api.list(PODS, namespace)).items
        return {objects.name(p): p for p in items if not objects.is_deleting(p)}

    async def running(self, namespace: str, *names: str) -> bool:
        """Whether every pod of `names` exists, is not being deleted, and is Running."""
        pods = await self.pods(namespace)
        return all((pods.get(n) or {}).get("status", {}).get("phase") == "Running" for n in names)

    async def replaced(self, namespace: str, name: str, old_uid: str) -> bool:
        """Whether pod `name` has been recreated (another uid) and is Running again."""
        pod = (await self.pods(namespace)).get(name)
        return (
            pod is not None
            and objects.uid(pod) != old_uid
            and pod.get("status", {}).get("phase") == "Running"
        )

    async def wait_for_condition(self, namespace: str, name: str, ctype: str, *, within: float = 60.0) -> Obj:
        """Wait until the job (of the first controller's kind) has condition `ctype` True; return it."""
        found: Obj = await wait_until(
            lambda: self.condition(namespace, name, ctype), what=f"{namespace}/{name} {ctype}", within=within
        )
        return found

    async def reason(self, namespace: str, name: str, ctype: str) -> str:
        """The reason of the job's condition `ctype`, once it is True."""
        return str((await self.wait_for_condition(namespace, name, ctype))["reason"])

    async def after_failure(
        self, plane: ControlPlane, namespace: str, job: str, pod: str, exit_code: int
    ) -> str:
        """Make kwok fail the Running pod `pod` of `job` with `exit_code`; return `replaced` once the pod runs
        again under the same name, or the reason of the job's Failed condition, whichever comes first."""
        old = objects.uid((await self.pods(namespace))[pod])
        plane.finish_pod(namespace, pod, Outcome.FAILED, exit_code=exit_code)

        async def outcome() -> str | None:
            if await self.replaced(namespace, pod, old):
                return "replaced"
            failed = await self.condition(namespace, job, "Failed")
            return None if failed is None else str(failed["reason"])

        result: str = await wait_until(outcome, what=f"{pod} replaced or {job} Failed")
        return result

    def counter(self, name: str, *, framework: str, namespace: str) -> float:
        """The value of a job counter metric (e.g. `training_operator_jobs_successful`), 0 when unset."""
        labels = {"job_namespace": namespace, "framework": framework}
        return self.metrics.registry.get_sample_value(f"{name}_total", labels) or 0.0


def container_spec(
    name: str = "", *, image: str = "trainer:1", port: tuple[str, int] | None = None, **fields: Any
) -> dict[str, Any]:
    """A container: `name` empty leaves it unnamed; `port` is a (name, containerPort) pair."""
    body: dict[str, Any] = {"image": image, **fields}
    if name:
        body["name"] = name
    if port is not None:
        body["ports"] = [{"name": port[0], "containerPort": port[1]}]
    return body


def replica_spec(count: int, *containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A replica spec of `count` replicas running `containers` (default: one unnamed container); `fields`
    are other replica-spec fields (`restartPolicy`) or `annotations` for the pod template."""
    template: dict[str, Any] = {"spec": {"containers": list(containers) or [container_spec()]}}
    annotations = fields.pop("annotations", None)
    if annotations:
        template["metadata"] = {"annotations": dict(annotations)}
    return {"replicas": count, "template": template, **fields}


def job_manifest(
    kind: KindInfo, specs: dict[str, Any], *, name: str = "job", namespace: str = "ns", **spec: Any
) -> dict[str, Any]:
    """The wire form of a `kind` job with replica specs `specs` and other spec fields `spec` (camelCase)."""
    return {
        "apiVersion": kind.api_version,
        "kind": kind.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {kind.replica_specs_field: specs, **spec},
    }


_INSTALLED: set[str] = set()


def install_crds(plane: ControlPlane) -> None:
    """`kubectl apply` the CRD of every kind (generated from the models, as committed in manifests/crds)
    and wait until they are Established; once per control plane, later calls return at once."""
    if str(plane.workdir) in _INSTALLED:
        return
    crds = {"apiVersion": "v1", "kind": "List", "items": [custom_resource_definition(i) for i in KINDS]}
    plane.kubectl("apply", "-f", "-", input=json.dumps(crds))
    for info in KINDS:
        plane.wait_established(info.crd_name)
    _INSTALLED.add(str(plane.workdir))


def kubectl_apply(plane: ControlPlane, body: Obj, *, namespace: str) -> None:
    """`kubectl apply -f -` of one object (e.g. a `job_manifest`) into `namespace`, as the admin."""
    plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(body))


@asynccontextmanager
async def on_control_plane(
    plane: ControlPlane,
    controllers: Sequence[type[ConfiguredJobController[Any]]],
    *,
    namespace: str,
    settings: ControllerSettings | None = None,
    **options: Any,
) -> AsyncIterator[InProcessOperator]:
    """An `InProcessOperator` on `plane` as the admin, watching `namespace`, with our CRDs installed."""
    install_crds(plane)
    api = await KubeApiClient.connect(str(plane.kubeconfig))
    try:
        async with InProcessOperator(
            api, controllers, settings=settings, namespace=namespace, **options
        ) as op:
            yield op
    finally:
        await api.close()


async def wait_until(check: Callable[[], Awaitable[Any]], *, what: str, within: float = 60.0) -> Any:
    """Poll `check` until it returns something truthy, and return that; AssertionError after `within` s."""
    deadline = time.monotonic() + within
    while not (result := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {within:g} s")
        await asyncio.sleep(0.2)
    return result
