"""PyTorchJob replicas as local processes, with exactly the env TorchEnv renders: they must train together.

Service names are mapped to 127.0.0.1 and every test takes its own free ports, as the local runner does.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kubetrain.podcontract import MasterEnv, RendezvousEnv, TorchEnv

from .conftest import Replicas, assert_trained_in_lock_step, base_env, free_ports, single_result

pytestmark = pytest.mark.runtime

DDP = "kubetrain.runtimes.examples.pytorch_ddp"
ELASTIC = "kubetrain.runtimes.examples.pytorch_elastic"
ACCURACY = 0.9  # measured 0.989 (10 epochs); guessing scores 0.1
DEADLINE_S = 180.0


def master_job_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    """The env of replica `rank` of a PyTorchJob with a Master: rank 0 is master-0, rank i is worker-(i-1)."""
    master = MasterEnv(addr="127.0.0.1", port=port, world_size=world_size, rank=rank)
    return base_env() | TorchEnv(nproc_per_node="auto", nnodes=world_size, master=master).render()


def test_ddp_replicas_train_in_lock_step_over_gloo(replicas: Replicas) -> None:
    (port,) = free_ports(1)
    started = [
        replicas.python(f"rank{r}", DDP, ["--timeout", "60", "--device", "cpu"], master_job_env(r, 2, port))
        for r in range(2)
    ]
    codes = replicas.wait(started, DEADLINE_S)
    assert codes == {"rank0": 0, "rank1": 0}, replicas.tails()
    results = [single_result(r) for r in started]
    assert_trained_in_lock_step(results, world_size=2, accuracy=ACCURACY)
    assert {r["backend"] for r in results} == {"gloo"}


def test_elastic_replicas_resume_from_the_checkpoint_after_a_restart(
    replicas: Replicas, tmp_path: Path
) -> None:
    """Two torchrun agents driven only by PET_*; every worker exits 1 at epoch 3 on the first attempt,
    torchrun restarts the group (PET_MAX_RESTARTS) and the workers resume at epoch 3 from the checkpoint."""
    (port,) = free_ports(1)
    rdzv = RendezvousEnv(
        endpoint=f"127.0.0.1:{port}", min_nodes=2, max_nodes=2, run_id="elastic-test", max_restarts=1
    )
    env = base_env() | TorchEnv(nproc_per_node="1", rendezvous=rdzv).render()
    args = [
        "--timeout",
        "60",
        "--device",
        "cpu",
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
        "--exit-at-epoch",
        "3",
    ]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "-m", ELASTIC, *args]
    started = [replicas.start(f"node{i}", torchrun, env) for i in range(2)]
    codes = replicas.wait(started, DEADLINE_S * 1.5)
    assert codes == {"node0": 0, "node1": 0}, replicas.tails()
    results = [result for node in started for result in node.results()]
    assert_trained_in_lock_step(results, world_size=2, accuracy=ACCURACY)
    # exactly one restart: torch alone (env:// on torchrun's agent store) often needed more, or failed, as
    # restarted ranks read the dead group's addresses; kubetrain.runtimes.torch gives each start a new store
    for r in results:
        assert (r["restart_count"], r["resumed_from"], r["run_id"]) == (1, 3, "elastic-test"), r


def test_a_dead_peer_fails_the_others_instead_of_hanging(replicas: Replicas) -> None:
    (port,) = free_ports(1)
    survivor = replicas.python(
        "rank0", DDP, ["--timeout", "30", "--device", "cpu"], master_job_env(0, 2, port)
    )
    doomed_args = ["--timeout", "30", "--device", "cpu", "--exit-at-epoch", "1"]
    doomed = replicas.python("rank1", DDP, doomed_args, master_job_env(1, 2, port))
    codes = replicas.wait([doomed, survivor], deadline_s=120)
    assert codes["rank1"] == 1, replicas.tails()
    assert codes["rank0"] != 0, replicas.tails()
    assert survivor.results() == []


GANG_MEMBER = """
import logging, sys, time
import torch, torch.distributed as dist
logging.basicConfig(level=logging.INFO)
from kubetrain.runtimes import torch as kt
start = sys.argv[1]
ctx = kt.init_distributed(device=kt.DeviceChoice.CPU, timeout_s=20)
print("formed", flush=True)
if start == "old" and ctx.rank == 0:
    while True:  # busy elsewhere (evaluating, checkpointing): it notices its dead peer late
        time.sleep(1)
t = torch.ones(4)
for _ in range(10):
    dist.all_reduce(t)
print("trained", float(t[0]), flush=True)
kt.destroy()
"""


def test_a_rank_restarted_before_rank_0_died_waits_for_the_new_rank_0(replicas: Replicas) -> None:
    # A gang restarting in place: rank 1 restarts at once, while the previous rank 0 still serves its store.
    # Met there, rank 1 would read the dead group's addresses and the new group would never form.
    (port,) = free_ports(1)

    def member(rank: int, start: str) -> Any:
        argv = [sys.executable, "-c", GANG_MEMBER, start]
        return replicas.start(f"{start}{rank}", argv, master_job_env(rank, 3, port))

    old = [member(r, "old") for r in range(3)]
    wait_until = time.monotonic() + 120
    while not all("formed" in o.output() for o in old):
        assert time.monotonic() < wait_until, replicas.tails()
        time.sleep(0.2)
    old[1].popen.kill()
    new = {1: member(1, "new")}
    while "serves the previous start's group" not in new[1].output():  # it met the old rank 0's store
        assert time.monotonic() < wait_until, replicas.tails()
        time.sleep(0.2)
    for o in (old[0], old[2]):
        o.popen.kill()
    new |= {r: member(r, "new") for r in (0, 2)}
    codes = replicas.wait([new[r] for r in range(3)], deadline_s=120)
    assert codes == {"new0": 0, "new1": 0, "new2": 0}, replicas.tails()
    assert all("trained 59049.0" in new[r].output() for r in range(3)), replicas.tails()


def test_a_peer_that_never_comes_fails_the_rendezvous_at_its_timeout(replicas: Replicas) -> None:
    (port,) = free_ports(1)
    start = time.monotonic()
    alone = replicas.python("rank0", DDP, ["--timeout", "10", "--device", "cpu"], master_job_env(0, 2, port))
    codes = replicas.wait([alone], deadline_s=90)
    assert codes["rank0"] != 0, replicas.tails()
    assert time.monotonic() - start < 80
    assert alone.results() == []


def test_a_half_set_env_is_a_clear_error_not_a_hang(replicas: Replicas) -> None:
    env = base_env() | {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto"}  # a worker-only job: no MASTER_*
    replica = replicas.python("rank0", DDP, ["--timeout", "10"], env)
    assert replicas.wait([replica], deadline_s=60) == {"rank0": 2}
    assert "MASTER_ADDR: not set although PET_NNODES is 2" in replica.output()
    assert "add a Master" in replica.output()


def _cuda_devices() -> int:
    code = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return int(out.stdout.strip().splitlines()[-1])


@pytest.mark.gpu
def test_ddp_uses_nccl_on_gpus(replicas: Replicas) -> None:
    devices = _cuda_devices()
    if devices == 0:
        pytest.skip("torch.cuda.is_available() is False on this machine: the NCCL path needs a CUDA GPU")
    world = min(devices, 2)
    (port,) = free_ports(1)
    started = [
        replicas.python(
            f"rank{r}", DDP, ["--timeout", "60", "--device", "cuda"], master_job_env(r, world, port)
        )
        for r in range(world)
    ]
    codes = replicas.wait(started, DEADLINE_S)
    assert set(codes.values()) == {0}, replicas.tails()
    results = [single_result(r) for r in started]
    assert_trained_in_lock_step(results, world_size=world, accuracy=ACCURACY)
    assert {r["backend"] for r in results} == {"nccl"}, json.dumps(results)
