"""bench/kueue_admission.py's pieces that need no cluster: the queued job it submits, the two paths, and the
table with the kubetrain/Kueue ratio range over the runs both paths finished."""

from __future__ import annotations

from opbench.queued import PATHS, QueuedRow, queued_job, ratios, render
from opbench.workload import Workload, kind_by_name


def row(path: str, run: int, *, t: float, cpu: float, requests: int, outcome: str = "ok") -> QueuedRow:
    figures = {
        "cpu_operator": cpu,
        "cpu_kueue": cpu,
        "requests_operator": requests,
        "requests_kueue": requests,
    }
    return QueuedRow(path=path, run=run, jobs=10, pods=20, outcome=outcome, t_pods=t, t_done=t + 3, **figures)


def test_each_job_names_the_queue_and_asks_for_cpu_so_kueue_accounts_it() -> None:
    body = queued_job(Workload(kind_by_name("PyTorchJob"), 1, 2), "bench-0")
    assert body["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "bench"}
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        assert spec["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "10m"


def test_kueues_path_switches_its_pytorchjob_integration_on_and_the_operator_leaves_it_to_kueue() -> None:
    assert PATHS["kueue"].frameworks_on == ("kubeflow.org/pytorchjob",)
    assert PATHS["kueue"].operator_args == ("--kueue-integration=none",)
    assert PATHS["kubetrain"].frameworks_on == () and PATHS["kubetrain"].operator_args == ()


def test_the_ratio_range_pairs_each_run_with_its_peer_and_skips_failed_runs() -> None:
    rows = [
        row("kubetrain", 1, t=10, cpu=4, requests=100),
        row("kueue", 1, t=20, cpu=8, requests=400),
        row("kueue", 2, t=10, cpu=4, requests=100),
        row("kubetrain", 2, t=10, cpu=6, requests=150),
        row("kubetrain", 3, t=1, cpu=1, requests=1),
        row("kueue", 3, t=1, cpu=1, requests=1, outcome="timeout"),
    ]
    found = ratios(rows)
    assert found["time to all pods"] == (0.5, 1.0)
    assert found["CPU s, operator + Kueue"] == (0.5, 1.5)
    assert found["API requests, operator + Kueue"] == (0.25, 1.5)
    table = render(rows, title="t")
    assert "| kueue | 3 | 10 | 20 | timeout |" in table and "- time to all pods: 0.50x to 1.00x" in table
