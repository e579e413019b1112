"""`kubetrain logs` and `TrainingClient.get_job_logs` read real container logs, end to end.

The operator process runs a PyTorchJob (master + 2 workers) on the real plane; kwok, playing the kubelet,
serves each pod's log from a file the test writes (kubetrain.testing.kwok_logs), through the API server's
`pods/log` exactly as a kubelet's logs reach a user. What users rely on: every replica's lines, prefixed
with the replica, master first; `-f` shows a line as soon as the container writes it; one replica alone
comes without prefix.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from kubetrain.client import TrainingClient
from kubetrain.client.logs import LogLine
from kubetrain.testing import ControlPlane
from kubetrain.testing.kwok_logs import PodLogFile
from kubetrain.testing.operator import install_crds
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.streams import LineStream

pytestmark = pytest.mark.integration

JOB = "ddp"
PODS = {"master-0": f"{JOB}-master-0", "worker-0": f"{JOB}-worker-0", "worker-1": f"{JOB}-worker-1"}


def _replicas(count: int) -> dict[str, object]:
    container = {"name": "pytorch", "image": "trainer:1", "command": ["python", "train.py"]}
    return {"replicas": count, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}


PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": JOB},
    "spec": {"pytorchReplicaSpecs": {"Master": _replicas(1), "Worker": _replicas(2)}},
}


@pytest.fixture
def running_job(
    control_plane: ControlPlane, namespace: str, tmp_path: Path
) -> Iterator[dict[str, PodLogFile]]:
    """The job's pods Running, each with a log file kwok serves ({replica: file}); the operator runs."""
    install_crds(control_plane)
    logs = {replica: control_plane.pod_log(namespace, pod) for replica, pod in PODS.items()}
    for replica, log in logs.items():
        log.write(f"{replica} starting", f"{replica} epoch 1 loss=0.5")
    args = [f"--namespace={namespace}", "--no-leader-elect", "--enable=pytorchjob"]
    with OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path) as op:
        op.wait_ready()
        control_plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(PYTORCHJOB))
        for pod in PODS.values():
            control_plane.wait_for_pod_phase(namespace, pod, "Running")
        yield logs


def _kubetrain(plane: ControlPlane, namespace: str, *args: str) -> list[str]:
    return [
        sys.executable, "-m", "kubetrain.cli", "logs", JOB, *args,
        "-n", namespace, "--kubeconfig", str(plane.kubeconfig),
    ]  # fmt: skip


def test_kubetrain_logs_prints_every_replica_prefixed(
    control_plane: ControlPlane, namespace: str, running_job: dict[str, PodLogFile]
) -> None:
    out = subprocess.run(
        _kubetrain(control_plane, namespace), capture_output=True, text=True, timeout=60, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"[{replica}] {text}"
        for replica in ("master-0", "worker-0", "worker-1")
        for text in (f"{replica} starting", f"{replica} epoch 1 loss=0.5")
    ]
    one = subprocess.run(
        _kubetrain(control_plane, namespace, "--replica-type", "worker", "--index", "1"),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert one.stdout.splitlines() == ["worker-1 starting", "worker-1 epoch 1 loss=0.5"], one.stderr


def test_kubetrain_logs_follow_shows_new_lines_as_they_are_written(
    control_plane: ControlPlane, namespace: str, running_job: dict[str, PodLogFile]
) -> None:
    with LineStream(_kubetrain(control_plane, namespace, "-f")) as follow:
        seen = {follow.next_line() for _ in range(6)}  # the pods' streams interleave as they come
        assert seen == {f"[{r}] {r} {text}" for r in PODS for text in ("starting", "epoch 1 loss=0.5")}
        running_job["worker-1"].write("worker-1 epoch 2 loss=0.25")
        assert follow.until("[worker-1] worker-1 epoch 2 loss=0.25") == [
            "[worker-1] worker-1 epoch 2 loss=0.25"
        ]
        running_job["master-0"].write("master-0 saved checkpoint", stream="stderr")
        assert follow.until("[master-0] master-0 saved checkpoint") == [
            "[master-0] master-0 saved checkpoint"
        ]


def test_training_client_reads_and_follows_the_logs(
    control_plane: ControlPlane, namespace: str, running_job: dict[str, PodLogFile]
) -> None:
    with TrainingClient(kubeconfig=control_plane.kubeconfig, namespace=namespace) as client:
        logs = client.get_job_logs(JOB)
        assert logs == {
            pod: f"{replica} starting\n{replica} epoch 1 loss=0.5\n" for replica, pod in PODS.items()
        }
        assert list(logs) == list(PODS.values()), "replica order: master first"
        assert client.get_job_logs(JOB, replica_type="Worker") == {
            PODS["worker-0"]: logs[PODS["worker-0"]], PODS["worker-1"]: logs[PODS["worker-1"]],
        }  # fmt: skip
        followed = client.get_job_logs(JOB, replica_type="Master", follow=True)
        assert isinstance(followed, Generator)
        try:
            assert [_next(followed).text for _ in range(2)] == [
                "master-0 starting",
                "master-0 epoch 1 loss=0.5",
            ]
            running_job["master-0"].write("master-0 epoch 2 loss=0.25")
            line = _next(followed)
            assert (line.replica, line.text, line.error) == ("master-0", "master-0 epoch 2 loss=0.25", False)
        finally:
            followed.close()


def _next(lines: Iterator[LogLine], timeout: float = 30.0) -> LogLine:
    """`next(lines)`, failing the test instead of hanging when no line comes."""
    got: queue.Queue[LogLine] = queue.Queue()
    threading.Thread(target=lambda: got.put(next(lines)), daemon=True).start()
    try:
        return got.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"no log line within {timeout:g} s") from None
