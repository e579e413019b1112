"""`kubetrain wait [KIND] NAME`: block until the job reaches a condition (Succeeded by default).

For scripts, the exit code is the answer: 0 reached, 1 the job failed (or cannot reach it any more), 3
timed out, 4 cluster trouble. While waiting, a terminal shows a live bar of the job's training progress
(state, percentage, ETA, loss, time waited); anything else (CI logs, pipes) gets one plain line per change
(`kubetrain.cli.progressview`).
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from kubetrain.cli import jobargs
from kubetrain.cli.jobargs import add_cluster_options, parse_target, run_guarded
from kubetrain.cli.output import resource_name
from kubetrain.cli.progressview import JobBars, progress_line
from kubetrain.client.errors import InvalidArgumentError
from kubetrain.client.jobs import condition, job_state

__all__ = ["parse_duration", "progress_line", "register", "run"]

_DURATION = re.compile(r"^(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?$")


def parse_duration(text: str) -> float:
    """Seconds from `90`, `30s`, `10m`, `1h30m` or `1.5h`; argparse reports anything else."""
    value = text.strip()
    try:
        return float(value)
    except ValueError:
        pass
    match = _DURATION.match(value)
    if not value or match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration; write it like 90s, 10m or 1h30m")
    hours, minutes, seconds = (float(part) if part else 0.0 for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `wait` sub-command."""
    parser = subparsers.add_parser(
        "wait",
        help="wait until a job succeeds (or reaches another condition)",
        description="Wait until a job reaches a condition; the exit code says how it ended.",
    )
    parser.add_argument("words", nargs="+", metavar="[KIND] NAME", help="the job (KIND/NAME works too)")
    parser.add_argument(
        "--for",
        dest="conditions",
        action="append",
        metavar="CONDITION",
        help="condition to wait for: Succeeded (default), Running, Failed, ...; repeat or comma-separate "
        "for any of several (kubectl's condition=Succeeded works too)",
    )
    parser.add_argument(
        "--timeout", type=parse_duration, default=600.0, help="give up after this long (default: 10m)"
    )
    parser.add_argument(
        "--poll", type=parse_duration, default=15.0, help="read the job at least this often (default: 15s)"
    )
    add_cluster_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Wait for the job; returns the exit code."""
    return run_guarded("wait", lambda: _wait(args))


def _conditions(values: list[str] | None) -> list[str]:
    found = []
    for value in values or ["Succeeded"]:
        for item in value.split(","):
            word = item.strip().removeprefix("condition=")
            if word:
                found.append(word)
    return found


def _wait(args: argparse.Namespace) -> int:
    target = parse_target(args.words)
    if len(target.names) != 1:
        raise InvalidArgumentError("wait takes exactly one job NAME (optionally after its KIND)")
    progress = JobBars(sys.stderr, tty=sys.stderr.isatty())
    client = jobargs.new_client(args)
    try:
        job = client.wait_for_job_conditions(
            target.names[0],
            target.kind,
            args.namespace,
            expected=_conditions(args.conditions),
            timeout=args.timeout,
            polling_interval=args.poll,
            callback=progress,
        )
    finally:
        progress.close()
        client.close()
    met = [c for c in _conditions(args.conditions) if condition(job, c)]
    print(f"{resource_name(job)} condition met: {met[0] if met else job_state(job)}")
    return 0
