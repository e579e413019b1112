"""Builds and runs the operator from validated `OperatorOptions`: the process behind `kubetrain operator`.

Start-up, in order, each step failing with one clear log line and a distinct exit code:
1. import the controller of every enabled kind (a kind is never dropped silently);
2. connect the API clients: one for the controllers and informers (--qps/--burst), one for Events (the
   same limits, a budget of its own), and one for leader election, so that Lease renewals never queue
   behind reconcile traffic;
3. with leader election, read the Lease (so that a missing RBAC rule for it is named at once);
4. build the Manager (shared informers, leader election, /healthz /readyz /metrics), an Event recorder
   per kind, one controller per kind and the progress endpoint (`kubetrain.common.progress.service`);
5. preflight, at no cost of its own: the informers' first requests (one streaming list per resource and
   namespace) prove that the API server is reachable, the credentials work, the CRDs (and the gang
   scheduler's PodGroup CRD) are installed and RBAC allows reading them. An informer whose first sync
   fails stops the start-up (`sync_patience`: at once, or after 30 s of busy answers), and its error
   becomes one line that says what to fix, instead of an operator that never gets ready and logs retries;
6. run until SIGTERM/SIGINT; then drain (in-flight reconciles get --shutdown-grace), release the Lease,
   exit 0. A signal during start-up stops at once, also with 0.
Steps 2, 4, 5 and 6 are the library's `kubetrain.common.Operator`, the one any operator runs on; this
module adds the Lease check, the explanations and the built-in kinds' `ControllerSettings`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubetrain import __version__
from kubetrain.cli.exitcodes import ExitCode
from kubetrain.cli.operator.options import OperatorOptions
from kubetrain.common import eventloop
from kubetrain.common.errors import (
    ApiError,
    Forbidden,
    LeadershipLost,
    NotFound,
    TransportError,
    Unauthorized,
)
from kubetrain.common.eventloop import EventLoopChoiceError
from kubetrain.common.events import EventRecorder
from kubetrain.common.job import JobController
from kubetrain.common.kube.http import use_small_tls_buffers
from kubetrain.common.kube.informer import CacheSyncError
from kubetrain.common.kube.resources import LEASES, Resource
from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.common.logformat import configure_logging
from kubetrain.common.manager import Manager
from kubetrain.common.metricsauth import MetricsSetupError
from kubetrain.common.operator import Clients, ConnectError, Operator, OperatorConfig
from kubetrain.common.progress.service import ProgressConfig
from kubetrain.controllers.registry import ControllerUnavailable, load_controller
from kubetrain.controllers.settings import ConfiguredJobController, add_controller

__all__ = ["run_operator"]

log = logging.getLogger("kubetrain.operator")

_TRANSIENT_PATIENCE = 30.0
"""Seconds an informer's first sync keeps retrying a busy (429, 5xx) API server before giving up."""

Controllers = Mapping[str, type[ConfiguredJobController[Any]]]


class OperatorFailure(Exception):
    """The operator cannot start (`startup`), or must stop; `code` is the process exit code."""

    def __init__(self, code: ExitCode, message: str, *, startup: bool = True) -> None:
        super().__init__(f"cannot start: {message}" if startup else message)
        self.code = code


def run_operator(options: OperatorOptions) -> int:
    """Run the operator in this process until it is stopped; returns the exit code."""
    configure_logging(options.log_format, options.log_level)
    use_small_tls_buffers()  # on asyncio's loop (KUBETRAIN_EVENT_LOOP=asyncio): 4 MiB less at rest
    try:
        controllers = {kind: load_controller(kind) for kind in options.kinds}
        return eventloop.run(_serve(options, controllers))
    except EventLoopChoiceError as err:
        log.error("cannot start: %s", err)
        return int(ExitCode.USAGE)
    except ControllerUnavailable as err:
        log.error("cannot start: %s", err)
        return int(ExitCode.FAILED)
    except OperatorFailure as err:
        log.error("%s", err)
        return int(err.code)


async def _serve(options: OperatorOptions, controllers: Controllers) -> int:
    operator = _BuiltinOperator(options, controllers)
    try:
        await operator.serve()
    except CacheSyncError as err:
        job_kinds = {cls.job_resource(): kind for kind, cls in controllers.items()}
        kind = job_kinds.get(err.resource)
        raise _explain(err.error, err.resource, err.namespace, kind, options) from err
    except ConnectError as err:
        raise OperatorFailure(ExitCode.CLUSTER, str(err)) from err
    except LeadershipLost as err:
        message = f"{err}; exiting so that a new process campaigns afresh"
        raise OperatorFailure(ExitCode.FAILED, message, startup=False) from err
    except MetricsSetupError as err:
        code = ExitCode.USAGE if err.usage else ExitCode.FAILED
        raise OperatorFailure(code, f"cannot serve /metrics over HTTPS: {err}") from err
    except OSError as err:
        message = f"cannot listen on the health or metrics address: {err}"
        raise OperatorFailure(ExitCode.FAILED, message) from err
    except RuntimeError as err:  # a dead informer or recorder: the manager stopped itself
        raise OperatorFailure(ExitCode.FAILED, f"stopping: {err}", startup=False) from err
    return int(ExitCode.OK)


class _BuiltinOperator(Operator):
    """The library's `Operator`, with the built-in kinds' start-up checks and their `ControllerSettings`."""

    def __init__(self, options: OperatorOptions, controllers: Controllers) -> None:
        config = OperatorConfig(
            kubeconfig=options.kubeconfig,
            context=options.context,
            namespaces=options.namespaces,
            leader_election=options.leader_election,
            health_address=options.health_address,
            metrics_address=options.metrics_address,
            metrics_secure=options.metrics_secure,
            metrics_cert_path=options.metrics_cert_path,
            progress=_progress_config(options),
            qps=options.qps,
            burst=options.burst,
            workers=options.workers,
            child_event_delay=options.child_event_delay,
            shutdown_grace=options.shutdown_grace,
            sync_patience=_TRANSIENT_PATIENCE,
            kueue_integration=options.kueue_integration,
            kueue_config=options.kueue_config,
            gang_restart=options.gang_restart,
        )
        super().__init__(list(controllers.values()), config)
        self.options = options
        self.by_kind = controllers

    async def prepare(self, clients: Clients) -> None:
        await _check_lease(clients.leader, self.options)
        gang = self.options.settings.gang
        resources = {r for cls in self.by_kind.values() for r in cls.resources_for(gang)}
        scopes = len(self.options.namespaces or (None,))
        log.info(
            "starting: %s; preflight: the informers' first requests check that the operator can read its "
            "%d resources in %d scopes",
            _summary(self.options), len(resources), scopes,
        )  # fmt: skip

    def add_controller(
        self, manager: Manager, cls: type[JobController[Any]], recorder: EventRecorder
    ) -> None:
        configured = next(c for c in self.by_kind.values() if c is cls)  # the same class, as configurable
        options = self.options
        add_controller(
            manager,
            configured,
            options.settings,
            recorder=recorder,
            workers=options.workers,
            child_event_delay=options.child_event_delay,
            progress=self.progress.injection if self.progress else None,
            kueue=self.kueue,
            gang_restart=options.gang_restart,
        )


def _progress_config(options: OperatorOptions) -> ProgressConfig | None:
    progress = options.progress
    if progress is None:
        return None
    return ProgressConfig(
        host=progress.address[0],
        port=progress.address[1],
        url=progress.url,
        audience=progress.audience,
        interval=progress.interval,
        max_connections=progress.max_connections,
        idle_timeout=progress.idle_timeout,
        hosts=progress.hosts,
        home=progress.namespace,
    )


async def _check_lease(leader_api: KubeApiClient | None, options: OperatorOptions) -> None:
    election = options.leader_election
    if leader_api is None or election is None:
        return
    try:
        await leader_api.get(LEASES, election.namespace, election.name)
    except NotFound:
        pass
    except ApiError as err:
        raise _explain(err, LEASES, election.namespace, None, options) from err


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
        f"metrics={_address(options.metrics_address)}"
        + (" (https, authorized)" if options.metrics_secure and options.metrics_address else ""),
        f"progress={options.progress.url if options.progress else 'off'}",
        f"qps={options.qps:g} burst={options.burst} workers={options.workers}",
    )
    return " ".join(parts)


def _address(address: tuple[str, int] | None) -> str:
    return f"{address[0]}:{address[1]}" if address else "off"
