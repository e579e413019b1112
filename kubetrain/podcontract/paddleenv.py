"""The PaddleJob environment: what the operator renders and what `paddle.distributed.launch` reads, as one
value (PaddleEnv).

The training-operator v1.9 gives every container of every PaddleJob pod, in this order:

- `PYTHONUNBUFFERED=1`, `PADDLE_JOB_ID` (the job's name) and `PADDLE_NNODES` (every replica of the job);
- `PADDLE_MASTER`, the launcher's rendezvous endpoint `host:port`. Collective mode (no Master replica
  type): worker 0 serves it on the Worker's `master` port (36543 by default). Parameter-server mode (a
  Master replica type): Master 0 serves it on the Master's `master` port. The serving pod itself gets
  `POD_IP_DUMMY` from the downward API (`status.podIP`) just before, and `PADDLE_MASTER=$(POD_IP_DUMMY):port`
  (the launcher starts the store when the endpoint's address is its own); every other pod gets the
  serving pod's name;
- parameter-server mode only: `PADDLE_SERVER_NUM=1` on Master pods, `PADDLE_TRAINER_NUM=1` on Worker pods
  (each pod runs one server or one trainer).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubetrain.podcontract import names as n
from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.values import format_host_port, optional, parse_host_port, parse_int, require

__all__ = ["POD_IP_SOURCE", "PaddleEnv", "PaddleRole"]

POD_IP_SOURCE: Mapping[str, Any] = {"fieldRef": {"fieldPath": "status.podIP"}}
"""The `valueFrom` of POD_IP_DUMMY: the pod's own IP, from the downward API."""

_FIX = (
    "The operator sets PADDLE_MASTER, PADDLE_NNODES and PADDLE_JOB_ID in every container of a PaddleJob; "
    "set all three (PADDLE_MASTER as host:port), or none to run a single node"
)
_HOST = re.compile(r"^[A-Za-z0-9_.:-]+$")
"""A DNS name, an IPv4 address or an IPv6 address without brackets (`master` adds them)."""
_NAMES = (n.PADDLE_MASTER, n.PADDLE_NNODES, n.PADDLE_JOB_ID)


class PaddleRole(StrEnum):
    """What a pod runs in parameter-server mode (`paddle.distributed.launch` reads the counts)."""

    SERVER = "server"
    """A Master pod: one parameter server (PADDLE_SERVER_NUM=1)."""
    TRAINER = "trainer"
    """A Worker pod: one trainer (PADDLE_TRAINER_NUM=1)."""


@dataclass(frozen=True)
class PaddleEnv:
    """Which job, how many nodes, where the rendezvous is, and (parameter-server mode) this pod's role."""

    job_id: str
    nnodes: int
    master_host: str | None
    """The rendezvous host; None: this pod serves it, at its own IP (POD_IP_DUMMY)."""
    master_port: int
    role: PaddleRole | None = None
    """None: collective mode."""

    def __post_init__(self) -> None:
        if not self.job_id:
            raise ContractError(n.PADDLE_JOB_ID, "is empty", _FIX)
        if self.nnodes < 1:
            raise ContractError(n.PADDLE_NNODES, f"{self.nnodes} is less than 1", _FIX)
        if self.master_host is not None and not _HOST.match(self.master_host):
            raise ContractError(n.PADDLE_MASTER, f"{self.master_host!r} is not a host name or address", _FIX)
        if not 1 <= self.master_port <= 65535:
            raise ContractError(n.PADDLE_MASTER, f"port {self.master_port} is outside 1..65535", _FIX)

    @property
    def master(self) -> str:
        """PADDLE_MASTER as rendered: `host:port`, or `$(POD_IP_DUMMY):port` on the serving pod."""
        if self.master_host is None:
            return f"$({n.POD_IP_DUMMY}):{self.master_port}"
        return format_host_port(self.master_host, self.master_port)

    def render(self) -> dict[str, str | Mapping[str, Any]]:
        """The env vars, in the order the training-operator appends them; a mapping is a `valueFrom`."""
        env: dict[str, str | Mapping[str, Any]] = {
            n.PYTHONUNBUFFERED: "1",
            n.PADDLE_JOB_ID: self.job_id,
            n.PADDLE_NNODES: str(self.nnodes),
        }
        if self.master_host is None:
            env[n.POD_IP_DUMMY] = POD_IP_SOURCE
        env[n.PADDLE_MASTER] = self.master
        if self.role is PaddleRole.SERVER:
            env[n.PADDLE_SERVER_NUM] = "1"
        elif self.role is PaddleRole.TRAINER:
            env[n.PADDLE_TRAINER_NUM] = "1"
        return env

    @classmethod
    def parse(cls, env: Mapping[str, str]) -> PaddleEnv:
        """The values from a pod's resolved env (PADDLE_MASTER's `$(POD_IP_DUMMY)` already expanded, so
        `master_host` is always set); ContractError naming the first that is missing or malformed."""
        host, port = parse_host_port(require(env, n.PADDLE_MASTER, _FIX), n.PADDLE_MASTER, _FIX)
        servers, trainers = optional(env, n.PADDLE_SERVER_NUM), optional(env, n.PADDLE_TRAINER_NUM)
        if servers is not None and trainers is not None:
            problem = f"is set beside {n.PADDLE_TRAINER_NUM}; a pod runs servers or trainers"
            raise ContractError(n.PADDLE_SERVER_NUM, problem, "set only one of them")
        role = None
        if servers is not None:
            parse_int(servers, n.PADDLE_SERVER_NUM, _FIX, minimum=1)
            role = PaddleRole.SERVER
        elif trainers is not None:
            parse_int(trainers, n.PADDLE_TRAINER_NUM, _FIX, minimum=1)
            role = PaddleRole.TRAINER
        return cls(
            job_id=require(env, n.PADDLE_JOB_ID, _FIX),
            nnodes=parse_int(require(env, n.PADDLE_NNODES, _FIX), n.PADDLE_NNODES, _FIX, minimum=1),
            master_host=host,
            master_port=port,
            role=role,
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> PaddleEnv | None:
        """This process's PaddleEnv, or None when none of PADDLE_MASTER, PADDLE_NNODES and PADDLE_JOB_ID is
        set (a single node, not a PaddleJob). Some but not all of them raises ContractError."""
        env = os.environ if env is None else env
        if all(optional(env, name) is None for name in _NAMES):
            return None
        return cls.parse(env)
