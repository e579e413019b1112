"""The local kubelet: runs the pods the operator creates in the in-memory API server as local processes.

It is an informer handler on the run's pods. A new pod (new uid) gets a `PodWorker`; a pod being
deleted, or gone, has its worker stopped (process group SIGTERM, SIGKILL after the grace period). It
knows nothing of training kinds: restart policies, backoff limits, deadlines and cleanup are the
operator's, which reads the statuses the workers write (see `podstatus`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from kubetrain.common.clock import Clock
from kubetrain.common.job.pods import main_container_index
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import CONFIGMAPS, SECRETS, Obj
from kubetrain.runtimes.local.plan import LaunchPlan, Planner
from kubetrain.runtimes.local.podenv import ConfigError
from kubetrain.runtimes.local.podworker import KubeletSink, PodWorker
from kubetrain.runtimes.local.ports import PortsExhausted

__all__ = ["KubeletOptions", "LocalKubelet"]


@dataclass(frozen=True)
class KubeletOptions:
    run_dir: Path
    crash_backoff: tuple[float, float] = (1.0, 30.0)
    """CrashLoopBackOff: first delay and cap, in seconds (Kubernetes: 10 and 300)."""
    config_retry: float = 1.0
    """Seconds between attempts to start a container whose ConfigMap/Secret is missing."""


class LocalKubelet:
    """See the module docstring. Handlers are synchronous (informer contract); work runs in tasks."""

    def __init__(
        self, api: ApiClient, *, planner: Planner, sink: KubeletSink, clock: Clock, options: KubeletOptions
    ) -> None:
        self._api, self._planner, self._sink, self._clock, self._opts = api, planner, sink, clock, options
        self._workers: dict[str, PodWorker] = {}
        """By uid: every pod seen, finished or not."""
        self._latest: dict[str, PodWorker] = {}
        """By pod name: the newest incarnation."""

    # informer handler -------------------------------------------------------------------------------
    def on_add(self, obj: Obj) -> None:
        self._sync(obj)

    def on_update(self, old: Obj, new: Obj) -> None:
        self._sync(new)

    def on_delete(self, obj: Obj) -> None:
        worker = self._workers.get(objects.uid(obj))
        if worker is not None:
            worker.stop(self._grace(obj))

    def _sync(self, pod: Obj) -> None:
        uid = objects.uid(pod)
        worker = self._workers.get(uid)
        if objects.is_deleting(pod):
            if worker is not None:
                worker.stop(self._grace(pod))
            return
        if worker is None and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            name = objects.name(pod)
            worker = PodWorker(
                pod,
                api=self._api,
                plan=self._plan,
                sink=self._sink,
                clock=self._clock,
                options=self._opts,
                previous=self._latest.get(name),
                main_container=self._main_container(pod),
            )
            self._workers[uid] = self._latest[name] = worker
            worker.task.add_done_callback(lambda _task: self._planner.release(uid))

    # queries and shutdown ---------------------------------------------------------------------------
    def gpus(self) -> dict[str, str]:
        """Pod name -> the GPU indices its container holds."""
        return self._planner.gpu_table({uid: w.name for uid, w in self._workers.items()})

    def pids(self) -> dict[str, int]:
        """Pod name -> pid of its running main process."""
        return {name: w.pid for name, w in self._latest.items() if w.pid is not None}

    async def shutdown(self, grace: float) -> None:
        """Stop every pod's container (SIGKILL after `grace` s) and wait until all are dead."""
        for worker in self._workers.values():
            worker.stop(grace, "the local run ends")
        await asyncio.gather(*(w.task for w in self._workers.values()), return_exceptions=True)

    async def drain(self, seconds: float) -> None:
        """After the last process died: read every container's remaining output, then close the pipes."""
        await asyncio.gather(*(w.drain(seconds) for w in self._workers.values()))

    def kill_now(self) -> None:
        """SIGKILL every container group at once (synchronous, for emergencies)."""
        for worker in self._workers.values():
            worker.kill_now()

    # internals --------------------------------------------------------------------------------------
    async def _plan(self, pod: Obj) -> LaunchPlan:
        namespace = objects.namespace(pod)
        found: dict[tuple[str, str], Obj] = {}
        for resource in (CONFIGMAPS, SECRETS):
            for item in (await self._api.list(resource, namespace)).items:
                found[(resource.kind, objects.name(item))] = {**item, "kind": resource.kind}
        try:
            return self._planner.plan(pod, lambda kind, name: found.get((kind, name)))
        except PortsExhausted as err:  # other local runs may end and free some: wait like for a ConfigMap
            raise ConfigError(str(err)) from None

    def _main_container(self, pod: Obj) -> str:
        spec = pod.get("spec") or {}
        index = main_container_index(spec, self._planner.default_container)
        return "" if index is None else str(spec["containers"][index].get("name", ""))

    def _grace(self, pod: Obj) -> float:
        value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return float(value) if value is not None else self._planner.default_grace
