"""The Go operators' command-line flags, as `kubetrain operator` takes them: the one table of them all.

A cluster moving from Kubeflow's training-operator v1.9 or mpi-operator v0.8 to kubetrain keeps its
Deployment's arguments. Each flag either of them defines (read from their `cmd/` sources and `--help`;
`docs/migrating.md` prints this table) is one `KubeflowFlag` row:

- `ALIAS`: the same meaning as a kubetrain flag; its value is checked and used as that flag's.
- `CONVERT`: the same setting written another way (mpi-operator's `--monitoring-port 9090` is
  `--metrics-bind-address :9090`); `convert` turns the value into the kubetrain flag's.
- `NO_OP`: nothing to do here, because kubetrain always behaves as the flag asks (logs go to stderr).
- `REFUSED`: no meaning here; the flag fails in one line that says what to use instead.

Both spellings Go's flag package takes are accepted: `--name` and `-name`, with the value after `=` or
as the next word (bool flags only after `=`). None shows in `--help`, whose epilog points here.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, final

from kubetrain import __version__

__all__ = [
    "FLAGS",
    "MPI_OPERATOR",
    "TRAINING_OPERATOR",
    "Handling",
    "KubeflowFlag",
    "add_kubeflow_flags",
    "markdown_table",
    "refusals",
]

TRAINING_OPERATOR = "training-operator v1.9.4"
MPI_OPERATOR = "mpi-operator v0.8.0"
_REFUSED_DEST = "kubeflow_refused"
"""Where refusals collect; `options_from_args` reports the first one before anything else."""


class Handling(StrEnum):
    ALIAS = "alias"
    CONVERT = "convert"
    NO_OP = "no-op"
    REFUSED = "refused"


def _port_address(text: str) -> str:
    """mpi-operator's `--monitoring-port N` (0: off) as a `--metrics-bind-address`."""
    port = int(text)  # argparse reports a ValueError as an invalid value of the flag
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port (0 to 65535, 0 disables metrics)")
    return "0" if port == 0 else f":{port}"


def _zap_encoder(text: str) -> str:
    formats = {"json": "json", "console": "text"}
    if text not in formats:
        raise argparse.ArgumentTypeError("write json or console (kubetrain's --log-format json or text)")
    return formats[text]


def _zap_level(text: str) -> str:
    """zap's levels (and its positive integers, more verbose than debug) as a `--log-level`."""
    levels = {"debug": "debug", "info": "info", "error": "error", "panic": "error"}
    if text in levels:
        return levels[text]
    if text.isdigit() and int(text) > 0:
        return "debug"
    raise argparse.ArgumentTypeError("write debug, info, error, panic or an integer > 0")


def _klog_verbosity(text: str) -> str:
    """klog's `-v N`: 0 is info, anything more detailed is kubetrain's debug."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError("write a whole number >= 0 (0: info, more: debug)")
    return "info" if int(text) == 0 else "debug"


@final
@dataclass(frozen=True, slots=True)
class KubeflowFlag:
    """One flag of a Go operator and what `kubetrain operator` does with it."""

    operator: str
    name: str
    """Without dashes, spelt as the Go operator spells it."""
    handling: Handling
    kubetrain: str
    """The kubetrain flag it sets or stands for ("" when none does)."""
    note: str
    """ALIAS/CONVERT/NO_OP: how the meaning carries over; REFUSED: the whole error after the flag's name."""
    boolean: bool = False
    convert: Callable[[str], str] | None = None


def _row(
    operator: str, name: str, handling: Handling, kubetrain: str, note: str, **extra: Any
) -> KubeflowFlag:
    return KubeflowFlag(operator, name, handling, kubetrain, note, **extra)


_TO, _MPI = TRAINING_OPERATOR, MPI_OPERATOR
_A, _C, _N, _R = Handling.ALIAS, Handling.CONVERT, Handling.NO_OP, Handling.REFUSED
_NO_WEBHOOK = "kubetrain runs no admission webhook (the CRDs' schema and CEL rules validate jobs): drop it"
_KLOG_FORMAT = (
    "klog's log layout; kubetrain writes one line per record to stderr (--log-format json|text): drop it"
)
_KLOG_FILES = "klog's log files; kubetrain logs to stderr only, collected from the pod: drop it"

FLAGS: tuple[KubeflowFlag, ...] = (
    # training-operator v1.9.4: cmd/training-operator.v1/main.go, controller-runtime's --kubeconfig, zap's
    _row(_TO, "kubeconfig", _A, "--kubeconfig", "the same"),
    _row(_TO, "metrics-bind-address", _A, "--metrics-bind-address", "the same ([HOST]:PORT, 0 disables)"),
    _row(_TO, "health-probe-bind-address", _A, "--health-probe-bind-address", "the same"),
    _row(_TO, "leader-elect", _A, "--leader-elect", "the same (its default false)", boolean=True),
    _row(_TO, "leader-election-id", _A, "--leader-election-id", "the Lease's name"),
    _row(_TO, "enable-scheme", _A, "--enable", "kinds to serve, repeated; any case"),
    _row(_TO, "gang-scheduler-name", _A, "--gang-scheduler-name", "volcano, or a scheduler-plugins name"),
    _row(_TO, "namespace", _A, "--namespace", "one namespace watched (kubetrain takes several)"),
    _row(_TO, "controller-threads", _A, "--workers", "workers per kind (its default 1, kubetrain's 5)"),
    _row(_TO, "kube-api-qps", _A, "--qps", "client QPS (its default 20, kubetrain's 50)"),
    _row(_TO, "kube-api-burst", _A, "--burst", "client burst (its default 30, kubetrain's 100)"),
    _row(_TO, "pytorch-init-container-image", _A, "--pytorch-init-container-image", "the same"),
    _row(_TO, "pytorch-init-container-max-tries", _A, "--pytorch-init-container-max-tries", "the same"),
    _row(_TO, "pytorch-init-container-template-file", _R, "--pytorch-init-container-image",
         "kubetrain renders the init container itself; set its image with --pytorch-init-container-image "
         "and its tries with --pytorch-init-container-max-tries"),
    _row(_TO, "mpi-kubectl-delivery-image", _R, "",
         "that image serves kubeflow.org/v1 MPIJobs, which kubetrain does not run; convert them to v2beta1 "
         "with `kubetrain convert` (its launcher needs no kubectl delivery): drop it"),
    _row(_TO, "webhook-server-port", _R, "", _NO_WEBHOOK),
    _row(_TO, "webhook-service-name", _R, "", _NO_WEBHOOK),
    _row(_TO, "webhook-secret-name", _R, "", _NO_WEBHOOK),
    _row(_TO, "zap-encoder", _C, "--log-format", "json is json, console is text", convert=_zap_encoder),
    _row(_TO, "zap-log-level", _C, "--log-level", "debug, info, error; panic is error, an integer debug",
         convert=_zap_level),
    _row(_TO, "zap-devel", _R, "--log-format",
         "kubetrain has no development mode: use --log-format text --log-level debug for what it set, "
         "or keep the defaults (json, info: its production mode)"),
    _row(_TO, "zap-stacktrace-level", _R, "",
         "kubetrain logs a traceback with every error record and never for the others: drop it"),
    _row(_TO, "zap-time-encoding", _R, "--log-format",
         "kubetrain's JSON lines carry RFC 3339 UTC times (the `time` key): drop it"),
    # mpi-operator v0.8.0: cmd/mpi-operator/app/options/options.go and klog's flags
    _row(_MPI, "kubeConfig", _A, "--kubeconfig", "the same"),
    _row(_MPI, "master", _R, "--kubeconfig",
         "kubetrain takes the API server's URL from the kubeconfig: pass --kubeconfig (and --context) "
         "naming a cluster with that server"),
    _row(_MPI, "namespace", _A, "--namespace", "one namespace watched (kubetrain takes several)"),
    _row(_MPI, "threadiness", _A, "--workers", "workers per kind (its default 2, kubetrain's 5)"),
    _row(_MPI, "version", _C, "--version", "prints kubetrain's version and exits"),
    _row(_MPI, "monitoring-port", _C, "--metrics-bind-address", "PORT is :PORT, 0 disables (its default)",
         convert=_port_address),
    _row(_MPI, "gang-scheduling", _A, "--gang-scheduler-name", "volcano, or a scheduler-plugins name"),
    _row(_MPI, "lock-namespace", _A, "--leader-election-namespace",
         "the Lease's namespace (the mpi-operator always elects; so does kubetrain by default)"),
    _row(_MPI, "kube-api-qps", _A, "--qps", "client QPS (its default 5, kubetrain's 50)"),
    _row(_MPI, "kube-api-burst", _A, "--burst", "client burst (its default 10, kubetrain's 100)"),
    _row(_MPI, "controller-queue-rate-limit", _R, "--qps",
         "kubetrain's work queues retry at client-go's fixed 10/s (this flag's default) and bound the API "
         "requests with --qps: drop it, or set --qps"),
    _row(_MPI, "controller-queue-burst", _R, "--burst",
         "kubetrain's work queues retry with client-go's fixed burst of 100 (this flag's default) and bound "
         "the API requests with --burst: drop it, or set --burst"),
    _row(_MPI, "cluster-domain", _A, "--cluster-domain", "the same (hostfile and TF_CONFIG names)"),
    _row(_MPI, "logtostderr", _N, "", "kubetrain always logs to stderr; =false (log files) is refused",
         boolean=True),
    _row(_MPI, "alsologtostderr", _N, "", "kubetrain always logs to stderr", boolean=True),
    _row(_MPI, "v", _C, "--log-level", "0 is info, more is debug", convert=_klog_verbosity),
    _row(_MPI, "vmodule", _R, "--log-level", "kubetrain has no per-file verbosity: use --log-level debug"),
    _row(_MPI, "add_dir_header", _R, "", _KLOG_FORMAT, boolean=True),
    _row(_MPI, "skip_headers", _R, "", _KLOG_FORMAT, boolean=True),
    _row(_MPI, "skip_log_headers", _R, "", _KLOG_FILES, boolean=True),
    _row(_MPI, "one_output", _R, "", _KLOG_FILES, boolean=True),
    _row(_MPI, "log_backtrace_at", _R, "", "kubetrain logs a traceback with every error record: drop it"),
    _row(_MPI, "log_dir", _R, "", _KLOG_FILES),
    _row(_MPI, "log_file", _R, "", _KLOG_FILES),
    _row(_MPI, "log_file_max_size", _R, "", _KLOG_FILES),
    _row(_MPI, "stderrthreshold", _R, "", _KLOG_FILES),
)  # fmt: skip


class _Refuse(argparse.Action):
    """Records that a flag with no meaning here was given (reported by `options_from_args`, in one line)."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, *, note: str, boolean: bool, **kw: Any
    ) -> None:
        super().__init__(option_strings, dest, nargs="?" if boolean else None, **kw)
        self.note = note

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        refused = [*(getattr(namespace, _REFUSED_DEST, None) or ())]
        refused.append(f"{option_string}: {self.note}")
        setattr(namespace, _REFUSED_DEST, refused)


class _StderrBool(argparse.Action):
    """klog's `-logtostderr`/`-alsologtostderr`: true is what kubetrain does; `-logtostderr=false` asks
    for log files, which it refuses."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", **kw)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        text = "true" if values is None else str(values).strip().lower()
        if text not in ("true", "false", "1", "0"):
            parser.error(f"{option_string}={values}: write {option_string}=true or =false")
        if option_string and option_string.lstrip("-") == "logtostderr" and text in ("false", "0"):
            refused = [*(getattr(namespace, _REFUSED_DEST, None) or ())]
            refused.append(f"{option_string}=false: {_KLOG_FILES}")
            setattr(namespace, _REFUSED_DEST, refused)


def _spellings(flag: KubeflowFlag, taken: set[str]) -> list[str]:
    """`--name` and `-name`, less those kubetrain's own flags already define (its `--namespace`...)."""
    return [s for s in (f"--{flag.name}", f"-{flag.name}") if s not in taken]


def add_kubeflow_flags(parser: argparse.ArgumentParser) -> None:
    """Add every row of `FLAGS` to `parser`, hidden from `--help`; call after kubetrain's own flags."""
    taken = set(parser._option_string_actions)
    by_flag = {s: a for a in parser._actions for s in a.option_strings}
    group = parser.add_argument_group("Kubeflow operators' flags (docs/migrating.md)")
    for flag in FLAGS:
        spellings = _spellings(flag, taken)
        if not spellings:
            continue
        taken.update(spellings)
        common: dict[str, Any] = {"help": argparse.SUPPRESS, "default": argparse.SUPPRESS}
        if flag.handling is Handling.REFUSED:
            group.add_argument(*spellings, dest=_REFUSED_DEST, action=_Refuse, note=flag.note,
                               boolean=flag.boolean, **common)  # fmt: skip
        elif flag.handling is Handling.NO_OP:
            group.add_argument(*spellings, dest="kubeflow_no_op", action=_StderrBool, **common)
        elif flag.kubetrain == "--version":
            group.add_argument(*spellings, action="version", version=f"kubetrain {__version__}",
                               help=argparse.SUPPRESS)  # fmt: skip
        else:
            _add_mapped(group, flag, spellings, by_flag[flag.kubetrain], common)


def _add_mapped(
    group: argparse._ArgumentGroup,
    flag: KubeflowFlag,
    spellings: list[str],
    target: argparse.Action,
    common: dict[str, Any],
) -> None:
    """A flag that sets `target`'s destination: with `target`'s own action and type, or `flag.convert`."""
    if flag.convert is not None:
        group.add_argument(*spellings, dest=target.dest, type=flag.convert, metavar="VALUE", **common)
        return
    kwargs: dict[str, Any] = {"dest": target.dest, "action": type(target), **common}
    if target.nargs is None:  # a value follows; BoolFlag sets its own nargs and metavar
        kwargs["metavar"] = target.metavar
    if target.type is not None:
        kwargs["type"] = target.type
    group.add_argument(*spellings, **kwargs)


def refusals(args: argparse.Namespace) -> list[str]:
    """The refused flags a parsed command line gave, each as its one-line error."""
    return list(getattr(args, _REFUSED_DEST, None) or ())


def markdown_table() -> str:
    """`FLAGS` as docs/migrating.md prints them: one table per operator (a unit test keeps them equal)."""
    lines: list[str] = []
    for operator in dict.fromkeys(flag.operator for flag in FLAGS):
        lines += [f"#### {operator}", "", "| flag | handling | kubetrain | note |", "|---|---|---|---|"]
        for flag in (f for f in FLAGS if f.operator == operator):
            kubetrain = f"`{flag.kubetrain}`" if flag.kubetrain else ""
            lines.append(f"| `--{flag.name}` | {flag.handling} | {kubetrain} | {flag.note} |")
        lines.append("")
    return "\n".join(lines)
