"""A real node for the test control plane: containerd (with Debian's runc), a kubelet, kube-proxy and
CoreDNS as child processes, on a bridge of its own. Pods on it run real containers from the images
`hack/images.sh` builds, imported into containerd (there is no registry).

    node = RealNode(layout, admin_kubeconfig=..., pki_dir=..., rest=plane.rest)
    node.start(images=["docker.io/kubetrain/trainer-pytorch:0.1.0"])
    ...
    node.stop()

kubetrain.testing.node_plane puts it beside a control plane whose API server binds the node's bridge.
Networking stays on the machine: the pod range and the Service range exist only on the bridge, pods have
no default route, nothing is masqueraded out and IP forwarding is left as the host has it (off here).
stop() leaves nothing behind: it kills every container, stops the daemons, unmounts what they mounted under
the node's directory (network namespaces, volumes, root filesystems), removes the bridge, kube-proxy's
iptables chains and the kubelet's cgroups.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from kubetrain.testing import node_config as cfg
from kubetrain.testing import node_host as host
from kubetrain.testing.certs import sign_serving
from kubetrain.testing.node_binaries import NodeBinaries
from kubetrain.testing.process import ComponentProcess, wait_until
from kubetrain.testing.rest import AdminRest, http_ok

__all__ = [
    "INIT_STAND_IN", "LOCAL_IMAGES", "PAUSE_IMAGE", "RealNode", "ensure_local_images", "preload_images"
]  # fmt: skip

PAUSE_IMAGE = cfg.PAUSE_IMAGE
# The first of these podman has: the trainers' base (its layers are in containerd already), or the Debian
# base hack/images.sh makes where no registry answers.
_LOCAL_BASES = ("localhost/kubetrain/python:3.11", "localhost/kubetrain/debian-python:bookworm")
INIT_STAND_IN = "docker.io/library/alpine:3.10"
LOCAL_IMAGES = {
    # The sandbox image: anything that sleeps forever (there is no registry to pull a pause image from).
    PAUSE_IMAGE: 'CMD ["sleep", "infinity"]',
    # Stands in for the PyTorch init container's default image (`--pytorch-init-container-image`), which
    # only needs `sh`, `sleep` and an `nslookup` that fails until the name resolves.
    INIT_STAND_IN: "RUN printf '#!/bin/sh\\nexec getent hosts \"$1\"\\n' > /usr/local/bin/nslookup"
    " && chmod 0755 /usr/local/bin/nslookup",
}


class RealNode:
    """One kubelet with its runtime, proxy and DNS; start() waits until the node is Ready."""

    def __init__(
        self, layout: cfg.NodeLayout, *, bins: NodeBinaries, admin_kubeconfig: Path, pki_dir: Path,
        rest: AdminRest, timeout: float = 180.0,
    ) -> None:  # fmt: skip
        self.layout = layout
        self._bins = bins
        self._kubeconfig = admin_kubeconfig
        self._pki = pki_dir
        self._rest = rest
        self._timeout = timeout
        self._procs: list[ComponentProcess] = []

    @property
    def name(self) -> str:
        return self.layout.name

    @property
    def processes(self) -> list[ComponentProcess]:
        return list(self._procs)

    def ctr(self, *args: str, check: bool = True) -> str:
        """`ctr` against this node's containerd, namespace k8s.io."""
        socket = str(self.layout.containerd_socket)
        return host.run("ctr", "--address", socket, "-n", "k8s.io", *args, check=check)

    def import_images(self, images: list[str]) -> list[str]:
        """Import these podman images into the node (skipped where containerd has that build already)."""
        return host.import_images(images, self.layout.containerd_socket)

    # ---------------------------------------------------------------- start
    def start(self, images: list[str]) -> None:
        self._write(("cni", "net.d", "10-kubetrain.conflist"), cfg.cni_conflist(self.layout))
        self._start_containerd()
        ensure_local_images()
        host.import_images([*LOCAL_IMAGES, *images], self.layout.containerd_socket)
        self._start_kubelet()
        self._wait("node Ready (kubelet)", self._node_ready)
        self._start_proxy()
        self._start_dns()

    def _write(self, parts: tuple[str, ...], text: str) -> Path:
        path = self.layout.path(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    def _spawn(self, name: str, argv: list[str]) -> ComponentProcess:
        path = os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        env = {"PATH": path, "HOME": str(self.layout.workdir)}
        process = ComponentProcess(name, argv, self.layout.path("logs", f"{name}.log"), env)
        self._procs.append(process)
        return process

    def _wait(self, what: str, check: Callable[[], bool]) -> None:
        wait_until(what, check, timeout=self._timeout, processes=self._procs)

    def _start_containerd(self) -> None:
        conf = self._write(("containerd", "config.toml"), cfg.containerd_config(self.layout))
        self._spawn("containerd", ["containerd", "--config", str(conf), "--log-level", "warn"])
        self._wait("containerd answers", lambda: self.ctr("version", check=False) != "")
        self._remove_containers()  # left in its kept root by a run that was killed

    def _start_kubelet(self) -> None:
        crt, key = sign_serving(self._pki, "kubelet", (self.layout.gateway,))
        conf = self._write(
            ("kubelet", "config.json"),
            cfg.kubelet_config(self.layout, ca=self._pki / "ca.crt", crt=crt, key=key),
        )
        self._spawn("kubelet", [
            str(self._bins.kubelet), f"--config={conf}", f"--kubeconfig={self._kubeconfig}",
            f"--root-dir={self.layout.path('kubelet', 'root')}", f"--hostname-override={self.name}",
            f"--node-ip={self.layout.gateway}", "--v=1",
        ])  # fmt: skip

    def _start_proxy(self) -> None:
        text = cfg.kube_proxy_config(self.layout, self._kubeconfig)
        conf = self._write(("kube-proxy", "config.json"), text)
        self._spawn("kube-proxy", [str(self._bins.kube_proxy), f"--config={conf}", "--v=1"])
        healthz = f"http://127.0.0.1:{self.layout.proxy_healthz_port}/healthz"
        self._wait("kube-proxy /healthz", lambda: http_ok(healthz))

    def _start_dns(self) -> None:
        conf = self._write(("coredns", "Corefile"), cfg.corefile(self.layout, self._kubeconfig))
        self._spawn("coredns", [str(self._bins.coredns), "-conf", str(conf)])
        ready = f"http://127.0.0.1:{self.layout.dns_ready_port}/ready"
        self._wait("CoreDNS /ready", lambda: http_ok(ready))

    def _node_ready(self) -> bool:
        status, node = self._rest.get(f"/api/v1/nodes/{self.name}")
        conditions = node.get("status", {}).get("conditions", []) if status == 200 else []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)

    # ---------------------------------------------------------------- stop
    def stop(self) -> None:
        """Stop everything and undo every change to the host. Idempotent; never raises for leftovers."""
        procs = {p.name: p for p in self._procs}
        for name in ("kubelet", "coredns", "kube-proxy"):
            if name in procs:
                procs[name].stop(grace=10.0)
        if "containerd" in procs and procs["containerd"].exit_code() is None:
            self._remove_containers()
        if "containerd" in procs:
            procs["containerd"].stop(grace=10.0)
        self._kill_shims()
        if "kube-proxy" in procs:
            host.run(str(self._bins.kube_proxy), "--cleanup", check=False)
        host.remove_kube_chains()  # what --cleanup leaves: the kubelet's canaries, the other family's
        host.unmount_under(self.layout.workdir)
        host.delete_bridge(self.layout.bridge)
        host.remove_cgroups("kubepods")
        self._procs.clear()

    def _remove_containers(self) -> None:
        for task in self.ctr("tasks", "ls", "-q", check=False).split():
            self.ctr("tasks", "kill", "-a", "-s", "SIGKILL", task, check=False)
        for container in self.ctr("containers", "ls", "-q", check=False).split():
            self.ctr("tasks", "delete", "-f", container, check=False)
            self.ctr("containers", "delete", container, check=False)

    def _kill_shims(self) -> None:
        """The runc shims this node's containerd started (found by its socket path)."""
        host.kill_shims(str(self.layout.containerd_socket))


def preload_images(images: Sequence[str], *, containerd_root: Path, timeout: float = 60.0) -> list[str]:
    """Import `images` (and the node's own LOCAL_IMAGES) into the kept containerd root before any node
    starts; returns the names imported. containerd runs alone for it, on a socket in a temporary directory,
    under the machine's real-node lock: a node that starts meanwhile waits, then finds them imported.

    The test command runs this in the background while the tiers before `node` run: a first import reads
    and hashes every byte of the images (about 8 GB, 10-15 min of disk on a fresh machine), work that
    otherwise waits until the node tier starts."""
    lock = host.node_lock("images being imported ahead of a node")
    try:
        with tempfile.TemporaryDirectory(prefix="kubetrain-cp-preload-") as tmp:
            work = Path(tmp) / "containerd"
            conf = work / "config.toml"
            work.mkdir()
            cni = Path(tmp) / "net.d"
            conf.write_text(cfg.containerd_config_at(root=containerd_root, workdir=work, cni_conf_dir=cni))
            socket = work / "containerd.sock"
            env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"), "HOME": tmp}
            argv = ["containerd", "--config", str(conf), "--log-level", "warn"]
            containerd = ComponentProcess("containerd", argv, Path(tmp) / "containerd.log", env)
            try:

                def answers() -> bool:
                    return host.run("ctr", "--address", str(socket), "version", check=False) != ""

                wait_until("containerd answers", answers, timeout=timeout, processes=[containerd])
                ensure_local_images()
                return host.import_images([*LOCAL_IMAGES, *images], socket)
            finally:
                containerd.stop(grace=10.0)
                host.unmount_under(Path(tmp))
    finally:
        lock.close()


def ensure_local_images() -> None:
    """Build the LOCAL_IMAGES podman does not have yet (a few seconds each: one layer on the base)."""
    for name, script in LOCAL_IMAGES.items():
        if _podman_has(name):
            continue
        base = next((b for b in _LOCAL_BASES if _podman_has(b)), None)
        if base is None:
            raise RuntimeError(f"none of {', '.join(_LOCAL_BASES)} in podman: run `bash hack/images.sh`")
        with tempfile.TemporaryDirectory() as context:
            (Path(context) / "Containerfile").write_text(f"FROM {base}\n{script}\n")
            done = subprocess.run(
                ["podman", "build", "--isolation=chroot", "--format=docker", "-t", name, context],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"building {name} from {base} failed: {done.stderr.strip()[-500:]}")


def _podman_has(image: str) -> bool:
    return subprocess.run(["podman", "image", "exists", image], check=False).returncode == 0
