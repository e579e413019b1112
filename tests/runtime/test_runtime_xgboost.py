"""XGBoostJob processes with exactly the env the operator renders: they must train one model together through
`xgboost.collective` (the master runs the tracker), directly and under `kubetrain run --local`.

xgboost (the `xgboost` extra, `xgboost-cpu`) is required: hack/frameworks.sh installs it; without it the
module fails to import and every test here fails.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import xgboost  # noqa: F401 (required: a missing xgboost fails these tests instead of skipping them)

from kubetrain.podcontract import XGBoostEnv

from .conftest import Replicas, assert_trained_in_lock_step, base_env, free_ports, single_result
from .test_local_examples import EXAMPLES, finish, job_of, kubetrain_run, results

pytestmark = pytest.mark.runtime

TRAINER = "kubetrain.runtimes.examples.xgboost_digits"
EXAMPLE = EXAMPLES / "xgboost" / "xgboost-digits.yaml"
ACCURACY = 0.95  # the example states it; measured 0.969 (30 rounds, 3 processes); guessing scores 0.1
LOSS = 0.1  # the last round's training log loss; measured 0.013 (30 rounds); untrained it is ln 10 = 2.3
DEADLINE_S = 240.0


def process_env(rank: int, world_size: int, port: int) -> dict[str, str]:
    env = XGBoostEnv(
        master_addr="127.0.0.1",
        master_port=port,
        world_size=world_size,
        rank=rank,
        worker_port=port + 1 if world_size > 1 else None,
        worker_addrs=("127.0.0.1",) * (world_size - 1),
    )
    return base_env() | env.render()


def test_processes_build_the_model_of_the_whole_data_through_the_collective(replicas: Replicas) -> None:
    """Each process holds a third of the rows; with the histograms all-reduced they grow the same trees as
    one process that holds them all: the same model digest, bit for bit."""
    (port,) = free_ports(1)
    args = ["--epochs", "30", "--timeout", "60"]
    started = [replicas.python(f"r{i}", TRAINER, args, process_env(i, 3, port)) for i in (2, 1, 0)]
    alone = replicas.python("alone", TRAINER, args, base_env())
    codes = replicas.wait([*started, alone], DEADLINE_S)
    assert codes == {"r0": 0, "r1": 0, "r2": 0, "alone": 0}, replicas.tails()
    found = [single_result(r) for r in started]
    assert_trained_in_lock_step(found, world_size=3, accuracy=ACCURACY)
    assert all(r["world_size"] == 3 and r["loss"] <= LOSS for r in found), found
    whole = single_result(alone)
    assert (whole["rank"], whole["world_size"]) == (0, 1)
    assert {r["weights_sha256"] for r in found} == {whole["weights_sha256"]}, (found, whole)


def test_half_the_env_is_refused_naming_the_variable(replicas: Replicas) -> None:
    env = base_env() | {"MASTER_ADDR": "127.0.0.1", "WORLD_SIZE": "2", "RANK": "1"}
    half = replicas.python("half", TRAINER, ["--timeout", "10"], env)
    assert replicas.wait([half], 60) == {"half": 2}, replicas.tails()
    assert "MASTER_PORT: not set" in half.output()


def test_the_example_learns_under_kubetrain_run_local(tmp_path: Path) -> None:
    """The exact command a user types: a master and 2 workers, the job Succeeded, the stated accuracy and
    loss, one model."""
    output = finish(kubetrain_run(EXAMPLE, tmp_path, timeout=DEADLINE_S), DEADLINE_S)
    kind, namespace, name = job_of(EXAMPLE)
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"{kind} {namespace}/{name} Succeeded ({kind}Succeeded): "), output[-6000:]
    found = results(output)
    pods = [f"{name}-master-0", f"{name}-worker-0", f"{name}-worker-1"]
    assert sorted(r["pod"] for r in found) == pods, output[-6000:]
    assert {r["pod"]: r["rank"] for r in found} == dict(zip(pods, range(3), strict=True)), found
    assert_trained_in_lock_step(found, world_size=3, accuracy=ACCURACY)
    assert all(r["loss"] <= LOSS for r in found), found
