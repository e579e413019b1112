"""`python bench/operator_scale.py`: the command line, the control plane, the loop over runs, the output.

Runs go N by N, the floor first, then the operator, then each peer (`--peer`), so that each row sits next
to its floor on a machine in the same state; between runs the namespace is deleted and waited for.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import os
import platform
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import cast

import yaml

from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.testing import ControlPlane, FakeNode, MissingBinariesError
from opbench.audit import audit_policy
from opbench.cluster import apply_crds, load_crds
from opbench.identity import USER_GROUP
from opbench.peers import Limits, build_peers, extra_controllers, parse_peer_names, peer_command, peers
from opbench.report import Mode, Row, render_json, render_markdown
from opbench.runner import Command, Settings, run_one
from opbench.subject import PLACEHOLDERS, Readiness, expand
from opbench.workload import Workload, kind_by_name

__all__ = ["main"]

BENCH_DIR = Path(__file__).resolve().parents[1]
REPO = BENCH_DIR.parent
OPERATOR_CMD = (
    "{python} -m kubetrain.cli operator --kubeconfig {kubeconfig} --no-leader-elect "
    "--health-probe-bind-address 127.0.0.1:{port} --metrics-bind-address 127.0.0.1:{port2} "
    "--metrics-secure=false --log-format text --log-level warning"  # the histogram read over plain HTTP
)
OPERATOR_METRICS = "http://127.0.0.1:{port2}/metrics"
OPERATOR_READY = "url:http://127.0.0.1:{port}/readyz"
FLOOR_CMD = (
    "{python} -m opbench.floor --kubeconfig {kubeconfig} --namespace {namespace} --kind {kind} "
    "--jobs {jobs} --replicas {replicas} --run-for {run_for}"
)
log = logging.getLogger("opbench")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/operator_scale.py",
        description="Measure how fast an operator turns N jobs of R replicas into pods, Running pods and "
        "Succeeded jobs, against a real (kwok-backed) control plane; compare with a bare client creating "
        "the same pods (the floor). Prints a Markdown table and writes it (and JSON) to --output-dir.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    what = parser.add_argument_group("what to run")
    what.add_argument("--jobs", type=_counts, default=[10, 100, 500], metavar="N,N,...", help="values of N")
    what.add_argument("--quick", action="store_true", help="N=10 only (overrides --jobs)")
    what.add_argument("--replicas", type=int, default=4, metavar="R", help="replicas per job")
    what.add_argument("--kind", default="PyTorchJob", help="PyTorchJob, TFJob or MPIJob")
    what.add_argument("--run-for", default="2s", metavar="DURATION", help="how long kwok runs each pod")
    what.add_argument("--modes", default="floor,operator", help="floor, operator, or both (comma-separated)")
    what.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME",
        help="also run this Go peer after the modes, built if missing (hack/peers.sh): training-operator "
        "(PyTorchJob, TFJob) or mpi-operator (MPIJob); repeat it or give a comma list",
    )
    subject = parser.add_argument_group("the operator under test")
    subject.add_argument(
        "--operator-cmd",
        default=OPERATOR_CMD,
        metavar="TEMPLATE",
        help="command template; placeholders {kubeconfig} {namespace} {port} {python} {kind} {jobs} "
        "{replicas} {run_for}",
    )
    subject.add_argument(
        "--operator-ready", default=OPERATOR_READY, metavar="HOW", help="url:URL, log:REGEX or after:SECONDS"
    )
    subject.add_argument(
        "--operator-metrics",
        default=OPERATOR_METRICS,
        metavar="URL",
        help="its /metrics (a template), read at the end of each run for the reconcile-time histogram "
        "(controller_runtime_reconcile_time_seconds); 'none' to skip",
    )
    floor = parser.add_argument_group(
        "the floor (bare client) and the peers", "both get kubetrain's default client limits and workers"
    )
    floor.add_argument(
        "--floor-workers", type=int, default=5, help="jobs created at the same time; a peer's workers"
    )
    floor.add_argument("--floor-qps", type=float, default=50.0, help="client-side rate limit (QPS)")
    floor.add_argument("--floor-burst", type=int, default=100, help="client-side rate limit (burst)")
    cluster = parser.add_argument_group("the cluster")
    cluster.add_argument("--kubeconfig", type=Path, help="use this cluster instead of starting one")
    cluster.add_argument("--audit-log", type=Path, help="with --kubeconfig: its API server's audit log")
    cluster.add_argument("--nodes", type=int, default=4, help="fake nodes of a started plane")
    cluster.add_argument("--node-pods", type=int, default=1000, help="pod capacity of each fake node")
    limits = parser.add_argument_group("limits and output")
    limits.add_argument("--timeout", type=float, default=900.0, metavar="SECONDS", help="per run")
    limits.add_argument("--ready-timeout", type=float, default=120.0, metavar="SECONDS")
    limits.add_argument("--output-dir", type=Path, default=BENCH_DIR / "results")
    return parser


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: write numbers separated by commas, e.g. 10,100"
        ) from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every N must be at least 1")
    return counts


def _modes(text: str) -> list[Mode]:
    try:
        return [Mode(part.strip()) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(f"--modes {text!r}: write floor, operator or floor,operator") from None


def _commands(args: argparse.Namespace) -> dict[Mode, Command]:
    floor = f"{FLOOR_CMD} --workers {args.floor_workers} --qps {args.floor_qps:g} --burst {args.floor_burst}"
    pythonpath = os.pathsep.join(p for p in (str(BENCH_DIR), os.environ.get("PYTHONPATH", "")) if p)
    return {
        Mode.OPERATOR: Command(
            args.operator_cmd,
            Readiness.parse(args.operator_ready),
            metrics=None if args.operator_metrics == "none" else args.operator_metrics,
        ),
        Mode.FLOOR: Command(floor, Readiness.parse("log:^ready$"), {"PYTHONPATH": pythonpath}),
    }


def _peer_commands(args: argparse.Namespace, names: list[str]) -> dict[str, Command]:
    limits = Limits(qps=args.floor_qps, burst=args.floor_burst, workers=args.floor_workers)
    known = peers()
    return {name: peer_command(known[name], kind_by_name(args.kind), limits) for name in names}


def _check(args: argparse.Namespace) -> tuple[list[Mode], dict[Mode, Command], list[str]]:
    """Every user error, before anything starts: ValueError naming the option."""
    kind = kind_by_name(args.kind)
    Workload(kind, 1, args.replicas)  # replicas fit the kind's layout
    modes = _modes(args.modes)
    if Mode.PEER in modes:
        raise ValueError("--modes: name the peers with --peer")
    peer_names = parse_peer_names(args.peer, kind, peers())
    commands = _commands(args)
    sample = {k: "x" for k in PLACEHOLDERS if k != "run_for"}
    expand(commands[Mode.OPERATOR].template, {**sample, "run_for": "2s"})
    if args.audit_log and not args.kubeconfig:
        raise ValueError("--audit-log goes with --kubeconfig (a started plane has its own audit log)")
    if peer_names and args.kubeconfig:
        raise ValueError("--peer needs a started plane (its kube-controller-manager runs what peers need)")
    return modes, commands, peer_names


def _meta(
    args: argparse.Namespace, plane: ControlPlane | None, peer_cmds: dict[str, Command]
) -> dict[str, object]:
    known = peers()
    return {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "cluster": plane.binaries.directory.name if plane else str(args.kubeconfig),
        "kind": kind_by_name(args.kind).kind,
        "replicas": args.replicas,
        "run_for": args.run_for,
        "operator_cmd": args.operator_cmd,
        "floor": {"workers": args.floor_workers, "qps": args.floor_qps, "burst": args.floor_burst},
        "peers": {
            name: {"version": known[name].version, "command": peer_cmds[name].template} for name in peer_cmds
        },
        "load_average": os.getloadavg(),
    }


def _notes(meta: dict[str, object], end_load: tuple[float, float, float]) -> list[str]:
    start = ", ".join(f"{x:.1f}" for x in cast(tuple[float, ...], meta["load_average"]))
    floor = cast(dict[str, float], meta["floor"])
    peer_notes = [
        f"peer {name} {peer['version']} (same QPS, burst and workers): `{peer['command']}`"
        for name, peer in cast(dict[str, dict[str, str]], meta["peers"]).items()
    ]
    return [
        f"{meta['date']} on {meta['host']}: {meta['cpus']} CPUs, {meta['memory_gib']} GiB, Python "
        f"{meta['python']}; load average (1, 5, 15 min) {start} at the start, "
        f"{', '.join(f'{x:.1f}' for x in end_load)} at the end (the machine is shared: times are noisy)",
        f"cluster: {meta['cluster']}; kind {meta['kind']}, R = {meta['replicas']}, each pod runs "
        f"{meta['run_for']} (kwok) then succeeds",
        f"operator: `{meta['operator_cmd']}`",
        f"floor: bare `KubeApiClient` loop, {floor['workers']} jobs at a time, QPS {floor['qps']:g}, burst "
        f"{floor['burst']}; creates only the pods (no Services, Events, status)",
        "times in seconds from the first job create (floor: its go signal); `all Succeeded` is every "
        "job's Succeeded condition (floor: every pod Succeeded); API requests from the audit log, by the "
        "process's own ServiceAccount; CPU during the run (start-up excluded), peak RSS of its process tree",
        *peer_notes,
    ]


async def _bench(
    args: argparse.Namespace, modes: list[Mode], peer_names: list[str], settings: Settings
) -> list[Row]:
    api = await KubeApiClient.connect(str(settings.admin_kubeconfig), qps=1000.0, burst=1000)
    rows: list[Row] = []
    try:
        await apply_crds(api, load_crds(REPO / "manifests" / "crds"))
        for jobs in [10] if args.quick else args.jobs:
            for mode in modes:
                log.info("run: %s, N=%d, R=%d", mode, jobs, args.replicas)
                rows.append(await run_one(api, settings, mode, jobs))
            for name in peer_names:
                log.info("run: peer %s, N=%d, R=%d", name, jobs, args.replicas)
                rows.append(await run_one(api, settings, Mode.PEER, jobs, peer=name))
    finally:
        await api.close()
    return rows


def _write(rows: list[Row], meta: dict[str, object], output: Path) -> str:
    """Write the table (.md) and every figure (.json) into `output`; returns the table, which names them."""
    notes = _notes(meta, os.getloadavg())
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M")
    path = output / f"operator_scale-{stamp}.md"
    table = render_markdown(rows, title=f"operator_scale, {meta['date']}", notes=notes)
    output.mkdir(parents=True, exist_ok=True)
    path.write_text(table)
    path.with_suffix(".json").write_text(render_json(rows, meta=meta))
    return f"{table}\nwritten to {path} and {path.with_suffix('.json').name}\n"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        modes, commands, peer_names = _check(args)
    except ValueError as err:
        print(f"operator_scale: {err}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    signal.signal(signal.SIGTERM, _interrupt)
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-bench-"))
    plane = None
    try:
        build_peers([name for name in peer_names if not peers()[name].built])
        peer_cmds = _peer_commands(args, peer_names)
        if args.kubeconfig is None:
            nodes = [FakeNode(f"bench-node-{i}", pods=args.node_pods) for i in range(args.nodes)]
            plane = ControlPlane(
                nodes=nodes,
                audit_policy=audit_policy(USER_GROUP),
                extra_controllers=extra_controllers(peer_names),
            ).start()
            log.info("control plane ready in %.1f s: %s", plane.start_seconds, plane.server)
        meta = _meta(args, plane, peer_cmds)
        admin = plane.kubeconfig if plane else args.kubeconfig
        settings = Settings(
            kind=kind_by_name(args.kind),
            replicas=args.replicas,
            run_for=args.run_for,
            commands=commands,
            admin_kubeconfig=admin,
            admin=yaml.safe_load(admin.read_text()),
            audit_log=plane.audit_log if plane else args.audit_log,
            workdir=workdir,
            timeout=args.timeout,
            ready_timeout=args.ready_timeout,
            peers=peer_cmds,
        )
        rows = asyncio.run(_bench(args, modes, peer_names, settings))
        print(_write(rows, meta, args.output_dir))
    except (MissingBinariesError, TimeoutError, RuntimeError, OSError, ValueError, yaml.YAMLError) as err:
        print(f"operator_scale: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("operator_scale: interrupted", file=sys.stderr)
        return 130
    finally:
        if plane is not None:
            plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if all(row.outcome == "ok" for row in rows) else 1
