"""What the real node changes on the host, and how each change is undone: the bridge (with the node's
address and a route for the Service range), the mounts containerd and kubelet leave under the node's
directory, kube-proxy's iptables chains, the kubelet's cgroups and the images imported into containerd.

Only one real node runs on a machine at a time (kube-proxy's chains are global): `node_lock` holds an
exclusive lock for the node's life, so a second run waits instead of breaking the first.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import random
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import IO

__all__ = [
    "bridges",
    "create_bridge",
    "delete_bridge",
    "free_pod_cidr",
    "import_images",
    "kill_cgroup_tasks",
    "kill_shims",
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


def _cgroup_dirs(root_name: str) -> list[Path]:
    """Every directory of the cgroup tree `/<root_name>` in every v1 hierarchy, leaves first."""
    found: list[Path] = []
    for hierarchy in _CGROUP_ROOT.iterdir():
        top = hierarchy / root_name
        if top.is_dir():
            found += [Path(current) for current, _dirs, _files in os.walk(top)]
    return sorted(found, key=lambda p: len(str(p)), reverse=True)


def remove_cgroups(root_name: str) -> None:
    """Remove the kubelet's cgroup tree `/<root_name>` in every v1 hierarchy, leaves first."""
    for current in _cgroup_dirs(root_name):
        try:
            os.rmdir(current)
        except OSError:
            continue


def kill_cgroup_tasks(root_name: str) -> list[int]:
    """SIGKILL every process in the cgroup tree `/<root_name>`: the containers of a node whose shims are
    gone (they are reparented, not killed, when their shim dies). Returns the pids signalled."""
    pids: set[int] = set()
    for current in _cgroup_dirs(root_name):
        with contextlib.suppress(OSError):
            pids.update(int(p) for p in (current / "cgroup.procs").read_text().split())
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return sorted(pids)


def kill_shims(address_prefix: str) -> list[int]:
    """SIGKILL the containerd runc shims (they outlive containerd by design) whose arguments name a path
    under `address_prefix` (their containerd's socket). Returns the pids signalled."""
    killed = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv[0].endswith(b"containerd-shim-runc-v2") and any(
                a.startswith(address_prefix.encode()) for a in argv[1:]
            ):
                os.kill(int(proc.name), signal.SIGKILL)
                killed.append(int(proc.name))
    return killed


def bridges() -> list[str]:
    """The names of the host's bridges."""
    return [
        line.split(":")[1].strip().split("@")[0]
        for line in run("ip", "-o", "link", "show", "type", "bridge").splitlines()
    ]


def remove_kube_chains(prefix: str = "KUBE-") -> list[str]:
    """Delete every `KUBE-*` iptables chain (IPv4 and IPv6) and the rules that jump to one: what kube-proxy
    and the kubelet (its canary chains) make. Only one real node runs on a machine (node_lock), and nothing
    else here makes such chains. Returns the chains removed (as `tool table chain`)."""
    removed = []
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            rules = run(tool, "-t", table, "-S", check=False).splitlines()
            for rule in rules:
                fields = rule.split()
                if fields[:1] == ["-A"] and not fields[1].startswith(prefix) and prefix in rule:
                    run(tool, "-t", table, "-D", *fields[1:], check=False)
            chains = [r.split()[1] for r in rules if r.startswith(f"-N {prefix}")]
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
    """`podman save IMG... | ctr -n k8s.io images import -` for the images whose podman build containerd
    does not have yet (containerd's root is kept between runs); returns the names imported.

    One stream for all of them (`podman save -m`, a multi-image archive): a layer that several share (the
    torch layers under trainer-pytorch and trainer-horovod, 5.6 GB) is saved and read once, not once per
    image. containerd hashes every blob it is sent, even one it has, so bytes not sent are the saving."""
    ctr = ("ctr", "--address", str(socket), "-n", "k8s.io")
    have = _imported(ctr)
    wanted = {image: _podman_id(image) for image in images}
    needed = [image for image, podman_id in wanted.items() if have.get(image) != podman_id]
    if not needed:
        return []
    save = ["podman", "save", *(["-m"] if len(needed) > 1 else []), *needed]
    with subprocess.Popen(save, stdout=subprocess.PIPE) as saving:
        assert saving.stdout is not None
        run(*ctr, "images", "import", "-", stdin=saving.stdout.fileno(), timeout=1800)
        if saving.wait() != 0:
            raise RuntimeError(f"`{' '.join(save)}` failed")
    for image in needed:
        run(*ctr, "images", "label", image, f"{_ID_LABEL}={wanted[image]}")
    return needed
