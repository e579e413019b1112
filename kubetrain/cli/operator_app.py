"""Builds and runs the operator from validated `OperatorOptions`: the process behind `kubetrain operator`.

Start-up, in order, each step failing with one clear log line and a distinct exit code:
1. import the controller of every enabled kind (a kind is never dropped silently);
2. connect the API clients: one for the controllers and informers (--qps/--burst), one for Events (the
   same limits, a budget of its own), and one for leader election, so that Lease renewals never queue
   behind reconcile traffic;
3. preflight: list each resource the controllers will watch, in each watched namespace, with a selector
   that matches nothing. This proves in a second what would otherwise be an operator that never gets
   ready and logs retries: the API server is reachable, the credentials work, the CRDs (and the gang
   scheduler's PodGroup CRD) are installed, and RBAC allows it; with leader election, the Lease is readable;
4. build the Manager (shared informers, leader election, /healthz /readyz /metrics), an Event recorder
   per kind, one controller per kind and the progress endpoint (`kubetrain.common.progress.service`);
5. run until SIGTERM/SIGINT; then drain (in-flight reconciles get --shutdown-grace), release the Lease,
   exit 0. A signal during start-up stops at once, also with 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubetrain import __version__
from kubetrain.cli.exitcodes import ExitCode
from kubetrain.cli.operator_logs import configure_logging
from kubetrain.cli.operator_options import OperatorOptions
from kubetrain.common.errors import (
    ApiError,
    Forbidden,
    LeadershipLost,
    NotFound,
    ServerError,
    Timeout,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from kubetrain.common.events import KubeEventRecorder
from kubetrain.common.kube.resources import LEASES, Resource
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.manager import Manager
from kubetrain.common.metrics import Metrics
from kubetrain.common.progress.service import ProgressConfig, ProgressService
from kubetrain.controllers.registry import ControllerUnavailable, load_controller
from kubetrain.controllers.settings import ConfiguredJobController, add_controller

__all__ = ["run_operator"]

log = logging.getLogger("kubetrain.operator")

_MATCHES_NOTHING = "kubetrain.dev/preflight=never-set"
"""A label selector no object carries: the preflight lists cost the server nothing, whatever its size."""
_TRANSIENT_PATIENCE = 30.0
"""Seconds the preflight keeps retrying a busy (429, 5xx) API server before giving up."""
_LEADER_QPS, _LEADER_BURST = 5.0, 10
"""The leader-election client's own limiter: a renewal every --leader-election-retry-period needs little."""
_PROGRESS_QPS, _PROGRESS_BURST = 20.0, 40
"""The progress endpoint's client: TokenReviews (cached a minute per token), coalesced status writes (one
per job per --progress-interval) and the CA ConfigMaps."""

Controllers = Mapping[str, type[ConfiguredJobController[Any]]]


class OperatorFailure(Exception):
    """The operator cannot start (`startup`), or must stop; `code` is the process exit code."""

    def __init__(self, code: ExitCode, message: str, *, startup: bool = True) -> None:
        super().__init__(f"cannot start: {message}" if startup else message)
        self.code = code


def run_operator(options: OperatorOptions) -> int:
    """Run the operator in this process until it is stopped; returns the exit code."""
    configure_logging(options.log_format, options.log_level)
    try:
        controllers = {kind: load_controller(kind) for kind in options.kinds}
        return asyncio.run(_serve(options, controllers))
    except ControllerUnavailable as err:
        log.error("cannot start: %s", err)
        return int(ExitCode.FAILED)
    except OperatorFailure as err:
        log.error("%s", err)
        return int(err.code)


async def _serve(options: OperatorOptions, controllers: Controllers) -> int:
    started = time.monotonic()
    stopper = _Signals()
    api = leader_api = events_api = progress_api = None
    metrics = Metrics(CollectorRegistry())  # every client counts its requests on what /metrics serves
    try:
        api = await _connect(options, options.qps, options.burst, metrics)
        # Events get a client (and so a rate limit) of their own, as client-go's event broadcaster does:
        # they never delay the pod and Service writes, nor wait behind them
        events_api = await _connect(options, options.qps, options.burst, metrics)
        if options.leader_election:
            leader_api = await _connect(options, _LEADER_QPS, _LEADER_BURST, metrics)
        if options.progress:  # progress writes, TokenReviews and CA ConfigMaps: never ahead of reconciles
            progress_api = await _connect(options, _PROGRESS_QPS, _PROGRESS_BURST, metrics)
        await _preflight(api, leader_api, controllers, options)
        clients = Clients(api, leader_api, events_api, progress_api)
        manager = _build(options, clients, controllers, metrics)
        stopper.target = manager.stop
        manager.add_runnable(lambda: _announce_ready(manager, started))
        log.info("starting: %s", _summary(options))
        await manager.run()
    except asyncio.CancelledError:
        log.info("stopped during start-up")
    except LeadershipLost as err:
        message = f"{err}; exiting so that a new process campaigns afresh"
        raise OperatorFailure(ExitCode.FAILED, message, startup=False) from err
    except OSError as err:
        message = f"cannot listen on the health or metrics address: {err}"
        raise OperatorFailure(ExitCode.FAILED, message) from err
    except RuntimeError as err:  # a dead informer or recorder: the manager stopped itself
        raise OperatorFailure(ExitCode.FAILED, f"stopping: {err}", startup=False) from err
    finally:
        stopper.remove()
        for client in (api, leader_api, events_api, progress_api):
            if client is not None:
                await client.close()
    log.info("operator stopped")
    return int(ExitCode.OK)


async def _announce_ready(manager: Manager, started: float) -> None:
    """Log once when /readyz turns 200 (with the time since the process started), then idle."""
    await manager.wait_synced()
    log.info("ready %.2f s after start-up began (caches synced)", time.monotonic() - started)
    await asyncio.Event().wait()  # a runnable lives as long as the manager


class _Signals:
    """SIGTERM/SIGINT call `target`: at first, cancel start-up; once the manager runs, `manager.stop`."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self.target: Callable[[], Any] = task.cancel
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._received, sig)

    def _received(self, sig: signal.Signals) -> None:
        log.info("received %s: stopping", sig.name)
        self.target()

    def remove(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_signal_handler(sig)


async def _connect(options: OperatorOptions, qps: float, burst: int, metrics: Metrics) -> KubeApiClient:
    where = options.kubeconfig or "in-cluster ServiceAccount, $KUBECONFIG or ~/.kube/config"
    try:
        return await KubeApiClient.connect(
            options.kubeconfig,
            context=options.context,
            qps=qps,
            burst=burst,
            user_agent=f"kubetrain-operator/{__version__}",
            metrics=metrics,
        )
    except asyncio.CancelledError:
        raise
    except Exception as err:  # the kubeconfig loader's own error types live below common.kube
        reason = _missing_kubeconfig() if options.kubeconfig is None else None
        raise OperatorFailure(ExitCode.CLUSTER, f"no usable credentials ({where}): {reason or err}") from err


def _missing_kubeconfig() -> str | None:
    """Why no kubeconfig was found outside a cluster, in plain words (the loader's message is cryptic)."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    paths = [Path(p).expanduser() for p in listed] or [Path("~/.kube/config").expanduser()]
    if any(path.is_file() for path in paths):
        return None
    where = f"$KUBECONFIG={os.environ['KUBECONFIG']}" if listed else str(paths[0])
    return f"not in a cluster, and {where} does not exist; pass --kubeconfig PATH"


async def _preflight(
    api: KubeApiClient, leader_api: KubeApiClient | None, controllers: Controllers, options: OperatorOptions
) -> None:
    job_kinds = {cls.job_resource(): kind for kind, cls in controllers.items()}
    resources = dict.fromkeys(
        r for cls in controllers.values() for r in cls.resources_for(options.settings.gang)
    )
    scopes = options.namespaces or (None,)
    log.info("preflight: can the operator read its %d resources in %d scopes?", len(resources), len(scopes))
    for resource in resources:
        for namespace in scopes:
            try:
                await _patiently(_probe(api, resource, namespace))
            except ApiError as err:
                raise _explain(err, resource, namespace, job_kinds.get(resource), options) from err
    election = options.leader_election
    if leader_api is not None and election is not None:
        try:
            await leader_api.get(LEASES, election.namespace, election.name)
        except NotFound:
            pass
        except ApiError as err:
            raise _explain(err, LEASES, election.namespace, None, options) from err


def _probe(api: KubeApiClient, resource: Resource, namespace: str | None) -> Callable[[], Awaitable[object]]:
    return lambda: api.list(resource, namespace, label_selector=_MATCHES_NOTHING)


async def _patiently(call: Callable[[], Awaitable[object]]) -> None:
    """`call()`, retried for a while when the server answers that it is busy or still starting (a CRD
    created a moment ago answers 429 "storage is (re)initializing"); other errors at once."""
    deadline = time.monotonic() + _TRANSIENT_PATIENCE
    while True:
        try:
            await call()
            return
        except (TooManyRequests, ServerError, Timeout) as err:
            if time.monotonic() > deadline:
                raise
            log.info("API server busy (%s); retrying", err)
            await asyncio.sleep(1.0)


def _explain(
    err: ApiError, resource: Resource, namespace: str | None, kind: str | None, options: OperatorOptions
) -> OperatorFailure:
    where = f"namespace {namespace}" if namespace else "all namespaces"
    if isinstance(err, TransportError):
        return OperatorFailure(ExitCode.CLUSTER, f"cannot reach the API server: {err}")
    if isinstance(err, Unauthorized):
        return OperatorFailure(ExitCode.CLUSTER, f"the API server rejected the operator's credentials: {err}")
    if isinstance(err, Forbidden):
        rbac = "manifests/overlays/namespaced" if options.namespaces else "manifests/base/rbac"
        return OperatorFailure(
            ExitCode.CLUSTER,
            f"not allowed to read {resource} in {where}: {err.message}; grant the rules of {rbac}",
        )
    if isinstance(err, NotFound) and kind is not None:
        return OperatorFailure(
            ExitCode.FAILED,
            f"the {kind} CRD is not installed: `kubectl apply -k manifests/crds`, or leave "
            f"{kind} out of --enable",
        )
    if isinstance(err, NotFound) and options.settings.gang and resource == options.settings.gang.resource:
        return OperatorFailure(
            ExitCode.FAILED,
            f"gang scheduler {options.settings.gang_scheduler!r} needs {resource} (its PodGroup CRD), "
            "which the API server does not serve: install the scheduler first, or drop --gang-scheduler",
        )
    return OperatorFailure(ExitCode.CLUSTER, f"cannot read {resource} in {where}: {err}")


@dataclass(frozen=True)
class Clients:
    """The operator's API clients, each with its own rate limit: controllers and informers, the leader
    election Lease, Events."""

    api: KubeApiClient
    leader: KubeApiClient | None
    events: KubeApiClient
    progress: KubeApiClient | None = None


def _build(options: OperatorOptions, clients: Clients, controllers: Controllers, metrics: Metrics) -> Manager:
    manager = Manager(
        clients.api,
        metrics=metrics,
        namespace=options.namespaces,
        leader_election=options.leader_election,
        leader_api=clients.leader,
        http_address=options.health_address,
        metrics_address=options.metrics_address,
        shutdown_grace=options.shutdown_grace,
    )
    identity = options.leader_election.identity if options.leader_election else ""
    progress = _progress(options, clients, controllers, manager)
    for cls in controllers.values():
        component = cls.kind.operator_name
        metrics.event_recorder(component)
        recorder = KubeEventRecorder(
            clients.events,
            component=component,
            clock=manager.clock,
            instance=identity,
            on_drop=functools.partial(metrics.event_dropped, component),
        )
        manager.add_runnable(recorder.run)
        add_controller(
            manager,
            cls,
            options.settings,
            recorder=recorder,
            workers=options.workers,
            child_event_delay=options.child_event_delay,
            progress=progress.injection if progress else None,
        )
    return manager


def _progress(
    options: OperatorOptions, clients: Clients, controllers: Controllers, manager: Manager
) -> ProgressService | None:
    """The training-progress endpoint, run beside the controllers (leader or not), if configured."""
    if options.progress is None or clients.progress is None:
        return None
    config = ProgressConfig(
        host=options.progress.address[0],
        port=options.progress.address[1],
        url=options.progress.url,
        audience=options.progress.audience,
        interval=options.progress.interval,
        hosts=options.progress.hosts,
    )
    kinds = [cls.kind for cls in controllers.values()]
    service = ProgressService(manager, clients.progress, kinds, config, registry=manager.registry)
    manager.add_runnable(service.run)
    return service


def _summary(options: OperatorOptions) -> str:
    election = options.leader_election
    lease = f"{election.namespace}/{election.name} as {election.identity}" if election else "off"
    parts: Sequence[str] = (
        f"kubetrain {__version__}",
        f"kinds={','.join(options.kinds)}",
        f"namespaces={','.join(options.namespaces) if options.namespaces else '(all)'}",
        f"gang={options.settings.gang_scheduler or 'none'}",
        f"leader-election={lease}",
        f"health={_address(options.health_address)}",
        f"metrics={_address(options.metrics_address)}",
        f"progress={options.progress.url if options.progress else 'off'}",
        f"qps={options.qps:g} burst={options.burst} workers={options.workers}",
    )
    return " ".join(parts)


def _address(address: tuple[str, int] | None) -> str:
    return f"{address[0]}:{address[1]}" if address else "off"
