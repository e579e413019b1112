"""MPIJob as local processes: the launcher runs mpirun with the env and hostfile the contract renders.

The hostfile names pod FQDNs, as the operator writes them; a fake remote-shell agent stands in for ssh
and starts each "pod's" daemon locally, ignoring the host name (the ssh options the operator adds, such
as `-o ConnectionAttempts=10`, come before the host and are skipped).
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from kubetrain.podcontract import Hostfile, HostfileEntry, MPIImplementation, launcher_env

from .conftest import Replicas, assert_trained_in_lock_step, base_env

pytestmark = pytest.mark.runtime

EXAMPLE = ["-m", "kubetrain.runtimes.examples.mpi_allreduce", "--timeout", "60"]
ACCURACY = 0.9  # measured 0.98; guessing scores 0.1
ROOT = Path(__file__).resolve().parents[2]
MPICH_ABI_DIR = ROOT / ".venv" / "lib" / "kubetrain-mpich"  # made by hack/frameworks.sh

FAKE_AGENT = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-l|-i) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
echo "$1" >> "$(dirname "$0")/agent-calls.log"
# Each pod has a /tmp of its own; sharing one lets the daemons' session files collide (a rare segfault).
TMPDIR="$(dirname "$0")/tmp-$1"
mkdir -p "$TMPDIR"
export TMPDIR
shift
exec /bin/sh -c "$*"
"""

PODS = (HostfileEntry("job-worker-0.job.default.svc", 1), HostfileEntry("job-worker-1.job.default.svc", 1))


def fake_agent(tmp_path: Path) -> Path:
    agent = tmp_path / "fake-rsh.sh"
    agent.write_text(FAKE_AGENT)
    agent.chmod(agent.stat().st_mode | stat.S_IXUSR)
    return agent


def launcher(tmp_path: Path, implementation: MPIImplementation) -> dict[str, str]:
    hostfile = tmp_path / "hostfile"
    hostfile.write_text(Hostfile(implementation, PODS).render())
    return base_env() | launcher_env(implementation, slots_per_worker=1, hostfile=str(hostfile))


def agent_calls(tmp_path: Path) -> list[str]:
    return sorted((tmp_path / "agent-calls.log").read_text().split())


def _open_mpi_env(tmp_path: Path) -> dict[str, str]:
    return launcher(tmp_path, MPIImplementation.OPEN_MPI) | {
        "OMPI_MCA_plm_rsh_agent": str(fake_agent(tmp_path)),
        "OMPI_ALLOW_RUN_AS_ROOT": "1",  # CI runs as root
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_btl": "self,tcp",
        "OMPI_MCA_btl_tcp_if_include": "lo",
        "OMPI_MCA_oob_tcp_if_include": "lo",
        "OMPI_MCA_mpi_yield_when_idle": "1",  # 2 cores: a rank that busy-waits starves its peer
    }


def test_open_mpi_launcher_trains_across_two_pods(replicas: Replicas, tmp_path: Path) -> None:
    env = _open_mpi_env(tmp_path)
    mpirun = shutil.which("mpirun.openmpi")
    assert mpirun, "Open MPI is missing: run `bash hack/setup.sh --frameworks`"
    run = replicas.start("launcher", [mpirun, "-np", "2", "python", *EXAMPLE], env)
    assert replicas.wait([run], deadline_s=180) == {"launcher": 0}, replicas.tails()
    results = run.results()
    assert_trained_in_lock_step(results, world_size=2, accuracy=ACCURACY)
    assert {r["mpi"] for r in results} == {"OpenMPI"}
    assert agent_calls(tmp_path) == [p.host for p in PODS], "one daemon per pod, FQDNs kept"


def _mpich_env(tmp_path: Path) -> dict[str, str]:
    assert (MPICH_ABI_DIR / "libmpi.so.12").exists(), "run `bash hack/setup.sh --frameworks` (MPICH ABI link)"
    library_path = ":".join(p for p in (str(MPICH_ABI_DIR), os.environ.get("LD_LIBRARY_PATH", "")) if p)
    return launcher(tmp_path, MPIImplementation.MPICH) | {
        "HYDRA_LAUNCHER": "rsh",
        "HYDRA_LAUNCHER_EXEC": str(fake_agent(tmp_path)),
        "MPI4PY_MPIABI": "mpich",
        "LD_LIBRARY_PATH": library_path,
    }


def test_mpich_launcher_trains_across_two_pods(replicas: Replicas, tmp_path: Path) -> None:
    mpiexec = shutil.which("mpiexec.mpich")
    assert mpiexec, "MPICH is missing: run `bash hack/setup.sh --frameworks`"
    run = replicas.start("launcher", [mpiexec, "-n", "2", "python", *EXAMPLE], _mpich_env(tmp_path))
    assert replicas.wait([run], deadline_s=180) == {"launcher": 0}, replicas.tails()
    results = run.results()
    assert_trained_in_lock_step(results, world_size=2, accuracy=ACCURACY)
    assert {r["mpi"] for r in results} == {"MPICH"}
    assert agent_calls(tmp_path) == [p.host for p in PODS]


def test_mpi4py_on_the_wrong_mpi_abi_is_a_clear_error(replicas: Replicas, tmp_path: Path) -> None:
    """Under MPICH without MPI4PY_MPIABI, mpi4py loads its Open MPI build and every rank would silently
    train alone; the helper notices and says how to fix it."""
    mpiexec = shutil.which("mpiexec.mpich")
    assert mpiexec, "MPICH is missing: run `bash hack/setup.sh --frameworks`"
    env = _mpich_env(tmp_path)
    del env["MPI4PY_MPIABI"]
    run = replicas.start("launcher", [mpiexec, "-n", "2", "python", *EXAMPLE], env)
    codes = replicas.wait([run], deadline_s=120)
    assert codes["launcher"] != 0
    assert run.results() == []
    assert "mpi4py loaded the wrong MPI build" in run.output()
    assert "MPI4PY_MPIABI=mpich" in run.output()


def test_horovod_launcher_trains_across_two_pods(replicas: Replicas, tmp_path: Path) -> None:
    """Horovod (torch, built by hack/frameworks.sh) under the Open MPI launcher, as MPIJob runs it."""
    env = _open_mpi_env(tmp_path)
    mpirun = shutil.which("mpirun.openmpi")
    assert mpirun, "Open MPI is missing: run `bash hack/setup.sh --frameworks`"
    horovod = ["-m", "kubetrain.runtimes.examples.horovod_torch", "--timeout", "60"]
    run = replicas.start("launcher", [mpirun, "-np", "2", "python", *horovod], env)
    assert replicas.wait([run], deadline_s=300) == {"launcher": 0}, replicas.tails()
    results = run.results()
    assert_trained_in_lock_step(results, world_size=2, accuracy=ACCURACY)
    assert sorted(r["local_rank"] for r in results) == [0, 0], "one rank per pod"
    assert agent_calls(tmp_path) == [p.host for p in PODS]
