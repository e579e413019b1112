"""The MPIJob contract: hostfile per MPI implementation, discover_hosts.sh, launcher/worker env, rank env.

Formats follow the mpi-operator (v2beta1): Open MPI's hostfile is `host slots=N`, Intel MPI's and MPICH's
(both Hydra) is `host:N`; discover_hosts.sh (read by Horovod elastic) echoes one host per line. The rank
variables are the ones each process manager exports to the ranks it starts.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from kubetrain.podcontract import names as n
from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.values import optional, parse_int, require

__all__ = [
    "DiscoverHosts",
    "Hostfile",
    "HostfileEntry",
    "MPIImplementation",
    "MPIProcess",
    "MPIRole",
    "launcher_env",
    "worker_env",
]

_HOSTFILE = "hostfile"
_HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.\-]*[A-Za-z0-9])?$|^\d{1,3}(\.\d{1,3}){3}$")


class MPIImplementation(StrEnum):
    """MPIJob `spec.mpiImplementation` values."""

    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class MPIRole(StrEnum):
    """K_MPI_JOB_ROLE values."""

    LAUNCHER = "launcher"
    WORKER = "worker"


@dataclass(frozen=True)
class HostfileEntry:
    host: str
    slots: int = 1

    def __post_init__(self) -> None:
        if not _HOST.match(self.host):
            raise ContractError(_HOSTFILE, f"{self.host!r} is not a host name or IPv4 address", _fix())
        if self.slots < 1:
            raise ContractError(_HOSTFILE, f"host {self.host} has {self.slots} slots, fewer than 1", _fix())


def _fix(implementation: MPIImplementation | None = None) -> str:
    if implementation is None:
        return "The operator writes one line per worker: 'host slots=N' (OpenMPI) or 'host:N' (Intel, MPICH)"
    if implementation is MPIImplementation.OPEN_MPI:
        return "Open MPI hostfile lines are 'host slots=N'"
    return f"{implementation} (Hydra) hostfile lines are 'host:N'"


@dataclass(frozen=True)
class Hostfile:
    """The hostfile mounted at /etc/mpi/hostfile on the launcher."""

    implementation: MPIImplementation
    entries: tuple[HostfileEntry, ...]

    @property
    def total_slots(self) -> int:
        return sum(e.slots for e in self.entries)

    def render(self) -> str:
        if self.implementation is MPIImplementation.OPEN_MPI:
            return "".join(f"{e.host} slots={e.slots}\n" for e in self.entries)
        return "".join(f"{e.host}:{e.slots}\n" for e in self.entries)

    @classmethod
    def parse(cls, text: str, implementation: MPIImplementation) -> Hostfile:
        """Blank lines and `#` comments are skipped; a missing slot count means 1."""
        entries = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.split("#", 1)[0].strip()
            if line:
                entries.append(_parse_line(line, number, implementation))
        return cls(implementation=implementation, entries=tuple(entries))


def _parse_line(line: str, number: int, implementation: MPIImplementation) -> HostfileEntry:
    where = f"{_HOSTFILE} line {number}"
    fix = _fix(implementation)
    if implementation is MPIImplementation.OPEN_MPI:
        host, *options = line.split()
        slots = 1
        for option in options:
            key, sep, value = option.partition("=")
            if key != "slots" or not sep:
                raise ContractError(where, f"{option!r} is not 'slots=N'", fix)
            slots = parse_int(value, where, fix, minimum=1)
        return _entry(host, slots, where, fix)
    if " " in line:
        raise ContractError(where, f"{line!r} has spaces", fix)
    host, sep, count = line.partition(":")
    return _entry(host, parse_int(count, where, fix, minimum=1) if sep else 1, where, fix)


def _entry(host: str, slots: int, where: str, fix: str) -> HostfileEntry:
    try:
        return HostfileEntry(host=host, slots=slots)
    except ContractError as e:
        raise ContractError(where, e.problem, fix) from None


@dataclass(frozen=True)
class DiscoverHosts:
    """/etc/mpi/discover_hosts.sh: Horovod elastic runs it to learn the hosts that are up right now.

    mpi-operator v2beta1 echoes bare host names (`slots` None); the v1 operator appended `:slots`."""

    hosts: tuple[str, ...]
    slots: int | None = None

    def render(self) -> str:
        suffix = "" if self.slots is None else f":{self.slots}"
        return "#!/bin/sh\n" + "".join(f"echo {host}{suffix}\n" for host in self.hosts)

    @classmethod
    def parse(cls, script: str) -> DiscoverHosts:
        where = "discover_hosts.sh"
        fix = "The operator writes '#!/bin/sh' then one 'echo host[:slots]' per host"
        lines = [line.strip() for line in script.splitlines() if line.strip()]
        if not lines or lines[0] != "#!/bin/sh":
            raise ContractError(where, "does not start with '#!/bin/sh'", fix)
        hosts, counts = [], set()
        for line in lines[1:]:
            verb, _, arg = line.partition(" ")
            if verb != "echo" or not arg:
                raise ContractError(where, f"{line!r} is not 'echo host'", fix)
            host, sep, count = arg.strip().partition(":")
            counts.add(parse_int(count, where, fix, minimum=1) if sep else None)
            hosts.append(_entry(host, 1, where, fix).host)
        if len(counts) > 1:
            raise ContractError(where, "hosts have different slot counts", fix)
        return cls(hosts=tuple(hosts), slots=counts.pop() if counts else None)


def launcher_env(
    implementation: MPIImplementation,
    *,
    slots_per_worker: int,
    hostfile: str = n.HOSTFILE_PATH,
    launcher_is_worker: bool = False,
) -> dict[str, str]:
    """The env the operator adds to the launcher's first container (mpi-operator v2beta1)."""
    env = {n.K_MPI_JOB_ROLE: MPIRole.LAUNCHER.value}
    if implementation is MPIImplementation.OPEN_MPI:
        env |= {
            n.OMPI_MCA_ORTE_KEEP_FQDN_HOSTNAMES: "true",
            n.OMPI_MCA_ORTE_DEFAULT_HOSTFILE: hostfile,
            n.OMPI_MCA_PLM_RSH_ARGS: n.SSH_CONNECTION_ATTEMPTS,
            n.OMPI_MCA_ORTE_SET_DEFAULT_SLOTS: str(slots_per_worker),
        }
    elif implementation is MPIImplementation.INTEL:
        env |= {
            n.I_MPI_HYDRA_HOST_FILE: hostfile,
            n.I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS: n.SSH_CONNECTION_ATTEMPTS,
            n.I_MPI_PERHOST: str(slots_per_worker),
        }
    else:
        env |= {n.HYDRA_HOST_FILE: hostfile, n.HYDRA_LAUNCH_EXTRA_ARGS: n.SSH_CONNECTION_ATTEMPTS}
    if not launcher_is_worker:
        # so that a launcher never grabs a GPU it was not scheduled for
        env |= {n.NVIDIA_VISIBLE_DEVICES: "", n.NVIDIA_DRIVER_CAPABILITIES: ""}
    return env


def worker_env() -> dict[str, str]:
    return {n.K_MPI_JOB_ROLE: MPIRole.WORKER.value}


@dataclass(frozen=True)
class MPIProcess:
    """One rank's place, from the variables its process manager exported; a singleton when there are none."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> MPIProcess:
        env = os.environ if env is None else env
        for variables in _RANK_VARIABLES:
            if optional(env, variables[0]) is not None:
                return cls._read(env, *variables)
        return cls()

    @classmethod
    def _read(
        cls, env: Mapping[str, str], rank_var: str, size_var: str, lrank_var: str, lsize_var: str
    ) -> MPIProcess:
        fix = "Start the program with mpirun/mpiexec, which exports the rank variables to each rank"
        rank = parse_int(require(env, rank_var, fix), rank_var, fix)
        size = parse_int(require(env, size_var, fix), size_var, fix, minimum=1)
        if rank >= size:
            raise ContractError(rank_var, f"rank {rank} is not below the size {size} ({size_var})", fix)
        return cls(
            rank=rank,
            size=size,
            local_rank=parse_int(optional(env, lrank_var) or "0", lrank_var, fix),
            local_size=parse_int(optional(env, lsize_var) or "1", lsize_var, fix, minimum=1),
        )


_RANK_VARIABLES = (
    # Open MPI
    (
        n.OMPI_COMM_WORLD_RANK,
        n.OMPI_COMM_WORLD_SIZE,
        n.OMPI_COMM_WORLD_LOCAL_RANK,
        n.OMPI_COMM_WORLD_LOCAL_SIZE,
    ),
    # Hydra: MPICH and Intel MPI
    (n.PMI_RANK, n.PMI_SIZE, n.MPI_LOCALRANKID, n.MPI_LOCALNRANKS),
)
