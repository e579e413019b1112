"""`kubetrain get [KIND] [NAME]`: list training jobs (every kind at once), or show one.

Like `kubectl get`, with the kinds merged: `kubetrain get` lists every TFJob, PyTorchJob, MPIJob, JAXJob,
XGBoostJob and PaddleJob of the namespace in one table, `kubetrain get pytorchjobs` only one kind, `kubetrain
get mnist` the job named mnist whatever its kind. `-o yaml|json|name|wide` as kubectl; `-A` for every
namespace.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kubetrain.api import AnyJob
from kubetrain.cli import jobargs
from kubetrain.cli.jobargs import Target, add_cluster_options, parse_target, run_guarded
from kubetrain.cli.output import FORMATS, dump, job_table
from kubetrain.client.errors import InvalidArgumentError, JobNotFoundError
from kubetrain.client.kinds import kind_spellings, suggest

__all__ = ["register", "run"]

_EXAMPLES = """\
examples:
  kubetrain get                      every training job of the namespace
  kubetrain get pytorchjobs -A       every PyTorchJob of every namespace
  kubetrain get mnist -o yaml        the job named mnist, whatever its kind
  kubetrain get tfjob/mnist -o name  tfjob.kubeflow.org/mnist
"""


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
    client = jobargs.new_client(args)
    try:
        if target.names:
            jobs = [_one(client, target, args.namespace)]
        else:
            jobs = client.list_jobs(target.kind, args.namespace, all_namespaces=args.all_namespaces)
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
