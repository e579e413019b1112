"""The validated configuration of `kubetrain operator`, and the rules that turn its flags into it.

Every check happens here, before anything connects, so that a typo is one line on stderr naming the flag
and the fix (exit 2), never a traceback from deep inside the operator. The result, `OperatorOptions`, is
a frozen value that `kubetrain.cli.operator_app` runs.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from kubetrain.cli.operator_kubeflow import refusals
from kubetrain.cli.operator_progress import ProgressOptions, progress_options
from kubetrain.common import cmdline
from kubetrain.common.kueue.integration import AUTO, DEFAULT_KUEUE_CONFIG, check_config_name, parse_setting
from kubetrain.controllers.registry import CONTROLLERS, UnknownKind, resolve_kinds

if TYPE_CHECKING:  # imported where used: every `kubetrain` command builds this parser, few run it
    from kubetrain.common.leader import LeaderElectionConfig
    from kubetrain.controllers.settings import ControllerSettings

__all__ = [
    "DEFAULTS",
    "SERVICE_ACCOUNT_NAMESPACE_FILE",
    "SERVICE_MODES",
    "BoolFlag",
    "GangChoice",
    "LogFormat",
    "OperatorOptions",
    "OptionsError",
    "ProgressOptions",
    "options_from_args",
    "parse_address",
]

SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
SCHEDULER_PLUGINS_DEFAULT_NAME = "scheduler-plugins-scheduler"
"""The scheduler name scheduler-plugins' "as a second scheduler" install registers."""
VOLCANO = "volcano"
SERVICE_MODES = ("job", "replica")
"""`--service-mode` values, the default first: `kubetrain.common.job.ServiceMode`'s (a unit test keeps them
equal), spelled out so that building the parser imports no controller code."""

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class OptionsError(ValueError):
    """A flag has a bad value; the message names the flag and the fix."""


class LogFormat(StrEnum):
    JSON = "json"
    TEXT = "text"


class GangChoice(StrEnum):
    NONE = "none"
    VOLCANO = "volcano"
    SCHEDULER_PLUGINS = "scheduler-plugins"


Address = tuple[str, int]
"""(host, port) to listen on; host "" means every interface."""


@final
@dataclass(frozen=True, slots=True)
class _FlagDefaults:
    """The flag defaults, as typed on a command line (addresses) or as used (everything else)."""

    qps: float = 50.0
    burst: int = 100
    workers: int = 5
    child_event_delay: float = 0.25
    pytorch_init_image: str = "alpine:3.10"
    pytorch_init_max_tries: int = 100
    """The two as `ControllerSettings` defaults them (a unit test keeps them equal)."""
    election_id: str = "kubetrain-operator"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    health_address: str = ":8081"
    metrics_address: str = ":8080"
    log_format: LogFormat = LogFormat.JSON
    log_level: str = "info"
    shutdown_grace: float = 20.0
    progress_address: str = "0"
    progress_audience: str = "kubetrain-progress"
    progress_interval: float = 10.0
    progress_max_connections: int = 1024
    progress_idle_timeout: float = 120.0


DEFAULTS = _FlagDefaults()


def _controller_settings(**values: Any) -> ControllerSettings:
    from kubetrain.controllers.settings import ControllerSettings  # noqa: PLC0415  (see the imports)

    return ControllerSettings(**values)


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorOptions:
    """Everything `kubetrain operator` runs with; the defaults are the flags' defaults."""

    kubeconfig: str | None = None
    context: str | None = None
    qps: float = DEFAULTS.qps
    burst: int = DEFAULTS.burst
    namespaces: tuple[str, ...] | None = None
    """None: every namespace."""
    kinds: tuple[str, ...] = tuple(CONTROLLERS)
    workers: int = DEFAULTS.workers
    child_event_delay: float = DEFAULTS.child_event_delay
    settings: ControllerSettings = field(default_factory=_controller_settings)
    leader_election: LeaderElectionConfig | None = None
    health_address: Address | None = ("", 8081)
    metrics_address: Address | None = ("", 8080)
    metrics_secure: bool = True
    """HTTPS, each scrape checked by TokenReview and SubjectAccessReview (controller-runtime's default)."""
    metrics_cert_path: str | None = None
    """A directory with tls.crt and tls.key; None: a self-signed pair made at start."""
    log_format: LogFormat = DEFAULTS.log_format
    log_level: str = DEFAULTS.log_level
    shutdown_grace: float = DEFAULTS.shutdown_grace
    progress: ProgressOptions | None = None
    """None: no endpoint, and pods get no reporting env."""
    kueue_integration: str = AUTO
    kueue_config: str = DEFAULT_KUEUE_CONFIG


class BoolFlag(argparse.Action):
    """`--flag` or `--flag=true|false` (Go flag style, as Kubeflow Deployments write it)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", metavar="true|false", **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        if values is None:
            setattr(namespace, self.dest, True)
            return
        text = str(values).strip().lower()
        if text not in ("true", "false", "1", "0", "yes", "no"):
            parser.error(f"{option_string}={values}: write {self.option_strings[0]}=true or =false")
        setattr(namespace, self.dest, text in ("true", "1", "yes"))


def parse_address(flag: str, text: str) -> Address | None:
    """`[HOST]:PORT` (IPv6 as `[::1]:8080`) -> (host, port); `0` -> None (disabled); the library's rule
    (`kubetrain.common.cmdline`), its error an OptionsError."""
    try:
        return cmdline.parse_address(flag, text)
    except ValueError as err:
        raise OptionsError(str(err)) from err


def options_from_args(args: argparse.Namespace, *, environ: dict[str, str] | None = None) -> OperatorOptions:
    """The validated options of a parsed `kubetrain operator` command line; OptionsError names a bad flag."""
    env = dict(os.environ) if environ is None else environ
    for refused in refusals(args):  # a Go operator's flag with no meaning here
        raise OptionsError(refused)
    _check_positive("--qps", args.qps)
    _check_positive("--burst", args.burst)
    _check_positive("--workers", args.workers)
    if not 0 <= args.child_event_delay <= 10:
        raise OptionsError(
            f"--child-event-delay={args.child_event_delay:g}: write seconds from 0 (at once) to 10"
        )
    if args.shutdown_grace < 0:
        raise OptionsError(f"--shutdown-grace={args.shutdown_grace:g}: must be >= 0 seconds")
    if args.kubeconfig is not None and not Path(args.kubeconfig).expanduser().is_file():
        raise OptionsError(f"--kubeconfig={args.kubeconfig}: no such file")
    return OperatorOptions(
        kubeconfig=str(Path(args.kubeconfig).expanduser()) if args.kubeconfig else None,
        context=args.context,
        qps=float(args.qps),
        burst=int(args.burst),
        namespaces=_namespaces(args.namespace),
        kinds=_kinds(args.enable),
        workers=int(args.workers),
        child_event_delay=float(args.child_event_delay),
        settings=_settings(args),
        leader_election=_election(args, env) if args.leader_elect else None,
        health_address=parse_address("--health-probe-bind-address", args.health_probe_bind_address),
        metrics_address=parse_address("--metrics-bind-address", args.metrics_bind_address),
        metrics_secure=bool(args.metrics_secure),
        metrics_cert_path=args.metrics_cert_path,
        log_format=LogFormat(args.log_format),
        log_level=args.log_level,
        shutdown_grace=float(args.shutdown_grace),
        progress=_progress(args, env),
        kueue_integration=_kueue(args),
        kueue_config=args.kueue_config,
    )


def _kueue(args: argparse.Namespace) -> str:
    try:
        parse_setting(args.kueue_integration, CONTROLLERS)
        check_config_name(args.kueue_config)
    except ValueError as err:
        raise OptionsError(str(err)) from err
    return str(args.kueue_integration)


def _check_positive(flag: str, value: float) -> None:
    if not value > 0:
        raise OptionsError(f"{flag}={value:g}: must be greater than 0")


def _split(values: Sequence[str] | None) -> list[str]:
    return [part.strip() for value in values or () for part in value.split(",") if part.strip()]


def _namespaces(values: Sequence[str] | None) -> tuple[str, ...] | None:
    names = _split(values)
    if values and not names:
        raise OptionsError("--namespace is empty: name a namespace, or leave the flag out for all namespaces")
    for name in names:
        if not _DNS_LABEL.match(name):
            raise OptionsError(
                f"--namespace={name!r}: not a namespace name (lower-case letters, digits and '-', at most 63)"
            )
    return tuple(dict.fromkeys(names)) or None


def _kinds(values: Sequence[str] | None) -> tuple[str, ...]:
    if values is None:
        return tuple(CONTROLLERS)
    try:
        kinds = resolve_kinds(_split(values))
    except UnknownKind as err:
        raise OptionsError(f"--enable: {err}") from err
    if not kinds:
        raise OptionsError(f"--enable is empty: name at least one of {', '.join(CONTROLLERS)}")
    return kinds


def _gang_scheduler(choice: str | None, name: str | None) -> str:
    """The settings' gang_scheduler: "" (off), "volcano", or the scheduler-plugins scheduler's name."""
    if name is not None and not _DNS_SUBDOMAIN.match(name):
        raise OptionsError(f"--gang-scheduler-name={name!r}: not a scheduler name (a DNS subdomain)")
    if choice is None:  # Kubeflow's single flag: the name decides
        return name or ""
    if choice == GangChoice.NONE:
        if name:
            raise OptionsError("--gang-scheduler-name needs gang scheduling: drop it or set --gang-scheduler")
        return ""
    if choice == GangChoice.VOLCANO:
        if name not in (None, VOLCANO):
            raise OptionsError(f"--gang-scheduler-name={name}: Volcano's scheduler is named {VOLCANO}")
        return VOLCANO
    if name == VOLCANO:
        raise OptionsError(
            "--gang-scheduler-name=volcano with scheduler-plugins: use --gang-scheduler volcano"
        )
    return name or SCHEDULER_PLUGINS_DEFAULT_NAME


_SETTINGS_FLAGS = {
    "cluster_domain": "--cluster-domain",
    "pytorch_init_image": "--pytorch-init-container-image",
    "pytorch_init_max_tries": "--pytorch-init-container-max-tries",
}


def _settings(args: argparse.Namespace) -> ControllerSettings:
    values: dict[str, Any] = {
        "cluster_domain": args.cluster_domain.strip().rstrip("."),
        "pytorch_init_image": args.pytorch_init_container_image.strip(),
        "pytorch_init_max_tries": args.pytorch_init_container_max_tries,
    }
    for key, flag in _SETTINGS_FLAGS.items():  # one at a time, so the message names the right flag
        try:
            _controller_settings(**{key: values[key]})
        except ValueError as err:
            raise OptionsError(f"{flag}: {err}") from err
    from kubetrain.common.job.services import ServiceMode  # noqa: PLC0415  (see the imports)

    gang = _gang_scheduler(args.gang_scheduler, args.gang_scheduler_name)
    mode = ServiceMode(args.service_mode)
    return _controller_settings(gang_scheduler=gang, service_mode=mode, **values)


def _election(args: argparse.Namespace, env: dict[str, str]) -> LeaderElectionConfig:
    from kubetrain.common.leader import LeaderElectionConfig, default_identity  # noqa: PLC0415

    namespace = args.leader_election_namespace or env.get("POD_NAMESPACE") or _in_cluster_namespace()
    if not namespace:
        raise OptionsError(
            "--leader-election-namespace is needed outside a cluster: name the namespace of the Lease "
            "(or run a single replica with --no-leader-elect)"
        )
    if not _DNS_LABEL.match(namespace):
        raise OptionsError(f"--leader-election-namespace={namespace!r}: not a namespace name")
    if not _DNS_SUBDOMAIN.match(args.leader_election_id):
        raise OptionsError(f"--leader-election-id={args.leader_election_id!r}: not a valid Lease name")
    try:
        return LeaderElectionConfig(
            namespace=namespace,
            name=args.leader_election_id,
            identity=default_identity(),
            lease_duration=args.leader_election_lease_duration,
            renew_deadline=args.leader_election_renew_deadline,
            retry_period=args.leader_election_retry_period,
        )
    except ValueError as err:
        raise OptionsError(
            f"--leader-election-retry-period/-renew-deadline/-lease-duration: {err}; "
            "each must be shorter than the next"
        ) from err


def _in_cluster_namespace() -> str:
    try:
        return SERVICE_ACCOUNT_NAMESPACE_FILE.read_text().strip()
    except OSError:
        return ""


def _progress(args: argparse.Namespace, env: dict[str, str]) -> ProgressOptions | None:
    address = parse_address("--progress-bind-address", args.progress_bind_address)
    if address is None:
        return None
    try:
        return progress_options(
            address,
            url=args.progress_url,
            audience=args.progress_audience,
            interval=args.progress_interval,
            max_connections=args.progress_max_connections,
            idle_timeout=args.progress_idle_timeout,
            namespace=env.get("POD_NAMESPACE") or _in_cluster_namespace(),
            domain=args.cluster_domain.strip().rstrip("."),
        )
    except ValueError as err:
        raise OptionsError(str(err)) from err
