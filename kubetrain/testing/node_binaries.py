"""Where the real node's binaries built by `hack/node.sh` live, found by the same rule as that script.

The directory is `$KUBETRAIN_NODE_DIR` when set, otherwise
`${XDG_CACHE_HOME:-~/.cache}/kubetrain/node/<key>`, where `<key>` names the Kubernetes and CoreDNS versions
and a hash of the wrapper modules in tools/node. containerd, runc and the CNI plugins are Debian's, on PATH
and in /usr/lib/cni, installed by the same script.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kubetrain.testing.binaries import MissingBinariesError, read_versions, repo_root

__all__ = [
    "CNI_BIN_DIR", "NODE_COMPONENTS", "NodeBinaries", "containerd_root", "find_node_binaries", "node_dir"
]  # fmt: skip

NODE_COMPONENTS = ("kubelet", "kube-proxy", "coredns")
HOST_TOOLS = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip", "podman")
CNI_BIN_DIR = Path("/usr/lib/cni")
_CNI_PLUGINS = ("bridge", "host-local", "loopback")
BUILD_HINT = "run `bash hack/node.sh` (as root: builds kubelet, kube-proxy and CoreDNS, installs containerd)"


@dataclass(frozen=True)
class NodeBinaries:
    """Absolute paths of the node's own builds, in one directory."""

    directory: Path

    @property
    def kubelet(self) -> Path:
        return self.directory / "kubelet"

    @property
    def kube_proxy(self) -> Path:
        return self.directory / "kube-proxy"

    @property
    def coredns(self) -> Path:
        return self.directory / "coredns"


def containerd_root(bins: NodeBinaries) -> Path:
    """The node's containerd root (its images), kept between runs beside the binaries' directories: an
    image is imported once per build, whichever version of the binaries imports it."""
    return bins.directory.parent / "containerd"


def cache_key(root: Path) -> str:
    """Same key as hack/node.sh: versions plus 12 hex digits of sha256(the wrapper files)."""
    k8s = read_versions(root / "tools" / "testbin").get("K8S", "")
    coredns = read_versions(root / "tools" / "node").get("COREDNS", "")
    parts = ("k8s/go.mod", "coredns/go.mod", "coredns/main.go")
    digest = hashlib.sha256(b"".join((root / "tools" / "node" / p).read_bytes() for p in parts))
    return f"k8s-{k8s}_coredns-{coredns}_{digest.hexdigest()[:12]}"


def node_dir(env: dict[str, str] | None = None) -> Path:
    """The build directory for the pinned versions (it may not exist yet)."""
    env = dict(os.environ) if env is None else env
    override = env.get("KUBETRAIN_NODE_DIR")
    if override:
        return Path(override)
    root = repo_root()
    if not (root / "tools" / "node" / "versions.env").is_file():
        raise MissingBinariesError(
            "tools/node/versions.env not found: set KUBETRAIN_NODE_DIR to the node's binaries"
        )
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "kubetrain" / "node" / cache_key(root)


def find_node_binaries(env: dict[str, str] | None = None) -> NodeBinaries:
    """The built binaries and the host tools, or MissingBinariesError naming what is missing."""
    directory = node_dir(env)
    missing = [n for n in NODE_COMPONENTS if not os.access(directory / n, os.X_OK)]
    missing += [t for t in HOST_TOOLS if shutil.which(t) is None]
    missing += [f"{CNI_BIN_DIR}/{p}" for p in _CNI_PLUGINS if not (CNI_BIN_DIR / p).exists()]
    if missing:
        raise MissingBinariesError(f"the real node's parts are missing ({', '.join(missing)}); {BUILD_HINT}")
    return NodeBinaries(directory)
