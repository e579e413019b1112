"""The real node's configuration (kubetrain.testing.node_config) keeps what the node tier relies on: pods
without a default route or masquerade, CoreDNS without `forward`, the kubelet settings cgroup v1 needs, and
the binary directory found by the same rule as hack/node.sh."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from kubetrain.testing.binaries import repo_root
from kubetrain.testing.node_binaries import node_dir
from kubetrain.testing.node_config import (
    NodeLayout,
    cni_conflist,
    containerd_config,
    corefile,
    kubelet_config,
)

LAYOUT = NodeLayout(
    name="n", workdir=Path("/tmp/x"), bridge="kt0", pod_cidr="10.244.7.0/24", gateway="10.244.7.1",
    service_cidr="10.0.0.0/24", kubelet_port=1, kubelet_healthz_port=2, proxy_healthz_port=3,
    proxy_metrics_port=5, dns_ready_port=4, containerd_root=Path("/cache/containerd"),
)  # fmt: skip


def test_pods_get_routes_only_for_the_pod_and_service_ranges_and_no_masquerade() -> None:
    (bridge,) = json.loads(cni_conflist(LAYOUT))["plugins"]
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["routes"] == [{"dst": "10.244.7.0/24"}, {"dst": "10.0.0.0/24"}]


def test_coredns_serves_the_cluster_and_forwards_nothing() -> None:
    text = corefile(LAYOUT, Path("/k"))
    assert "kubernetes cluster.local" in text
    assert "forward" not in text
    assert "bind 10.244.7.1" in text


def test_kubelet_runs_on_cgroup_v1_with_the_node_ip_and_keeps_imported_images() -> None:
    conf = json.loads(kubelet_config(LAYOUT, ca=Path("ca"), crt=Path("c"), key=Path("k")))
    assert (conf["failCgroupV1"], conf["cgroupDriver"]) == (False, "cgroupfs")
    assert conf["address"] == conf["clusterDNS"][0] == "10.244.7.1"
    assert conf["imageGCHighThresholdPercent"] == 100
    assert conf["authorization"]["mode"] == "Webhook"


def test_kubelet_never_evicts_for_the_hosts_disk() -> None:
    """Disk pressure on the shared host disk once evicted an example's pods and deleted the pause image, which
    nothing can pull back: the node's only eviction signal is memory (naming one turns the others off)."""
    conf = json.loads(kubelet_config(LAYOUT, ca=Path("ca"), crt=Path("c"), key=Path("k")))
    assert set(conf["evictionHard"]) == {"memory.available"}


def test_containerd_keeps_its_runtime_paths_private() -> None:
    text = containerd_config(LAYOUT)
    assert 'root = "/cache/containerd"' in text
    assert 'state = "/tmp/x/containerd/state"' in text
    assert "restrict_oom_score_adj = true" in text
    assert "netns_mounts_under_state_dir = true" in text


def test_binary_directory_agrees_with_hack_node_sh(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    script = repo_root() / "hack" / "node.sh"
    printed = subprocess.run(
        ["bash", str(script), "--print-dir"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert Path(printed) == node_dir({"XDG_CACHE_HOME": str(tmp_path)})
