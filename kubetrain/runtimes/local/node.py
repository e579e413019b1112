"""The local "node": the machine-level environment every local container gets, as an image and a node would.

Images are not run locally: a container's command runs on this machine, with this interpreter's
environment first on PATH (so `python`, `torchrun` and `kubetrain` are the current venv's). Layers of a
container's environment, last wins:
1. this process's environment, minus the variables the operator owns (TF_CONFIG, MASTER_*, PET_*, the
   MPI launchers' ...), so a developer's shell cannot leak into the replicas;
2. the node's: PATH (venv first), HOSTNAME (the pod's), the run marker `KUBETRAIN_LOCAL_RUN`, and the
   run's progress endpoint (the three `KUBEFLOW_TRAINER_SERVER_*` variables; a developer's own are dropped);
3. the pod's own env (resolved and rewritten for the local network and volumes);
4. for MPI launchers, the remote-shell agent in place of ssh, for every implementation (Open MPI's
   `OMPI_MCA_plm_rsh_agent`, Hydra's `HYDRA_LAUNCHER*` and `I_MPI_HYDRA_BOOTSTRAP*`), MPI kept on the
   loopback interface, root allowed for Open MPI, and for MPICH its `mpirun`/`mpiexec` and mpi4py ABI
   first (an MPICH image has MPICH as its default MPI; this machine's default is Open MPI).

MPI worker pods run sshd in a cluster. Locally they run a stand-in (`standin.py`) that holds the pod's
process group while the agent runs the launcher's processes under it, and each worker keeps Open MPI's
shared-memory segments in a directory of its own (they are named after the machine, which all local
"hosts" share).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from kubetrain.podcontract import names as n
from kubetrain.podcontract import progress

__all__ = ["RUN_MARKER", "LocalNode", "base_env", "is_mpi_worker"]

RUN_MARKER = "KUBETRAIN_LOCAL_RUN"
"""Set in every process of a local run to the run's id: how leftovers are found and killed."""

_OWNED = frozenset(
    {n.TF_CONFIG, n.MASTER_ADDR, n.MASTER_PORT, n.WORLD_SIZE, n.RANK, n.LOCAL_RANK, n.GROUP_RANK}
    | {n.LOCAL_WORLD_SIZE, n.TORCHELASTIC_RUN_ID, n.K_MPI_JOB_ROLE, RUN_MARKER}
    | {progress.URL_ENV, progress.CA_CERT_ENV, progress.TOKEN_ENV}
)
_OWNED_PREFIXES = ("PET_", "OMPI_", "PMI_", "PMIX_", "HYDRA_", "I_MPI_", "MPI4PY_")
_HERE = Path(__file__).resolve().parent
_MPICH_LIB = "libmpich.so.12"


def base_env(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables the operator or the MPI launchers own."""
    return {k: v for k, v in environ.items() if k not in _OWNED and not k.startswith(_OWNED_PREFIXES)}


def is_mpi_worker(env: Mapping[str, str]) -> bool:
    """An MPIJob worker (by the contract's K_MPI_JOB_ROLE): hosts what the launcher starts, via the agent."""
    return env.get(n.K_MPI_JOB_ROLE) == "worker"


@dataclass(frozen=True)
class LocalNode:
    """The node of one local run: its directory, marker, interpreter and agent."""

    run_dir: Path
    run_id: str
    python: str = sys.executable
    environ: Mapping[str, str] | None = None
    progress: Mapping[str, str] = field(default_factory=dict)
    """The run's report receiver's env (`ReportReceiver.env()`): every container gets it."""

    def prepare(self) -> None:
        """Write the agent wrapper (an executable path is what MPI launchers accept)."""
        bin_dir = self.run_dir / "bin"
        bin_dir.mkdir(parents=True, exist_ok=True)
        script = f'#!/bin/sh\nexec "{self.python}" "{_HERE / "agent.py"}" "{self.run_dir}" "$@"\n'
        self.agent.write_text(script)
        self.agent.chmod(0o755)

    @property
    def agent(self) -> Path:
        return self.run_dir / "bin" / "kubetrain-rsh"

    def standin_command(self, original: list[str]) -> list[str]:
        """What an MPI worker runs locally instead of `original` (sshd)."""
        return [self.python, str(_HERE / "standin.py"), " ".join(original) or "(the image's entrypoint)"]

    def container_env(self, pod_env: Mapping[str, str], *, hostname: str) -> dict[str, str]:
        """The full environment of a container whose own (rewritten) env is `pod_env`."""
        env = base_env(os.environ if self.environ is None else self.environ)
        bin_dir = str(Path(self.python).parent)
        env["PATH"] = os.pathsep.join([bin_dir, *(p for p in env.get("PATH", "").split(os.pathsep) if p)])
        env["HOSTNAME"] = hostname
        env |= pod_env
        env[RUN_MARKER] = self.run_id
        env |= self.progress  # the KEP-2779 env: the receiver's URL, CA certificate and token files
        if n.K_MPI_JOB_ROLE in pod_env:
            env |= self._mpi_env(pod_env, env["PATH"])
        if is_mpi_worker(pod_env):
            env |= self._worker_env(hostname)
        return env

    def _worker_env(self, hostname: str) -> dict[str, str]:
        """Open MPI names its shared-memory segments after the machine's host name, the job and the local
        rank: ranks of two worker "hosts" on one machine would share (and corrupt) them. Each worker gets
        its own directory for them; set on the workers only, so that mpirun does not forward one value to
        every rank. (A launcher that also runs ranks keeps the default, /dev/shm.)"""
        shm = self.run_dir / "shm" / hostname
        shm.mkdir(parents=True, exist_ok=True)
        return {"OMPI_MCA_btl_vader_backing_directory": str(shm)}

    def _mpi_env(self, pod_env: Mapping[str, str], path: str) -> dict[str, str]:
        agent = str(self.agent)
        env = {
            n.OMPI_MCA_PLM_RSH_AGENT: agent,
            "OMPI_MCA_oob_tcp_if_include": "lo",
            "OMPI_MCA_btl_tcp_if_include": "lo",
            n.HYDRA_LAUNCHER: "rsh",
            n.HYDRA_LAUNCHER_EXEC: agent,
            n.I_MPI_HYDRA_BOOTSTRAP: "rsh",
            n.I_MPI_HYDRA_BOOTSTRAP_EXEC: agent,
        }
        if os.geteuid() == 0:
            env |= {n.OMPI_ALLOW_RUN_AS_ROOT: "1", n.OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1"}
        if n.HYDRA_HOST_FILE in pod_env:
            env |= self._mpich_env(path)
        return env

    def _mpich_env(self, path: str) -> dict[str, str]:
        """MPICH's launchers first on PATH, and mpi4py pointed at the MPICH ABI (Debian names it oddly)."""
        mpich_bin, mpich_lib = self.run_dir / "mpich" / "bin", self.run_dir / "mpich" / "lib"
        mpich_bin.mkdir(parents=True, exist_ok=True)
        mpich_lib.mkdir(parents=True, exist_ok=True)
        for name in ("mpirun", "mpiexec"):
            target = shutil.which(f"{name}.mpich")
            wrapper = mpich_bin / name
            if target and not wrapper.exists():
                # a wrapper, not a symlink: Hydra finds hydra_pmi_proxy next to the path it was started as
                wrapper.write_text(f'#!/bin/sh\nexec "{target}" "$@"\n')
                wrapper.chmod(0o755)
        library = _find_library(_MPICH_LIB)
        if library is not None and not (mpich_lib / "libmpi.so.12").exists():
            (mpich_lib / "libmpi.so.12").symlink_to(library)
        ld_path = os.pathsep.join(p for p in (str(mpich_lib), os.environ.get("LD_LIBRARY_PATH", "")) if p)
        return {
            "PATH": f"{mpich_bin}{os.pathsep}{path}",
            "MPI4PY_MPIABI": "mpich",
            "LD_LIBRARY_PATH": ld_path,
        }


def _find_library(name: str) -> Path | None:
    for root in (Path("/usr/lib"), Path("/usr/lib64"), Path("/usr/local/lib")):
        if root.is_dir():
            found = next(root.rglob(name), None)
            if found is not None:
                return found
    return None
