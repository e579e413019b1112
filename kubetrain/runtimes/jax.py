"""Pod-side JAX helper: start `jax.distributed` from the JAXJob environment, and stop it cleanly.

Training code calls `init_distributed()` (or uses `distributed()` as a context manager) and gets its process
id and the number of processes. Process 0 serves the coordinator at COORDINATOR_ADDRESS:COORDINATOR_PORT
(its own Service), every process connects to it, and from then on `jax.devices()` lists the devices of every
process, so one `jax.jit` over a mesh of them runs the job's collectives (gloo between CPU processes).
Without the JAXJob env the process runs alone; with half of it, ContractError says what is missing.

jax is imported lazily: the operator never imports this module, and importing it costs nothing.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubetrain.podcontract import JaxEnv

__all__ = ["DEFAULT_TIMEOUT_S", "JaxContext", "distributed", "init_distributed", "shutdown"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class JaxContext:
    """What a training loop needs to know about its place in the job."""

    process_id: int
    num_processes: int
    coordinator: str | None
    """`host:port` of the coordinator; None for a process that runs alone."""

    @property
    def distributed(self) -> bool:
        return self.coordinator is not None

    @property
    def is_chief(self) -> bool:
        return self.process_id == 0


def init_distributed(
    *, timeout_s: float = DEFAULT_TIMEOUT_S, env: Mapping[str, str] | None = None
) -> JaxContext:
    """Connect this process to the job's coordinator (process 0 starts it); a no-op without the JAXJob env.

    `timeout_s` bounds the wait for the coordinator and the other processes. Raises ContractError when the
    environment is half-set or malformed.
    """
    jax_env = JaxEnv.from_env(env)
    if jax_env is None:
        return JaxContext(process_id=0, num_processes=1, coordinator=None)
    _jax().distributed.initialize(
        coordinator_address=jax_env.coordinator,
        num_processes=jax_env.num_processes,
        process_id=jax_env.process_id,
        initialization_timeout=max(1, round(timeout_s)),
    )
    log.info(
        "jax.distributed up: process %d/%d, coordinator %s",
        jax_env.process_id,
        jax_env.num_processes,
        jax_env.coordinator,
    )
    return JaxContext(jax_env.process_id, jax_env.num_processes, jax_env.coordinator)


def shutdown(ctx: JaxContext) -> None:
    """Leave the job (every process waits for the others at the coordinator); a no-op for a lone process."""
    if ctx.distributed:
        _jax().distributed.shutdown()


@contextmanager
def distributed(
    *, timeout_s: float = DEFAULT_TIMEOUT_S, env: Mapping[str, str] | None = None
) -> Iterator[JaxContext]:
    """`with distributed() as ctx:` connects to the coordinator and always disconnects."""
    ctx = init_distributed(timeout_s=timeout_s, env=env)
    try:
        yield ctx
    finally:
        shutdown(ctx)


def _jax() -> Any:
    """jax, imported on first use (typed Any: no dependency on jax's types)."""
    return importlib.import_module("jax")
