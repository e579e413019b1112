"""PaddleJob pods with exactly the env the operator renders: `python -m paddle.distributed.launch` in each
reads it, the launchers meet at PADDLE_MASTER, and the trainers they start learn together (gloo on CPU).
The example job under `kubetrain run --local` (2 pods, the job Succeeded, accuracy and loss as it
states them, the same weights in both) is `test_local_examples.py`'s case `paddle/paddle-collective.yaml`.

paddle (the `paddle` extra, `paddlepaddle`) is required: hack/frameworks.sh installs it; without it the
module's collection fails, and so every test here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from kubetrain.podcontract import PaddleEnv

from .conftest import Replica, Replicas, assert_trained_in_lock_step, base_env, free_ports, single_result

pytestmark = pytest.mark.runtime

# required: a missing paddle fails these tests instead of skipping them (found, not imported: importing it
# here would only slow the collection down and warn that ccache is missing)
assert importlib.util.find_spec("paddle") is not None, "paddle is not installed: run hack/frameworks.sh"

TRAINER = "kubetrain.runtimes.examples.paddle_collective"
ACCURACY = 0.9  # the example states it; measured 0.981 (20 epochs, 2 trainers); guessing scores 0.1
LOSS = 0.1  # the last epoch's mean cross-entropy; measured 0.0096 (20 epochs); untrained it is ln 10 = 2.3
DEADLINE_S = 240.0


def launcher(replicas: Replicas, name: str, env: PaddleEnv, tmp_path: Path, epochs: int) -> Replica:
    """One pod's main process: the launcher with the pod's rendered env (the rendezvous pod's
    `$(POD_IP_DUMMY)` expanded to its address, 127.0.0.1, as the kubelet would)."""
    rendered = {k: v for k, v in env.render().items() if isinstance(v, str)}
    argv = [sys.executable, "-m", "paddle.distributed.launch", "--log_dir", str(tmp_path / name)]
    argv += [sys.executable, "-m", TRAINER, "--epochs", str(epochs), "--timeout", "60"]
    return replicas.start(name, argv, base_env() | rendered)


def test_two_pods_train_in_lock_step_through_paddle_distributed_launch(
    replicas: Replicas, tmp_path: Path
) -> None:
    (port,) = free_ports(1)
    serving = PaddleEnv(job_id="t", nnodes=2, master_host="127.0.0.1", master_port=port)
    started = [launcher(replicas, f"worker-{i}", serving, tmp_path, 20) for i in range(2)]
    codes = replicas.wait(started, DEADLINE_S)
    assert codes == {"worker-0": 0, "worker-1": 0}, replicas.tails()
    found = [single_result(r) for r in started]
    assert_trained_in_lock_step(found, world_size=2, accuracy=ACCURACY)
    assert all(r["loss"] <= LOSS for r in found), found


def test_a_trainer_outside_a_paddlejob_trains_alone(replicas: Replicas) -> None:
    alone = replicas.python("alone", TRAINER, ["--epochs", "10", "--timeout", "60"], base_env())
    assert replicas.wait([alone], DEADLINE_S) == {"alone": 0}, replicas.tails()
    result = single_result(alone)
    assert (result["world_size"], result["rank"]) == (1, 0)
    assert result["accuracy"] >= ACCURACY, result
