"""Pod-side XGBoost helper: join the job's collective (`xgboost.collective`) from the XGBoostJob environment.

Training code runs `with collective() as ctx:` and trains with `xgboost.train` inside it: the histograms of
every process's rows are all-reduced each round, so every process builds the same model from the whole
data set while holding only its own shard. The master (RANK 0) starts the collective's tracker on
MASTER_PORT, listening on every interface, as Kubeflow's XGBoost examples arrange it; every process (the
master too) then connects to MASTER_ADDR:MASTER_PORT with its RANK as task id, and the tracker hands out
ranks in task-id order, so the collective's rank is the pod's RANK. Workers that start before the tracker
retry until it answers. Without the XGBoostJob env the process runs alone; with half of it, ContractError
says what is missing.

xgboost is imported lazily: the operator never imports this module, and importing it costs nothing.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kubetrain.podcontract import XGBoostEnv

__all__ = ["DEFAULT_TIMEOUT_S", "XGBoostContext", "collective", "tracker_args", "worker_args"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0
_RETRY_EVERY_S = 1.0  # how often a worker retries the tracker: dmlc_retry is a count of tries
_TASK_ID_WIDTH = 10  # ranks as task ids, zero-padded so that the tracker's string order is numeric order


@dataclass(frozen=True)
class XGBoostContext:
    """What a training loop needs to know about its place in the job."""

    rank: int
    world_size: int
    tracker: str | None
    """`host:port` of the tracker; None for a process that runs alone."""

    @property
    def distributed(self) -> bool:
        return self.tracker is not None

    @property
    def is_master(self) -> bool:
        return self.rank == 0


def tracker_args(env: XGBoostEnv, timeout_s: float) -> dict[str, Any]:
    """The keyword arguments of `xgboost.tracker.RabitTracker` for the master's tracker."""
    return {
        "n_workers": env.world_size,
        "host_ip": "0.0.0.0",
        "port": env.master_port,
        "sortby": "task",
        "timeout": max(1, round(timeout_s)),
    }


def worker_args(env: XGBoostEnv, timeout_s: float) -> dict[str, Any]:
    """The keyword arguments of `xgboost.collective.CommunicatorContext` for this process."""
    return {
        "dmlc_communicator": "rabit",
        "dmlc_tracker_uri": env.master_addr,
        "dmlc_tracker_port": env.master_port,
        "dmlc_task_id": str(env.rank).zfill(_TASK_ID_WIDTH),
        "dmlc_retry": max(1, round(timeout_s / _RETRY_EVERY_S)),
        "dmlc_timeout": max(1, round(timeout_s)),
    }


@contextmanager
def collective(
    *, timeout_s: float = DEFAULT_TIMEOUT_S, env: Mapping[str, str] | None = None
) -> Iterator[XGBoostContext]:
    """Join the job's collective for the `with` block (the master also runs the tracker, and waits for it
    to finish after the block); a lone process without the XGBoostJob env just runs the block.

    `timeout_s` bounds the wait for the tracker and the other processes. Raises ContractError when the
    environment is half-set or malformed, and RuntimeError when the tracker assigns a rank other than RANK.
    """
    xgb_env = XGBoostEnv.from_env(env)
    if xgb_env is None:
        yield XGBoostContext(rank=0, world_size=1, tracker=None)
        return
    coll = importlib.import_module("xgboost.collective")
    tracker = None
    if xgb_env.is_master:
        tracker = importlib.import_module("xgboost.tracker").RabitTracker(**tracker_args(xgb_env, timeout_s))
        tracker.start()
    where = f"{xgb_env.master_addr}:{xgb_env.master_port}"
    with coll.CommunicatorContext(**worker_args(xgb_env, timeout_s)):
        rank, size = coll.get_rank(), coll.get_world_size()
        if (rank, size) != (xgb_env.rank, xgb_env.world_size):
            raise RuntimeError(
                f"the tracker at {where} made this process rank {rank} of {size}; the XGBoostJob env says "
                f"RANK {xgb_env.rank} of WORLD_SIZE {xgb_env.world_size}"
            )
        log.info("xgboost collective up: rank %d/%d, tracker %s", rank, size, where)
        yield XGBoostContext(rank, size, where)
    if tracker is not None:
        tracker.wait_for(max(1, round(timeout_s)))
