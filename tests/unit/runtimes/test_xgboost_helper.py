"""The pod-side XGBoost helper: the tracker's and the workers' arguments from the XGBoostJob env, and the
lone-process and half-env cases. Real collectives of several processes run in tests/runtime."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kubetrain.podcontract import ContractError, XGBoostEnv
from kubetrain.runtimes import xgboost as kt_xgb

MASTER = XGBoostEnv(
    master_addr="job-master-0.job",
    master_port=9999,
    world_size=12,
    rank=0,
    worker_port=9999,
    worker_addrs=tuple(f"job-worker-{i}.job" for i in range(11)),
)


def test_the_master_runs_the_tracker_on_its_port_for_every_process() -> None:
    args = kt_xgb.tracker_args(MASTER, timeout_s=120)
    assert args == {"n_workers": 12, "host_ip": "0.0.0.0", "port": 9999, "sortby": "task", "timeout": 120}


def test_every_process_joins_the_tracker_at_master_addr_with_its_rank_as_task_id() -> None:
    worker = replace(MASTER, rank=11)
    args = kt_xgb.worker_args(worker, timeout_s=30)
    assert (args["dmlc_tracker_uri"], args["dmlc_tracker_port"]) == ("job-master-0.job", 9999)
    assert args["dmlc_communicator"] == "rabit" and args["dmlc_timeout"] == 30 and args["dmlc_retry"] >= 30


def test_task_ids_sort_as_ranks_do() -> None:
    """The tracker orders task ids as strings: rank 10 must come after rank 9, not after rank 1."""
    ids = [kt_xgb.worker_args(replace(MASTER, rank=r), 1)["dmlc_task_id"] for r in range(12)]
    assert sorted(ids) == ids


def test_without_the_env_the_block_runs_alone() -> None:
    with kt_xgb.collective(env={}) as ctx:
        assert (ctx.rank, ctx.world_size, ctx.distributed, ctx.is_master) == (0, 1, False, True)


def test_half_the_env_is_a_contract_error_before_xgboost_is_touched() -> None:
    with pytest.raises(ContractError, match="WORLD_SIZE"), kt_xgb.collective(env={"MASTER_ADDR": "m"}):
        pass
