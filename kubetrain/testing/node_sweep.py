"""What a real node killed mid-run (pytest SIGKILLed, the machine's session cut) leaves on the host, and
its removal before the next node starts.

A node's daemons die with the process that started them (PR_SET_PDEATHSIG), but the rest outlives it: the
runc shims (they daemonize), the containers under them (reparented when a shim dies), the mounts under the
node's directory (network namespaces, root filesystems, volumes), the node's `kt<hex>` bridge with its
Service route, the `KUBE-*` iptables chains and the `kubepods` cgroups. A next node would find its pod range
taken and stale chains answering for old Services. NodePlane runs `sweep()` while it holds the machine's
real-node lock and before anything of its own exists, so everything of this kind on the machine is a dead
run's. A plane's temporary directory is removed afterwards by the control plane's own sweep of directories
whose owner is gone, once nothing is mounted under it.
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubetrain.testing import node_host as host

__all__ = ["NODE_LEFTOVERS", "Leftovers", "sweep"]


@dataclass(frozen=True)
class Leftovers:
    """How a node's leftovers are recognised: its temporary directories, bridges, cgroup root and chains."""

    tempdir_prefix: str  # <tempdir>/<prefix>*: the planes' directories (a node's lives in `node` inside)
    bridge: re.Pattern[str]
    cgroup_root: str
    chain_prefix: str
    tempdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))


NODE_LEFTOVERS = Leftovers(
    tempdir_prefix="kubetrain-cp-", bridge=re.compile(r"kt[0-9a-f]{6}"), cgroup_root="kubepods",
    chain_prefix="KUBE-",
)  # fmt: skip


def sweep(leftovers: Leftovers = NODE_LEFTOVERS) -> list[str]:
    """Remove what dead nodes left; returns one line per kind of thing removed (empty when nothing was).
    Call it only while holding `node_host.node_lock` and before starting a node."""
    prefix = str(leftovers.tempdir.resolve() / leftovers.tempdir_prefix)
    removed = []
    if shims := host.kill_shims(prefix):
        removed.append(f"{len(shims)} containerd shims")
    if tasks := _kill_tasks(leftovers.cgroup_root):
        removed.append(f"{len(tasks)} container processes")
    mounts = [
        m for d in leftovers.tempdir.glob(f"{leftovers.tempdir_prefix}*") for m in host.unmount_under(d)
    ]
    if mounts:
        removed.append(f"{len(mounts)} mounts under {prefix}*")
    if stale := [b for b in host.bridges() if leftovers.bridge.fullmatch(b)]:
        for bridge in stale:
            host.delete_bridge(bridge)
        removed.append(f"bridges {', '.join(stale)}")
    if chains := host.remove_kube_chains(leftovers.chain_prefix):
        removed.append(f"{len(chains)} iptables chains")
    host.remove_cgroups(leftovers.cgroup_root)
    return removed


def _kill_tasks(cgroup_root: str, timeout: float = 10.0) -> list[int]:
    """Kill the processes left in the node's cgroups and wait until the cgroups are empty."""
    killed = host.kill_cgroup_tasks(cgroup_root)
    deadline = time.monotonic() + timeout
    while killed and time.monotonic() < deadline and host.kill_cgroup_tasks(cgroup_root):
        time.sleep(0.1)
    return killed
