"""What the real node changes on the host, and how each change is undone: the bridge (with the node's
address and a route for the Service range), the mounts containerd and kubelet leave under the node's
directory, kube-proxy's iptables chains, the kubelet's cgroups and the images imported into containerd.

Only one real node runs on a machine at a time (kube-proxy's chains are global): `node_lock` holds an
exclusive lock for the node's life, so a second run waits instead of breaking the first.
"""

from __future__ import annotations

import fcntl
import ipaddress
import os
import random
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import IO

__all__ = [
    "create_bridge",
    "delete_bridge",
    "free_pod_cidr",
    "import_images",
    "node_lock",
    "remove_cgroups",
    "remove_kube_chains",
    "unmount_under",
]

_LOCK = Path("/run/lock/kubetrain-real-node.lock")
_CGROUP_ROOT = Path("/sys/fs/cgroup")


def run(*argv: str, check: bool = True, timeout: float = 120.0, stdin: int | None = None) -> str:
    """Run a host tool; on failure raise with its command line and stderr."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout, stdin=stdin)
    if check and done.returncode != 0:
        raise RuntimeError(f"`{' '.join(argv)}` failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def node_lock(timeout_note: str) -> IO[str]:
    """Take the machine's real-node lock (blocking); the returned file holds it until closed."""
    _LOCK.parent.mkdir(parents=True, exist_ok=True)
    handle = _LOCK.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"waiting for another real node on this machine to stop ({timeout_note})", flush=True)
        fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def free_pod_cidr() -> ipaddress.IPv4Network:
    """A 10.244.N.0/24 that no route of the host uses yet."""
    used = run("ip", "-4", "route", "show", "table", "all")
    candidates = list(range(1, 250))
    random.shuffle(candidates)
    for n in candidates:
        if f"10.244.{n}." not in used:
            return ipaddress.IPv4Network(f"10.244.{n}.0/24")
    raise RuntimeError("no free 10.244.N.0/24 for the real node's pods")


def create_bridge(name: str, gateway: str, prefix: int, service_cidr: str) -> None:
    """The node's bridge with its gateway address, and the Service range routed onto it (never out)."""
    run("ip", "link", "add", name, "type", "bridge")
    run("ip", "addr", "add", f"{gateway}/{prefix}", "dev", name)
    run("ip", "link", "set", name, "up")
    run("ip", "route", "replace", service_cidr, "dev", name, "src", gateway)


def delete_bridge(name: str) -> None:
    run("ip", "link", "delete", name, check=False)


def _mount_points() -> list[str]:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return [line.split()[4].replace("\\040", " ") for line in lines]


def unmount_under(directory: Path) -> list[str]:
    """Unmount everything mounted at or below `directory`, deepest first; returns what was unmounted."""
    prefix = str(directory.resolve())
    done = []
    for _ in range(3):  # a mount can hide another on the same point
        points = [p for p in _mount_points() if p == prefix or p.startswith(prefix + "/")]
        if not points:
            break
        for point in sorted(points, key=len, reverse=True):
            if run("umount", "-l", point, check=False) == "" and point not in done:
                done.append(point)
    return done


def remove_cgroups(root_name: str) -> None:
    """Remove the kubelet's cgroup tree `/<root_name>` in every v1 hierarchy, leaves first."""
    for hierarchy in _CGROUP_ROOT.iterdir():
        top = hierarchy / root_name
        if not top.is_dir():
            continue
        for current, _dirs, _files in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
            try:
                os.rmdir(current)
            except OSError:
                continue


def remove_kube_chains() -> list[str]:
    """Delete every `KUBE-*` iptables chain (IPv4 and IPv6) and the rules that jump to one: what kube-proxy
    and the kubelet (its canary chains) make. Only one real node runs on a machine (node_lock), and nothing
    else here makes such chains. Returns the chains removed."""
    removed = []
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            rules = run(tool, "-t", table, "-S", check=False).splitlines()
            for rule in rules:
                fields = rule.split()
                if fields[:1] == ["-A"] and not fields[1].startswith("KUBE-") and "KUBE-" in rule:
                    run(tool, "-t", table, "-D", *fields[1:], check=False)
            chains = [r.split()[1] for r in rules if r.startswith("-N KUBE-")]
            for chain in chains:
                run(tool, "-t", table, "-F", chain, check=False)
            for chain in chains:
                run(tool, "-t", table, "-X", chain, check=False)
            removed += [f"{tool} {table} {chain}" for chain in chains]
    return removed


def _podman_id(image: str) -> str:
    found = run("podman", "image", "inspect", "--format", "{{.Id}}", image, check=False).strip()
    if not found:
        raise RuntimeError(f"image {image} is not in podman's store: build it with `bash hack/images.sh`")
    return found


def _imported(ctr: tuple[str, ...]) -> dict[str, str]:
    """Image name -> the podman image ID it was imported from (the label import_images sets)."""
    found: dict[str, str] = {}
    for line in run(*ctr, "images", "ls").splitlines()[1:]:
        fields = line.split()
        labels = dict(kv.partition("=")[::2] for kv in fields[-1].split(",")) if fields else {}
        if fields and _ID_LABEL in labels:
            found[fields[0]] = labels[_ID_LABEL]
    return found


_ID_LABEL = "kubetrain.io/podman-id"


def import_images(images: Iterable[str], socket: Path) -> list[str]:
    """`podman save IMG | ctr -n k8s.io images import -` for each image whose podman build containerd
    does not have yet (containerd's root is kept between runs); returns the names imported."""
    ctr = ("ctr", "--address", str(socket), "-n", "k8s.io")
    have = _imported(ctr)
    imported = []
    for image in images:
        podman_id = _podman_id(image)
        if have.get(image) == podman_id:
            continue
        with subprocess.Popen(["podman", "save", image], stdout=subprocess.PIPE) as save:
            assert save.stdout is not None
            run(*ctr, "images", "import", "-", stdin=save.stdout.fileno(), timeout=1800)
            if save.wait() != 0:
                raise RuntimeError(f"`podman save {image}` failed")
        run(*ctr, "images", "label", image, f"{_ID_LABEL}={podman_id}")
        imported.append(image)
    return imported
