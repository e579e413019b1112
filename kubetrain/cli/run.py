"""`kubetrain run --local JOB.yaml`: run a TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob or MPIJob on this
machine, for real.

The job is defaulted and validated as the operator does, then reconciled by the operator's own
controller for its kind against an in-memory API server, while a local kubelet runs every pod's main
container as a process here (`kubetrain.runtimes.local`). The exit code is 0 if and only if the job
Succeeded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from kubetrain.api import AnyJob, InvalidJobError, check_job, load_jobs, load_valid_jobs
from kubetrain.cli.exitcodes import ExitCode
from kubetrain.client.jobs import read_job_file
from kubetrain.controllers.checks import check_operator_rules
from kubetrain.controllers.registry import ControllerUnavailable, load_controller

__all__ = ["register", "run"]

_DESCRIPTION = """\
Run one TFJob, PyTorchJob, JAXJob, XGBoostJob, PaddleJob or MPIJob on this machine, for real, with the
operator's own controller code: the same defaulting, validation, pods, environment, restart policies,
backoffLimit, activeDeadlineSeconds, success policy, cleanPodPolicy and conditions as in a cluster.

Locally, by default (--runtime process):
  - images are ignored: each pod's main container runs its `command` + `args` as a local process, with
    this interpreter's environment first on PATH (so `python` is this venv's); a container without a
    command cannot run (its image's entrypoint is unknown here);
  - init containers and sidecars are skipped; volumes are local directories (configMap, secret,
    downwardAPI, emptyDir; a persistentVolumeClaim is one directory shared by the pods of the run;
    hostPath is the path itself), and paths under a mountPath are rewritten in env and arguments;
  - every replica's address is 127.0.0.1 and every (replica, port) gets its own free local port, so
    several local runs can share the machine; env values and arguments naming replicas are rewritten;
  - GPUs are handed out like a device plugin does: each pod sees only the GPUs of its nvidia.com/gpu
    limit (CUDA_VISIBLE_DEVICES), exclusively, also against other local runs; a pod asking none sees
    none; a job whose requests can never fit this machine is refused before anything starts;
  - MPIJob workers run a stand-in for sshd, and the launcher's mpirun/mpiexec reaches them through a
    local remote-shell agent; MPI stays on the loopback interface;
  - Ctrl-C stops every process of the job (a second Ctrl-C kills at once); nothing is left running.
With --runtime container (podman or docker), each pod's main container runs instead as a container of
its image, on a private network where every pod answers to the DNS names its Services give it, with the
pod's env and volumes (bind mounts) as the operator rendered them, nothing rewritten; MPI workers run
their image's sshd. Images are never pulled: the kubetrain trainer images are built by
`bash hack/images.sh`. Containers and network are removed when the run ends, Ctrl-C included.
Output: each replica's lines prefixed like `kubectl logs --prefix`, the operator's events, and on a
terminal a live per-replica table; the last line states the job's final condition and reason.
"""

_EPILOG = """\
exit codes:
  0    the job Succeeded
  1    the job Failed (or could not be run)
  2    bad command line or invalid job file; nothing was run
  3    --timeout passed; every process was stopped
  130  interrupted (Ctrl-C); every process was stopped
"""


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the `run` sub-command."""
    parser = subparsers.add_parser(
        "run",
        help="run a job locally, for real (--local)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("file", metavar="JOB.yaml", type=Path, help="a file holding exactly one job")
    parser.add_argument("--local", action="store_true", help="run on this machine (required)")
    parser.add_argument(
        "-n", "--namespace", help="namespace of the job when its YAML names none (default: default)"
    )
    parser.add_argument(
        "--timeout", type=_positive, metavar="SECONDS", help="stop everything after this long; exit 3"
    )
    parser.add_argument(
        "--keep-logs", type=Path, metavar="DIR", help="also write each replica's output to DIR/<pod>.log"
    )
    parser.add_argument("--plain", action="store_true", help="plain lines, no live table, even on a terminal")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="run a job whose runPolicy.suspend is true (as Kueue does on admission)",
    )
    parser.add_argument(
        "--grace", type=_non_negative, default=5.0, metavar="SECONDS",
        help="SIGTERM-to-SIGKILL grace of pods without terminationGracePeriodSeconds (default 5)",
    )  # fmt: skip
    parser.add_argument(
        "--linger", type=_non_negative, default=15.0, metavar="SECONDS",
        help="after the job finished, pods its cleanPodPolicy keeps may still run this long (default 15)",
    )  # fmt: skip
    parser.add_argument(
        "--gpus", metavar="LIST",
        help="GPUs the run may use: all (default: every GPU nvidia-smi/NVML finds), none, or indices/UUIDs "
        "such as 0,2",
    )  # fmt: skip
    parser.add_argument(
        "--runtime", choices=("process", "container"), default="process",
        help="run each pod as a local process (default) or as a container of its image",
    )  # fmt: skip
    parser.add_argument(
        "--engine", choices=("podman", "docker"),
        help="container engine of --runtime container (default: podman if on PATH, else docker)",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="also show the operator's own log")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Validate, run, and return the exit code (see the epilog)."""
    if not args.local:
        return _usage("only local runs exist: add --local (to run on a cluster, use `kubetrain submit`)")
    try:
        job = _load(args.file, args.namespace, resume=args.resume)
    except (InvalidJobError, ValueError) as err:
        return _usage(str(err))
    try:
        controller = load_controller(job.KIND)
    except ControllerUnavailable as err:
        print(f"kubetrain run: {err}", file=sys.stderr)
        return ExitCode.FAILED
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="[operator] %(levelname)s %(name)s: %(message)s")
    return asyncio.run(_run(job, controller, args))


async def _run(job: AnyJob, controller: type[Any], args: argparse.Namespace) -> int:
    # lazy: the local runtime (in-memory API server, kubelet) costs import time every other command saves
    from kubetrain.controllers.settings import ControllerSettings  # noqa: PLC0415
    from kubetrain.runtimes.local.console import Console  # noqa: PLC0415
    from kubetrain.runtimes.local.gpus import GpuFitError, discover, select_gpus  # noqa: PLC0415
    from kubetrain.runtimes.local.runner import LocalRun, LocalRunOptions, Outcome  # noqa: PLC0415

    try:
        gpus = select_gpus(discover(), args.gpus)
    except ValueError as err:
        return _usage(str(err))
    console = Console(sys.stdout, tty=sys.stdout.isatty() and not args.plain, log_dir=args.keep_logs)
    from kubetrain.runtimes.local.container import ImageMissing  # noqa: PLC0415

    options = LocalRunOptions(
        timeout=args.timeout, grace=args.grace, linger=args.linger, gpus=gpus,
        runtime=args.runtime, engine=args.engine,
    )  # fmt: skip
    local = LocalRun(
        job.to_wire(), controller, console=console, options=options,
        controller_options={"settings": ControllerSettings()},
    )  # fmt: skip
    try:
        local.preflight()
    except (ValueError, ImageMissing) as err:
        print(f"kubetrain run: {err}", file=sys.stderr)
        return ExitCode.FAILED
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, local.interrupt)
    try:
        result = await local.run()
    except GpuFitError as err:
        print(f"kubetrain run: {err}", file=sys.stderr)
        return ExitCode.FAILED
    except RuntimeError as err:  # the operator itself stopped (a bug): everything was stopped with it
        print(f"kubetrain run: {err}; rerun with -v for the operator's log", file=sys.stderr)
        return ExitCode.FAILED
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, RuntimeError):
                loop.remove_signal_handler(sig)
    codes = {
        Outcome.SUCCEEDED: ExitCode.OK,
        Outcome.FAILED: ExitCode.FAILED,
        Outcome.TIMED_OUT: ExitCode.TIMEOUT,
        Outcome.INTERRUPTED: ExitCode.INTERRUPTED,
    }
    return int(codes[result.outcome])


def _load(path: Path, namespace: str | None, *, resume: bool) -> AnyJob:
    text = read_job_file(path)
    try:
        load_valid_jobs(text)  # as the API server and the operator would check it
        jobs = load_jobs(text)
    except InvalidJobError as error:
        raise InvalidJobError(error.errors, subject=str(path)) from None
    if not jobs:
        raise ValueError(f"{path}: holds no job; write a TFJob, PyTorchJob or MPIJob document")
    if len(jobs) > 1:
        raise ValueError(f"{path} holds {len(jobs)} jobs: `run --local` runs exactly one; split the file")
    job = jobs[0]
    named = job.metadata.namespace
    if namespace and named and namespace != named:
        raise ValueError(
            f"the job's metadata.namespace is {named!r} but --namespace is {namespace!r}: drop one of them"
        )
    job = job.model_copy(
        update={"metadata": job.metadata.model_copy(update={"namespace": named or namespace or "default"})}
    )
    try:
        check_job(job)
    except InvalidJobError as error:
        raise InvalidJobError(error.errors, subject=str(path)) from None
    check_operator_rules(job, subject=str(path))  # what the operator would fail it for, as it checks
    if job.run_policy.suspend:
        if not resume:
            raise ValueError(
                "spec.runPolicy.suspend is true, so nothing would run: pass --resume to run it "
                "(as Kueue does when it admits the job), or set suspend: false"
            )
        policy = job.run_policy.model_copy(update={"suspend": False})
        job = job.model_copy(update={"spec": job.spec.model_copy(update={"run_policy": policy})})
    return job


def _usage(message: str) -> int:
    print(f"kubetrain run: {message}", file=sys.stderr)
    return ExitCode.USAGE


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value
