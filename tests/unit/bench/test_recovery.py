"""bench/gang_recovery.py's pure parts: reading the trainers' `kubetrain-train` lines, when a gang trains
again, the jobs each mode runs, and the table."""

from __future__ import annotations

import json

import pytest
from recoverybench.cases import KINDS, Mode, job_for, load_example, policy_of
from recoverybench.report import table
from recoverybench.run import Logs, Run
from recoverybench.signal import TrainLine, all_training, first_after, recovered_after, train_lines


def line(rank: int, epoch: int, time: float) -> str:
    return "kubetrain-train " + json.dumps(
        {"epoch": epoch, "rank": rank, "step": epoch * 10 + 1, "time": time}
    )


def test_lines_are_read_after_any_prefix_and_a_cut_line_is_passed_over() -> None:
    text = "\n".join(["noise", line(0, 1, 10.5), "[1,1]<stdout>:" + line(1, 1, 10.6), 'kubetrain-train {"ra'])
    assert train_lines(text) == [TrainLine(0, 1, 11, 10.5), TrainLine(1, 1, 11, 10.6)]


def test_the_gang_has_recovered_when_its_last_rank_trains_again() -> None:
    lines = [TrainLine(0, 5, 0, 99.0), TrainLine(0, 0, 0, 104.0), TrainLine(0, 1, 0, 105.0)]
    lines += [TrainLine(1, 0, 0, 107.5)]
    first = first_after(lines, 100.0)
    assert first == {0: 104.0, 1: 107.5}
    assert recovered_after(first, [0, 1], 100.0) == 7.5
    assert recovered_after(first, [0, 1, 2], 100.0) is None, "rank 2 has not trained again"


def test_a_gang_is_training_once_every_rank_printed_two_epochs() -> None:
    lines = [TrainLine(r, e, 0, 1.0) for r in (0, 1) for e in (0, 1)]
    assert all_training(lines, [0, 1])
    assert not all_training(lines[:-1], [0, 1])
    assert not all_training(lines, [0, 1, 2])


def test_both_modes_run_every_replica_under_on_failure_and_only_one_carries_the_policy() -> None:
    for kind in KINDS.values():
        plain, gang = job_for(kind, Mode.ON_FAILURE), job_for(kind, Mode.RESTART_GANG, epochs=7)
        for job in (plain, gang):
            specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
            assert {s["restartPolicy"] for s in specs.values()} == {"OnFailure"}, kind.name
        assert policy_of(plain) is None
        shipped = policy_of(load_example(kind)[0])
        assert policy_of(gang) == (shipped or {"rules": [{"action": "RestartGang"}]}), kind.name
        assert any(r["action"] == "RestartGang" for r in policy_of(gang)["rules"]), kind.name
        words = json.dumps(gang["spec"])
        assert '"--epochs", "7"' in words, kind.name
        assert f'"--epochs", "{kind.epochs}"' in json.dumps(plain["spec"]), kind.name


def test_the_mpi_launcher_gets_the_epochs_and_sshd_is_left_alone() -> None:
    job = job_for(KINDS["MPIJob"], Mode.ON_FAILURE, epochs=9)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert launcher["command"][-2:] == ["--epochs", "9"]
    assert "--epochs" not in worker["command"]


def run(mode: Mode, seconds: float | None, replaced: int = 0) -> Run:
    gang = mode is Mode.RESTART_GANG
    twice = (seconds, 2 * seconds if seconds else None)
    containers = (seconds / 2, None) if seconds and gang else ()
    return Run(
        "PyTorchJob", mode, twice, containers, replaced, 4, 1 if gang else 0, 1 if gang else None, 4, "",
        "in-place",
    )  # fmt: skip


def test_the_table_gives_ranges_runs_not_recovered_and_the_ratio_of_each_round() -> None:
    rounds = [
        [run(Mode.ON_FAILURE, 20.0), run(Mode.RESTART_GANG, 5.0)],
        [run(Mode.RESTART_GANG, 6.0), run(Mode.ON_FAILURE, 30.0)],
        [run(Mode.ON_FAILURE, None), run(Mode.RESTART_GANG, 4.0)],
    ]
    text = table(rounds, limit=240)
    missing = "1 of 3 not within 240 s"
    each = f"| PyTorchJob | OnFailure | kubelet restarts each container | 20.0-30.0 s; {missing} |"
    assert f"{each} 40.0-60.0 s; {missing} |" in text
    assert (
        "| PyTorchJob | RestartGang | in-place | 4.0-6.0 s (2-3 s) | 8.0-12.0 s | 0/4 | 1 | 1 | 4 | 3 |"
        in text
    )
    assert "kill 1: RestartGang / OnFailure time 0.20-0.25x over 2 rounds" in text
    assert "kill 2: RestartGang / OnFailure time 0.20-0.25x over 2 rounds" in text


def test_the_kubelets_part_ends_when_the_last_restarted_pod_had_a_container_running_again() -> None:
    logs = Logs.__new__(Logs)
    kill = 1000.4
    # pod a: an instance from before the kill, then one started 3 s after it; pod b: 7 s after, then later
    logs._seen = {("a", 990.0): [], ("a", 1003.0): [], ("b", 1007.0): [], ("b", 1020.0): []}
    assert logs.restarted_by(kill) == pytest.approx(6.6)
    logs._seen = {("a", 990.0): []}
    assert logs.restarted_by(kill) is None
