"""A control plane of its own with one real node (kubetrain.testing.node) and no kwok fake nodes, so
that every pod, the operator's included, runs in a real container. The scale, chaos and ecosystem tiers
keep ControlPlane and its kwok nodes; the `node` tier (tests/node) uses this.

    with NodePlane(images=[...]) as plane:
        plane.kubectl("apply", "-k", "manifests/base")

The node's bridge is made before the API server starts: the API server binds and advertises the bridge's
gateway address (pods reach it there, and through the `kubernetes` Service, 10.0.0.1, by kube-proxy), and
its certificate names both. Clients on the host use the same address. One real node runs on a machine at
a time (a lock file serializes them): kube-proxy's iptables chains are global. Holding that lock, start()
first removes what a killed earlier run left on the host (kubetrain.testing.node_sweep).
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from kubetrain.testing import node_host as host
from kubetrain.testing.binaries import Binaries
from kubetrain.testing.controlplane import ControlPlane
from kubetrain.testing.node import RealNode
from kubetrain.testing.node_binaries import NodeBinaries, containerd_root, find_node_binaries
from kubetrain.testing.node_config import NodeLayout
from kubetrain.testing.node_sweep import sweep
from kubetrain.testing.process import free_port

__all__ = ["NODE_NAME", "SERVICE_CIDR", "NodePlane"]

NODE_NAME = "kubetrain-node"
SERVICE_CIDR = "10.0.0.0/24"  # the plane's --service-cluster-ip-range
KUBERNETES_SERVICE_IP = "10.0.0.1"
# What a Deployment (the operator's) and Services (CoreDNS and kube-proxy read EndpointSlices) need beyond
# the controllers every plane runs.
NODE_CONTROLLERS = ("deployment-controller", "replicaset-controller", "endpointslice-controller")


class NodePlane(ControlPlane):
    """ControlPlane + RealNode; `images` are imported into the node's containerd at start."""

    def __init__(
        self, *, images: Sequence[str] = (), binaries: Binaries | None = None,
        node_binaries: NodeBinaries | None = None, start_timeout: float = 180.0,
    ) -> None:  # fmt: skip
        super().__init__(
            binaries=binaries, nodes=(), start_timeout=start_timeout, extra_controllers=NODE_CONTROLLERS
        )
        self._images = list(images)
        self._node_bins = node_binaries
        self._node: RealNode | None = None
        self._lock: IO[str] | None = None
        self._bridge = ""

    @property
    def node(self) -> RealNode:
        if self._node is None:
            raise RuntimeError("the real node is not started")
        return self._node

    def start(self) -> NodePlane:
        """Take the machine's real-node lock, sweep what a killed run left (kubetrain.testing.node_sweep),
        then start the plane and the node."""
        self._lock = self._lock or host.node_lock("one real node per machine")
        swept = sweep()
        if swept:
            print(f"removed what a killed real node left: {'; '.join(swept)}", flush=True)
        super().start()
        return self

    def _start_all(self, bins: Binaries, work: Path) -> None:
        node_bins = self._node_bins or find_node_binaries()
        self._lock = self._lock or host.node_lock("one real node per machine")
        cidr = host.free_pod_cidr()
        gateway = str(cidr.network_address + 1)
        self._bridge = f"kt{secrets.token_hex(3)}"
        host.create_bridge(self._bridge, gateway, cidr.prefixlen, SERVICE_CIDR)
        self._address, self._extra_ips = gateway, (gateway, KUBERNETES_SERVICE_IP)
        super()._start_all(bins, work)
        layout = NodeLayout(
            name=NODE_NAME, workdir=work / "node", bridge=self._bridge, pod_cidr=str(cidr), gateway=gateway,
            service_cidr=SERVICE_CIDR, kubelet_port=free_port(), kubelet_healthz_port=free_port(),
            proxy_healthz_port=free_port(), proxy_metrics_port=free_port(), dns_ready_port=free_port(),
            containerd_root=containerd_root(node_bins),
        )  # fmt: skip
        self._node = RealNode(
            layout, bins=node_bins, admin_kubeconfig=self.kubeconfig, pki_dir=work / "pki", rest=self.rest,
            timeout=self._timeout,
        )  # fmt: skip
        self._node.start(self._images)

    def stop(self) -> None:
        """The node first (its pods need the API server no more), then the plane, then the lock."""
        if self._node is not None:
            self._node.stop()
            self._node = None
        elif self._bridge:
            host.delete_bridge(self._bridge)
        self._bridge = ""
        super().stop()
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def exit_codes(self) -> dict[str, int | None]:
        codes = super().exit_codes()
        if self._node is not None:
            codes.update({p.name: p.exit_code() for p in self._node.processes})
        return codes

    def log_tails(self, lines: int = 30) -> str:
        tails = super().log_tails(lines)
        if self._node is None:
            return tails
        node = "\n".join(f"----- {p.name} ({p.log_path})\n{p.log_tail(lines)}" for p in self._node.processes)
        return f"{tails}\n{node}"
