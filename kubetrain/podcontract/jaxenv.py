"""The JAXJob environment: what the operator renders and what a JAX process reads, as one value (JaxEnv).

The training-operator v1.9 gives every container of every JAXJob pod `PYTHONUNBUFFERED=1` and the four
values `jax.distributed.initialize` takes: the coordinator's host (`<job>-worker-0`, the Service of worker
0, which runs the coordinator service) and port (worker 0's `jaxjob-port`, 6666 by default), the number of
processes (every replica of the job) and this process's id (its replica index). One process per pod.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from kubetrain.podcontract import names as n
from kubetrain.podcontract.errors import ContractError
from kubetrain.podcontract.values import check_host, check_port, optional, parse_int, require

__all__ = ["JaxEnv"]

_FIX = (
    "The operator sets COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID in every "
    "container of a JAXJob; set all four, or none to run a single process"
)
_NAMES = (n.COORDINATOR_ADDRESS, n.COORDINATOR_PORT, n.NUM_PROCESSES, n.PROCESS_ID)


@dataclass(frozen=True)
class JaxEnv:
    """Where a JAX process finds the coordinator, how many processes there are, and which one it is."""

    coordinator_address: str
    """A host name or address, without a port (the port is `coordinator_port`); IPv6 in brackets."""
    coordinator_port: int
    num_processes: int
    process_id: int

    def __post_init__(self) -> None:
        check_host(self.coordinator_address, n.COORDINATOR_ADDRESS, _FIX)
        check_port(self.coordinator_port, n.COORDINATOR_PORT, _FIX)
        if self.num_processes < 1:
            raise ContractError(n.NUM_PROCESSES, f"{self.num_processes} is less than 1", _FIX)
        if not 0 <= self.process_id < self.num_processes:
            problem = f"{self.process_id} is not in [0, NUM_PROCESSES {self.num_processes})"
            raise ContractError(n.PROCESS_ID, problem, _FIX)

    @property
    def coordinator(self) -> str:
        """`host:port`, the `coordinator_address` argument of `jax.distributed.initialize`."""
        return f"{self.coordinator_address}:{self.coordinator_port}"

    def render(self) -> dict[str, str]:
        """The env vars, in the order the training-operator appends them."""
        return {
            n.PYTHONUNBUFFERED: "1",
            n.COORDINATOR_PORT: str(self.coordinator_port),
            n.COORDINATOR_ADDRESS: self.coordinator_address,
            n.NUM_PROCESSES: str(self.num_processes),
            n.PROCESS_ID: str(self.process_id),
        }

    @classmethod
    def parse(cls, env: Mapping[str, str]) -> JaxEnv:
        """The four values from `env`; ContractError naming the first that is missing or malformed."""
        port = require(env, n.COORDINATOR_PORT, _FIX)
        processes = require(env, n.NUM_PROCESSES, _FIX)
        return cls(
            coordinator_address=require(env, n.COORDINATOR_ADDRESS, _FIX),
            coordinator_port=parse_int(port, n.COORDINATOR_PORT, _FIX, minimum=1),
            num_processes=parse_int(processes, n.NUM_PROCESSES, _FIX, minimum=1),
            process_id=parse_int(require(env, n.PROCESS_ID, _FIX), n.PROCESS_ID, _FIX),
        )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> JaxEnv | None:
        """This process's JaxEnv, or None when none of the four is set (a single process, not a JAXJob).

        Half a set (some of the four) raises ContractError: a process that guessed would wait for peers
        that never come, or train alone while the others wait for it."""
        env = os.environ if env is None else env
        if all(optional(env, name) is None for name in _NAMES):
            return None
        return cls.parse(env)
