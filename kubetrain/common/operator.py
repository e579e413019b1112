"""`Operator`: one object that runs JobControllers in a process, the way `kubetrain operator` runs its own.

It connects to the cluster (a kubeconfig, `$KUBECONFIG`, `~/.kube/config`, or the in-cluster ServiceAccount),
gives each controller an Event recorder, runs them under a `Manager` (shared informers, leader election on a
Lease, `/healthz` `/readyz` `/metrics`), and stops cleanly on SIGTERM or SIGINT::

    Operator([SleepJobController], OperatorConfig(health_address=("", 8081))).main()

`kubetrain.common.run(SleepJobController)` does the same with the configuration read from command-line
flags (`kubetrain.common.flags`). Subclasses adjust one step: `prepare` (checks before the manager starts)
or `add_controller` (how a controller is built on the manager).

API clients, each with its own rate limit: one for the controllers and informers, one for Events (as
client-go's broadcaster has: Events never delay pod writes, nor wait behind them), one for leader election
(Lease renewals never queue behind reconcile traffic), one for the progress endpoint's writes, and one for
the reviews of callers' tokens (TokenReview, SubjectAccessReview) of /metrics and the progress endpoint:
anyone who can reach those ports can send tokens, and their reviews must never take the controllers'
budget (`kubetrain.common.kube.authn`: bounded in concurrency and backlog, cancelled with the request).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from kubetrain import __version__
from kubetrain.common import eventloop
from kubetrain.common.errors import KubetrainError
from kubetrain.common.events import EventRecorder, KubeEventRecorder
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.job import JobController, add_job_controller
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.kueue import AUTO, DEFAULT_KUEUE_CONFIG, KueueIntegration, parse_setting
from kubetrain.common.kueue import resolve as resolve_kueue
from kubetrain.common.kueue.arrival import restart_when_served
from kubetrain.common.leader import LeaderElectionConfig
from kubetrain.common.manager import Manager
from kubetrain.common.metrics import Metrics
from kubetrain.common.metricsauth import MetricsSecurity, metrics_security
from kubetrain.common.progress.service import ProgressConfig, ProgressService

__all__ = ["Clients", "ConnectError", "Operator", "OperatorConfig"]

log = logging.getLogger("kubetrain.operator")

Address = tuple[str, int]
_LEADER_QPS, _LEADER_BURST = 5.0, 10
"""The leader-election client's own limiter: a renewal every retry period needs little."""
_PROGRESS_QPS, _PROGRESS_BURST = 20.0, 40
"""The progress endpoint's writes: coalesced status writes (one per job per interval), the CA ConfigMaps."""
_PROGRESS_WRITES = 0.75 * _PROGRESS_QPS
"""The status writes' share of that budget (the rest: the CA ConfigMaps): with more than 150 reporting
jobs per 10 s interval, the interval grows (500 jobs: 33 s), so the writes never queue."""
_REVIEW_QPS, _REVIEW_BURST = 20.0, 40
"""The reviews of callers' tokens (cached a minute per token; `TokenAuthenticator`: a few at once, a
bounded backlog) and the progress endpoint's reads of the issuer's keys, with a limit apart from the
controllers' and the progress writes': a pod's report is answered once its token is verified (by the keys,
or else a review), so neither may queue behind the writes of 500 jobs, and a stranger's junk tokens on
/metrics must never queue in front of a reconcile."""


class ConnectError(KubetrainError):
    """No usable credentials for the API server; the message says where they were looked for."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorConfig:
    """How an operator process runs; the defaults are those of `kubetrain operator`."""

    kubeconfig: str | None = None
    """None: the in-cluster ServiceAccount, else `$KUBECONFIG`, else `~/.kube/config`."""
    context: str | None = None
    namespaces: tuple[str, ...] | None = None
    """The namespaces watched; None: every namespace."""
    leader_election: LeaderElectionConfig | None = None
    """None: no leader election (run a single replica)."""
    health_address: Address | None = ("", 8081)
    """`/healthz` `/readyz` (host "" is every address); None: no probe server."""
    metrics_address: Address | None = None
    """The listener of `/metrics` for Prometheus; None: /metrics is not served (never on the probe port)."""
    metrics_secure: bool = True
    """The metrics listener serves HTTPS, each scrape checked by TokenReview and SubjectAccessReview
    (`kubetrain.common.metricsauth`); False: plain, open HTTP there (an explicit opt-out)."""
    metrics_cert_path: str | None = None
    """A directory with tls.crt and tls.key for the metrics listener; None: a self-signed pair made at
    start."""
    progress: ProgressConfig | None = None
    """The training-progress endpoint (KEP-2779, `kubetrain.common.progress`): served, and new pods injected
    to report to it, when set; None: neither."""
    qps: float = 50.0
    burst: int = 100
    workers: int = 1
    """Jobs of one kind reconciled at once."""
    child_event_delay: float = 0.0
    """Seconds a change of a job's pods waits, merging with other such changes, before it reconciles."""
    shutdown_grace: float = 30.0
    """Seconds in-flight reconciles get after SIGTERM."""
    sync_patience: float | None = None
    """With a value (seconds), an informer that cannot fill its cache at start-up stops the operator:
    `serve()` raises its `CacheSyncError` (`kubetrain.common.Manager`); None: informers retry for ever."""
    user_agent: str = f"kubetrain-operator/{__version__}"
    kueue_integration: str = AUTO
    """`--kueue-integration`: `auto`, `none`, or a comma list of kinds (`kubetrain.common.kueue`)."""
    kueue_config: str = DEFAULT_KUEUE_CONFIG
    """`--kueue-config`: Kueue's ConfigMap, NAMESPACE/NAME, read by `auto`."""
    gang_restart: GangRestartMode = GangRestartMode.AUTO
    """`--gang-restart`: how new jobs' gangs restart, in place or by new pods (`kubetrain.common.job`)."""


@dataclass(frozen=True)
class Clients:
    """The operator's API clients, each with its own rate limit."""

    api: KubeApiClient
    leader: KubeApiClient | None
    events: KubeApiClient
    progress: KubeApiClient | None = None
    """The progress endpoint's writes (never waiting behind reconciles), when it is served."""
    reviews: KubeApiClient | None = None
    """The reviews of callers' tokens for /metrics and the progress endpoint (never waiting behind the
    controllers' requests or the progress writes, nor in front of them); None when neither checks tokens."""


class Operator:
    """Runs `controllers` (JobController subclasses) in this process, configured by `config`."""

    def __init__(
        self,
        controllers: Sequence[type[JobController[Any]]],
        config: OperatorConfig | None = None,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        if not controllers:
            raise ValueError("an Operator needs at least one JobController subclass to run")
        self.controllers = tuple(controllers)
        self.config = config or OperatorConfig()
        self.metrics = metrics or Metrics(CollectorRegistry())
        """Every client counts its requests here; it is what /metrics serves."""
        self.manager: Manager | None = None
        self.progress: ProgressService | None = None
        """The training-progress endpoint, once built (when `config.progress` is set)."""
        self.kueue: KueueIntegration | None = None
        """The Kueue integration, decided at start-up from `config.kueue_integration` (None: off)."""

    def main(self) -> None:
        """Run until SIGTERM or SIGINT, in a new event loop (uvloop's where installed: `eventloop.run`)."""
        eventloop.run(self.serve())

    async def serve(self) -> None:
        """Connect, `prepare`, build the manager and run it until a signal stops it, then close the clients.
        Raises `ConnectError` without credentials, `MetricsSetupError` without a metrics certificate,
        `CacheSyncError` when an informer cannot sync (with `sync_patience`),
        `LeadershipLost` when the Lease is lost, `OSError` when
        an address cannot be bound, `RuntimeError` when an informer or recorder dies."""
        started = time.monotonic()
        stopper = _Signals()
        opened: list[KubeApiClient] = []
        try:
            config = self.config
            api = await self._connect(config.qps, config.burst, opened)
            events = await self._connect(config.qps, config.burst, opened)
            leader = None
            if config.leader_election:
                leader = await self._connect(_LEADER_QPS, _LEADER_BURST, opened)
            secure_metrics = config.metrics_secure and config.metrics_address is not None
            progress = reviews = None
            if config.progress:
                progress = await self._connect(_PROGRESS_QPS, _PROGRESS_BURST, opened)
            if config.progress or secure_metrics:
                reviews = await self._connect(_REVIEW_QPS, _REVIEW_BURST, opened)
            clients = Clients(api, leader, events, progress, reviews)
            await self.prepare(clients)
            self.kueue = await self.resolve_kueue(clients.api)
            security = await metrics_security(
                secure=secure_metrics, cert_path=config.metrics_cert_path, api=reviews or api
            )
            manager = self.manager = self.build(clients, security)
            manager.add_runnable(lambda: _announce_ready(manager, started, stopper))
            if self.kueue is None:  # Kueue installed later: restart then (`kubetrain.common.kueue.arrival`)
                manager.add_runnable(functools.partial(restart_when_served, api, config.kueue_integration))
            await manager.run()
        except asyncio.CancelledError:
            log.info("stopped during start-up")
        finally:
            stopper.remove()
            for client in opened:
                await client.close()
        log.info("operator stopped")

    async def prepare(self, clients: Clients) -> None:
        """Checks before the manager starts (the built-in operator reads its Lease). Default: none."""

    async def resolve_kueue(self, api: KubeApiClient) -> KueueIntegration | None:
        """Which kinds' queued jobs this operator admits through Kueue (`--kueue-integration`)."""
        kinds = [cls.kind for cls in self.controllers]
        setting = parse_setting(self.config.kueue_integration, [k.kind for k in kinds])
        return await resolve_kueue(api, setting, kinds, config=self.config.kueue_config)

    def build(self, clients: Clients, security: MetricsSecurity | None = None) -> Manager:
        """The manager, with an Event recorder per kind and every controller added to it; `security`
        guards the metrics listener (default: open, plain HTTP)."""
        security = security or MetricsSecurity()
        config = self.config
        manager = Manager(
            clients.api,
            metrics=self.metrics,
            namespace=config.namespaces,
            leader_election=config.leader_election,
            leader_api=clients.leader,
            http_address=config.health_address,
            metrics_address=config.metrics_address,
            metrics_guard=security.guard,
            metrics_tls=security.tls,
            shutdown_grace=config.shutdown_grace,
            sync_patience=config.sync_patience,
        )
        identity = config.leader_election.identity if config.leader_election else ""
        self.progress = self._progress(clients, manager)
        for cls in self.controllers:
            component = cls.kind.operator_name
            self.metrics.event_recorder(component)
            recorder = KubeEventRecorder(
                clients.events,
                component=component,
                clock=manager.clock,
                instance=identity,
                on_drop=functools.partial(self.metrics.event_dropped, component),
            )
            manager.add_runnable(recorder.run)
            self.add_controller(manager, cls, recorder)
        return manager

    def add_controller(
        self, manager: Manager, cls: type[JobController[Any]], recorder: EventRecorder
    ) -> None:
        """Build one controller on `manager` (default: `add_job_controller` with the configured workers)."""
        config = self.config
        add_job_controller(
            manager,
            cls,
            recorder=recorder,
            workers=config.workers,
            child_event_delay=config.child_event_delay,
            progress=self.progress.injection if self.progress else None,
            kueue=self.kueue,
            gang_restart=config.gang_restart,
        )

    def _progress(self, clients: Clients, manager: Manager) -> ProgressService | None:
        """The training-progress endpoint, run beside the controllers (leader or not), if configured."""
        if self.config.progress is None or clients.progress is None:
            return None
        kinds = [cls.kind for cls in self.controllers]
        service = ProgressService(
            manager,
            clients.progress,
            kinds,
            self.config.progress,
            registry=manager.registry,
            reviews=clients.reviews,
            fetch=(clients.reviews or clients.progress).get_path,
            writes_per_second=_PROGRESS_WRITES,
        )
        manager.add_runnable(service.run)
        return service

    async def _connect(self, qps: float, burst: int, opened: list[KubeApiClient]) -> KubeApiClient:
        config = self.config
        where = config.kubeconfig or "in-cluster ServiceAccount, $KUBECONFIG or ~/.kube/config"
        try:
            client = await KubeApiClient.connect(
                config.kubeconfig,
                context=config.context,
                qps=qps,
                burst=burst,
                user_agent=config.user_agent,
                metrics=self.metrics,
            )
        except asyncio.CancelledError:
            raise
        except Exception as err:  # the kubeconfig loader's own error types live below common.kube
            reason = _missing_kubeconfig() if config.kubeconfig is None else None
            raise ConnectError(f"no usable credentials ({where}): {reason or err}") from err
        opened.append(client)
        return client


async def _announce_ready(manager: Manager, started: float, signals: _Signals) -> None:
    """Log once when /readyz turns 200 (with the time since start-up began), then idle. From then on a
    signal stops the manager cleanly; before, it cancels the start-up (nothing runs yet to drain)."""
    await manager.wait_synced()
    signals.target = manager.stop
    log.info("ready %.2f s after start-up began (caches synced)", time.monotonic() - started)
    await asyncio.Event().wait()  # a runnable lives as long as the manager


class _Signals:
    """SIGTERM/SIGINT call `target`: at first, cancel start-up; once the caches synced, `manager.stop`."""

    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None
        self.target: Callable[[], Any] = task.cancel
        for sig in (signal.SIGTERM, signal.SIGINT):
            # outside the main thread (an operator in a test's thread) there are no signals to handle
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                self._loop.add_signal_handler(sig, self._received, sig)

    def _received(self, sig: signal.Signals) -> None:
        log.info("received %s: stopping", sig.name)
        self.target()

    def remove(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_signal_handler(sig)


def _missing_kubeconfig() -> str | None:
    """Why no kubeconfig was found outside a cluster, in plain words (the loader's message is cryptic)."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    paths = [Path(p).expanduser() for p in listed] or [Path("~/.kube/config").expanduser()]
    if any(path.is_file() for path in paths):
        return None
    where = f"$KUBECONFIG={os.environ['KUBECONFIG']}" if listed else str(paths[0])
    return f"not in a cluster, and {where} does not exist; pass --kubeconfig PATH"
