"""The validated configuration of `kubetrain operator`, and the rules that turn its flags into it.

The flags every operator has are checked by the library's rules (`kubetrain.common.flagvalues`), the
built-in kinds' own flags here. Every check happens before anything connects, so that a typo is one line
on stderr naming the flag and the fix (exit 2), never a traceback from deep inside the operator. The
result, `OperatorOptions`, is a frozen value that `kubetrain.cli.operator.app` runs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, final

from kubetrain.cli.operator.kubeflow import refusals
from kubetrain.cli.operator.progress import ProgressOptions, progress_options
from kubetrain.common.cmdline import FlagDefaults
from kubetrain.common.flagvalues import (
    DNS_SUBDOMAIN,
    Address,
    BoolFlag,
    FlagError,
    leader_election,
    own_namespace,
    parse_address,
    parse_namespaces,
    split_list,
)
from kubetrain.common.gangrestart import GangRestartMode
from kubetrain.common.kueue.integration import AUTO, DEFAULT_KUEUE_CONFIG, check_config_name, parse_setting
from kubetrain.common.logformat import LogFormat
from kubetrain.controllers.registry import CONTROLLERS, UnknownKind, resolve_kinds

if TYPE_CHECKING:  # imported where used: every `kubetrain` command builds this parser, few run it
    from kubetrain.common.leader import LeaderElectionConfig
    from kubetrain.controllers.settings import ControllerSettings

__all__ = [
    "COMMON_DEFAULTS",
    "DEFAULTS",
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

SCHEDULER_PLUGINS_DEFAULT_NAME = "scheduler-plugins-scheduler"
"""The scheduler name scheduler-plugins' "as a second scheduler" install registers."""
VOLCANO = "volcano"
SERVICE_MODES = ("job", "replica")
"""`--service-mode` values, the default first: `kubetrain.common.job.ServiceMode`'s (a unit test keeps them
equal), spelled out so that building the parser imports no controller code."""

OptionsError = FlagError
"""A flag has a bad value; the message names the flag and the fix (the library's `FlagError`)."""


class GangChoice(StrEnum):
    NONE = "none"
    VOLCANO = "volcano"
    SCHEDULER_PLUGINS = "scheduler-plugins"


@final
@dataclass(frozen=True, slots=True)
class _FlagDefaults:
    """The defaults of the built-in kinds' own flags, as used."""

    qps: float = 50.0
    burst: int = 100
    child_event_delay: float = 0.25
    pytorch_init_image: str = "alpine:3.10"
    pytorch_init_max_tries: int = 100
    """The two as `ControllerSettings` defaults them (a unit test keeps them equal)."""
    shutdown_grace: float = 20.0
    progress_address: str = "0"
    progress_audience: str = "kubetrain-progress"
    progress_interval: float = 10.0
    progress_max_connections: int = 1024
    progress_idle_timeout: float = 120.0


DEFAULTS = _FlagDefaults()
COMMON_DEFAULTS = FlagDefaults(
    workers=5,
    leader_elect=True,
    lease_name="kubetrain-operator",
    metrics_address=":8080",
    log_format=LogFormat.JSON,
)
"""The flags every operator has, as `kubetrain operator` defaults them (a Deployment's operator)."""


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
    workers: int = COMMON_DEFAULTS.workers
    child_event_delay: float = DEFAULTS.child_event_delay
    settings: ControllerSettings = field(default_factory=_controller_settings)
    leader_election: LeaderElectionConfig | None = None
    health_address: Address | None = ("", 8081)
    metrics_address: Address | None = ("", 8080)
    metrics_secure: bool = True
    """HTTPS, each scrape checked by TokenReview and SubjectAccessReview (controller-runtime's default)."""
    metrics_cert_path: str | None = None
    """A directory with tls.crt and tls.key; None: a self-signed pair made at start."""
    log_format: LogFormat = COMMON_DEFAULTS.log_format
    log_level: str = COMMON_DEFAULTS.log_level
    shutdown_grace: float = DEFAULTS.shutdown_grace
    progress: ProgressOptions | None = None
    """None: no endpoint, and pods get no reporting env."""
    kueue_integration: str = AUTO
    kueue_config: str = DEFAULT_KUEUE_CONFIG
    gang_restart: GangRestartMode = GangRestartMode.AUTO


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
        namespaces=parse_namespaces(args.namespace),
        kinds=_kinds(args.enable),
        workers=int(args.workers),
        child_event_delay=float(args.child_event_delay),
        settings=_settings(args),
        leader_election=_lease(args, env) if args.leader_elect else None,
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
        gang_restart=GangRestartMode(args.gang_restart),
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


def _kinds(values: Sequence[str] | None) -> tuple[str, ...]:
    if values is None:
        return tuple(CONTROLLERS)
    try:
        kinds = resolve_kinds(split_list(values))
    except UnknownKind as err:
        raise OptionsError(f"--enable: {err}") from err
    if not kinds:
        raise OptionsError(f"--enable is empty: name at least one of {', '.join(CONTROLLERS)}")
    return kinds


def _gang_scheduler(choice: str | None, name: str | None) -> str:
    """The settings' gang_scheduler: "" (off), "volcano", or the scheduler-plugins scheduler's name."""
    if name is not None and not DNS_SUBDOMAIN.match(name):
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


def _lease(args: argparse.Namespace, env: dict[str, str]) -> LeaderElectionConfig:
    """The library's rule; the Lease is named by --leader-election-id, whose default is ours."""
    return leader_election(args, lease_name=args.leader_election_id, environ=env)


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
            namespace=env.get("POD_NAMESPACE") or own_namespace(),
            domain=args.cluster_domain.strip().rstrip("."),
        )
    except ValueError as err:
        raise OptionsError(str(err)) from err
