"""Pod-side MPI helper: rank and size from the MPI env, the hostfile, mpi4py and Horovod start-up.

A rank learns its place from the variables its process manager exports (Open MPI's OMPI_COMM_WORLD_*,
Hydra's PMI_* for MPICH and Intel MPI), and `world()` checks that mpi4py's view agrees: mpi4py's wheel
carries builds for both MPI ABIs, and when it loads the wrong one every rank silently runs alone.
mpi4py and horovod are imported lazily; the operator never imports this module.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from kubetrain.podcontract import ContractError, Hostfile, MPIImplementation, MPIProcess
from kubetrain.podcontract.names import HOSTFILE_PATH

__all__ = ["allreduce_mean", "implementation", "init_horovod", "process", "read_hostfile", "world"]

log = logging.getLogger(__name__)

_ABI_FIX = (
    "mpi4py loaded the wrong MPI build. Under MPICH or Intel MPI set MPI4PY_MPIABI=mpich (Debian's MPICH "
    "also needs a libmpi.so.12 -> libmpich.so.12 symlink on LD_LIBRARY_PATH); under Open MPI unset it"
)


def _mpi() -> Any:
    """mpi4py.MPI, imported (which initialises MPI) on first use."""
    return importlib.import_module("mpi4py.MPI")


def process() -> MPIProcess:
    """This rank's place according to the process manager's env (a singleton when not under mpirun)."""
    return MPIProcess.from_env()


def world() -> Any:
    """mpi4py's COMM_WORLD (initialising MPI), checked against the process manager's env."""
    comm = _mpi().COMM_WORLD
    expected = process()
    if comm.Get_size() != expected.size or comm.Get_rank() != expected.rank:
        raise ContractError(
            "MPI",
            f"mpi4py sees rank {comm.Get_rank()} of {comm.Get_size()}, the launcher exported rank "
            f"{expected.rank} of {expected.size}",
            _ABI_FIX,
        )
    return comm


def implementation() -> MPIImplementation | None:
    """Which MPI library mpi4py loaded, in MPIJob's terms (None for another one)."""
    version = str(_mpi().Get_library_version())
    for marker, impl in (
        ("Open MPI", MPIImplementation.OPEN_MPI),
        ("Intel", MPIImplementation.INTEL),
        ("MPICH", MPIImplementation.MPICH),
    ):
        if marker in version:
            return impl
    return None


def read_hostfile(implementation: MPIImplementation, path: str | Path = HOSTFILE_PATH) -> Hostfile:
    """The hostfile the operator mounted on the launcher, parsed for `implementation`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ContractError(
            str(path), f"cannot be read ({e.strerror})", "The operator mounts it on the MPIJob launcher"
        ) from None
    return Hostfile.parse(text, implementation)


def allreduce_mean(comm: Any, array: Any) -> Any:
    """The element-wise mean of `array` (a float numpy array) over all ranks, on every rank."""
    import numpy as np  # noqa: PLC0415 (lazy, like mpi4py)

    out = np.empty_like(array)
    comm.Allreduce(np.ascontiguousarray(array), out, op=_mpi().SUM)
    out /= comm.Get_size()
    return out


def init_horovod() -> Any:
    """horovod.torch, initialised, after checking that its view of the job matches the launcher's env."""
    hvd: Any = importlib.import_module("horovod.torch")
    hvd.init()
    expected = process()
    if expected.size > 1 and (hvd.size(), hvd.rank()) != (expected.size, expected.rank):
        raise ContractError(
            "horovod",
            f"horovod sees rank {hvd.rank()} of {hvd.size()}, the launcher exported {expected.rank} of "
            f"{expected.size}",
            "Start the program with horovodrun or the mpirun that horovod was built against",
        )
    log.info("horovod up: rank %d/%d, local rank %d", hvd.rank(), hvd.size(), hvd.local_rank())
    return hvd
