"""The XGBoostJob environment: what the operator renders and what an XGBoost process reads (XGBoostEnv).

The training-operator v1.9 gives every container of every XGBoostJob pod `PYTHONUNBUFFERED=1` and:

- `MASTER_ADDR`: the master's address (`<job>-master-0`), where the collective's tracker runs;
- `MASTER_PORT`: the Master's `xgboostjob-port` (9999 by default), the tracker's port;
- `WORLD_SIZE`: every replica of the job (the master trains too);
- `RANK`: the master's 0, a worker's index + 1 (the Master count, which is always 1);
- with more than one replica, for LightGBM's machine list: `WORKER_PORT` (the Worker's `xgboostjob-port`)
  and `WORKER_ADDRS`, `<job>-worker-0,...,<job>-worker-<WORLD_SIZE-2>` (one per replica but the master).

One process per pod. Every value is the same in every pod but RANK.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kubetrain.podcontract import names as n
from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.values import check_host, check_port, optional, parse_int, require

__all__ = ["XGBoostEnv"]

_FIX = (
    "The operator sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK in every container of an XGBoostJob "
    "(and WORKER_ADDRS and WORKER_PORT when it has more than one replica); set all of them, or none to "
    "run a single process"
)
_NAMES = (n.MASTER_ADDR, n.MASTER_PORT, n.WORLD_SIZE, n.RANK)


@dataclass(frozen=True)
class XGBoostEnv:
    """Where an XGBoost process finds the tracker, how many processes there are, which one it is, and
    (LightGBM) where the workers listen."""

    master_addr: str
    """A host name or address, without a port (the port is `master_port`); IPv6 in brackets."""
    master_port: int
    world_size: int
    rank: int
    worker_port: int | None = None
    worker_addrs: tuple[str, ...] = ()
    """`WORKER_ADDRS`, present (with `worker_port`) exactly when `world_size` > 1: WORLD_SIZE - 1 hosts."""

    def __post_init__(self) -> None:
        check_host(self.master_addr, n.MASTER_ADDR, _FIX)
        check_port(self.master_port, n.MASTER_PORT, _FIX)
        if self.world_size < 1:
            raise ContractError(n.WORLD_SIZE, f"{self.world_size} is less than 1", _FIX)
        if not 0 <= self.rank < self.world_size:
            raise ContractError(n.RANK, f"{self.rank} is not in [0, WORLD_SIZE {self.world_size})", _FIX)
        if (self.worker_port is None) != (self.world_size == 1):
            problem = "must be set" if self.world_size > 1 else "must not be set"
            raise ContractError(n.WORKER_PORT, f"{problem} when WORLD_SIZE is {self.world_size}", _FIX)
        if self.worker_port is not None:
            check_port(self.worker_port, n.WORKER_PORT, _FIX)
        if len(self.worker_addrs) != self.world_size - 1:
            problem = f"has {len(self.worker_addrs)} hosts, WORLD_SIZE {self.world_size} needs one fewer"
            raise ContractError(n.WORKER_ADDRS, problem, _FIX)
        for host in self.worker_addrs:
            check_host(host, n.WORKER_ADDRS, _FIX)

    @property
    def is_master(self) -> bool:
        """Whether this process is the master's (rank 0): it runs the tracker."""
        return self.rank == 0

    def render(self) -> dict[str, str]:
        """The env vars, in the order the training-operator appends them."""
        env = {
            n.MASTER_PORT: str(self.master_port),
            n.MASTER_ADDR: self.master_addr,
            n.WORLD_SIZE: str(self.world_size),
            n.RANK: str(self.rank),
            n.PYTHONUNBUFFERED: "1",
        }
        if self.worker_port is not None:
            env[n.WORKER_PORT] = str(self.worker_port)
            env[n.WORKER_ADDRS] = ",".join(self.worker_addrs)
        return env

    @classmethod
    def parse(cls, env: Mapping[str, str]) -> XGBoostEnv:
        """The values from `env`; ContractError naming the first that is missing or malformed."""
        world_size = parse_int(require(env, n.WORLD_SIZE, _FIX), n.WORLD_SIZE, _FIX, minimum=1)
        port = optional(env, n.WORKER_PORT)
        addrs = optional(env, n.WORKER_ADDRS)
        return cls(
            master_addr=require(env, n.MASTER_ADDR, _FIX),
            master_port=parse_int(require(env, n.MASTER_PORT, _FIX), n.MASTER_PORT, _FIX, minimum=1),
            world_size=world_size,
            rank=parse_int(require(env, n.RANK, _FIX), n.RANK, _FIX),
            worker_port=None if port is None else parse_int(port, n.WORKER_PORT, _FIX, minimum=1),
            worker_addrs=tuple(a.strip() for a in addrs.split(",")) if addrs else (),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> XGBoostEnv | None:
        """This process's XGBoostEnv, or None when none of MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK is
        set (a single process, not an XGBoostJob).

        Half a set raises ContractError: a process that guessed would wait for peers that never come, or
        train alone while the others wait for it."""
        env = os.environ if env is None else env
        if all(optional(env, name) is None for name in _NAMES):
            return None
        return cls.parse(env)
