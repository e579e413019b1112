"""`kubetrain get [KIND] [NAME]`: list training jobs (every kind at once), or show one.

Like `kubectl get`, with the kinds merged: `kubetrain get` lists every TFJob, PyTorchJob, MPIJob, JAXJob,
XGBoostJob and PaddleJob of the namespace in one table, `kubetrain get pytorchjobs` only one kind, `kubetrain
get mnist` the job named mnist whatever its kind. `-o yaml|json|name|wide` as kubectl; `-A` for every
namespace. PROGRESS, ETA and METRIC are the trainer's latest report (`status.trainerStatus`, KEP-2779).

`-w` follows the jobs' training progress: a live bar per job on a terminal, a plain line per change
otherwise (`kubetrain.cli.progressview`). The jobs are read again every `--interval` seconds, until every
job shown has finished (or Ctrl-C).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from kubetrain.api import AnyJob
from kubetrain.cli import jobargs
from kubetrain.cli.jobargs import Target, add_cluster_options, parse_target, run_guarded
from kubetrain.cli.output import FORMATS, dump, job_table
from kubetrain.cli.progressview import JobBars
from kubetrain.cli.wait import parse_duration
from kubetrain.client.errors import InvalidArgumentError, JobNotFoundError
from kubetrain.client.jobs import job_state
from kubetrain.client.kinds import kind_spellings, suggest

__all__ = ["register", "run"]

_EXAMPLES = """\
examples:
  kubetrain get                      every training job of the namespace
  kubetrain get pytorchjobs -A       every PyTorchJob of every namespace
  kubetrain get mnist -o yaml        the job named mnist, whatever its kind
  kubetrain get tfjob/mnist -o name  tfjob.kubeflow.org/mnist
  kubetrain get -w                   live progress bars until every job has finished
"""

_FINISHED = ("Succeeded", "Failed")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `get` sub-command."""
    parser = subparsers.add_parser(
        "get",
        help="list training jobs, or show one",
        description="List TFJobs, PyTorchJobs, MPIJobs, JAXJobs, XGBoostJobs and PaddleJobs (one table), or "
        "show one job.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "words",
        nargs="*",
        metavar="[KIND] [NAME]",
        help="a kind (tfjob, pytorchjobs, mpijob, ...) and/or a job name; KIND/NAME works too",
    )
    parser.add_argument("-o", "--output", choices=FORMATS, help="yaml, json, name, or wide (more columns)")
    parser.add_argument(
        "-w", "--watch", action="store_true", help="follow the jobs' progress until they have all finished"
    )
    parser.add_argument(
        "--interval", type=parse_duration, default=2.0, help="with -w: read the jobs this often (default: 2s)"
    )
    add_cluster_options(parser, all_namespaces=True)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """List or show jobs; returns the exit code."""
    return run_guarded("get", lambda: _get(args))


def _get(args: argparse.Namespace) -> int:
    target = parse_target(args.words)
    if len(target.names) > 1:
        raise InvalidArgumentError(f"get takes one NAME, got {len(target.names)}: {' '.join(target.names)}")
    if target.names and args.all_namespaces:
        raise InvalidArgumentError("a NAME is looked up in one namespace: drop -A and give -n NAMESPACE")
    if args.watch and args.output is not None:
        raise InvalidArgumentError("-w shows live progress, not -o output: drop one of them")
    client = jobargs.new_client(args)
    try:
        jobs = _watch(client, target, args) if args.watch else _read(client, target, args)
        namespace = args.namespace or client.namespace
    finally:
        client.close()
    if not jobs:
        where = "any namespace" if args.all_namespaces else f"namespace {namespace!r}"
        print(f"No training jobs found in {where}.", file=sys.stderr)
        return 0
    if args.output in ("yaml", "json", "name"):
        print(dump(jobs, args.output, single=bool(target.names)))
    else:
        print(job_table(jobs, wide=args.output == "wide", namespaces=args.all_namespaces))
    return 0


def _read(client: jobargs.JobsClient, target: Target, args: argparse.Namespace) -> list[AnyJob]:
    if target.names:
        return [_one(client, target, args.namespace)]
    return client.list_jobs(target.kind, args.namespace, all_namespaces=args.all_namespaces)


def _watch(client: jobargs.JobsClient, target: Target, args: argparse.Namespace) -> list[AnyJob]:
    """Show every version of the jobs until all have finished; returns them as last read."""
    bars = JobBars(sys.stderr, tty=sys.stderr.isatty())
    try:
        while True:
            jobs = _read(client, target, args)
            for job in jobs:
                bars(job)
            if jobs and all(job_state(job) in _FINISHED for job in jobs):
                return jobs
            time.sleep(args.interval)
    finally:
        bars.close()


def _one(client: jobargs.JobsClient, target: Target, namespace: str | None) -> AnyJob:
    name = target.names[0]
    try:
        return client.get_job(name, target.kind, namespace)
    except JobNotFoundError as error:
        hint = suggest(name, kind_spellings()) if target.kind is None else ""
        if not hint:
            raise
        raise JobNotFoundError(
            error.name, error.namespace, error.kinds, hint=f"if you meant a kind{hint.lstrip(';')}"
        ) from None
