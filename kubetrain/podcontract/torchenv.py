"""The PyTorchJob environment: what the operator renders (TorchEnv) and what a process reads (TorchProcess).

TorchEnv mirrors the training-operator: `MASTER_*`/`WORLD_SIZE`/`RANK` only when the job has a Master
replica, torchrun's `PET_*` variables always (elastic jobs get the rendezvous ones), `PYTHONUNBUFFERED=1`.
TorchProcess is the view of one training process, under torchrun or started directly with that env.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kubetrain.podcontract import names as n
from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.values import optional, parse_host_port, parse_int, require

__all__ = ["MasterEnv", "RendezvousEnv", "TorchEnv", "TorchProcess"]

_MASTER_FIX = "The operator sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK when a PyTorchJob has a Master"
_ELASTIC_FIX = "The operator sets PET_RDZV_* and PET_NNODES=min:max when the PyTorchJob has an elasticPolicy"
_NPROC_FIX = "PET_NPROC_PER_NODE comes from spec.nprocPerNode: 'auto', 'cpu', 'gpu' or a positive integer"


@dataclass(frozen=True)
class MasterEnv:
    """The static rendezvous at the Master replica: set on every replica when a Master exists."""

    addr: str
    port: int
    world_size: int
    rank: int
    """The replica's node rank: 0 for the master, index + 1 for worker `index`."""

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise ContractError(n.MASTER_PORT, f"port {self.port} is outside 1..65535", _MASTER_FIX)
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            problem = f"rank {self.rank} is not in [0, world size {self.world_size})"
            raise ContractError(n.RANK, problem, _MASTER_FIX)


@dataclass(frozen=True)
class RendezvousEnv:
    """torchrun's elastic rendezvous, set on every replica of a job with an elasticPolicy."""

    endpoint: str
    min_nodes: int
    max_nodes: int
    backend: str = "c10d"
    run_id: str | None = None
    conf: tuple[tuple[str, str], ...] = ()
    max_restarts: int | None = None
    standalone: bool = False

    def __post_init__(self) -> None:
        parse_host_port(self.endpoint, n.PET_RDZV_ENDPOINT, _ELASTIC_FIX)
        if not 1 <= self.min_nodes <= self.max_nodes:
            problem = f"min {self.min_nodes} / max {self.max_nodes} nodes is not 1 <= min <= max"
            raise ContractError(n.PET_NNODES, problem, _ELASTIC_FIX)


@dataclass(frozen=True)
class TorchEnv:
    """Everything the operator injects into each container of a PyTorchJob replica."""

    nproc_per_node: str | None = None
    nnodes: int | None = None
    """PET_NNODES for a job without elasticPolicy: the total number of replicas."""
    master: MasterEnv | None = None
    rendezvous: RendezvousEnv | None = None

    def __post_init__(self) -> None:
        if self.nproc_per_node is not None and self.nproc_per_node not in ("auto", "cpu", "gpu"):
            parse_int(self.nproc_per_node, n.PET_NPROC_PER_NODE, _NPROC_FIX, minimum=1)
        if self.nnodes is not None and self.rendezvous is not None:
            raise ContractError(n.PET_NNODES, "both a node count and an elastic range given", _ELASTIC_FIX)

    def render(self) -> dict[str, str]:
        """The env vars, in the order the training-operator appends them."""
        env = {n.PYTHONUNBUFFERED: "1"}
        if self.master is not None:
            m = self.master
            env |= {n.MASTER_PORT: str(m.port), n.PET_MASTER_PORT: str(m.port)}
            env |= {n.MASTER_ADDR: m.addr, n.PET_MASTER_ADDR: m.addr}
            env |= {n.WORLD_SIZE: str(m.world_size), n.RANK: str(m.rank), n.PET_NODE_RANK: str(m.rank)}
        if self.nproc_per_node is not None:
            env[n.PET_NPROC_PER_NODE] = self.nproc_per_node
        if self.rendezvous is not None:
            env |= _render_rendezvous(self.rendezvous)
        elif self.nnodes is not None:
            env[n.PET_NNODES] = str(self.nnodes)
        return env

    @classmethod
    def parse(cls, env: Mapping[str, str]) -> TorchEnv:
        elastic = optional(env, n.PET_RDZV_ENDPOINT) is not None
        nnodes_text = optional(env, n.PET_NNODES)
        nnodes = None
        if not elastic and nnodes_text is not None:
            nnodes = parse_int(nnodes_text, n.PET_NNODES, _ELASTIC_FIX, minimum=1)
        return cls(
            nproc_per_node=optional(env, n.PET_NPROC_PER_NODE),
            nnodes=nnodes,
            master=_parse_master(env) if optional(env, n.MASTER_ADDR) is not None else None,
            rendezvous=_parse_rendezvous(env) if elastic else None,
        )


def _render_rendezvous(r: RendezvousEnv) -> dict[str, str]:
    env = {n.PET_RDZV_ENDPOINT: r.endpoint, n.PET_RDZV_BACKEND: r.backend}
    env[n.PET_NNODES] = f"{r.min_nodes}:{r.max_nodes}"
    if r.max_restarts is not None:
        env[n.PET_MAX_RESTARTS] = str(r.max_restarts)
    if r.run_id is not None:
        env[n.PET_RDZV_ID] = r.run_id
    if r.conf:
        env[n.PET_RDZV_CONF] = ",".join(f"{k}={v}" for k, v in r.conf)
    if r.standalone:
        env[n.PET_STANDALONE] = ""
    return env


def _parse_master(env: Mapping[str, str]) -> MasterEnv:
    return MasterEnv(
        addr=require(env, n.MASTER_ADDR, _MASTER_FIX),
        port=parse_int(require(env, n.MASTER_PORT, _MASTER_FIX), n.MASTER_PORT, _MASTER_FIX, minimum=1),
        world_size=parse_int(require(env, n.WORLD_SIZE, _MASTER_FIX), n.WORLD_SIZE, _MASTER_FIX, minimum=1),
        rank=parse_int(require(env, n.RANK, _MASTER_FIX), n.RANK, _MASTER_FIX),
    )


def _parse_rendezvous(env: Mapping[str, str]) -> RendezvousEnv:
    endpoint = require(env, n.PET_RDZV_ENDPOINT, _ELASTIC_FIX)
    parse_host_port(endpoint, n.PET_RDZV_ENDPOINT, _ELASTIC_FIX)
    nnodes = require(env, n.PET_NNODES, _ELASTIC_FIX)
    low, _, high = nnodes.partition(":")
    min_nodes = parse_int(low, n.PET_NNODES, _ELASTIC_FIX, minimum=1)
    max_nodes = parse_int(high, n.PET_NNODES, _ELASTIC_FIX, minimum=1) if high else min_nodes
    restarts = optional(env, n.PET_MAX_RESTARTS)
    return RendezvousEnv(
        endpoint=endpoint,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
        backend=optional(env, n.PET_RDZV_BACKEND) or "c10d",
        run_id=optional(env, n.PET_RDZV_ID),
        conf=_parse_conf(optional(env, n.PET_RDZV_CONF)),
        max_restarts=None if restarts is None else parse_int(restarts, n.PET_MAX_RESTARTS, _ELASTIC_FIX),
        standalone=n.PET_STANDALONE in env,
    )


def _parse_conf(text: str | None) -> tuple[tuple[str, str], ...]:
    if text is None:
        return ()
    pairs = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ContractError(n.PET_RDZV_CONF, f"{item!r} is not key=value", _ELASTIC_FIX)
        pairs.append((key, value))
    return tuple(pairs)


@dataclass(frozen=True)
class TorchProcess:
    """One training process's place in the job, read from the env that torchrun or the operator set."""

    rank: int
    world_size: int
    local_rank: int = 0
    local_world_size: int = 1
    master_addr: str | None = None
    master_port: int | None = None
    under_torchrun: bool = False

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> TorchProcess:
        """Raises ContractError when the env is half-set or asks for a launcher the process lacks."""
        env = os.environ if env is None else env
        if n.TORCHELASTIC_RUN_ID in env or n.LOCAL_RANK in env:
            return _torchrun_process(env)
        if optional(env, n.MASTER_ADDR) is not None:
            return _plain_process(env)
        _refuse_missing_launcher(env)
        return cls(rank=0, world_size=1)


def _torchrun_process(env: Mapping[str, str]) -> TorchProcess:
    fix = "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT for each process it starts"
    master = _parse_master(env)
    local_size = optional(env, n.LOCAL_WORLD_SIZE) or "1"
    return TorchProcess(
        rank=master.rank,
        world_size=master.world_size,
        local_rank=parse_int(require(env, n.LOCAL_RANK, fix), n.LOCAL_RANK, fix),
        local_world_size=parse_int(local_size, n.LOCAL_WORLD_SIZE, fix, minimum=1),
        master_addr=master.addr,
        master_port=master.port,
        under_torchrun=True,
    )


def _plain_process(env: Mapping[str, str]) -> TorchProcess:
    master = _parse_master(env)
    nproc = optional(env, n.PET_NPROC_PER_NODE)
    if nproc is not None and nproc.isdigit() and int(nproc) > 1:
        raise ContractError(
            n.PET_NPROC_PER_NODE,
            f"is {nproc}, so WORLD_SIZE counts {nproc} processes per replica, but this process was not "
            "started by torchrun",
            "Make the container command `torchrun ...` (it reads PET_*), or set nprocPerNode to 1",
        )
    return TorchProcess(
        rank=master.rank, world_size=master.world_size, master_addr=master.addr, master_port=master.port
    )


def _refuse_missing_launcher(env: Mapping[str, str]) -> None:
    if optional(env, n.PET_RDZV_ENDPOINT) is not None:
        raise ContractError(
            n.PET_RDZV_ENDPOINT,
            "set (an elastic PyTorchJob) but this process was not started by torchrun",
            "Make the container command `torchrun ...`: it reads PET_* and runs the rendezvous",
        )
    nnodes = optional(env, n.PET_NNODES)
    if nnodes is not None and nnodes.isdigit() and int(nnodes) > 1:
        raise ContractError(
            n.MASTER_ADDR,
            f"not set although PET_NNODES is {nnodes}",
            "The operator sets MASTER_ADDR/RANK/WORLD_SIZE only when the PyTorchJob has a Master replica: "
            "add a Master, or give the job an elasticPolicy and start it with torchrun",
        )
