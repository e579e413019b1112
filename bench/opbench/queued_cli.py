"""The command line of bench/kueue_admission.py: a control plane with API auditing and kwok nodes, Kueue's
CRDs and the kubeflow.org CRDs, then `--runs` rounds of the two paths (opbench.queued), the order of the
two alternating from one round to the next; the table is printed and written under `--output-dir`."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import logging
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import yaml

from kubetrain.common.kube.rest import KubeApiClient
from kubetrain.testing import ControlPlane, FakeNode, MissingBinariesError
from kubetrain.testing.ecosystem import MissingComponentError, find_component
from kubetrain.testing.kueue import Kueue
from opbench.audit import audit_policy
from opbench.cluster import apply_crds, load_crds
from opbench.identity import USER_GROUP
from opbench.queued import PATHS, QueuedRow, QueuedSettings, render, run_path

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[2]
log = logging.getLogger("opbench")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kueue_admission.py", description=__doc__)
    parser.add_argument("--jobs", type=int, default=500, help="PyTorchJobs per run (default 500)")
    parser.add_argument("--replicas", type=int, default=2, help="pods per job: a Master and Workers (2)")
    parser.add_argument("--runs", type=int, default=3, help="rounds, each with both paths (3)")
    parser.add_argument("--quick", action="store_true", help="10 jobs, one round: proves the harness runs")
    parser.add_argument("--run-for", default="2s", help="how long each pod runs before it succeeds (2s)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds a run may take (1200)")
    parser.add_argument("--nodes", type=int, default=4, help="kwok nodes (4)")
    parser.add_argument("--node-pods", type=int, default=500, help="pods each node holds (500)")
    parser.add_argument("--output-dir", type=Path, default=REPO / "bench" / "results")
    return parser


async def _bench(args: argparse.Namespace, settings: QueuedSettings) -> list[QueuedRow]:
    api = await KubeApiClient.connect(str(settings.plane.kubeconfig), qps=1000.0, burst=1000)
    rows: list[QueuedRow] = []
    try:
        await apply_crds(api, load_crds(REPO / "manifests" / "crds"))
        for run in range(1, (1 if args.quick else args.runs) + 1):
            order = ["kubetrain", "kueue"] if run % 2 else ["kueue", "kubetrain"]
            for name in order:
                log.info("run %d: %s, N=%d, R=%d", run, name, settings.jobs, settings.replicas)
                rows.append(await run_path(api, settings, PATHS[name], run))
    finally:
        await api.close()
    return rows


def _write(rows: list[QueuedRow], output: Path) -> str:
    stamp = datetime.datetime.now().strftime("%Y-%m-%dT%H%M")
    table = render(rows, title=f"kueue_admission, {stamp}")
    output.mkdir(parents=True, exist_ok=True)
    path = output / f"kueue_admission-{stamp}.md"
    path.write_text(table)
    return f"{table}\nwritten to {path}\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    workdir = Path(tempfile.mkdtemp(prefix="kubetrain-bench-"))
    plane = None
    rows: list[QueuedRow] = []
    try:
        find_component("kueue")
        nodes = [FakeNode(f"bench-node-{i}", pods=args.node_pods) for i in range(args.nodes)]
        plane = ControlPlane(nodes=nodes, audit_policy=audit_policy(USER_GROUP)).start()
        Kueue(plane, workdir / "crds").install_crds()
        settings = QueuedSettings(
            plane=plane,
            admin=yaml.safe_load(plane.kubeconfig.read_text()),
            workdir=workdir,
            jobs=10 if args.quick else args.jobs,
            replicas=args.replicas,
            run_for=args.run_for,
            timeout=args.timeout,
        )
        rows = asyncio.run(_bench(args, settings))
        print(_write(rows, args.output_dir))
    except (MissingBinariesError, MissingComponentError, TimeoutError, RuntimeError, OSError) as err:
        print(f"kueue_admission: {err}", file=sys.stderr)
        return 1
    finally:
        if plane is not None:
            plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if rows and all(row.outcome == "ok" for row in rows) else 1
