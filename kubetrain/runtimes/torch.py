"""Pod-side PyTorch helper: start torch.distributed from the PyTorchJob environment, and stop it cleanly.

Training code calls `init_distributed()` (or uses `distributed()` as a context manager) and gets its rank,
world size, local rank and device, whether it was started by torchrun (elastic or static, from PET_*) or
directly with MASTER_ADDR/MASTER_PORT/WORLD_SIZE/RANK. NCCL is used when CUDA is available (and not
refused), gloo otherwise. Every rendezvous and collective has a finite timeout, so a missing or dead peer
makes the process fail instead of hanging for torch's default 30 minutes.

torch is imported lazily: the operator never imports this module, and importing it costs nothing.
"""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubetrain.podcontract import ContractError, TorchProcess
from kubetrain.podcontract.values import format_host_port

__all__ = ["Backend", "DeviceChoice", "DistContext", "destroy", "distributed", "init_distributed"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0


class DeviceChoice(StrEnum):
    AUTO = "auto"
    """CUDA when torch sees a GPU, else CPU."""
    CPU = "cpu"
    CUDA = "cuda"


class Backend(StrEnum):
    GLOO = "gloo"
    NCCL = "nccl"


@dataclass(frozen=True)
class DistContext:
    """What a training loop needs to know about its place in the job."""

    process: TorchProcess
    backend: Backend
    device: Any
    """The torch.device this process computes on (cuda:<local rank> with NCCL)."""

    @property
    def rank(self) -> int:
        return self.process.rank

    @property
    def world_size(self) -> int:
        return self.process.world_size

    @property
    def local_rank(self) -> int:
        return self.process.local_rank

    @property
    def is_chief(self) -> bool:
        return self.process.rank == 0


def init_distributed(
    *,
    device: DeviceChoice = DeviceChoice.AUTO,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> DistContext:
    """Initialise the default process group from the environment (a group of one when not distributed).

    Raises ContractError when the environment is half-set, asks for torchrun, or asks for CUDA without one.
    """
    torch, dist = _frameworks()
    process = TorchProcess.from_env(env)
    use_cuda = _use_cuda(device, torch)
    backend = Backend.NCCL if use_cuda else Backend.GLOO
    torch_device = _select_device(torch, process, use_cuda)
    timeout = datetime.timedelta(seconds=timeout_s)
    if not process.distributed:
        dist.init_process_group(backend.value, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
    elif process.under_torchrun and os.environ.get(USE_AGENT_STORE) == "True":
        store = _fresh_store(dist, process, timeout)
        dist.init_process_group(
            backend.value, store=store, rank=process.rank, world_size=process.world_size, timeout=timeout
        )
    elif process.under_torchrun:
        dist.init_process_group(backend.value, init_method="env://", timeout=timeout)
    else:
        store = _gang_store(dist, process, timeout)
        dist.init_process_group(
            backend.value, store=store, rank=process.rank, world_size=process.world_size, timeout=timeout
        )
        if process.rank == 0:
            store.set(_FORMED_KEY, "1")
    log.info(
        "torch.distributed up: rank %d/%d, local rank %d, backend %s, device %s",
        process.rank,
        process.world_size,
        process.local_rank,
        backend,
        torch_device,
    )
    return DistContext(process=process, backend=backend, device=torch_device)


def destroy() -> None:
    """Tear the process group down; a no-op when none is up."""
    _, dist = _frameworks()
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@contextmanager
def distributed(
    *,
    device: DeviceChoice = DeviceChoice.AUTO,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
) -> Iterator[DistContext]:
    """`with distributed() as ctx:` initialises the process group and always destroys it."""
    ctx = init_distributed(device=device, timeout_s=timeout_s, env=env)
    try:
        yield ctx
    finally:
        destroy()


USE_AGENT_STORE = "TORCHELASTIC_USE_AGENT_STORE"
_STORE_KEY = "kubetrain/fresh-store-port"


def _fresh_store(dist: Any, process: TorchProcess, timeout: datetime.timedelta) -> Any:
    """A store no earlier start of the group has written to, for the process group to meet in.

    torchrun's agent serves one store (at MASTER_ADDR:MASTER_PORT) for all restarts of the worker group, and
    torch (2.15 at least) no longer prefixes the workers' keys per attempt: after a restart, a rank can read
    the dead group's gloo addresses, fail to connect ("Connection refused") and fail the restart too. So
    rank 0 (on the agent's host) serves a new store on a free port at every start and publishes the port in
    the agent's store; a stale port refuses connections, so the other ranks retry until they see the new one.
    """
    assert process.master_addr is not None and process.master_port is not None
    agent = dist.TCPStore(process.master_addr, process.master_port, is_master=False, timeout=timeout)
    if process.rank == 0:
        store = dist.TCPStore(
            process.master_addr,
            0,
            process.world_size,
            is_master=True,
            timeout=timeout,
            wait_for_workers=False,
        )
        agent.set(_STORE_KEY, str(store.port))
        return store
    deadline = time.monotonic() + timeout.total_seconds()
    while True:
        port = int(agent.get(_STORE_KEY))
        try:
            short = datetime.timedelta(seconds=2)
            return dist.TCPStore(process.master_addr, port, is_master=False, timeout=short)
        except (RuntimeError, OSError):  # a stale port: rank 0 of this start has not published yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


_FORMED_KEY = "kubetrain/gang-formed"


def _gang_store(dist: Any, process: TorchProcess, timeout: datetime.timedelta) -> Any:
    """The store at MASTER_ADDR:MASTER_PORT that rank 0 of this start serves, never its predecessor's.

    Rank 0 hosts the store the group meets in. When a gang restarts in place, a rank that restarts first
    can reach the store of the previous rank 0, still alive until it notices the failure, read the dead
    group's addresses from it and leave the new group waiting for it until the timeout. Rank 0 marks its
    store once the group is up; a rank that finds the mark is talking to a group that formed without it,
    so it lets go and connects again until the new rank 0 serves a fresh store."""
    assert process.master_addr is not None and process.master_port is not None
    host, port, size = process.master_addr, process.master_port, process.world_size
    if process.rank == 0:
        return dist.TCPStore(host, port, size, is_master=True, timeout=timeout, multi_tenant=True)
    deadline, told = time.monotonic() + timeout.total_seconds(), False
    while True:
        left = datetime.timedelta(seconds=max(deadline - time.monotonic(), 1.0))
        store = dist.TCPStore(host, port, size, is_master=False, timeout=left)
        if not store.check([_FORMED_KEY]):
            return store
        del store  # the previous start's rank 0: its group formed long ago
        if not told:
            log.info("%s serves the previous start's group: connecting again", format_host_port(host, port))
            told = True
        if time.monotonic() > deadline:
            raise TimeoutError(f"{format_host_port(host, port)} still serves the previous start's group")
        time.sleep(0.2)


def _frameworks() -> tuple[Any, Any]:
    """torch and torch.distributed, imported on first use (typed Any: no dependency on torch's types)."""
    import torch  # noqa: PLC0415 (lazy: the operator imports kubetrain.runtimes, never torch)
    import torch.distributed as dist  # noqa: PLC0415

    return torch, dist


def _use_cuda(device: DeviceChoice, torch: Any) -> bool:
    available = bool(torch.cuda.is_available())
    if device is DeviceChoice.CUDA and not available:
        raise ContractError(
            "device",
            "CUDA was requested but torch sees no GPU",
            "Request a GPU in the replica's resources (nvidia.com/gpu) or run with device 'cpu' or 'auto'",
        )
    return available and device is not DeviceChoice.CPU


def _select_device(torch: Any, process: TorchProcess, use_cuda: bool) -> Any:
    if not use_cuda:
        return torch.device("cpu")
    count = int(torch.cuda.device_count())
    if process.local_rank >= count:
        raise ContractError(
            "LOCAL_RANK",
            f"is {process.local_rank} but this replica sees {count} GPU(s)",
            "Set nprocPerNode to at most the number of GPUs the replica requests",
        )
    torch.cuda.set_device(process.local_rank)
    return torch.device("cuda", process.local_rank)
