"""`kubetrain submit FILE...`: create the jobs of YAML files, all of them or none.

Every document of every file is read and validated first (each problem reported with its file, document
and field); then the API server dry-runs every create (names taken, schema, admission, permissions); only
then is anything created. `--dry-run=client` stops after our validation, `--dry-run=server` after the
server's. `-` reads standard input. Other objects in a file (the PVC a job mounts) are not created here: a
note names each, and `kubectl apply -f FILE` creates the file whole.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kubetrain.api import AnyJob, FieldError, InvalidJobError, other_objects
from kubetrain.api.load import MAX_INPUT_BYTES, decode_job_bytes
from kubetrain.cli import jobargs
from kubetrain.cli.jobargs import add_cluster_options, run_guarded
from kubetrain.cli.output import dump, resource_name
from kubetrain.client.jobs import read_jobs

__all__ = ["load_files", "register", "run"]


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `submit` sub-command."""
    parser = subparsers.add_parser(
        "submit",
        help="validate and create the jobs of YAML files (all or none)",
        description="Validate the jobs of every file, then create them all (if one is invalid: none).",
    )
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="job YAML files (several documents each); - is stdin"
    )
    parser.add_argument(
        "--dry-run",
        choices=("none", "client", "server"),
        default="none",
        help="client: only validate here; server: also let the API server check; none (default): create",
    )
    parser.add_argument("-o", "--output", choices=("name", "yaml", "json"), help="print the created jobs so")
    add_cluster_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Validate and create; returns the exit code."""
    return run_guarded("submit", lambda: _submit(args))


def load_files(paths: Sequence[str]) -> list[AnyJob]:
    """The jobs of every file, validated; one `InvalidJobError` listing the problems of all files.

    A single bad file keeps its own error (`job.yaml: not UTF-8 text ...`: one line for one problem).
    """
    jobs: list[AnyJob] = []
    problems: list[FieldError] = []
    failed: list[InvalidJobError] = []
    for path in paths:
        try:
            jobs.extend(_read(path))
        except InvalidJobError as error:
            failed.append(error)
            problems.extend(
                FieldError(f"{path}: {e.path}" if e.path else path, e.message, e.fix, e.document)
                for e in error.errors
            )
    if len(failed) == 1 and len(paths) == 1:
        raise failed[0]
    if problems:
        raise InvalidJobError(problems, subject="the input")
    return jobs


def _read(path: str) -> list[AnyJob]:
    if path != "-":
        jobs = read_jobs(path)  # refuses what is too large, not UTF-8, too deep or not YAML
        _note_other_objects(path, Path(path).read_text(encoding="utf-8"))
        return jobs
    stream = getattr(sys.stdin, "buffer", None)  # None when stdin was replaced by a text stream
    data = stream.read(MAX_INPUT_BYTES + 1) if stream is not None else sys.stdin.read().encode()
    text = decode_job_bytes(data, "standard input")
    try:
        jobs = read_jobs(text if "\n" in text else text + "\n")
    except InvalidJobError as error:
        raise InvalidJobError(error.errors, subject="standard input") from None
    _note_other_objects(path, text)
    return jobs


def _note_other_objects(path: str, text: str) -> None:
    """Say which objects of the file (a PVC, a PriorityClass...) are left to `kubectl apply`."""
    for obj in other_objects(text):
        name = (obj.get("metadata") or {}).get("name", "")
        print(
            f"kubetrain submit: note: {path}: {obj['kind']} {name!r} is not a job and is not created here; "
            f"create it with `kubectl apply -f {path}` if it does not exist",
            file=sys.stderr,
        )


def _submit(args: argparse.Namespace) -> int:
    jobs = load_files(args.files)
    if args.dry_run == "client":
        _report(jobs, args.output, "valid (client dry run)")
        return 0
    client = jobargs.new_client(args)
    try:
        created = client.create_jobs(jobs, args.namespace, dry_run=args.dry_run == "server")
    finally:
        client.close()
    _report(created, args.output, "created (server dry run)" if args.dry_run == "server" else "created")
    return 0


def _report(jobs: list[AnyJob], output: str | None, verb: str) -> None:
    if output in ("yaml", "json"):
        print(dump(jobs, output, single=len(jobs) == 1))
    elif output == "name":
        print(dump(jobs, "name", single=False))
    else:
        for job in jobs:
            print(f"{resource_name(job)} {verb}")
