"""Command lines of the five control-plane components, tuned for a small (2-core) test machine.

Why these flags (see also the module docstring of controlplane.py):
- everything binds 127.0.0.1 on ports picked at start; kube-apiserver also needs an explicit advertise
  address because a test machine may have no default route;
- etcd keeps its data on /dev/shm when present and skips fsync: the data is thrown away anyway;
- kube-apiserver runs RBAC, real ServiceAccount tokens (issuer + signing key) and client-certificate auth;
  it drops priority-and-fairness (CPU), the endpoint reconciler (a loopback address cannot be published)
  and the TaintNodesByCondition admission plugin (it taints every new Node not-ready, and only the
  node-lifecycle controller, which we do not run, would lift the taint); it reaches the kubelet API
  (pods/log) of every fake node at its InternalIP, which kwok sets to 127.0.0.1 (kwok_logs.py);
- kube-controller-manager runs only the controllers tests rely on (CONTROLLERS), without serving;
- kube-scheduler and kwok talk to the API server with the admin kubeconfig.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kubetrain.testing.binaries import Binaries
from kubetrain.testing.certs import Pki

__all__ = ["CONTROLLERS", "Ports", "apiserver_args", "etcd_args", "kcm_args", "kwok_args", "scheduler_args"]

# garbage collector: ownerReference cascades; namespace: namespace deletion (the per-test fixture);
# serviceaccount(+token): the `default` SA that pods need and legacy token Secrets; root-ca publisher: the
# kube-root-ca.crt ConfigMap that projected SA token volumes mount; clusterrole aggregation: the built-in
# admin/edit/view roles get their rules only through it; resourcequota: status.used of ResourceQuotas,
# without which quota admission rejects every create in a namespace that has a quota; pod GC: force-deletes
# pods bound to a node that no longer exists (a test's "lost node"), so their namespace can go away;
# persistentvolume binder: binds a PersistentVolumeClaim (an example's) to the volume a test provides.
CONTROLLERS = (
    "persistentvolume-binder-controller",
    "garbage-collector-controller",
    "namespace-controller",
    "resourcequota-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "clusterrole-aggregation-controller",
    "pod-garbage-collector-controller",
)


@dataclass(frozen=True)
class Ports:
    """Loopback ports of one plane."""

    etcd_client: int
    etcd_peer: int
    apiserver: int
    scheduler: int
    kubelet: int  # kwok's kubelet API (container logs), shared by every fake node


def etcd_args(bins: Binaries, ports: Ports, data_dir: Path) -> list[str]:
    client = f"http://127.0.0.1:{ports.etcd_client}"
    peer = f"http://127.0.0.1:{ports.etcd_peer}"
    return [
        str(bins.etcd),
        "--name=kubetrain-test",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=kubetrain-test={peer}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def apiserver_args(
    bins: Binaries, ports: Ports, pki: Pki, cert_dir: Path, address: str = "127.0.0.1"
) -> list[str]:
    """`address`: where it binds and what it advertises; anything but loopback (a real node's bridge, which
    pods reach) also publishes it as the `kubernetes` Service's endpoint and lets it call a real kubelet."""
    server = f"https://{address}:{ports.apiserver}"
    base = _apiserver_base(bins, ports, pki, cert_dir, server=server, address=address)
    return [*base, *_node_args(pki, address)]


def _node_args(pki: Pki, address: str) -> list[str]:
    if address == "127.0.0.1":
        return ["--endpoint-reconciler-type=none"]
    return [
        "--endpoint-reconciler-type=lease",
        f"--kubelet-client-certificate={pki.admin_crt}",
        f"--kubelet-client-key={pki.admin_key}",
    ]


def _apiserver_base(
    bins: Binaries, ports: Ports, pki: Pki, cert_dir: Path, *, server: str, address: str
) -> list[str]:
    return [
        str(bins.kube_apiserver),
        f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
        f"--bind-address={address}",
        f"--advertise-address={address}",
        f"--secure-port={ports.apiserver}",
        f"--cert-dir={cert_dir}",
        f"--tls-cert-file={pki.serving_crt}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_crt}",
        f"--service-account-issuer={server}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        "--authorization-mode=RBAC",
        "--allow-privileged=true",
        "--disable-admission-plugins=TaintNodesByCondition",
        "--enable-priority-and-fairness=false",
        "--kubelet-preferred-address-types=InternalIP",  # kwok's nodes: 127.0.0.1, where kwok listens
        f"--kubelet-certificate-authority={pki.ca_crt}",  # kwok serves with the plane's serving certificate
        "--profiling=false",
        "--v=1",
    ]


def kcm_args(bins: Binaries, kubeconfig: Path, pki: Pki, extra_controllers: Sequence[str] = ()) -> list[str]:
    """`extra_controllers`: run these too (e.g. `job-controller` for an operator that creates batch Jobs)."""
    controllers = [*CONTROLLERS, *(c for c in extra_controllers if c not in CONTROLLERS)]
    return [
        str(bins.kube_controller_manager),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        "--secure-port=0",
        f"--controllers={','.join(controllers)}",
        f"--service-account-private-key-file={pki.sa_key}",
        f"--root-ca-file={pki.ca_crt}",
        "--use-service-account-credentials=false",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--profiling=false",
        "--v=1",
    ]


def scheduler_args(bins: Binaries, kubeconfig: Path, ports: Ports) -> list[str]:
    return [
        str(bins.kube_scheduler),
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={ports.scheduler}",
        "--profiling=false",
        "--v=0",  # 1 dumps every flag; unschedulable pods are visible as Events and pod conditions
    ]


def kwok_args(bins: Binaries, kubeconfig: Path, config: Path) -> list[str]:
    return [
        str(bins.kwok),
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        "--node-lease-duration-seconds=0",
    ]
