"""Runs an operator process: shared informers, controllers, leader election, health and metrics, shutdown.

Order of life:
1. The HTTP servers start (`/healthz` `/readyz` on the probe port, served by a thread of their own:
   `ProbeServer`; `/metrics` on its own port) and every informer starts listing, leader or not, so
   that a standby has a warm cache when it takes over.
2. Once every informer has synced, the process is ready; with leader election it then campaigns
   (a standby is ready too: readiness means "healthy and able to lead").
3. While leading (or always, without election), every controller runs.
4. On `stop()` (SIGTERM, SIGINT): controllers take no new work and in-flight reconciles get
   `shutdown_grace` seconds; the Lease is released; informers and the server stop.
Losing the Lease cancels the controllers at once and `run()` raises LeadershipLost: the process must
exit (and be restarted), never keep acting. With `sync_patience`, an informer that cannot fill its cache
at start-up (no such CRD, no RBAC rule, an unreachable server; busy answers for longer than the patience)
stops the manager, and `run()` raises its `CacheSyncError`: the informers' first requests are the
start-up check, with no request of their own.

Informers are shared: `informer(res, label_selector=...)` makes one per resource, scope and exact
selector. `labelled_informer(res, key=..., value=...)` is for several controllers that each want the
objects whose label `key` has their own `value` (each kind's `operator-name`): all of them share one
informer per resource, scope and key, which selects `key in (every value asked for, sorted)`. That is one
list and one watch (one connection) instead of one per controller; each reader picks its own objects out
of the shared store (e.g. by the controller-uid index). Its selector is fixed when `run()` starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import signal
import ssl
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from kubetrain.common.clock import Clock, SystemClock
from kubetrain.common.controller import Controller
from kubetrain.common.httpserver import Guard, HealthServer, ProbeServer
from kubetrain.common.kube.client import ApiClient
from kubetrain.common.kube.informer import CacheSyncError, Informer
from kubetrain.common.kube.multinamespace import MultiNamespaceInformer
from kubetrain.common.kube.resources import Resource
from kubetrain.common.kube.selectors import format_labels
from kubetrain.common.leader import LeaderElectionConfig, LeaderElector
from kubetrain.common.metrics import Metrics
from kubetrain.common.reconcile import Reconciler

__all__ = ["Manager"]

log = logging.getLogger(__name__)

Runnable = Callable[[], Awaitable[None]]

_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
"""A non-empty label value (the API server's rule): what a set-based selector can carry."""

_Scope = tuple[str, ...] | None


class Manager:
    """Owns the informers (one per Resource, scope and selector, shared by controllers) and runs everything.

    `api` serves informers and controllers; `leader_api` (a separate client with its own rate limit)
    serves leader election. `namespace` scopes every informer by default: None (cluster-wide), one
    namespace, or several (one list+watch per namespace behind each informer, for an operator whose
    rights stop at those namespaces). `http_address=None` disables the probe server (/healthz /readyz;
    tests); port 0 picks a free port (`http_port`). `metrics_address`, when set, is the listener of
    /metrics (`metrics_port`, guarded by `metrics_guard`, over `metrics_tls`), which also answers the probe
    paths; None: /metrics is not served at all (the probe port never serves it: it has no guard).
    `sync_patience` (seconds) goes to every informer: see the module docstring; None, the default, lets
    informers retry for ever.
    """

    def __init__(
        self,
        api: ApiClient,
        *,
        clock: Clock | None = None,
        registry: CollectorRegistry | None = None,
        metrics: Metrics | None = None,
        namespace: str | Sequence[str] | None = None,
        leader_election: LeaderElectionConfig | None = None,
        leader_api: ApiClient | None = None,
        http_address: tuple[str, int] | None = ("0.0.0.0", 8081),
        metrics_address: tuple[str, int] | None = None,
        metrics_guard: Guard | None = None,
        metrics_tls: ssl.SSLContext | None = None,
        shutdown_grace: float = 30.0,
        sync_patience: float | None = None,
    ) -> None:
        self.api = api
        self._sync_patience = sync_patience
        self.clock: Clock = clock or SystemClock()
        if metrics is not None:  # served as given: its registry is the one /metrics shows
            registry = metrics.registry
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = metrics or Metrics(self.registry)
        self.namespaces = _scope(namespace)
        """The default scope of informers: None (cluster-wide) or the namespaces, deduplicated, in order."""
        self.controllers: list[Controller] = []
        self._informers: dict[tuple[Resource, _Scope, str | None], Informer] = {}
        self._labelled: dict[tuple[Resource, _Scope, str], tuple[Informer, set[str]]] = {}
        """The `labelled_informer`s by (resource, scope, label key), with the values asked for."""
        self._started = False
        self._runnables: list[Runnable] = []
        self._elector = (
            LeaderElector(leader_api or api, leader_election, clock=self.clock) if leader_election else None
        )
        lease = leader_election.name if leader_election else None
        self._lease_gauge = self.metrics.leader_status.labels(lease) if lease else None
        # /metrics only ever on its own listener, as guarded as it is configured: never open on the probe port
        self._server = ProbeServer(self.is_ready) if http_address else None
        self._http_address = http_address
        self._metrics_server = (
            HealthServer(self.registry, self.is_ready, guard=metrics_guard, ssl_context=metrics_tls)
            if metrics_address
            else None
        )
        self._metrics_address = metrics_address
        self._grace = shutdown_grace
        self._stop = asyncio.Event()
        self._synced = False
        self._synced_event = asyncio.Event()
        self._previous_handlers: dict[signal.Signals, Any] = {}
        self._crash: BaseException | None = None

    # wiring -----------------------------------------------------------------------------------------
    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: Mapping[str, str] | None = None,
    ) -> Informer:
        """The shared informer of `resource` in `namespace` (default: the manager scope), made once."""
        scope = (namespace,) if namespace is not None else self.namespaces
        selector = format_labels(label_selector) if label_selector else None
        key = (resource, scope, selector)
        if key not in self._informers:
            self._informers[key] = self._new_informer(resource, scope, selector)
        return self._informers[key]

    def labelled_informer(
        self, resource: Resource, *, key: str, value: str, namespace: str | None = None
    ) -> Informer:
        """The informer of the `resource` objects whose label `key` is `value`, shared with every caller
        that asks for the same resource, scope and `key` (with any value): it selects `key in (values)`,
        so its store holds the objects of every value; pick yours out of it (by controller-uid, owner).

        Values are collected until `run()` starts; a value new after that is a RuntimeError, since the
        informer already lists and watches with its selector."""
        if not _LABEL_VALUE.match(value):
            raise ValueError(
                f"labelled_informer({resource}, key={key!r}, value={value!r}): the value must be a label "
                "value (1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)"
            )
        scope = (namespace,) if namespace is not None else self.namespaces
        shared = self._labelled.get((resource, scope, key))
        if self._started and (shared is None or value not in shared[1]):
            raise RuntimeError(
                f"labelled_informer({resource}, key={key!r}, value={value!r}) after the manager started: "
                "the shared informer's selector was fixed at start; ask for it before Manager.run()"
            )
        if shared is None:
            informer = self._new_informer(resource, scope, f"{key} in ({value})")  # fixed at start
            shared = self._labelled[(resource, scope, key)] = (informer, set())
        shared[1].add(value)
        return shared[0]

    def _new_informer(self, resource: Resource, scope: _Scope, selector: str | None) -> Informer:
        if scope is not None and len(scope) > 1:
            return MultiNamespaceInformer(
                self.api, resource, clock=self.clock, namespaces=scope, label_selector=selector,
                sync_patience=self._sync_patience,
            )  # fmt: skip
        ns = scope[0] if scope else None
        return Informer(
            self.api, resource, clock=self.clock, namespace=ns, label_selector=selector,
            sync_patience=self._sync_patience,
        )  # fmt: skip

    def _fix_selectors(self) -> None:
        """Give each labelled informer its final selector, every value asked for, before it first lists."""
        for (_resource, _scope, key), (informer, values) in self._labelled.items():
            selector = f"{key} in ({','.join(sorted(values))})"
            members = informer.members if isinstance(informer, MultiNamespaceInformer) else []
            for each in (informer, *members):
                each.label_selector = selector

    @property
    def informers(self) -> list[Informer]:
        """Every informer `run()` starts: the exact-selector ones, then the labelled ones."""
        return [*self._informers.values(), *(informer for informer, _ in self._labelled.values())]

    def controller(
        self, name: str, reconciler: Reconciler, *, workers: int = 1, **options: Any
    ) -> Controller:
        """A Controller on this manager's clock and metrics, already added; `options` go to Controller."""
        controller = Controller(
            name, reconciler, clock=self.clock, workers=workers, metrics=self.metrics, **options
        )
        self.add(controller)
        return controller

    def add(self, controller: Controller) -> None:
        """Run `controller` while leading; it starts once the informers it watches have synced."""
        self.controllers.append(controller)

    def add_runnable(self, runnable: Runnable) -> None:
        """Run `runnable()` for the whole life of the process, leader or not (e.g. an event recorder)."""
        self._runnables.append(runnable)

    # state ------------------------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        return self._elector.is_leader if self._elector else self._synced

    def is_ready(self) -> bool:
        """Informers synced (leading or standing by): what /readyz reports."""
        return self._synced and not self._stop.is_set()

    async def wait_synced(self) -> None:
        """Return once every informer has synced (when `is_ready()` first turns true)."""
        await self._synced_event.wait()

    @property
    def http_port(self) -> int | None:
        return self._server.port if self._server else None

    @property
    def metrics_port(self) -> int | None:
        return self._metrics_server.port if self._metrics_server else None

    def stop(self) -> None:
        """Ask `run()` to shut down cleanly. Safe to call from a signal handler, or twice."""
        self._stop.set()

    # running ----------------------------------------------------------------------------------------
    async def run(self, *, handle_signals: bool = False) -> None:
        """Run until `stop()` (or SIGTERM/SIGINT if `handle_signals`); LeadershipLost if the Lease is lost.

        An informer or runnable that dies (they never return normally) stops the manager cleanly, and
        `run()` then raises RuntimeError: a process with a dead cache must restart, not limp on. An
        informer's CacheSyncError (with `sync_patience`) is raised as it is, for the caller to explain.
        """
        if handle_signals:
            self._signal_handlers(install=True)
        background: list[asyncio.Future[None]] = []
        try:
            self._started = True
            self._fix_selectors()
            await self._start_servers()  # OSError (e.g. port in use) after undoing what was started
            background = [asyncio.ensure_future(inf.run()) for inf in self.informers]
            background += [asyncio.ensure_future(r()) for r in self._runnables]
            for task in background:
                task.add_done_callback(self._on_background_exit)
            await self._main()
        finally:
            for task in background:
                task.remove_done_callback(self._on_background_exit)
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            for server in (self._server, self._metrics_server):
                if server:
                    await server.stop()
            self._set_leading(0)
            if handle_signals:
                self._signal_handlers(install=False)
            log.info("manager stopped")
        if isinstance(self._crash, CacheSyncError):
            raise self._crash
        if self._crash is not None:
            raise RuntimeError(f"a background task of the manager died: {self._crash!r}") from self._crash

    async def _start_servers(self) -> None:
        if self._server and self._http_address:
            await self._server.start(*self._http_address)
        if self._metrics_server and self._metrics_address:
            await self._metrics_server.start(*self._metrics_address)

    def _on_background_exit(self, task: asyncio.Future[None]) -> None:
        if not task.cancelled():
            self._crash = task.exception() or RuntimeError("returned unexpectedly")
            if isinstance(self._crash, CacheSyncError):  # the caller explains it: no error line here
                log.info("%s; stopping", self._crash)
            else:
                log.error("background task died (%r); stopping", self._crash)
            self.stop()

    async def _main(self) -> None:
        stopper: asyncio.Future[object] = asyncio.ensure_future(self._stop.wait())
        try:
            if await self._until_synced(stopper):
                await self._elect_and_lead(stopper)
        finally:
            stopper.cancel()

    async def _until_synced(self, stopper: asyncio.Future[object]) -> bool:
        sync: asyncio.Future[object] = asyncio.ensure_future(self._wait_synced())
        try:
            await asyncio.wait({stopper, sync}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sync.cancel()
        if self._stop.is_set():
            return False
        self._synced = True
        self._synced_event.set()
        log.info("caches synced (%d informers)", len(self.informers))
        return True

    async def _elect_and_lead(self, stopper: asyncio.Future[object]) -> None:
        election: asyncio.Future[object] = asyncio.ensure_future(
            self._elector.run(self._lead) if self._elector else self._lead()
        )
        try:
            await asyncio.wait({stopper, election}, return_when=asyncio.FIRST_COMPLETED)
            if not self.is_leader:  # stopping while standing by: nothing to drain
                election.cancel()
            await asyncio.wait({election})
        finally:
            if not election.done():
                election.cancel()
                await asyncio.gather(election, return_exceptions=True)
        if not election.cancelled() and (err := election.exception()) is not None:
            raise err

    async def _wait_synced(self) -> None:
        for informer in self.informers:
            await informer.wait_synced()

    def _set_leading(self, value: int) -> None:
        self.metrics.is_leader.set(value)
        if self._lease_gauge is not None:
            self._lease_gauge.set(value)

    async def _lead(self) -> None:
        self._set_leading(1)
        try:
            async with asyncio.TaskGroup() as group:
                for controller in self.controllers:
                    group.create_task(controller.run(), name=f"controller-{controller.name}")
                await self._stop.wait()
                log.info("stopping %d controllers (grace %g s)", len(self.controllers), self._grace)
                await asyncio.gather(*(c.stop(self._grace) for c in self.controllers))
        finally:
            self._set_leading(0)

    def _signal_handlers(self, *, install: bool) -> None:
        """Route SIGTERM/SIGINT to `stop()`; on removal, put back whatever handlers were there before."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                if install:
                    self._previous_handlers[sig] = signal.getsignal(sig)
                    loop.add_signal_handler(sig, self.stop)
                else:
                    loop.remove_signal_handler(sig)
                    previous = self._previous_handlers.pop(sig, None)
                    if previous is not None:
                        signal.signal(sig, previous)


def _scope(namespace: str | Sequence[str] | None) -> tuple[str, ...] | None:
    if namespace is None:
        return None
    scope = (namespace,) if isinstance(namespace, str) else tuple(dict.fromkeys(namespace))
    if not scope or not all(scope):
        raise ValueError(f"namespace must be None (all namespaces) or non-empty names, got {namespace!r}")
    return scope
