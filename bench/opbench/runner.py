"""One run of operator_scale: (mode, N) on a running cluster, from a fresh namespace to a `Row`.

1. a namespace and an identity of its own (the audit log is read by that identity afterwards);
2. what the process needs beside its command is set up (`Command.prepare`: a peer's webhook Secret and
   certificate files), then it is started and awaited until ready (its start-up is not timed);
3. watches on pods (and jobs) are listed and running, then the clock starts: the harness creates the N
   jobs (operator and peer modes) or sends the floor client its go signal;
4. the run ends when every job (floor: every pod) has finished, when the process under test exits, or
   after `timeout` seconds; CPU is read, the process is stopped, the namespace and identity are removed.

A run that fails is a row with its outcome, never an exception that loses the other rows.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api import KindInfo
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.resources import PODS, Obj, Resource
from kubetrain.testing.process import free_port
from opbench.audit import read_requests
from opbench.cluster import create_namespace, delete_namespace, follow, submit
from opbench.histogram import ReconcileTimes, scrape_reconcile_times
from opbench.identity import Identity, create_identity, delete_identity
from opbench.procstat import TreeSampler, steal_seconds
from opbench.progress import Progress
from opbench.report import Mode, Row
from opbench.subject import Readiness, Subject, expand
from opbench.workload import Workload

__all__ = ["Command", "Prepare", "Settings", "run_one"]

log = logging.getLogger("opbench")


Prepare = Callable[[ApiClient, str, Path], AbstractAsyncContextManager[Mapping[str, str]]]
"""What a process under test needs beside its command, set up by the harness (as the admin) before it
starts and undone after it stopped: called with the admin client, the run's namespace and a scratch
directory of the run; yields more environment for the process."""


@dataclass(frozen=True)
class Command:
    """A process under test: its command template, readiness, extra environment, environment variables
    it must not inherit, and what to set up before it starts."""

    template: str
    ready: Readiness
    env: Mapping[str, str] = field(default_factory=dict)
    unset: frozenset[str] = frozenset()
    prepare: Prepare | None = None
    metrics: str | None = None
    """URL template of its /metrics, read at the end of the run for the reconcile-time histogram."""

    def environment(self, base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
        """`base` (the harness's environment) without `unset`, with `env` and `extra` over it."""
        merged = {**base, **self.env, **extra}
        return {name: value for name, value in merged.items() if name not in self.unset}


@asynccontextmanager
async def _nothing(api: ApiClient, namespace: str, scratch: Path) -> AsyncIterator[Mapping[str, str]]:
    yield {}


@dataclass(frozen=True)
class Settings:
    """What every run shares."""

    kind: KindInfo
    replicas: int
    run_for: str
    commands: Mapping[Mode, Command]
    """The floor's and the operator's."""
    admin_kubeconfig: Path
    admin: dict[str, Any]
    """The admin kubeconfig, parsed."""
    audit_log: Path | None
    workdir: Path
    timeout: float
    ready_timeout: float = 120.0
    stop_grace: float = 30.0
    cleanup_timeout: float = 300.0
    submit_concurrency: int = 20
    peers: Mapping[str, Command] = field(default_factory=dict)
    """Each peer's (peer mode), by name."""

    def command(self, mode: Mode, peer: str | None) -> Command:
        return self.peers[peer or ""] if mode is Mode.PEER else self.commands[mode]


@dataclass
class _Window:
    """What `_measure` found out."""

    t_submitted: float | None = None
    cpu_start: float | None = None
    cpu_end: float | None = None
    steal_start: float | None = None
    steal_end: float | None = None
    outcome: str = "not started"
    reconciles: ReconcileTimes | None = None


async def run_one(api: ApiClient, settings: Settings, mode: Mode, jobs: int, peer: str | None = None) -> Row:
    """Run `mode` (the peer named `peer`, in peer mode) with `jobs` jobs; everything it created is removed
    before it returns."""
    workload = Workload(settings.kind, jobs, settings.replicas, settings.run_for)
    tag = f"{mode}-{jobs}-{secrets.token_hex(3)}"
    namespace = f"bench-{tag}"
    load = os.getloadavg()[0]
    progress = Progress(pods=workload.pods, jobs=0 if mode is Mode.FLOOR else jobs)
    window, sampler, identity = _Window(), None, None
    began = time.monotonic()
    try:
        await create_namespace(api, namespace)
        identity = await create_identity(
            api, settings.admin, settings.admin_kubeconfig.parent, f"op-{tag}", settings.workdir
        )
        command = settings.command(mode, peer)
        sampler = await _measure(
            api, settings, command, mode, workload, namespace, identity, progress, window
        )
    except Exception as err:  # a failed run is reported as a row
        window.outcome = f"error: {err}".splitlines()[0][:200]
        log.exception("run %s failed", tag)
    finally:
        if not await delete_namespace(api, namespace, within=settings.cleanup_timeout):
            log.warning("namespace %s was not gone after %.0f s", namespace, settings.cleanup_timeout)
        if identity is not None:
            await delete_identity(api, identity)
    log.info("run %s: %s in %.0f s (%s)", tag, window.outcome, time.monotonic() - began, progress.summary())
    return _row(mode, peer, workload, load, progress, window, sampler, settings.audit_log, identity)


async def _measure(
    api: ApiClient,
    settings: Settings,
    command: Command,
    mode: Mode,
    workload: Workload,
    namespace: str,
    identity: Identity,
    progress: Progress,
    window: _Window,
) -> TreeSampler:
    scratch = settings.workdir / identity.name
    scratch.mkdir(parents=True, exist_ok=True)
    async with (command.prepare or _nothing)(api, namespace, scratch) as extra:
        env = command.environment(os.environ, extra)
        return await _measure_process(
            api, settings, command, mode, workload, namespace, identity, progress, window, env
        )


async def _measure_process(
    api: ApiClient,
    settings: Settings,
    command: Command,
    mode: Mode,
    workload: Workload,
    namespace: str,
    identity: Identity,
    progress: Progress,
    window: _Window,
    env: Mapping[str, str],
) -> TreeSampler:
    values = _placeholders(workload, namespace, identity)
    subject = Subject(expand(command.template, values), settings.workdir / f"{identity.name}.log", env)
    sampler = TreeSampler(subject.pid)
    sampler.start()
    try:
        try:
            waited = await subject.wait_ready(command.ready.expanded(values), within=settings.ready_timeout)
        except (TimeoutError, RuntimeError):
            print(f"--- last lines of {subject.log_path}:\n{subject.log_tail()}", file=sys.stderr)
            raise
        log.info("%s ready after %.1f s; starting the clock", mode, waited)
        async with _watching(api, namespace, workload, progress) as watchers:
            window.cpu_start = sampler.sample().cpu_seconds
            window.steal_start = steal_seconds()
            t0 = time.monotonic()
            progress.origin = t0
            if mode is not Mode.FLOOR:
                bodies = [workload.job(name) for name in workload.job_names()]
                await submit(
                    api, workload.resource, namespace, bodies, concurrency=settings.submit_concurrency
                )
                window.t_submitted = time.monotonic() - t0
            else:
                subject.go()
            window.outcome = await _until_done(progress, subject, watchers, t0 + settings.timeout)
            # the CPU of the run ends here: scraping the reconcile histogram below is the bench's doing
            last = sampler.sample() if subject.exit_code() is None else sampler.last
            window.cpu_end = last.cpu_seconds if last else None
            window.steal_end = steal_seconds()
            if command.metrics and subject.exit_code() is None:
                window.reconciles = await _reconcile_times(command.metrics.format_map(values))
    finally:
        await sampler.stop()
        await subject.stop(settings.stop_grace)
    if window.outcome.startswith("exited"):
        print(f"--- last lines of {subject.log_path}:\n{subject.log_tail()}", file=sys.stderr)
    return sampler


def _placeholders(workload: Workload, namespace: str, identity: Identity) -> dict[str, str]:
    return {
        "kubeconfig": str(identity.kubeconfig),
        "namespace": namespace,
        "port": str(free_port()),
        "port2": str(free_port()),
        "port3": str(free_port()),
        "python": sys.executable,
        "kind": workload.kind.kind,
        "jobs": str(workload.jobs),
        "replicas": str(workload.replicas),
        "run_for": workload.run_for,
    }


@asynccontextmanager
async def _watching(
    api: ApiClient, namespace: str, workload: Workload, progress: Progress
) -> AsyncIterator[list[asyncio.Task[None]]]:
    """Watches on the pods (and the jobs, in operator mode), listed before the body runs."""
    follows: list[tuple[Resource, Callable[[Obj, float], None]]] = [(PODS, progress.observe_pod)]
    if progress.jobs:
        follows.append((workload.resource, progress.observe_job))
    listed = [asyncio.Event() for _ in follows]
    tasks = [
        asyncio.ensure_future(follow(api, res, namespace, observe, ready))
        for (res, observe), ready in zip(follows, listed, strict=True)
    ]
    try:
        for event, task in zip(listed, tasks, strict=True):
            waiter = asyncio.ensure_future(event.wait())
            await asyncio.wait([waiter, task], timeout=60.0, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if task.done():
                task.result()  # raises what stopped the watch
        yield tasks
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _until_done(
    progress: Progress, subject: Subject, watchers: list[asyncio.Task[None]], deadline: float
) -> str:
    """How the run ended: ok, N failed, timeout, or the process under test exited."""
    while not progress.done.is_set():
        code = subject.exit_code()
        if code is not None:
            return f"exited {code}"
        for task in watchers:
            if task.done():
                task.result()
                raise RuntimeError("a watch ended unexpectedly")
        if time.monotonic() > deadline:
            return "timeout"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(progress.done.wait(), timeout=1.0)
    failed = progress.failures()
    return f"{failed} failed" if failed else "ok"


def _row(
    mode: Mode,
    peer: str | None,
    workload: Workload,
    load: float,
    progress: Progress,
    window: _Window,
    sampler: TreeSampler | None,
    audit_log: Path | None,
    identity: Identity | None,
) -> Row:
    requests = read_requests(audit_log, identity.username) if audit_log and identity else None
    return Row(
        mode=mode,
        peer=peer if mode is Mode.PEER else None,
        kind=workload.kind.kind,
        jobs=workload.jobs,
        replicas=workload.replicas,
        pods=workload.pods,
        outcome=window.outcome,
        load_before=load,
        steal_seconds=_spent(window.steal_start, window.steal_end),
        t_submitted=window.t_submitted,
        t_pods=progress.since_origin(progress.t_pods),
        t_running=progress.since_origin(progress.t_running),
        t_done=progress.since_origin(progress.t_done),
        requests=requests.total if requests else None,
        requests_by_call=requests.by_call if requests else {},
        refused_by_call=requests.refused if requests else {},
        cpu_seconds=_spent(window.cpu_start, window.cpu_end),
        cpu_total_seconds=window.cpu_end,
        peak_rss_mib=sampler.peak_rss_kib / 1024 if sampler and sampler.peak_rss_kib else None,
        reconciles=window.reconciles,
    )


def _spent(start: float | None, end: float | None) -> float | None:
    """What a counter read at the window's start and end grew by (None unless both readings exist)."""
    return None if start is None or end is None else end - start


async def _reconcile_times(url: str) -> ReconcileTimes | None:
    try:
        return await asyncio.to_thread(scrape_reconcile_times, url)
    except (OSError, ValueError) as err:
        log.warning("cannot read the reconcile histogram at %s: %s", url, err)
        return None
