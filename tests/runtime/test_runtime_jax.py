"""JAXJob processes with exactly the env the operator renders: they must train together through
`jax.distributed`, directly and under `kubetrain run --local`.

jax (the `jax` extra, `jax[cpu]`) is required: hack/frameworks.sh installs it; without it the module fails
to import and every test here fails.
"""

from __future__ import annotations

from pathlib import Path

import jax  # noqa: F401 (required: a missing jax fails these tests instead of skipping them)
import pytest

from kubetrain.podcontract import JaxEnv

from .conftest import Replicas, assert_trained_in_lock_step, base_env, free_ports, single_result
from .test_local_examples import EXAMPLES, finish, job_of, kubetrain_run, results

pytestmark = pytest.mark.runtime

SPMD = "kubetrain.runtimes.examples.jax_spmd"
EXAMPLE = EXAMPLES / "jax" / "jax-spmd.yaml"
ACCURACY = 0.9  # the example states it; measured 0.983 (20 epochs, 2 processes); guessing scores 0.1
LOSS = 0.1  # the last epoch's mean cross-entropy; measured 0.0096 (20 epochs); untrained it is ln 10 = 2.3
DEADLINE_S = 240.0


def process_env(process_id: int, num_processes: int, port: int) -> dict[str, str]:
    env = JaxEnv(
        coordinator_address="127.0.0.1",
        coordinator_port=port,
        num_processes=num_processes,
        process_id=process_id,
    )
    return base_env() | env.render()


def test_processes_train_in_lock_step_through_jax_distributed(replicas: Replicas) -> None:
    (port,) = free_ports(1)
    started = [
        replicas.python(f"p{i}", SPMD, ["--epochs", "20", "--timeout", "60"], process_env(i, 2, port))
        for i in range(2)
    ]
    codes = replicas.wait(started, DEADLINE_S)
    assert codes == {"p0": 0, "p1": 0}, replicas.tails()
    found = [single_result(r) for r in started]
    assert_trained_in_lock_step(found, world_size=2, accuracy=ACCURACY)
    assert all(r["num_processes"] == 2 and r["loss"] <= LOSS for r in found), found


def test_a_process_without_the_jaxjob_env_trains_alone(replicas: Replicas) -> None:
    alone = replicas.python("alone", SPMD, ["--epochs", "10", "--timeout", "60"], base_env())
    assert replicas.wait([alone], DEADLINE_S) == {"alone": 0}, replicas.tails()
    result = single_result(alone)
    assert (result["num_processes"], result["process_id"]) == (1, 0)
    assert result["accuracy"] >= ACCURACY, result


def test_half_the_env_is_refused_naming_the_variable(replicas: Replicas) -> None:
    env = base_env() | {"COORDINATOR_ADDRESS": "127.0.0.1", "NUM_PROCESSES": "2"}
    half = replicas.python("half", SPMD, ["--timeout", "10"], env)
    assert replicas.wait([half], 60) == {"half": 2}, replicas.tails()
    assert "COORDINATOR_PORT: not set" in half.output()


def test_the_example_learns_under_kubetrain_run_local(tmp_path: Path) -> None:
    """The exact command a user types: 2 worker processes, the job Succeeded, the stated accuracy and loss."""
    output = finish(kubetrain_run(EXAMPLE, tmp_path, timeout=DEADLINE_S), DEADLINE_S)
    kind, namespace, name = job_of(EXAMPLE)
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"{kind} {namespace}/{name} Succeeded ({kind}Succeeded): "), output[-6000:]
    found = results(output)
    assert sorted(r["pod"] for r in found) == [f"{name}-worker-0", f"{name}-worker-1"], output[-6000:]
    assert_trained_in_lock_step(found, world_size=2, accuracy=ACCURACY)
    assert all(r["loss"] <= LOSS for r in found), found
