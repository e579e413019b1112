"""`python -m kubetrain.testing`: start the test control plane by hand, for exploring with kubectl.

It prints the `export KUBECONFIG=...` line to paste into another shell, then waits; Ctrl-C or SIGTERM
stops every component and removes the temporary directory. The same start-up as the pytest fixture.
With `--real-node` (root; `bash hack/node.sh` first) the plane has a real node instead of kwok's fake ones
(kubetrain.testing.node_plane): pods run in containers, from the images `--image` names (imported from
podman's store). `--real-node --import-only --image ...` only imports the images into the node's kept
containerd root and exits.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

from kubetrain.testing.binaries import MissingBinariesError
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.node import preload_images
from kubetrain.testing.node_binaries import NodeBinaries, containerd_root, node_dir
from kubetrain.testing.node_plane import NodePlane

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kubetrain.testing",
        description="Start a throw-away Kubernetes control plane (etcd, kube-apiserver, "
        "kube-controller-manager, kube-scheduler, kwok fake nodes) on 127.0.0.1 until Ctrl-C.",
    )
    parser.add_argument(
        "--start-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="give up starting after this long",
    )
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="one real node (kubelet, containerd, CNI bridge, kube-proxy, CoreDNS) instead of kwok's",
    )
    parser.add_argument(
        "--image",
        action="append",
        default=[],
        metavar="IMAGE",
        help="with --real-node: import this image from podman into the node (repeatable)",
    )
    parser.add_argument(
        "--import-only",
        action="store_true",
        help="with --real-node: import the --image images (and the node's own stand-ins) into the node's "
        "containerd, then exit without starting anything else (the test command runs this ahead of the "
        "node tier)",
    )
    return parser


def _import_only(images: Sequence[str]) -> int:
    began = time.monotonic()
    try:
        root = containerd_root(NodeBinaries(node_dir()))  # the binaries need not be built yet
        imported = preload_images(images, containerd_root=root)
    except (MissingBinariesError, RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as err:
        print(f"importing into the real node's containerd failed: {err}", file=sys.stderr)
        return 1
    took = time.monotonic() - began
    print(f"imported {', '.join(imported) or 'nothing (all there)'} in {took:.0f} s", flush=True)
    return 0


def _stop_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _announce(plane: ControlPlane) -> None:
    print(f"control plane ready in {plane.start_seconds:.1f} s: {plane.server}")
    print(f"component logs: {plane.workdir / 'logs'}")
    print("in another shell:")
    print(f"  export KUBECONFIG={plane.kubeconfig}")
    print(f"  export PATH={plane.binaries.directory}:$PATH   # the matching kubectl")
    print("  kubectl get nodes")
    if isinstance(plane, NodePlane):
        layout = plane.node.layout
        print(f"real node {layout.name}: logs in {layout.path('logs')}, pods on {layout.pod_cidr}")
    print("Ctrl-C stops it.", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run until interrupted; 0 on a clean stop, 1 when the plane cannot start or a component dies."""
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored (`&`)
    if args.import_only:
        if not args.real_node:
            print("error: --import-only goes with --real-node", file=sys.stderr)
            return 2
        return _import_only(args.image)
    plane = (
        NodePlane(images=args.image, start_timeout=args.start_timeout)
        if args.real_node
        else ControlPlane(start_timeout=args.start_timeout)
    )
    try:
        plane.start()
        _announce(plane)
        while True:
            for name, code in plane.exit_codes().items():
                if code is not None:
                    print(f"error: {name} exited with code {code}:\n{plane.log_tails(20)}", file=sys.stderr)
                    return 1
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("stopping ...", flush=True)
        return 0
    except (MissingBinariesError, RuntimeError, TimeoutError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        plane.stop()


if __name__ == "__main__":
    sys.exit(main())
