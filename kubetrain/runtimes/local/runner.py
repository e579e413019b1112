"""`kubetrain run --local`: the real operator, an in-memory API server and a local kubelet, for one job.

Nothing about the job's kind is simulated: the kind's own `JobController` (the operator's code, wired by
`add_job_controller`) reconciles the job over `InMemoryApiClient` on the real clock, exactly as against a
cluster: it defaults and validates, creates pods, Services and extra objects (MPI hostfile, ...), renders
each replica's env (TF_CONFIG, MASTER_*, ...), applies restartPolicy/ExitCode, backoffLimit,
activeDeadlineSeconds, the success policy and cleanPodPolicy, and writes the job's conditions. The local
kubelet (`kubelet`) runs each pod's main container as a process group here and reports pod statuses.

The replicas report training progress (KEP-2779) to a loopback receiver (`reports`), whose latest report the
run writes to the job's status, as the operator's endpoint would; the console shows it as a live bar.

The run ends when the job has a terminal condition and the operator's cleanup is done (pods it keeps may
run to their own end for a little while: `linger`), on the timeout,
or on `interrupt()` (Ctrl-C; a second one kills at once). Whatever still runs then is stopped
(cleanPodPolicy None keeps pods in a cluster; a local run cannot outlive itself), the run's marked
processes are swept, and its port claims released. Locally, gang scheduling is off and
ttlSecondsAfterFinished never comes into play (the run is over before it expires).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from kubetrain.api import JobStatus, kind_info
from kubetrain.api.trainerstatus import replacing
from kubetrain.common.clock import SystemClock
from kubetrain.common.events import EventType, ObjectRef
from kubetrain.common.job import (
    JobController,
    PodFacts,
    add_job_controller,
    is_finished,
    is_succeeded,
)
from kubetrain.common.job.containers import replica_gpus
from kubetrain.common.job.policy import pods_to_clean
from kubetrain.common.kube import objects
from kubetrain.common.kube.fake import InMemoryApiClient
from kubetrain.common.kube.informer import Informer
from kubetrain.common.kube.resources import PODS, Obj
from kubetrain.common.manager import Manager
from kubetrain.runtimes.local.console import Console
from kubetrain.runtimes.local.container import ContainerEngine
from kubetrain.runtimes.local.gpus import Gpu, GpuAllocator, check_fit, discover
from kubetrain.runtimes.local.kubelet import KubeletOptions, LocalKubelet
from kubetrain.runtimes.local.network import Hosts, Network, ReplicaNames
from kubetrain.runtimes.local.node import RUN_MARKER, LocalNode
from kubetrain.runtimes.local.plan import Planner
from kubetrain.runtimes.local.ports import PortAllocator
from kubetrain.runtimes.local.progressbar import LossHistory
from kubetrain.runtimes.local.reports import ReportReceiver
from kubetrain.runtimes.local.sweep import kill_marked
from kubetrain.runtimes.local.view import Board, Condition, ReplicaRow, Snapshot, latest_condition

__all__ = ["LocalRun", "LocalRunOptions", "Outcome", "RunResult"]


class Outcome(StrEnum):
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    TIMED_OUT = "TimedOut"
    INTERRUPTED = "Interrupted"


@dataclass(frozen=True)
class RunResult:
    outcome: Outcome
    job: Obj
    """The job as last seen: status and conditions as the operator wrote them."""
    condition: Condition | None
    rows: tuple[ReplicaRow, ...]
    seconds: float
    leftovers: tuple[int, ...] = ()
    """Pids the final sweep had to kill (processes that escaped their process group)."""


@dataclass(frozen=True)
class LocalRunOptions:
    timeout: float | None = None
    workdir: Path = field(default_factory=Path.cwd)
    """Where containers without a usable workingDir run."""
    grace: float = 5.0
    """Grace period (SIGTERM -> SIGKILL) of pods that set no terminationGracePeriodSeconds."""
    crash_backoff: tuple[float, float] = (1.0, 30.0)
    cleanup_wait: float = 10.0
    """How long to wait, after the job finished, for the operator's cleanPodPolicy deletions."""
    linger: float = 15.0
    """How long pods the operator keeps (cleanPodPolicy) may still run to their own end (e.g. the other
    ranks printing their results after the master's success) before the run stops them."""
    tick: float = 0.25
    ports: PortAllocator | None = None
    environ: Mapping[str, str] | None = None
    """The environment containers start from (default: this process's)."""
    gpus: tuple[Gpu, ...] | None = None
    """The GPUs the run may hand out (default: every GPU of the machine, `gpus.discover()`)."""
    gpu_claims_dir: Path | None = None
    """Where GPU claims shared with other local runs live (default: a per-user temp directory)."""
    runtime: str = "process"
    """`process`: each main container is a local process; `container`: a container of its image."""
    engine: str | None = None
    """With runtime `container`: podman or docker (default: whichever is on PATH, podman first)."""


@dataclass
class _Session:
    """The moving parts of one run, wired together."""

    manager: Manager
    controller: JobController[Any]
    kubelet: LocalKubelet
    network: Network
    jobs: Informer
    pods: Informer
    reports: ReportReceiver


class LocalRun:
    """One job, run locally; see the module docstring. `job` is its wire form."""

    def __init__(
        self,
        job: Obj,
        controller: type[JobController[Any]],
        *,
        console: Console,
        options: LocalRunOptions | None = None,
        controller_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.namespace, self.name = objects.namespace(job) or "default", objects.name(job)
        self.job = {**job, "metadata": {**job.get("metadata", {}), "namespace": self.namespace}}
        self.run_id = secrets.token_hex(6)
        self._cls = controller
        self._ctl_options = dict(controller_options or {})
        self._console = console
        self._opts = options or LocalRunOptions()
        self._ports = self._opts.ports or PortAllocator()
        inventory = self._opts.gpus if self._opts.gpus is not None else discover()
        self._gpus = GpuAllocator(inventory, claims_dir=self._opts.gpu_claims_dir)
        self._interrupts = 0
        self._stop = asyncio.Event()
        self._board = Board()
        self._last_job: Obj = self.job
        self._session: _Session | None = None
        self._started = time.monotonic()
        self._engine: ContainerEngine | None = None
        self._losses = LossHistory()

    def preflight(self) -> None:
        """What must hold before anything starts: with runtime `container`, an engine on PATH and every
        image of the job in its local storage. Raises ValueError or ImageMissing, saying what to do."""
        if self._opts.runtime == "container":
            self._engine = ContainerEngine.detect(self.run_id, self._opts.engine)
            self._engine.check_images(self.job)
        elif self._opts.runtime != "process":
            raise ValueError(f"unknown runtime {self._opts.runtime!r}: use process or container")

    def interrupt(self) -> None:
        """Ctrl-C: stop the run (containers get their grace period); a second call kills at once."""
        self._interrupts += 1
        self._stop.set()
        if self._interrupts > 1 and self._session is not None:
            self._session.kubelet.kill_now()

    async def run(self) -> RunResult:
        self._started = time.monotonic()
        run_dir = Path(tempfile.mkdtemp(prefix=f"kubetrain-local-{self.name}-"))
        try:
            outcome, leftovers = await self._run_in(run_dir)
        finally:
            self._ports.release()
            self._gpus.release_all()
            shutil.rmtree(run_dir, ignore_errors=True)
        snapshot = self._snapshot()
        stopped = {
            Outcome.TIMED_OUT: "timed out: every process was stopped",
            Outcome.INTERRUPTED: "interrupted: every process was stopped",
        }
        self._console.finish(snapshot, outcome=stopped.get(outcome))
        seconds = time.monotonic() - self._started
        return RunResult(outcome, self._last_job, snapshot.condition, snapshot.rows, seconds, leftovers)

    async def _run_in(self, run_dir: Path) -> tuple[Outcome, tuple[int, ...]]:
        if self._opts.runtime == "container" and self._engine is None:
            self.preflight()
        session = self._session = self._wire(run_dir)
        self._check_gpus(session.controller)
        resource = session.controller.job_resource()
        if self._engine is not None:
            await self._engine.create_network()
        await session.manager.api.create(resource, self.namespace, self.job)
        manager_task = asyncio.ensure_future(session.manager.run())
        leftovers: tuple[int, ...] = ()
        session.reports.start()
        try:
            outcome = await self._until_done(session, manager_task)
        finally:
            session.reports.stop()
            await session.kubelet.shutdown(0.0 if self._interrupts > 1 else self._opts.grace)
            session.manager.stop()
            self._board.stopped()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(manager_task, 10)
            if self._engine is not None:  # containers a SIGKILL orphaned, and the network
                await asyncio.shield(self._engine.cleanup())
            leftovers = tuple(kill_marked(RUN_MARKER, self.run_id))
            await session.kubelet.drain(5.0)
        return outcome, leftovers

    def _wire(self, run_dir: Path) -> _Session:
        info = kind_info(self._cls.kind.model.model_validate(self.job))
        reports = ReportReceiver(
            info.api_version, self.namespace, info.plural, self.name, directory=run_dir / "progress"
        )
        env = reports.env() if self._opts.runtime == "process" else {}  # a container's loopback is its own
        node = LocalNode(run_dir, self.run_id, environ=self._opts.environ, progress=env)
        node.prepare()
        api = InMemoryApiClient(status_subresources=[self._cls.job_resource()])
        manager = Manager(api, namespace=self.namespace, http_address=None, shutdown_grace=2.0)
        recorder = _ConsoleRecorder(self._console)
        controller = add_job_controller(manager, self._cls, recorder=recorder, **self._ctl_options)
        hosts = Hosts(self.namespace, self._replica_names(controller), subdomain=self.name)
        network = Network(hosts, self._ports.allocate)
        planner = Planner(
            network,
            node,
            controller.kind.default_container_name,
            self._opts.workdir,
            default_grace=self._opts.grace,
            gpus=self._gpus,
            engine=self._engine,
        )
        options = KubeletOptions(run_dir=run_dir, crash_backoff=self._opts.crash_backoff)
        kubelet = LocalKubelet(api, planner=planner, sink=self._console, clock=SystemClock(), options=options)
        pods = manager.informer(PODS)
        pods.add_handler(kubelet)
        pods.add_handler(self._board)
        jobs = manager.informer(controller.job_resource())
        return _Session(manager, controller, kubelet, network, jobs, pods, reports)

    async def _until_done(self, session: _Session, manager_task: asyncio.Future[None]) -> Outcome:
        deadline = None if self._opts.timeout is None else self._started + self._opts.timeout
        while True:
            await self._write_report(session)
            self._console.update(self._snapshot())
            if manager_task.done():
                manager_task.result()  # raises what stopped the operator
                raise RuntimeError("the operator stopped unexpectedly")
            if self._stop.is_set():
                return Outcome.INTERRUPTED
            if deadline is not None and time.monotonic() >= deadline:
                return Outcome.TIMED_OUT
            status = JobStatus.model_validate(self._last_job.get("status") or {})
            if is_finished(status):
                await self._await_cleanup(session)
                return Outcome.SUCCEEDED if is_succeeded(status) else Outcome.FAILED
            await self._pause()

    async def _write_report(self, session: _Session) -> None:
        """The latest report, if a new one came, into the job's status (as the operator's endpoint does)."""
        report = session.reports.take()
        if report is None:
            return
        patch = {"status": {"trainerStatus": replacing(report)}}
        resource = session.controller.job_resource()
        await session.manager.api.patch(resource, self.namespace, self.name, patch, subresource="status")

    async def _await_cleanup(self, session: _Session) -> None:
        """Let the operator apply cleanPodPolicy (the rule read back from the operator's own code)."""
        ctl = session.controller
        policy = ctl.default(ctl.kind.model.model_validate(self._last_job)).run_policy.clean_pod_policy
        end = time.monotonic() + self._opts.cleanup_wait
        while policy is not None and time.monotonic() < end and not self._stop.is_set():
            if not pods_to_clean(policy, [PodFacts.of(p) for p in session.pods.store]):
                break
            self._console.update(self._snapshot())
            await self._pause()
        end = time.monotonic() + self._opts.linger
        while session.kubelet.pids() and time.monotonic() < end and not self._stop.is_set():
            self._console.update(self._snapshot())
            await self._pause()
        for name in sorted(session.kubelet.pids()):
            self._console.notice(
                name, "still running after the job finished (kept by cleanPodPolicy): stopping it"
            )

    async def _pause(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), self._opts.tick)

    # the view ---------------------------------------------------------------------------------------
    def _snapshot(self) -> Snapshot:
        session = self._session
        if session is not None:
            current = session.jobs.store.get(self.namespace, self.name)
            self._last_job = current if current is not None else self._last_job
        pids = session.kubelet.pids() if session else {}
        gpus = session.kubelet.gpus() if session else {}
        rows = self._board.rows(pids, _port_notes(session.network if session else None), gpus)
        trainer = JobStatus.model_validate(self._last_job.get("status") or {}).trainer_status
        self._losses.add(trainer)
        return Snapshot(
            kind=str(self.job.get("kind", "")),
            namespace=self.namespace,
            name=self.name,
            condition=latest_condition(self._last_job),
            rows=rows,
            elapsed=time.monotonic() - self._started,
            trainer=trainer,
            losses=tuple(self._losses.values),
        )

    def _check_gpus(self, ctl: JobController[Any]) -> None:
        """Refuse (GpuFitError) a job whose GPU requests can never fit, before anything starts."""
        job = ctl.default(ctl.kind.model.model_validate(self.job))
        # An elastic PyTorchJob starts training once minReplicas workers are up: only those must fit at once.
        elastic = getattr(job.spec, "elastic_policy", None)
        least = elastic.min_replicas if elastic is not None and elastic.min_replicas is not None else None
        requests = {
            str(rtype): (replica_gpus(ctl.kind, spec), min(spec.replicas or 0, least or spec.replicas or 0))
            for rtype, spec in job.replica_specs.items()
        }
        check_fit(requests, self._gpus.inventory)

    def _replica_names(self, ctl: JobController[Any]) -> ReplicaNames:
        job = ctl.default(ctl.kind.model.model_validate(self.job))
        return ReplicaNames(self.name, {t.lower(): s.replicas or 0 for t, s in job.replica_specs.items()})


def _port_notes(network: Network | None) -> dict[str, str]:
    notes: dict[str, list[str]] = {}
    for (replica, port), local in sorted(network.table.items()) if network else ():
        notes.setdefault(replica, []).append(f"{port}->{local}")
    return {replica: ",".join(items) for replica, items in notes.items()}


class _ConsoleRecorder:
    """The operator's Events, shown as lines (what `kubectl get events` would list)."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def record(
        self, obj: Mapping[str, Any] | ObjectRef, event_type: EventType, reason: str, message: str
    ) -> None:
        ref = obj if isinstance(obj, ObjectRef) else ObjectRef.of(obj)
        self._console.event(f"{ref.kind.lower()}/{ref.name}", str(event_type), reason, message)
