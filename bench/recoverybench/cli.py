"""bench/gang_recovery.py's command line: one real node plane per invocation, rounds of runs, the table."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from kubetrain.testing.binaries import find_binaries
from kubetrain.testing.node_binaries import find_node_binaries
from kubetrain.testing.node_plane import NodePlane
from recoverybench.cases import KINDS, Mode
from recoverybench.report import run_line, table
from recoverybench.run import Run, measure

ROOT = Path(__file__).resolve().parents[2]
OPERATOR_IMAGE = "docker.io/kubetrain/kubetrain-operator:0.1.0"
TRAINER = "docker.io/kubetrain/trainer-{}:0.1.0"


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description="Time from one rank's kill until every rank trains again.")
    p.add_argument("--runs", type=int, default=3, help="rounds; each runs every kind in both modes")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    p.add_argument("--modes", default=",".join(m.value for m in Mode), help="OnFailure, RestartGang")
    p.add_argument("--epochs", type=int, default=None, help="override every kind's epochs")
    p.add_argument("--limit", type=float, default=240.0, help="seconds to wait for the gang to train again")
    p.add_argument(
        "--kills", type=int, default=2,
        help="kills per run, each once the gang trains again: the kubelet's back-off grows from the second",
    )  # fmt: skip
    p.add_argument("--out", type=Path, default=None, help="default: bench/results/gang_recovery-<time>.md")
    args = p.parse_args(argv)
    unknown = set(args.kinds.split(",")) - set(KINDS)
    if unknown:
        p.error(f"--kinds: unknown {', '.join(sorted(unknown))}; use {', '.join(KINDS)}")
    try:
        args.mode_list = [Mode(m) for m in args.modes.split(",")]
    except ValueError:
        p.error(f"--modes: use {', '.join(m.value for m in Mode)}")
    if args.runs < 1 or args.kills < 1:
        p.error("--runs and --kills must be at least 1")
    return args


def install(plane: NodePlane, frameworks: set[str]) -> None:
    """The operator as README installs it (`kubectl apply -k manifests/base`), the trainers' images."""
    plane.kubectl("apply", "-k", str(ROOT / "manifests" / "base"))
    plane.kubectl(
        "rollout", "status", "deployment/kubetrain-operator", "--timeout=300s",
        namespace="kubetrain-system", timeout=320,
    )  # fmt: skip
    imported = plane.node.import_images([TRAINER.format(f) for f in sorted(frameworks)])
    if imported:
        print(f"imported {', '.join(imported)}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    began = time.monotonic()
    kinds = [KINDS[k] for k in args.kinds.split(",")]
    plane = NodePlane(images=[OPERATOR_IMAGE], binaries=find_binaries(), node_binaries=find_node_binaries())
    rounds: list[list[Run]] = []
    try:
        plane.start()
        install(plane, {f for k in kinds for f in k.images})
        print(f"plane, operator and images ready in {time.monotonic() - began:.0f} s", flush=True)
        for number in range(args.runs):
            modes = args.mode_list if number % 2 == 0 else list(reversed(args.mode_list))
            rounds.append([])
            for kind in kinds:
                for mode in modes:
                    run = measure(plane, kind, mode, epochs=args.epochs, limit=args.limit, kills=args.kills)
                    print(f"round {number + 1}:" + run_line(run).removeprefix(" "), flush=True)
                    rounds[-1].append(run)
    finally:
        plane.stop()
    wall = time.monotonic() - began
    text = table(rounds, args.limit) + f"\n\nOne invocation, {args.runs} rounds: {wall:.0f} s wall time.\n"
    print(text)
    out = args.out or ROOT / "bench" / "results" / f"gang_recovery-{time.strftime('%Y%m%d-%H%M%S')}.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    print(f"written to {out}")
    return 0
