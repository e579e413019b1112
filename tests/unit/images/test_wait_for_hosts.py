"""images/mpi/wait-for-hosts.sh, which the MPI images run in front of mpirun and mpiexec: an MPIJob's
launcher starts MPI only once every host of its hostfile resolves, within a bound, and says which hosts did
not; anywhere else it runs the command at once. Name resolution is a stand-in `getent` on PATH that knows
the names listed in a file, so a test can make a name appear while the script waits."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "images" / "mpi" / "wait-for-hosts.sh"
FAKE_GETENT = '#!/bin/sh\n[ "$1" = hosts ] && grep -qx "$2" "$KNOWN_HOSTS" && echo "10.0.0.9 $2"\n'


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "getent").write_text(FAKE_GETENT)
    (bin_dir / "getent").chmod(0o755)
    (tmp_path / "known").write_text("")
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# the launcher's hostfile\nw-0.job.ns.svc:2\nw-1.job.ns.svc slots=2\n\n")
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "KNOWN_HOSTS": str(tmp_path / "known"),
        "K_MPI_JOB_ROLE": "launcher",
        "HYDRA_HOST_FILE": str(hostfile),
    }


def run(env: dict[str, str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    argv = ["sh", str(SCRIPT), "echo", "mpirun ran with", "-n", "4"]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)


def test_the_launcher_runs_mpirun_once_every_host_resolves(env: dict[str, str]) -> None:
    def names_appear() -> None:
        time.sleep(1.5)
        Path(env["KNOWN_HOSTS"]).write_text("w-0.job.ns.svc\n")
        time.sleep(1.5)
        Path(env["KNOWN_HOSTS"]).write_text("w-0.job.ns.svc\nw-1.job.ns.svc\n")

    began = time.monotonic()
    writer = threading.Thread(target=names_appear)
    writer.start()
    done = run(env)
    writer.join()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "mpirun ran with -n 4\n"
    assert time.monotonic() - began >= 3.0, "mpirun ran before the second worker's name resolved"
    assert "every host of" in done.stderr and "resolves (waited" in done.stderr


def test_names_that_never_resolve_fail_the_launcher_in_time_and_are_named(env: dict[str, str]) -> None:
    Path(env["KNOWN_HOSTS"]).write_text("w-0.job.ns.svc\n")
    began = time.monotonic()
    done = run({**env, "KUBETRAIN_HOSTS_TIMEOUT": "2"})
    assert done.returncode == 1
    assert done.stdout == "", "mpirun must not run"
    assert time.monotonic() - began < 10.0
    assert "still do not resolve: w-1.job.ns.svc." in done.stderr
    assert "KUBETRAIN_HOSTS_TIMEOUT" in done.stderr


def test_a_bad_bound_is_refused_with_the_variable_named(env: dict[str, str]) -> None:
    done = run({**env, "KUBETRAIN_HOSTS_TIMEOUT": "2m"})
    assert done.returncode == 2
    assert "KUBETRAIN_HOSTS_TIMEOUT=2m is not a whole number of seconds" in done.stderr


@pytest.mark.parametrize("role", ["worker", ""])
def test_anything_but_a_launcher_runs_the_command_at_once(env: dict[str, str], role: str) -> None:
    done = run({**env, "K_MPI_JOB_ROLE": role, "KUBETRAIN_HOSTS_TIMEOUT": "60"}, timeout=5.0)
    assert (done.returncode, done.stdout) == (0, "mpirun ran with -n 4\n")


def test_open_mpis_hostfile_variable_is_read_first(env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "ompi").write_text("launcher.job.ns.svc slots=1\n")
    Path(env["KNOWN_HOSTS"]).write_text("launcher.job.ns.svc\n")
    done = run({**env, "OMPI_MCA_orte_default_hostfile": str(tmp_path / "ompi")}, timeout=5.0)
    assert (done.returncode, done.stdout) == (0, "mpirun ran with -n 4\n")
