"""One pod's life on the local kubelet: prepare, start, report, restart in place, end; or be stopped.

The worker never gets cancelled mid-step (a cancelled start could leak a process): `stop()` only asks,
and the worker's own loop kills the process group (SIGTERM, then SIGKILL after the grace period) and
returns without writing a status, since the pod is gone. A new incarnation of the same pod name waits
until the previous one's processes are dead, because both would bind the same local ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Protocol

from kubetrain.common.clock import Clock
from kubetrain.common.errors import Conflict, NotFound
from kubetrain.common.kube import objects
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.runtimes.local import podstatus as ps
from kubetrain.runtimes.local.agent import container_file
from kubetrain.runtimes.local.gpus import Unschedulable
from kubetrain.runtimes.local.plan import LaunchPlan
from kubetrain.runtimes.local.podenv import ConfigError
from kubetrain.runtimes.local.process import LocalProcess, StartError

__all__ = ["KubeletSink", "PodWorker", "WorkerOptions"]

log = logging.getLogger(__name__)

PlanFn = Callable[[Obj], Awaitable[LaunchPlan]]


class KubeletSink(Protocol):
    """Where the kubelet reports: container output lines, and its own decisions about a pod."""

    def output(self, pod: str, container: str, line: str) -> None: ...

    def notice(self, pod: str, message: str) -> None: ...


class WorkerOptions(Protocol):
    @property
    def crash_backoff(self) -> tuple[float, float]: ...

    @property
    def config_retry(self) -> float: ...

    @property
    def run_dir(self) -> Path: ...


class PodWorker:
    """Runs one pod (one uid); see the module docstring."""

    def __init__(
        self,
        pod: Obj,
        *,
        api: ApiClient,
        plan: PlanFn,
        sink: KubeletSink,
        clock: Clock,
        options: WorkerOptions,
        main_container: str,
        previous: PodWorker | None = None,
    ) -> None:
        self.name, self.uid, self.namespace = objects.name(pod), objects.uid(pod), objects.namespace(pod)
        self.hosts = sorted({self.name, str((pod.get("spec") or {}).get("hostname") or self.name)})
        self.pod = pod
        self.pid: int | None = None
        self.done = asyncio.Event()
        self._api, self._plan_fn, self._sink, self._clock, self._opts = api, plan, sink, clock, options
        self._previous = previous
        self._container = main_container
        self._stopping = asyncio.Event()
        self._grace = 0.0
        self._why = ""
        self._process: LocalProcess | None = None
        self._processes: list[LocalProcess] = []
        self.task = asyncio.ensure_future(self._run())

    def stop(self, grace: float, why: str = "pod deleted") -> None:
        """Ask the worker to kill its container (SIGKILL after `grace` s) and end without a status."""
        if not self._stopping.is_set():
            self._grace, self._why = grace, why
            self._stopping.set()

    def kill_now(self) -> None:
        if self._process is not None:
            self._process.kill_now()

    async def drain(self, seconds: float) -> None:
        """Finish reading the output of every container run of this pod (once everything is dead)."""
        await asyncio.gather(*(p.drain(seconds) for p in self._processes))

    # the life ---------------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            if self._previous is not None:
                await self._previous.done.wait()
            plan = await self._prepare()
            if plan is not None:
                for note in plan.notes:
                    self._sink.notice(self.name, note)
                await self._live(plan)
        except Exception as err:  # a bug of ours: the pod fails visibly instead of hanging in Pending
            log.exception("local kubelet: pod %s", self.name)
            self.kill_now()
            self._sink.notice(self.name, f"local kubelet error: {err!r}: pod Failed")
            state = ps.terminated_state(ps.START_ERROR_EXIT_CODE, started=self._now(), finished=self._now())
            await self._status(
                ps.final_status(self._container, state=state, restarts=0, last=None, now=self._now())
            )
        finally:
            for host in self.hosts:
                with contextlib.suppress(FileNotFoundError):
                    container_file(self._opts.run_dir, host).unlink()
            self.pid = None
            self.done.set()

    async def _prepare(self) -> LaunchPlan | None:
        container = self._container
        await self._status(ps.pending_status(container, reason="ContainerCreating", now=self._now()))
        shown = ""
        while not self._stopping.is_set():
            try:
                return await self._plan_fn(self.pod)
            except Unschedulable as err:
                if str(err) != shown:
                    shown = str(err)
                    self._sink.notice(self.name, f"Pending (Unschedulable): {err}; waiting for a GPU")
                    await self._status(ps.unschedulable_status(shown, now=self._now()))
            except ConfigError as err:
                if str(err) != shown:
                    shown = str(err)
                    self._sink.notice(self.name, f"CreateContainerConfigError: {err} (retrying)")
                    status = ps.pending_status(
                        container, reason="CreateContainerConfigError", message=shown, now=self._now()
                    )
                    await self._status(status)
            if await self._sleep_or_stop(self._opts.config_retry):
                return None
        return None

    async def _live(self, plan: LaunchPlan) -> None:
        """Run the container until it ends for good (per restartPolicy) or the pod is deleted."""
        restarts, last = 0, None
        while not self._stopping.is_set():
            started = self._now()
            code, message = await self._run_once(plan, restarts, last)
            if code is None:
                return
            state = ps.terminated_state(code, started=started, finished=self._now(), message=message)
            if not ps.restarts_in_place(plan.restart_policy, code):
                await self._end(plan, state, restarts=restarts, last=last)
                return
            restarts, last = restarts + 1, state
            if await self._back_off(plan, state, restarts=restarts):
                return

    async def _end(self, plan: LaunchPlan, state: Obj, *, restarts: int, last: Obj | None) -> None:
        final = ps.final_status(plan.container, state=state, restarts=restarts, last=last, now=self._now())
        await self._status(final)
        self._sink.notice(self.name, f"container exited with code {_code(state)}: pod {final['phase']}")

    async def _back_off(self, plan: LaunchPlan, state: Obj, *, restarts: int) -> bool:
        """CrashLoopBackOff before restart number `restarts`; True when the pod was deleted meanwhile."""
        initial, cap = self._opts.crash_backoff
        delay = ps.crash_backoff(restarts, initial=initial, cap=cap)
        why = f"container exited with code {_code(state)}; restartPolicy {plan.restart_policy}"
        self._sink.notice(self.name, f"{why}: restart {restarts} in {delay:g} s")
        now = self._now()
        await self._status(
            ps.waiting_restart_status(plan.container, restarts=restarts, last=state, delay=delay, now=now)
        )
        return await self._sleep_or_stop(delay)

    async def _run_once(self, plan: LaunchPlan, restarts: int, last: Obj | None) -> tuple[int | None, str]:
        """Start and wait for the container: (exit code, start error); (None, "") when stopped meanwhile."""
        try:
            if plan.start_error:
                raise StartError(plan.start_error)
            process = await LocalProcess.start(
                plan.argv,
                env=plan.env,
                cwd=plan.cwd,
                on_line=lambda line: self._sink.output(self.name, plan.container, line),
            )
        except StartError as err:
            self._sink.notice(self.name, f"StartError: {err}")
            return ps.START_ERROR_EXIT_CODE, str(err)
        self._process, self.pid = process, process.pid
        self._processes.append(process)
        self._publish(plan, process.pid)
        self._sink.notice(self.name, f"started pid {process.pid}: {plan.display or ' '.join(plan.argv)}")
        await self._status(
            ps.running_status(
                plan.container, restarts=restarts, started=self._now(), last=last, now=self._now()
            )
        )
        waiter = asyncio.ensure_future(process.wait())
        stopper = asyncio.ensure_future(self._stopping.wait())
        await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not waiter.done():
            await process.stop(self._grace)
            self._sink.notice(self.name, f"{self._why}: container stopped")
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            return None, ""
        return waiter.result(), ""

    # helpers ----------------------------------------------------------------------------------------
    def _publish(self, plan: LaunchPlan, pgid: int) -> None:
        """The container's env, cwd and process group, for the MPI agent (written atomically)."""
        text = json.dumps({"env": plan.env, "cwd": str(plan.cwd), "pgid": pgid})
        for host in self.hosts:
            path = container_file(self._opts.run_dir, host)
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, path)

    async def _status(self, status: Obj) -> None:
        body = {"metadata": {"uid": self.uid}, "status": status}
        with contextlib.suppress(NotFound, Conflict):  # the pod is gone or was replaced: nothing to report
            await self._api.patch(PODS, self.namespace, self.name, body, subresource="status")

    async def _sleep_or_stop(self, seconds: float) -> bool:
        """Sleep `seconds`; True when asked to stop meanwhile."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)
        return self._stopping.is_set()

    def _now(self) -> datetime:
        return self._clock.now()


def _code(state: Obj) -> int:
    return int(state["terminated"]["exitCode"])
