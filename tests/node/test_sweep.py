"""A real node killed mid-run (pytest SIGKILLed) leaves shims, containers, mounts, its bridge, iptables chains
and cgroups behind; the next NodePlane sweeps them before it starts (kubetrain.testing.node_sweep). Here the
leftovers are made by hand, each of a real kind (a tmpfs mount, a bridge, a chain with a rule jumping to it, a
process in a cgroup, a process named like a shim of a dead node's containerd), under names of their own, so
that the test never touches a node running beside it."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.testing import node_host as host
from kubetrain.testing.node_sweep import Leftovers, sweep

pytestmark = pytest.mark.node

CGROUPS = Path("/sys/fs/cgroup")


def mounted(path: Path) -> bool:
    return any(line.split()[4] == str(path) for line in Path("/proc/self/mountinfo").read_text().splitlines())


def chains(prefix: str) -> list[str]:
    return [r for r in host.run("iptables", "-S").splitlines() if prefix in r]


@pytest.fixture
def leftovers(tmp_path: Path) -> Iterator[Leftovers]:
    if os.geteuid() != 0:
        pytest.fail("the node tier runs as root (mounts, bridges, iptables, cgroups)", pytrace=False)
    tag = secrets.token_hex(3)
    made = Leftovers(
        tempdir_prefix="ktsweep-", bridge=re.compile(r"kx[0-9a-f]{6}"), cgroup_root=f"ktsweep-{tag}",
        chain_prefix=f"KTSWEEP{tag.upper()}-", tempdir=tmp_path,
    )  # fmt: skip
    yield made
    sweep(made)  # whatever the test left, should it fail half-way


def test_the_sweep_removes_what_a_killed_node_left(leftovers: Leftovers, tmp_path: Path) -> None:
    state = tmp_path / "ktsweep-dead" / "node" / "containerd" / "state"
    state.mkdir(parents=True)
    host.run("mount", "-t", "tmpfs", "tmpfs", str(state))
    bridge = f"kx{secrets.token_hex(3)}"
    host.run("ip", "link", "add", bridge, "type", "bridge")
    chain = f"{leftovers.chain_prefix}SERVICES"
    host.run("iptables", "-N", chain)
    host.run("iptables", "-A", "FORWARD", "-i", bridge, "-j", chain)
    shim = subprocess.Popen(  # argv[0] and -address as a runc shim of the dead node's containerd has them
        ["containerd-shim-runc-v2", "-c", "import time; time.sleep(300)", "-address", f"{state}/c.sock"],
        executable=sys.executable,
    )  # fmt: skip
    container = subprocess.Popen(["sleep", "300"])
    pod = CGROUPS / "pids" / leftovers.cgroup_root / "pod-dead"
    pod.mkdir(parents=True)
    (pod / "cgroup.procs").write_text(str(container.pid))

    swept = sweep(leftovers)

    assert swept == [
        "1 containerd shims",
        "1 container processes",
        f"1 mounts under {tmp_path.resolve()}/ktsweep-*",
        f"bridges {bridge}",
        "1 iptables chains",
    ]
    assert shim.wait(timeout=10) == -9 and container.wait(timeout=10) == -9
    assert not mounted(state)
    assert bridge not in host.bridges()
    assert chains(leftovers.chain_prefix) == []
    assert not (CGROUPS / "pids" / leftovers.cgroup_root).exists()
    assert sweep(leftovers) == [], "a second sweep finds nothing"
