"""The state view: which condition is shown, how replicas are summarised and counted, how the run ends."""

from __future__ import annotations

from typing import Any

from kubetrain.runtimes.local.view import (
    Board,
    Condition,
    ReplicaRow,
    Snapshot,
    final_line,
    latest_condition,
    render_table,
)


def job(*conditions: tuple[str, str, str]) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {"type": t, "status": s, "reason": r, "message": f"{t} msg"} for t, s, r in conditions
            ]
        }
    }


def test_the_shown_condition_is_the_terminal_one_else_the_latest_true_one() -> None:
    assert latest_condition(None) is None
    running = job(("Created", "True", "JobCreated"), ("Running", "True", "JobRunning"))
    assert latest_condition(running) == Condition("Running", "JobRunning", "Running msg")
    failed = job(("Created", "True", "C"), ("Failed", "True", "JobFailed"), ("Running", "False", "R"))
    assert latest_condition(failed) == Condition("Failed", "JobFailed", "Failed msg")


def pod(
    name: str, uid: str, phase: str, state: dict[str, Any], restarts: int = 0, rtype: str = "worker"
) -> dict[str, Any]:
    labels = {"training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": name[-1]}
    status = {"phase": phase, "containerStatuses": [{"name": "c", "state": state, "restartCount": restarts}]}
    return {"metadata": {"name": name, "uid": uid, "labels": labels}, "status": status}


def test_board_counts_in_place_restarts_plus_replaced_pods_and_keeps_deleted_rows() -> None:
    board = Board()
    first = pod("j-worker-0", "u1", "Failed", {"terminated": {"exitCode": 137}})
    board.on_add(first)
    board.on_delete(first)
    board.on_add(pod("j-worker-0", "u2", "Running", {"running": {}}, restarts=1))
    board.on_add(pod("j-worker-1", "u3", "Running", {"waiting": {"reason": "CrashLoopBackOff"}}, restarts=2))
    gone = pod("j-master-0", "u4", "Succeeded", {"terminated": {"exitCode": 0}}, rtype="master")
    board.on_add(gone)
    board.on_delete(gone)
    rows = board.rows({"j-worker-0": 41, "j-worker-1": 42}, {"j-worker-0": "2222->30001"})
    assert rows == (
        ReplicaRow("j-master-0", "master", 0, "Deleted", 0, 0),
        ReplicaRow("j-worker-0", "worker", 0, "Running", 2, None, 41, "2222->30001"),
        ReplicaRow("j-worker-1", "worker", 1, "CrashLoopBackOff", 2, None),
    )


def snapshot(condition: Condition | None) -> Snapshot:
    rows = (
        ReplicaRow("tf-worker-0", "worker", 0, "Running", 0, None, 1234, "2222->30001"),
        ReplicaRow("tf-worker-1", "worker", 1, "Failed", 3, 137),
    )
    return Snapshot("TFJob", "ns", "tf", condition, rows, elapsed=75.4)


def test_the_table_has_a_header_and_aligned_columns() -> None:
    lines = render_table(snapshot(Condition("Running", "TFJobRunning")))
    assert lines[0] == "TFJob ns/tf  Running (TFJobRunning)  01:15"
    assert lines[1].split() == ["REPLICA", "TYPE", "STATE", "RESTARTS", "EXIT", "PID", "LOCAL", "PORTS"]
    assert lines[2].split() == ["tf-worker-0", "worker", "Running", "0", "1234", "2222->30001"]
    assert lines[3].split() == ["tf-worker-1", "worker", "Failed", "3", "137"]
    assert lines[2].index("Running") == lines[1].index("STATE")


def test_a_narrow_terminal_cuts_lines() -> None:
    assert all(len(line) <= 30 for line in render_table(snapshot(None), width=30)[1:])


def test_the_final_line_states_the_condition_and_reason_or_why_the_run_stopped() -> None:
    failed = snapshot(
        Condition("Failed", "TFJobFailed", "TFJob ns/tf has failed because 1 Worker replica(s) failed.")
    )
    assert (
        final_line(failed)
        == "TFJob ns/tf Failed (TFJobFailed): TFJob ns/tf has failed because 1 Worker replica(s) failed."
    )
    stopped = final_line(
        snapshot(Condition("Running", "TFJobRunning")), outcome="interrupted: every process was stopped"
    )
    assert stopped == "TFJob ns/tf: interrupted: every process was stopped; it was Running"


def test_a_gpus_column_shows_which_pod_holds_which_gpu_when_any_does() -> None:
    rows = (
        ReplicaRow(pod="ddp-master-0", rtype="master", state="Running", pid=10, gpus="0,1"),
        ReplicaRow(pod="ddp-worker-0", rtype="worker", state="Pending"),
    )
    lines = render_table(Snapshot("PyTorchJob", "ns", "ddp", None, rows))
    assert lines[1].split()[-1] == "GPUS"
    assert lines[2].split() == ["ddp-master-0", "master", "Running", "0", "10", "0,1"]
    assert lines[2].index("0,1") == lines[1].index("GPUS")
    assert "GPUS" not in render_table(Snapshot("PyTorchJob", "ns", "ddp", None, rows[1:]))[1]
