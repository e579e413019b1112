"""`run(MyController)`: an operator's `main`, with the flags every operator has, declared once.

    --kubeconfig PATH  --context NAME        credentials (default: in-cluster, $KUBECONFIG, ~/.kube/config)
    --namespace NS (repeatable)               the namespaces watched (default: all)
    --workers N                               jobs of one kind reconciled at once
    --leader-elect[=true|false]  --leader-election-namespace NS  --leader-election-id NAME
    --leader-election-lease-duration/-renew-deadline/-retry-period SECONDS
    --health-probe-bind-address [HOST]:PORT   /healthz /readyz, never /metrics (default :8081; 0: off)
    --metrics-bind-address [HOST]:PORT        /metrics, for Prometheus (0: not served)
    --metrics-secure=true|false  --metrics-cert-path DIR   HTTPS with each scrape checked (default true)
    --log-format json|text  --log-level LEVEL
    --kueue-integration auto|none|KIND[,KIND...]  --kueue-config NAMESPACE/NAME   (docs/ecosystem.md)
    --gang-restart auto|in-place|recreate     how gang restarts restart pods (docs/failure-policy.md)

The flag names are controller-runtime's, so a Deployment written for a kubebuilder operator reads the
same. `kubetrain operator` is built on the same declarations (`add_operator_flags`, its own defaults in a
`FlagDefaults`, each flag placed in its help section), and adds the flags of the built-in kinds. `run`
returns the process exit code: 0 after a clean stop, 1 when the operator cannot start or must stop, 2 for
a bad flag (argparse's own).
"""

from __future__ import annotations

import argparse
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any, final

from kubetrain.common.flagvalues import BoolFlag, FlagError, leader_election, parse_address, parse_namespaces
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.kueue.integration import AUTO, DEFAULT_KUEUE_CONFIG, check_config_name, parse_setting
from kubetrain.common.logformat import LogFormat, configure_logging

if TYPE_CHECKING:  # imported where used: `kubetrain --help` builds these flags and runs no operator
    from kubetrain.common.job import JobController
    from kubetrain.common.operator import OperatorConfig

__all__ = [
    "DEFAULTS",
    "FlagDefaults",
    "Section",
    "add_operator_flags",
    "config_from_args",
    "operator_parser",
    "parse_address",
    "run",
]

_Add = Callable[..., None]
"""`add(section, *names, **options)`: adds one flag in its section's group."""

log = logging.getLogger("kubetrain.operator")


class Section(StrEnum):
    """The part of a help page a flag belongs in (`kubetrain operator --help` shows them as groups)."""

    CONNECTION = "connection"
    SCOPE = "scope"
    ELECTION = "election"
    ENDPOINTS = "endpoints"
    LOGGING = "logging"
    KUEUE = "kueue"
    FAILURES = "failures"


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class FlagDefaults:
    """The defaults of the flags every operator has, as typed on a command line."""

    workers: int = 1
    leader_elect: bool = False
    lease_name: str | None = None
    """None: the first kind's operator name."""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    health_address: str = ":8081"
    metrics_address: str = "0"
    log_format: LogFormat = LogFormat.TEXT
    log_level: str = "info"


DEFAULTS = FlagDefaults()


def run(
    *controllers: type[JobController[Any]], argv: Sequence[str] | None = None, prog: str | None = None
) -> int:
    """Run `controllers` as an operator configured by the command line `argv` (default: `sys.argv[1:]`)
    until SIGTERM or SIGINT; returns the exit code, for `sys.exit(run(MyController))`."""
    from kubetrain.common.errors import LeadershipLost  # noqa: PLC0415  (see the imports)
    from kubetrain.common.metricsauth import MetricsSetupError  # noqa: PLC0415
    from kubetrain.common.operator import ConnectError, Operator  # noqa: PLC0415

    names = ", ".join(cls.kind.kind for cls in controllers)
    lease_name = controllers[0].kind.operator_name
    defaults = replace(DEFAULTS, lease_name=lease_name)
    parser = operator_parser(prog=prog, description=f"Runs the operator of {names}.", defaults=defaults)
    args = parser.parse_args(argv)
    try:
        parse_setting(args.kueue_integration, [cls.kind.kind for cls in controllers])
        config = config_from_args(args, lease_name=lease_name)
    except ValueError as err:
        parser.error(str(err))
    configure_logging(LogFormat(args.log_format), args.log_level)
    try:
        Operator(controllers, config).main()
    except (ConnectError, LeadershipLost, MetricsSetupError, OSError, RuntimeError) as err:
        log.error("operator stopped: %s", err)
        return 1
    return 0


def operator_parser(
    *, prog: str | None = None, description: str | None = None, defaults: FlagDefaults = DEFAULTS
) -> argparse.ArgumentParser:
    """The parser of the flags every operator has (add your own to it)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    return add_operator_flags(parser, defaults=defaults)


def add_operator_flags(
    parser: argparse.ArgumentParser,
    *,
    defaults: FlagDefaults = DEFAULTS,
    sections: Mapping[Section, argparse._ActionsContainer] | None = None,
) -> argparse.ArgumentParser:
    """Add the flags every operator has to `parser`, each in its section's group where `sections` has
    one (else at the top level), with `defaults`; returns `parser`."""

    def add(section: Section, *names: str, **options: Any) -> None:
        (sections or {}).get(section, parser).add_argument(*names, **options)

    for flags in (_connection_flags, _election_flags, _endpoint_flags, _queueing_flags):
        flags(add, defaults)
    return parser


def _connection_flags(add: _Add, defaults: FlagDefaults) -> None:
    """The API server and the namespaces watched."""
    add(
        Section.CONNECTION,
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: in-cluster ServiceAccount, else $KUBECONFIG, else ~/.kube/config)",
    )
    add(
        Section.CONNECTION,
        "--context",
        metavar="NAME",
        help="kubeconfig context (default: its current context)",
    )
    add(
        Section.SCOPE,
        "--namespace",
        action="append",
        metavar="NS",
        help="watch only this namespace; repeat (or comma-separate) for several (default: all namespaces)",
    )
    add(
        Section.SCOPE,
        "--workers",
        type=int,
        default=defaults.workers,
        metavar="N",
        help="jobs of one kind reconciled at the same time (default: %(default)d)",
    )


def _election_flags(add: _Add, defaults: FlagDefaults) -> None:
    """Leader election."""
    lease = defaults.lease_name or "the first kind's operator name"
    elect = (
        "true; --leader-elect=false or --no-leader-elect to run without" if defaults.leader_elect else "false"
    )
    add(
        Section.ELECTION,
        "--leader-elect",
        dest="leader_elect",
        action=BoolFlag,
        default=defaults.leader_elect,
        help=f"hold a Lease so that of several replicas only one acts (default: {elect})",
    )
    add(
        Section.ELECTION,
        "--no-leader-elect",
        dest="leader_elect",
        action="store_false",
        help=argparse.SUPPRESS,
    )
    add(
        Section.ELECTION,
        "--leader-election-namespace",
        metavar="NS",
        help="namespace of the Lease (default: $POD_NAMESPACE, else the in-cluster ServiceAccount's)",
    )
    add(
        Section.ELECTION,
        "--leader-election-id",
        default=defaults.lease_name,
        metavar="NAME",
        help=f"name of the Lease (default: {lease})",
    )
    for name, default, what in (
        ("lease-duration", defaults.lease_duration, "standbys wait this long for an unrenewed Lease"),
        ("renew-deadline", defaults.renew_deadline, "the leader stops acting if it cannot renew this long"),
        ("retry-period", defaults.retry_period, "time between tries to take or renew the Lease"),
    ):
        add(
            Section.ELECTION,
            f"--leader-election-{name}",
            type=float,
            default=default,
            metavar="SECONDS",
            help=f"{what} (default: %(default)g)",
        )


def _endpoint_flags(add: _Add, defaults: FlagDefaults) -> None:
    """The probe, metrics and progress endpoints, and the logs."""
    add(
        Section.ENDPOINTS,
        "--health-probe-bind-address",
        default=defaults.health_address,
        metavar="[HOST]:PORT",
        help="serves /healthz and /readyz (never /metrics); 0 disables (default: %(default)s)",
    )
    add(
        Section.ENDPOINTS,
        "--metrics-bind-address",
        default=defaults.metrics_address,
        metavar="[HOST]:PORT",
        help="the listener of /metrics, the port Prometheus scrapes; 0: not served (default: %(default)s)",
    )
    add(
        Section.ENDPOINTS,
        "--metrics-secure",
        action=BoolFlag,
        default=True,
        help="serve /metrics over HTTPS, each scrape authenticated by TokenReview and authorized by "
        "SubjectAccessReview (get on the nonResourceURL /metrics); --metrics-secure=false serves plain, "
        "open HTTP (default: true)",
    )
    add(
        Section.ENDPOINTS,
        "--metrics-cert-path",
        metavar="DIR",
        help="directory holding tls.crt and tls.key for /metrics (default: a self-signed pair made at start)",
    )
    add(
        Section.LOGGING,
        "--log-format",
        choices=[str(f) for f in LogFormat],
        default=str(defaults.log_format),
        help="json: one object per line, for log collectors; text: for people (default: %(default)s)",
    )
    add(
        Section.LOGGING,
        "--log-level",
        type=str.lower,
        choices=["debug", "info", "warning", "error"],
        default=defaults.log_level,
        help="(default: %(default)s)",
    )


def _queueing_flags(add: _Add, defaults: FlagDefaults) -> None:
    """Kueue's integration and how a gang restarts."""
    add(
        Section.KUEUE,
        "--kueue-integration",
        default=AUTO,
        metavar="auto|none|KIND[,KIND...]",
        help="the kinds whose queued jobs (label kueue.x-k8s.io/queue-name) this operator admits through "
        "Kueue itself: auto (default) = those Kueue's configuration does not integrate itself; none; or a "
        "comma list of kinds",
    )
    add(
        Section.KUEUE,
        "--kueue-config",
        default=DEFAULT_KUEUE_CONFIG,
        metavar="NAMESPACE/NAME",
        help="Kueue's ConfigMap, read by --kueue-integration=auto (default: %(default)s)",
    )
    add(
        Section.FAILURES,
        "--gang-restart",
        choices=[str(m) for m in GangRestartMode],
        default=str(GangRestartMode.AUTO),
        help="how a failure policy's gang restart restarts the pods of a new job: in-place (the kubelet "
        "restarts their containers: same pods, no rescheduling; needs kubelets of Kubernetes 1.36), recreate "
        "(new pods), or auto (default): in place when a Ready node declares "
        "RestartAllContainersOnContainerExits",
    )


def config_from_args(
    args: argparse.Namespace, *, lease_name: str, environ: Mapping[str, str] | None = None
) -> OperatorConfig:
    """The `OperatorConfig` of parsed flags (the Lease is `lease_name` unless --leader-election-id names
    one); a FlagError (a ValueError) names the bad flag and the fix."""
    from kubetrain.common.operator import OperatorConfig  # noqa: PLC0415  (see the imports)

    if args.workers < 1:
        raise FlagError(f"--workers={args.workers}: must be 1 or more")
    check_config_name(args.kueue_config)
    env = os.environ if environ is None else environ
    return OperatorConfig(
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=parse_namespaces(args.namespace),
        leader_election=leader_election(args, lease_name=lease_name, environ=env)
        if args.leader_elect
        else None,
        health_address=parse_address("--health-probe-bind-address", args.health_probe_bind_address),
        metrics_address=parse_address("--metrics-bind-address", args.metrics_bind_address),
        metrics_secure=args.metrics_secure,
        metrics_cert_path=args.metrics_cert_path,
        workers=args.workers,
        kueue_integration=args.kueue_integration,
        kueue_config=args.kueue_config,
        gang_restart=GangRestartMode(args.gang_restart),
    )
