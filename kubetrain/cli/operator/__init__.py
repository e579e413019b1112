"""`kubetrain operator`: run the operator (the controllers of every kind it serves) until SIGTERM.

This package is the command line of the built-in kinds' operator. The flags every operator has are the
library's (`kubetrain.common.cmdline`, with this command's defaults); this module adds the ones of the
built-in kinds, groups them all as a platform engineer looks for them, and `options` validates them into
one `OperatorOptions` value (a bad flag is one message naming it and the fix, exit 2, before anything
connects). `app` builds and runs the operator from it.

Kubeflow's training-operator v1.9 and mpi-operator v0.8 flags are accepted where they mean something here
(`--kube-api-qps`, `--enable-scheme`, `--controller-threads`, `--threadiness`, `--monitoring-port`...), so
an existing Deployment's arguments carry over; the others fail naming kubetrain's equivalent. The table
of them is `kubetrain.cli.operator.kubeflow.FLAGS` (docs/migrating.md).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubetrain.cli.exitcodes import ExitCode
from kubetrain.cli.operator.kubeflow import add_kubeflow_flags
from kubetrain.cli.operator.options import (
    COMMON_DEFAULTS,
    DEFAULTS,
    SERVICE_MODES,
    GangChoice,
    OptionsError,
    options_from_args,
)
from kubetrain.common.cmdline import Section, add_operator_flags
from kubetrain.controllers.registry import CONTROLLERS

__all__ = ["build_operator_parser", "register", "run"]

_DESCRIPTION = """\
Run the kubetrain operator: the controllers of TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob
(kubeflow.org/v1) and MPIJob (kubeflow.org/v2beta1). It watches the jobs, creates their pods and Services,
and writes their status, until SIGTERM or Ctrl-C, which let in-flight work finish (--shutdown-grace) and
release the leader Lease.

Credentials: in a cluster, the pod's ServiceAccount; elsewhere --kubeconfig, else $KUBECONFIG, else
~/.kube/config. The operator needs the CRDs installed (manifests/crds) and the rights of
manifests/base/rbac (or overlays/namespaced with --namespace); it checks both when it starts.
"""

_EPILOG = """\
endpoints:
  /healthz   200 while the operator's event loop runs; 500 once it has not for 5 s (liveness)
  /readyz    200 once the caches are filled, leader or standby (readiness)
  /metrics   Prometheus metrics: jobs created/succeeded/failed/restarted, reconciles, work queues, leader

exit codes:
  0    stopped by SIGTERM/SIGINT after a clean drain
  1    the operator failed: CRDs missing, lost its leader Lease, or an unexpected error
  2    bad flags; nothing was started
  4    the API server was unreachable, or refused the operator's credentials or rights

examples:
  kubetrain operator                                    every kind, every namespace, leader election on
  kubetrain operator --namespace team-a --namespace team-b --enable pytorchjob,tfjob
  kubetrain operator --kubeconfig ~/.kube/dev --no-leader-elect --log-format text --log-level debug
  kubetrain operator --gang-scheduler volcano --cluster-domain cluster.local

Kubeflow training-operator v1.9 and mpi-operator v0.8 flags (--kube-api-qps, --enable-scheme,
--controller-threads, --threadiness, --monitoring-port, --lock-namespace, -v...) are taken where they have
a meaning here; the others fail naming kubetrain's equivalent. The table: docs/migrating.md.
"""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `operator` sub-command."""
    parser = subparsers.add_parser(
        "operator",
        help="run the operator (the job controllers) until SIGTERM",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=_HelpFormatter,
    )
    _add_flags(parser)
    parser.set_defaults(handler=run)


def build_operator_parser() -> argparse.ArgumentParser:
    """A stand-alone parser with the operator's flags (for tests and for checking manifests' args)."""
    parser = argparse.ArgumentParser(
        prog="kubetrain operator", description=_DESCRIPTION, epilog=_EPILOG, formatter_class=_HelpFormatter
    )
    _add_flags(parser)
    return parser


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the description's and epilog's line breaks; a wider column for the long flag names."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=40, width=110)


def _add_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group
    sections = {
        Section.CONNECTION: group("connection to the API server"),
        Section.SCOPE: group("what the operator serves"),
    }
    jobs = group("how jobs are run")
    sections[Section.FAILURES] = jobs
    sections[Section.ELECTION] = group("leader election (one active replica at a time)")
    sections[Section.ENDPOINTS] = group("health and metrics endpoints")
    sections[Section.LOGGING] = group("logging and shutdown")
    sections[Section.KUEUE] = group("Kueue (docs/ecosystem.md)")
    add_operator_flags(parser, defaults=COMMON_DEFAULTS, sections=sections)
    _connection_flags(sections[Section.CONNECTION])
    _scope_flags(sections[Section.SCOPE])
    _job_flags(jobs)
    _progress_flags(sections[Section.ENDPOINTS])
    _shutdown_flags(sections[Section.LOGGING])
    add_kubeflow_flags(parser)


def _connection_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--qps",
        type=float,
        default=DEFAULTS.qps,
        metavar="N",
        help="steady requests per second to the API server, client-side (default: %(default)g)",
    )
    group.add_argument(
        "--burst",
        type=int,
        default=DEFAULTS.burst,
        metavar="N",
        help="requests allowed in a burst above --qps (default: %(default)d)",
    )


def _scope_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--enable",
        action="append",
        metavar="KINDS",
        help=f"kinds to serve, comma-separated or repeated, any case (default: {','.join(CONTROLLERS)})",
    )
    group.add_argument(
        "--child-event-delay",
        type=float,
        default=DEFAULTS.child_event_delay,
        metavar="SECONDS",
        help="reconcile a job this long after a change of its pods or Services, so that changes coming "
        "together cost one reconcile and one status write; a change that completes what the job waits "
        "for (the pods it just created or deleted) is never delayed; 0: at once (default: %(default)g)",
    )


def _job_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--cluster-domain",
        default="",
        metavar="DOMAIN",
        help="DNS suffix of Service names in TF_CONFIG and MPI hostfiles, e.g. cluster.local "
        "(default: none; names end in .svc, which pods resolve on any cluster)",
    )
    group.add_argument(
        "--service-mode",
        choices=SERVICE_MODES,
        default=SERVICE_MODES[0],
        help="how TFJob and PyTorchJob pods get DNS names: 'job', one headless Service per job, pods named "
        "<pod>.<job>; 'replica', a Service per replica named like its pod, as Kubeflow's operator does, "
        "for code that relies on those names (default: %(default)s; MPIJobs always have the job's)",
    )
    group.add_argument(
        "--pytorch-init-container-image",
        "--init-container-image",
        default=DEFAULTS.pytorch_init_image,
        metavar="IMAGE",
        help="image of the init container that holds PyTorch workers until the master's name resolves; "
        "needs nslookup (default: %(default)s)",
    )
    group.add_argument(
        "--pytorch-init-container-max-tries",
        type=int,
        default=DEFAULTS.pytorch_init_max_tries,
        metavar="N",
        help="lookups (2 s apart) before that init container gives up (default: %(default)d)",
    )
    group.add_argument(
        "--gang-scheduler",
        choices=[str(c) for c in GangChoice],
        help="create a PodGroup per job so that all its pods start together or none does "
        "(default: none, or what --gang-scheduler-name implies)",
    )
    group.add_argument(
        "--gang-scheduler-name",
        metavar="NAME",
        help="scheduler name put on the pods; alone, Kubeflow's meaning: volcano selects Volcano, any "
        "other name scheduler-plugins (default with scheduler-plugins: scheduler-plugins-scheduler)",
    )


def _progress_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--progress-bind-address",
        default=DEFAULTS.progress_address,
        metavar="[HOST]:PORT",
        help="serves the training-progress endpoint (KEP-2779) over HTTPS, e.g. :8443; new jobs' pods then "
        'report to it unless annotated kubetrain.io/progress: "false"; 0 disables (default: %(default)s)',
    )
    group.add_argument(
        "--progress-url",
        metavar="https://HOST[:PORT]",
        help="how pods reach the endpoint (default: https://kubetrain-operator.<namespace>.svc:<port>, the "
        "operator's Service in its own namespace)",
    )
    group.add_argument(
        "--progress-audience",
        default=DEFAULTS.progress_audience,
        help="the prefix of each job's token audience, <prefix>/<group>/<version>/namespaces/<ns>/<plural>/"
        "<name>/status, which the endpoint requires (default: %(default)s)",
    )
    group.add_argument(
        "--progress-interval",
        type=float,
        default=DEFAULTS.progress_interval,
        metavar="SECONDS",
        help="at most one status write of progress per job per interval; longer when more than 15 jobs "
        "a second would be written (500 jobs: 33 s), and pods are told when to report next "
        "(default: %(default)g)",
    )
    group.add_argument(
        "--progress-max-connections",
        type=int,
        default=DEFAULTS.progress_max_connections,
        metavar="N",
        help="connections the endpoint serves at once; each reporting pod keeps one open, so set it above "
        "the number of reporting pods (default: %(default)d)",
    )
    group.add_argument(
        "--progress-idle-timeout",
        type=float,
        default=DEFAULTS.progress_idle_timeout,
        metavar="SECONDS",
        help="a pod's kept connection is closed after this long without a report; longer than the "
        "write interval (default: %(default)g)",
    )


def _shutdown_flags(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--shutdown-grace",
        type=float,
        default=DEFAULTS.shutdown_grace,
        metavar="SECONDS",
        help="on SIGTERM, how long in-flight reconciles may take before they are cancelled; keep it below "
        "the pod's terminationGracePeriodSeconds (default: %(default)g)",
    )


def run(args: argparse.Namespace) -> int:
    """Validate the flags, then run the operator until it is stopped; returns the exit code."""
    try:
        options = options_from_args(args)
    except OptionsError as err:
        print(f"kubetrain operator: {err}", file=sys.stderr)
        return int(ExitCode.USAGE)
    # Imported here: `kubetrain --help` and the other commands need none of the operator's machinery.
    from kubetrain.cli.operator.app import run_operator  # noqa: PLC0415

    return run_operator(options)
