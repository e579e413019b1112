"""`run(MyController)`: an operator's `main`, with the flags every operator has.

    --kubeconfig PATH  --context NAME        credentials (default: in-cluster, $KUBECONFIG, ~/.kube/config)
    --namespace NS (repeatable)               the namespaces watched (default: all)
    --leader-elect  --leader-election-namespace NS  --leader-election-id NAME
    --health-probe-bind-address [HOST]:PORT   /healthz /readyz /metrics (default :8081; 0: off)
    --metrics-bind-address [HOST]:PORT        a second listener for Prometheus (default 0: off)
    --metrics-secure=true|false  --metrics-cert-path DIR   HTTPS with each scrape checked (default true)
    --workers N  --log-level LEVEL
    --kueue-integration auto|none|KIND[,KIND...]  --kueue-config NAMESPACE/NAME   (docs/ecosystem.md)

The flag names are controller-runtime's, so a Deployment written for a kubebuilder operator reads the
same. `run` returns the process exit code: 0 after a clean stop, 1 when the operator cannot start or must
stop, 2 for a bad flag (argparse's own).
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
from collections.abc import Sequence
from typing import Any

from kubetrain.common.errors import LeadershipLost
from kubetrain.common.job import JobController
from kubetrain.common.kueue.integration import AUTO, DEFAULT_KUEUE_CONFIG, check_config_name, parse_setting
from kubetrain.common.leader import LeaderElectionConfig, default_identity
from kubetrain.common.logs import ContextFilter
from kubetrain.common.metricsauth import MetricsSetupError
from kubetrain.common.operator import Address, ConnectError, Operator, OperatorConfig

__all__ = ["add_kueue_flags", "config_from_args", "operator_parser", "parse_address", "run"]

log = logging.getLogger("kubetrain.operator")

_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request)s] %(message)s"


def run(
    *controllers: type[JobController[Any]], argv: Sequence[str] | None = None, prog: str | None = None
) -> int:
    """Run `controllers` as an operator configured by the command line `argv` (default: `sys.argv[1:]`)
    until SIGTERM or SIGINT; returns the exit code, for `sys.exit(run(MyController))`."""
    names = ", ".join(cls.kind.kind for cls in controllers)
    parser = operator_parser(prog=prog, description=f"Runs the operator of {names}.")
    args = parser.parse_args(argv)
    try:
        parse_setting(args.kueue_integration, [cls.kind.kind for cls in controllers])
        config = config_from_args(args, lease_name=controllers[0].kind.operator_name)
    except ValueError as err:
        parser.error(str(err))
    _configure_logging(args.log_level)
    try:
        Operator(controllers, config).main()
    except (ConnectError, LeadershipLost, MetricsSetupError, OSError, RuntimeError) as err:
        log.error("operator stopped: %s", err)
        return 1
    return 0


def operator_parser(*, prog: str | None = None, description: str | None = None) -> argparse.ArgumentParser:
    """The parser of the flags every operator has (add your own to it)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add = parser.add_argument
    add("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
    add("--context", help="kubeconfig context (default: the current one)")
    add("--namespace", action="append", help="watch this namespace only (repeatable; default: all)")
    add("--leader-elect", action="store_true", help="campaign for a Lease; only the leader reconciles")
    add("--leader-election-namespace", help="namespace of the Lease (default: the pod's own)")
    add("--leader-election-id", help="the Lease's name (default: the first kind's operator name)")
    add("--health-probe-bind-address", default=":8081", help="[HOST]:PORT of /healthz /readyz; 0: off")
    add("--metrics-bind-address", default="0", help="[HOST]:PORT of a second /metrics listener; 0: off")
    add(
        "--metrics-secure",
        type=_bool,
        default=True,
        metavar="true|false",
        help="serve --metrics-bind-address over HTTPS, each scrape checked by TokenReview and "
        "SubjectAccessReview (default: true)",
    )
    add("--metrics-cert-path", metavar="DIR", help="tls.crt and tls.key for /metrics (default: self-signed)")
    add("--workers", type=int, default=1, help="jobs of each kind reconciled at once")
    add("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_kueue_flags(parser)
    return parser


def add_kueue_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """`--kueue-integration` and `--kueue-config`, the flags of the Kueue integration
    (`kubetrain.common.kueue.integration`), as every operator has them."""
    parser.add_argument(
        "--kueue-integration",
        default=AUTO,
        metavar="auto|none|KIND[,KIND...]",
        help="the kinds whose queued jobs (label kueue.x-k8s.io/queue-name) this operator admits through "
        "Kueue itself: auto (default) = those Kueue's configuration does not integrate itself; none; or a "
        "comma list of kinds",
    )
    parser.add_argument(
        "--kueue-config",
        default=DEFAULT_KUEUE_CONFIG,
        metavar="NAMESPACE/NAME",
        help="Kueue's ConfigMap, read by --kueue-integration=auto (default: %(default)s)",
    )


def config_from_args(args: argparse.Namespace, *, lease_name: str) -> OperatorConfig:
    """The `OperatorConfig` of parsed flags (the Lease is `lease_name` unless --leader-election-id names
    one); a ValueError names the bad flag and the fix."""
    if args.workers < 1:
        raise ValueError(f"--workers={args.workers}: must be 1 or more")
    check_config_name(args.kueue_config)
    return OperatorConfig(
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespaces=tuple(args.namespace) if args.namespace else None,
        leader_election=_election(args, lease_name) if args.leader_elect else None,
        health_address=parse_address("--health-probe-bind-address", args.health_probe_bind_address),
        metrics_address=parse_address("--metrics-bind-address", args.metrics_bind_address),
        metrics_secure=args.metrics_secure,
        metrics_cert_path=args.metrics_cert_path,
        workers=args.workers,
        kueue_integration=args.kueue_integration,
        kueue_config=args.kueue_config,
    )


def _bool(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"{text!r}: write true or false")


def parse_address(flag: str, text: str) -> Address | None:
    """`[HOST]:PORT` (IPv6 as `[::1]:8080`) -> (host, port); `0` -> None (off). ValueError names `flag`."""
    text = text.strip()
    if text == "0":
        return None
    host, sep, port_text = text.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        raise ValueError(f"{flag}={text!r}: write [HOST]:PORT, e.g. :8081 or 127.0.0.1:8081, or 0 to disable")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if host and host != "localhost":
        try:
            ipaddress.ip_address(host)
        except ValueError as err:
            raise ValueError(f"{flag}={text!r}: the host must be an IP address or empty (all)") from err
    return host, int(port_text)


def _election(args: argparse.Namespace, lease_name: str) -> LeaderElectionConfig:
    namespace = args.leader_election_namespace or os.environ.get("POD_NAMESPACE") or _own_namespace()
    if not namespace:
        raise ValueError("--leader-election-namespace is needed outside a cluster: name the Lease's one")
    return LeaderElectionConfig(
        namespace=namespace, name=args.leader_election_id or lease_name, identity=default_identity()
    )


def _own_namespace() -> str:
    try:
        with open(_SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as file:
            return file.read().strip()
    except OSError:
        return ""


def _configure_logging(level: str) -> None:
    handler = logging.StreamHandler()
    handler.addFilter(ContextFilter())
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("asyncio").setLevel(logging.WARNING)
