"""PyTorchJob env: what the operator renders (TorchEnv) and what one training process reads (TorchProcess)."""

from __future__ import annotations

import pytest

from kubetrain.podcontract import ContractError, MasterEnv, RendezvousEnv, TorchEnv, TorchProcess

MASTER = MasterEnv(addr="job-master-0", port=23456, world_size=3, rank=2)


def test_master_job_env_in_the_operators_order() -> None:
    env = TorchEnv(nproc_per_node="auto", nnodes=3, master=MASTER).render()
    assert list(env.items()) == [
        ("PYTHONUNBUFFERED", "1"),
        ("MASTER_PORT", "23456"),
        ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", "job-master-0"),
        ("PET_MASTER_ADDR", "job-master-0"),
        ("WORLD_SIZE", "3"),
        ("RANK", "2"),
        ("PET_NODE_RANK", "2"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "3"),
    ]


def test_elastic_env() -> None:
    rdzv = RendezvousEnv(
        endpoint="job-worker-0:23456",
        min_nodes=1,
        max_nodes=3,
        run_id="rdzv-id",
        conf=(("join_timeout", "60"), ("last_call_timeout", "5")),
        max_restarts=3,
        standalone=True,
    )
    env = TorchEnv(nproc_per_node="1", rendezvous=rdzv).render()
    assert env == {
        "PYTHONUNBUFFERED": "1",
        "PET_NPROC_PER_NODE": "1",
        "PET_RDZV_ENDPOINT": "job-worker-0:23456",
        "PET_RDZV_BACKEND": "c10d",
        "PET_NNODES": "1:3",
        "PET_MAX_RESTARTS": "3",
        "PET_RDZV_ID": "rdzv-id",
        "PET_RDZV_CONF": "join_timeout=60,last_call_timeout=5",
        "PET_STANDALONE": "",
    }
    assert "MASTER_ADDR" not in env and "RANK" not in env


@pytest.mark.parametrize(
    "env",
    [
        TorchEnv(nproc_per_node="auto", nnodes=3, master=MASTER),
        TorchEnv(nproc_per_node="2", rendezvous=RendezvousEnv(endpoint="w-0:1", min_nodes=2, max_nodes=2)),
        TorchEnv(
            nproc_per_node="gpu",
            master=MASTER,
            rendezvous=RendezvousEnv(
                endpoint="[::1]:29500", min_nodes=1, max_nodes=4, run_id="x", max_restarts=0
            ),
        ),
        TorchEnv(nnodes=1),
    ],
)
def test_render_then_parse_round_trips(env: TorchEnv) -> None:
    assert TorchEnv.parse(env.render()) == env


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MASTER_ADDR": "m"}, "MASTER_PORT"),
        ({"MASTER_ADDR": "m", "MASTER_PORT": "x", "WORLD_SIZE": "2", "RANK": "0"}, "MASTER_PORT"),
        ({"MASTER_ADDR": "m", "MASTER_PORT": "1", "WORLD_SIZE": "2", "RANK": "2"}, "RANK"),
        ({"MASTER_ADDR": "m", "MASTER_PORT": "1", "WORLD_SIZE": "0", "RANK": "0"}, "WORLD_SIZE"),
        ({"PET_NPROC_PER_NODE": "many"}, "PET_NPROC_PER_NODE"),
        ({"PET_NNODES": "two"}, "PET_NNODES"),
        ({"PET_RDZV_ENDPOINT": "w-0"}, "PET_RDZV_ENDPOINT"),
        ({"PET_RDZV_ENDPOINT": "w-0:1"}, "PET_NNODES"),
        ({"PET_RDZV_ENDPOINT": "w-0:1", "PET_NNODES": "3:1"}, "PET_NNODES"),
        ({"PET_RDZV_ENDPOINT": "w-0:1", "PET_NNODES": "1:2", "PET_RDZV_CONF": "novalue"}, "PET_RDZV_CONF"),
    ],
)
def test_malformed_env_names_the_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ContractError) as err:
        TorchEnv.parse(env)
    assert err.value.variable == variable
    assert "operator" in err.value.fix or "nprocPerNode" in err.value.fix


def test_a_process_under_torchrun() -> None:
    process = TorchProcess.from_env(
        {
            "TORCHELASTIC_RUN_ID": "job1",
            "RANK": "3",
            "WORLD_SIZE": "4",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "localhost",
            "MASTER_PORT": "40000",
        }
    )
    assert process == TorchProcess(
        rank=3,
        world_size=4,
        local_rank=1,
        local_world_size=2,
        master_addr="localhost",
        master_port=40000,
        under_torchrun=True,
    )


def test_a_process_started_directly_with_the_operators_env() -> None:
    env = TorchEnv(nproc_per_node="auto", nnodes=3, master=MASTER).render()
    process = TorchProcess.from_env(env)
    assert (process.rank, process.world_size, process.local_rank) == (2, 3, 0)
    assert (process.master_addr, process.master_port, process.under_torchrun) == (
        "job-master-0",
        23456,
        False,
    )
    assert process.distributed


def test_a_single_replica_without_master_runs_alone() -> None:
    process = TorchProcess.from_env(TorchEnv(nproc_per_node="auto", nnodes=1).render())
    assert process == TorchProcess(rank=0, world_size=1)
    assert not process.distributed


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto"}, "add a Master"),
        ({"PET_RDZV_ENDPOINT": "w-0:1", "PET_NNODES": "1:2"}, "torchrun"),
        (
            {
                "MASTER_ADDR": "m",
                "MASTER_PORT": "1",
                "WORLD_SIZE": "4",
                "RANK": "0",
                "PET_NPROC_PER_NODE": "2",
            },
            "torchrun",
        ),
        ({"LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "m"}, "MASTER_PORT"),
    ],
)
def test_a_process_refuses_env_it_cannot_honour(env: dict[str, str], says: str) -> None:
    with pytest.raises(ContractError, match=says):
        TorchProcess.from_env(env)
