"""The configuration files of the real node (kubetrain.testing.node), rendered from one NodeLayout.

Pure functions: they write nothing. Why each setting is what it is:
- containerd keeps its state, socket and pods' network namespaces under the node's temporary directory
  (`netns_mounts_under_state_dir`) and its root (images) in a cache directory of its own, so nothing of the
  machine's own configuration changes and an image is imported once per build;
  `restrict_oom_score_adj` because this sandbox refuses to lower `oom_score_adj` (every sandbox fails
  without it); runc with cgroupfs (cgroup v1 hosts); the pause image is a local one (no registry).
- CNI: one bridge, no masquerade, and routes only for the pod and Service ranges: a pod has no default
  route, so nothing it sends can leave the machine.
- kubelet: `failCgroupV1: false` (1.35+ refuse cgroup v1 otherwise), cgroupfs, the bridge's gateway as
  node IP (a kubelet refuses loopback), its serving certificate for that IP, webhook authentication and
  authorization, a memory eviction threshold for a small machine, no eviction for disk pressure and no
  image garbage collection (images come from `ctr import`; there is nothing to pull them back from).
- CoreDNS answers `cluster.local` and reverse lookups from the API server and nothing else: there is no
  `forward`, so any other name is REFUSED.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLUSTER_DOMAIN",
    "NodeLayout",
    "cni_conflist",
    "containerd_config",
    "containerd_config_at",
    "corefile",
    "kube_proxy_config",
    "kubelet_config",
]

CLUSTER_DOMAIN = "cluster.local"
PAUSE_IMAGE = "localhost/kubetrain/pause:sleep"


@dataclass(frozen=True)
class NodeLayout:
    """Names, addresses and paths of one real node."""

    name: str
    workdir: Path
    bridge: str
    pod_cidr: str  # 10.244.N.0/24
    gateway: str  # 10.244.N.1: the node's IP, the API server's and CoreDNS's address
    service_cidr: str
    kubelet_port: int
    kubelet_healthz_port: int
    proxy_healthz_port: int
    proxy_metrics_port: int
    dns_ready_port: int
    # Kept between runs (images are imported once per build); one node at a time uses it (node_host's lock).
    containerd_root: Path

    def path(self, *parts: str) -> Path:
        return self.workdir.joinpath(*parts)

    @property
    def containerd_socket(self) -> Path:
        return self.path("containerd", "containerd.sock")


def containerd_config(layout: NodeLayout) -> str:
    work, cni = layout.path("containerd"), layout.path("cni", "net.d")
    return containerd_config_at(root=layout.containerd_root, workdir=work, cni_conf_dir=cni)


def containerd_config_at(*, root: Path, workdir: Path, cni_conf_dir: Path) -> str:
    """containerd's config with its image root `root`, and its state and socket (`containerd.sock`) in
    `workdir`; `containerd_config` is this for a node."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    socket = workdir / "containerd.sock"
    return f"""version = 2
root = "{root}"
state = "{workdir / "state"}"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  disable_apparmor = true
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = "{cni_conf_dir}"
"""


def cni_conflist(layout: NodeLayout) -> str:
    bridge = {
        "type": "bridge",
        "bridge": layout.bridge,
        "isGateway": True,
        "ipMasq": False,
        "hairpinMode": True,
        "ipam": {
            "type": "host-local",
            "dataDir": str(layout.path("cni", "ipam")),
            "ranges": [[{"subnet": layout.pod_cidr, "gateway": layout.gateway}]],
            "routes": [{"dst": layout.pod_cidr}, {"dst": layout.service_cidr}],
        },
    }
    conf = {"cniVersion": "0.4.0", "name": "kubetrain", "plugins": [bridge]}
    return json.dumps(conf, indent=2)


def kubelet_config(layout: NodeLayout, *, ca: Path, crt: Path, key: Path) -> str:
    conf = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{layout.containerd_socket}",
        "address": layout.gateway,
        "port": layout.kubelet_port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": layout.kubelet_healthz_port,
        "tlsCertFile": str(crt),
        "tlsPrivateKeyFile": str(key),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [layout.gateway],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": "",
        "podCIDR": layout.pod_cidr,
        "failSwapOn": False,
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        # Memory only: the node's filesystem is the host's, shared with the image builds and everything
        # else on the machine, and under disk pressure the kubelet evicts pods and deletes "unused" images,
        # the pause image among them, that nothing can pull back (no registry). Naming one signal sets the
        # others to none (the kubelet applies its defaults only when evictionHard is left out).
        "evictionHard": {"memory.available": "512Mi"},
        "volumePluginDir": str(layout.path("kubelet", "volume-plugins")),
        "podLogsDir": str(layout.path("kubelet", "pod-logs")),
        "fileCheckFrequency": "5s",
        "syncFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "maxPods": 60,
    }
    return json.dumps(conf, indent=2)


def kube_proxy_config(layout: NodeLayout, kubeconfig: Path) -> str:
    conf = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": layout.name,
        "bindAddress": layout.gateway,
        "healthzBindAddress": f"127.0.0.1:{layout.proxy_healthz_port}",
        "metricsBindAddress": f"127.0.0.1:{layout.proxy_metrics_port}",
        "clusterCIDR": layout.pod_cidr,
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "iptables": {"masqueradeAll": False, "localhostNodePorts": False},
        "nodePortAddresses": [f"{layout.gateway}/32"],
    }
    return json.dumps(conf, indent=2)


def corefile(layout: NodeLayout, kubeconfig: Path) -> str:
    """Cluster names only; the `.` block answers everything else with REFUSED (no plugin handles it)."""
    return f"""{CLUSTER_DOMAIN}:53 in-addr.arpa:53 {{
    bind {layout.gateway}
    errors
    ready 127.0.0.1:{layout.dns_ready_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa {{
        kubeconfig {kubeconfig} kubetrain-test
        pods insecure
        ttl 5
    }}
    cache 5
}}
"""
