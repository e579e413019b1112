"""TFJob replicas as local processes, each with the TF_CONFIG that TFConfig renders (addresses on 127.0.0.1).

TensorFlow workers take about 600 MB each and ignore SIGTERM while waiting for peers: the harness kills
with SIGKILL, and the tests run their replicas one group at a time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kubetrain.podcontract import TFConfig, TFTask

from .conftest import Replicas, assert_trained_in_lock_step, base_env, free_ports, single_result

pytestmark = pytest.mark.runtime

MWMS = "kubetrain.runtimes.examples.tf_multiworker"
PS = "kubetrain.runtimes.examples.tf_ps"
ACCURACY = 0.9  # measured 0.978 (MultiWorkerMirrored) and 0.986 (ParameterServer); guessing scores 0.1


def tf_env(cluster: dict[str, tuple[str, ...]], task: TFTask) -> dict[str, str]:
    return base_env() | {"TF_CONFIG": TFConfig(cluster=cluster, task=task).render()}


def loopback(count: int) -> tuple[str, ...]:
    return tuple(f"127.0.0.1:{port}" for port in free_ports(count))


def test_multi_worker_mirrored_workers_train_in_lock_step(replicas: Replicas) -> None:
    cluster = {"worker": loopback(2)}
    started = [
        replicas.python(f"worker{i}", MWMS, ["--timeout", "60"], tf_env(cluster, TFTask("worker", i)))
        for i in range(2)
    ]
    codes = replicas.wait(started, deadline_s=240)
    assert codes == {"worker0": 0, "worker1": 0}, replicas.tails()
    results = [single_result(r) for r in started]
    assert_trained_in_lock_step(results, world_size=2, accuracy=ACCURACY)
    for r in results:
        assert r["replicas"] == 2
        assert r["keras"].startswith("tf_keras"), "tf.keras must be tf-keras (Keras 3's fit fails here)"


def test_chief_and_worker_train_and_the_evaluator_scores_the_final_model(
    replicas: Replicas, tmp_path: Path
) -> None:
    """The TFJob shape with a Chief: chief and worker all-reduce; the evaluator (outside the collective)
    waits for the chief's final weights in the shared --model-dir and scores exactly those weights."""
    cluster = {"chief": loopback(1), "worker": loopback(1), "evaluator": loopback(1)}
    args = ["--timeout", "60", "--model-dir", str(tmp_path / "model")]
    tasks = (TFTask("chief", 0), TFTask("worker", 0), TFTask("evaluator", 0))
    started = [replicas.python(f"{t.type}{t.index}", MWMS, args, tf_env(cluster, t)) for t in tasks]
    codes = replicas.wait(started, deadline_s=300)
    assert codes == {"chief0": 0, "worker0": 0, "evaluator0": 0}, replicas.tails()
    chief, worker, evaluator = (single_result(r) for r in started)
    assert_trained_in_lock_step([chief, worker], world_size=2, accuracy=ACCURACY)
    assert (chief["task"], worker["task"]) == ("chief:0", "worker:0")
    assert evaluator["task"] == "evaluator:0"
    assert evaluator["weights_sha256"] == chief["weights_sha256"]
    assert evaluator["accuracy"] == chief["accuracy"]


def test_a_worker_whose_peer_never_comes_fails_at_the_registration_timeout(replicas: Replicas) -> None:
    """Without a timeout TensorFlow waits for the missing worker forever (and ignores SIGTERM)."""
    cluster = {"worker": loopback(2)}
    start = time.monotonic()
    alone = replicas.python("worker0", MWMS, ["--timeout", "10"], tf_env(cluster, TFTask("worker", 0)))
    codes = replicas.wait([alone], deadline_s=120)
    assert codes["worker0"] != 0, replicas.tails()
    assert "Wait_for_all_tasks_to_register" in alone.output(), "the registration timeout, not the watchdog"
    assert time.monotonic() - start < 100


def test_parameter_server_strategy_chief_trains_through_ps_and_workers(replicas: Replicas) -> None:
    cluster = {"chief": loopback(1), "ps": loopback(1), "worker": loopback(2)}
    servers = [
        replicas.python(f"{t.type}{t.index}", PS, [], tf_env(cluster, t))
        for t in (TFTask("ps", 0), TFTask("worker", 0), TFTask("worker", 1))
    ]
    chief = replicas.python("chief0", PS, ["--timeout", "90"], tf_env(cluster, TFTask("chief", 0)))
    codes = replicas.wait([chief], deadline_s=300)
    assert codes == {"chief0": 0}, replicas.tails()
    assert all(s.popen.poll() is None for s in servers), "ps and workers serve until they are deleted"
    result = single_result(chief)
    assert result["accuracy"] >= ACCURACY, result
    assert result["variables_on"] == ["/job:ps/replica:0/task:0/device:CPU:0"]
    assert (result["ps"], result["workers"]) == (1, 2)


def test_without_a_chief_worker_zero_coordinates_the_parameter_servers(replicas: Replicas) -> None:
    """The TF1-era PS + Worker TFJob (worker 0 succeeding ends the job) under TF2's strategy."""
    cluster = {"ps": loopback(1), "worker": loopback(2)}
    ps = replicas.python("ps0", PS, ["--role", "ps"], tf_env(cluster, TFTask("ps", 0)))
    server = replicas.python("worker1", PS, [], tf_env(cluster, TFTask("worker", 1)))
    coordinator = replicas.python(
        "worker0", PS, ["--timeout", "90", "--steps", "300"], tf_env(cluster, TFTask("worker", 0))
    )
    assert replicas.wait([coordinator], deadline_s=300) == {"worker0": 0}, replicas.tails()
    assert ps.popen.poll() is None and server.popen.poll() is None, replicas.tails()
    result = single_result(coordinator)
    assert result["accuracy"] >= ACCURACY, result
    assert (result["task"], result["workers"], result["epochs"]) == ("worker:0", 1, round(300 / 44, 2))


def test_a_replica_given_the_wrong_role_says_so(replicas: Replicas) -> None:
    cluster = {"ps": loopback(1), "worker": loopback(2)}
    wrong = replicas.python("worker1", PS, ["--role", "ps"], tf_env(cluster, TFTask("worker", 1)))
    assert replicas.wait([wrong], deadline_s=120) == {"worker1": 2}
    assert "--role: is 'ps' but TF_CONFIG makes this replica worker:1" in wrong.output()
