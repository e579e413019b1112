"""The operator at rest: resident memory of `kubetrain operator` started, caches synced, no jobs.

What a platform engineer pays for an idle operator on every cluster (target: at most 50 MiB), next
to what importing the entry point alone costs and which large packages that import pulls in. It starts a
throw-away control plane (`kubetrain.testing`), installs the CRDs, runs `kubetrain operator` against it
as a Deployment would (admin kubeconfig here), waits until /readyz answers, then samples VmRSS.

    python bench/operator_at_rest.py [--samples 5] [--no-progress] [--out bench/results/operator_at_rest.md]
                                     [--operator-arg=FLAG ...]

The operator runs with the shipped Deployment's endpoints: HTTPS /metrics and the training-progress
endpoint (`--progress-bind-address`, here on loopback); `--no-progress` leaves the latter off, and
`--operator-arg` adds any other flag.

Prints a table and writes it to --out. Figures vary with the machine's load by a few MiB; compare runs
made on the same machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import free_port

ROOT = Path(__file__).resolve().parents[1]
HEAVY = (
    "kubernetes_asyncio",
    "kubernetes",
    "pydantic",
    "prometheus_client",
    "aiohttp",
    "yaml",
    "cryptography",
)
_IMPORT_PROBE = """
import sys
import kubetrain.cli.operator.app
rss = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS:')) / 1024
heavy = [m for m in {heavy!r} if m in sys.modules]
print(f"{{rss:.1f}} {{','.join(heavy)}}")
"""


def import_cost() -> tuple[float, str]:
    """RSS (MiB) of a fresh interpreter after importing the operator's entry point, and the heavy modules."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_PROBE.format(heavy=HEAVY)],
        capture_output=True,
        text=True,
        check=True,
    )
    rss, _, heavy = done.stdout.strip().partition(" ")
    return float(rss), heavy or "-"


def at_rest(samples: int, *, progress: bool = True, extra: tuple[str, ...] = ()) -> list[float]:
    """VmRSS (MiB) of a running, ready, idle operator (`extra`: more of its flags), sampled once a second."""
    with ControlPlane() as plane, tempfile.TemporaryDirectory() as tmp:
        plane.kubectl("apply", "-f", str(ROOT / "manifests" / "crds"))
        # the shipped default: HTTPS /metrics, scrapes checked
        args = ["--no-leader-elect", "--metrics-secure", *extra]
        if progress:  # as shipped too (port 0 would turn it off); outside a cluster the URL must be given
            port = free_port()
            args += [f"--progress-bind-address=127.0.0.1:{port}", f"--progress-url=https://127.0.0.1:{port}"]
        with OperatorProcess(plane.kubeconfig, args, workdir=Path(tmp)) as op:
            op.wait_ready()
            time.sleep(2.0)  # informers listed and watching; nothing else to do
            found = []
            for _ in range(samples):
                found.append(op.rss_mib())
                time.sleep(1.0)
            return found


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument(
        "--no-progress", action="store_true", help="without the training-progress endpoint (on as shipped)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "operator_at_rest.md")
    parser.add_argument(
        "--operator-arg",
        action="append",
        default=[],
        metavar="FLAG",
        help="a further flag of kubetrain operator (repeatable), e.g. --operator-arg=--workers=10",
    )
    args = parser.parse_args()
    imported, heavy = import_cost()
    rss = at_rest(args.samples, progress=not args.no_progress, extra=tuple(args.operator_arg))
    endpoints = "HTTPS /metrics" + ("" if args.no_progress else ", progress endpoint")
    lines = [
        "| what | RSS MiB | notes |",
        "|---|---|---|",
        f"| `import kubetrain.cli.operator.app` | {imported:.1f} | heavy modules loaded: {heavy} |",
        f"| operator ready, idle (median of {len(rss)}; {endpoints}) | {sorted(rss)[len(rss) // 2]:.1f} | "
        f"min {min(rss):.1f}, max {max(rss):.1f}; target <= 50 |",
    ]
    table = "\n".join(lines)
    print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
