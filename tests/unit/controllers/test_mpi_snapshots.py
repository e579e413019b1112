"""Every MPIJob example through the real MPIJobController: exactly what it creates, against reviewed
snapshots.

MPI snapshots are taken once every pod runs (`running=True`): under WaitForWorkersReady the launcher only
exists from then on, and discover_hosts.sh lists the hosts that are up. Two examples are also rendered
under gang scheduling (`<stem>.gang.yaml`), one per launcher creation policy, because the policy decides
whether the launcher counts in the PodGroup's minMember.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.api import load_jobs
from kubetrain.controllers.mpi import MPIJobController
from kubetrain.controllers.settings import ControllerSettings

from .snapshot import EXAMPLES, SNAPSHOTS, assert_snapshot, render_snapshot

CASES = sorted((EXAMPLES / "mpi").glob("*.yaml"))
GANG = ControllerSettings(gang_scheduler="scheduler-plugins-scheduler")
GANG_CASES = [EXAMPLES / "mpi" / "mpi-allreduce-openmpi.yaml", EXAMPLES / "mpi" / "mpi-horovod-openmpi.yaml"]


def test_the_examples_cover_every_implementation_and_launcher_policy() -> None:
    specs = [load_jobs(p.read_text())[0].to_wire()["spec"] for p in CASES]
    assert {s.get("mpiImplementation", "OpenMPI") for s in specs} == {"OpenMPI", "Intel", "MPICH"}
    policies = {s.get("launcherCreationPolicy", "AtStartup") for s in specs}
    assert policies == {"AtStartup", "WaitForWorkersReady"}
    assert {p.name for p in GANG_CASES} <= {p.name for p in CASES}


@pytest.mark.parametrize("example", CASES, ids=lambda p: p.stem)
async def test_example_creates_exactly_the_snapshot(example: Path) -> None:
    rendered = await render_snapshot(example, MPIJobController, running=True)
    assert_snapshot(SNAPSHOTS / "mpi" / f"{example.stem}.yaml", rendered)


@pytest.mark.parametrize("example", GANG_CASES, ids=lambda p: p.stem)
async def test_example_under_gang_scheduling_creates_exactly_the_snapshot(example: Path) -> None:
    rendered = await render_snapshot(example, MPIJobController, settings=GANG, running=True)
    assert_snapshot(SNAPSHOTS / "mpi" / f"{example.stem}.gang.yaml", rendered)
