"""`kubetrain operator` as a process on the real control plane, started the way a Deployment starts it.

What a platform engineer relies on: the command becomes ready quickly, serves /healthz /readyz /metrics,
runs every kind end to end (jobs submitted with `kubectl apply -f`, pods created, kwok finishes them, the
jobs reach Succeeded and the job metrics count them), holds a leader Lease that a standby takes over when
the leader stops, and on SIGTERM drains, releases the Lease and exits 0. Start-up failures exit non-zero
with one line that says what to fix. Start-up time and memory are printed (`-s`), not asserted.
"""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.operator import install_crds
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until

pytestmark = pytest.mark.integration

RUN_NEVER = {"restartPolicy": "Never"}


def _replicas(count: int, container: str) -> dict[str, Any]:
    spec = {"containers": [{"name": container, "image": "trainer:1"}]}
    return {"replicas": count, **RUN_NEVER, "template": {"spec": spec}}


JOBS: dict[str, dict[str, Any]] = {
    "tfjobs": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "tf"},
        "spec": {"tfReplicaSpecs": {"Worker": _replicas(2, "tensorflow")}},
    },
    "pytorchjobs": {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "torch"},
        "spec": {
            "pytorchReplicaSpecs": {"Master": _replicas(1, "pytorch"), "Worker": _replicas(1, "pytorch")}
        },
    },
    "mpijobs": {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "mpi"},
        "spec": {"mpiReplicaSpecs": {"Launcher": _replicas(1, "mpi"), "Worker": _replicas(1, "mpi")}},
    },
}
"""One small job per kind. kwok plays the pods; the test finishes the pods that decide each job."""
DECIDERS = {
    "tfjobs": ["tf-worker-0", "tf-worker-1"],
    "pytorchjobs": ["torch-master-0"],
    "mpijobs": ["mpi-launcher-0"],
}
CHILDREN = {
    "tfjobs": ["tf-worker-0", "tf-worker-1"],
    "pytorchjobs": ["torch-master-0", "torch-worker-0"],
    "mpijobs": ["mpi-launcher-0", "mpi-worker-0"],
}


@pytest.fixture
def plane(control_plane: ControlPlane) -> ControlPlane:
    install_crds(control_plane)
    return control_plane


@pytest.fixture
def operators(tmp_path: Path) -> Iterator[list[OperatorProcess]]:
    """Operator processes a test starts; any still running at the end is stopped."""
    started: list[OperatorProcess] = []
    yield started
    for op in started:
        op.stop()


def _start(plane: ControlPlane, operators: list[OperatorProcess], tmp: Path, *args: str) -> OperatorProcess:
    name = f"operator-{len(operators)}"
    op = OperatorProcess(plane.kubeconfig, args, workdir=tmp, name=name).start()
    operators.append(op)
    return op


def _lease(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    out = plane.kubectl("get", "lease", name, "-o", "json", namespace=namespace).stdout
    spec: dict[str, Any] = json.loads(out)["spec"]
    return spec


def _pods(plane: ControlPlane, namespace: str) -> dict[str, str]:
    out = plane.kubectl("get", "pods", "-o", "json", namespace=namespace).stdout
    return {p["metadata"]["name"]: p["status"].get("phase", "") for p in json.loads(out)["items"]}


def _conditions(plane: ControlPlane, namespace: str, plural: str, name: str) -> set[str]:
    """The condition types that are True."""
    jsonpath = "jsonpath={.status.conditions[?(@.status=='True')].type}"
    return set(plane.kubectl("get", plural, name, "-o", jsonpath, namespace=namespace).stdout.split())


def _job_metric(metrics: str, name: str, namespace: str) -> dict[str, float]:
    """{framework: value} of one job counter for `namespace`."""
    found = {}
    pattern = re.compile(rf"^{name}_total\{{(?P<labels>[^}}]*)\}} (?P<value>\S+)$", re.M)
    for match in pattern.finditer(metrics):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("job_namespace") == namespace:
            found[labels["framework"]] = float(match["value"])
    return found


def test_the_operator_process_runs_every_kind_and_stops_cleanly(
    plane: ControlPlane, namespace: str, operators: list[OperatorProcess], tmp_path: Path
) -> None:
    lease = "kubetrain-it"
    op = _start(
        plane, operators, tmp_path, f"--namespace={namespace}",
        f"--leader-election-namespace={namespace}", f"--leader-election-id={lease}",
    )  # fmt: skip
    ready_after = op.wait_ready()
    assert op.get("/healthz")[0] == 200
    wait_until(
        "the Lease held", lambda: bool(_lease(plane, namespace, lease).get("holderIdentity")), timeout=30
    )

    for job in JOBS.values():
        plane.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(job))
    want = [pod for pods in CHILDREN.values() for pod in pods]
    wait_until(
        "every replica pod Running",
        lambda: all(_pods(plane, namespace).get(p) == "Running" for p in want),
        timeout=90, processes=[op.process],
    )  # fmt: skip
    for pods in DECIDERS.values():
        for pod in pods:
            plane.finish_pod(namespace, pod, Outcome.SUCCEEDED)
    wait_until(
        "every job Succeeded",
        lambda: all(
            "Succeeded" in _conditions(plane, namespace, plural, job["metadata"]["name"])
            for plural, job in JOBS.items()
        ),
        timeout=90, processes=[op.process],
    )  # fmt: skip

    metrics = op.metrics()
    assert len(_job_metric(metrics, "training_operator_jobs_created", namespace)) == 3, metrics
    succeeded = _job_metric(metrics, "training_operator_jobs_successful", namespace)
    assert sorted(succeeded.values()) == [1.0, 1.0, 1.0], succeeded
    assert op.get("/readyz")[0] == 200
    rss = op.rss_mib()

    assert op.terminate() == 0, op.process.log_tail()
    assert not _lease(plane, namespace, lease).get("holderIdentity"), "the Lease is released on SIGTERM"
    messages = [r["msg"] for r in op.log_records()]
    assert any(m.startswith("ready ") for m in messages) and messages[-1] == "operator stopped", messages[-5:]
    assert not [r for r in op.log_records() if r["level"] == "error"]
    print(f"\noperator process: ready {ready_after:.2f} s after exec, RSS {rss:.0f} MiB with 3 jobs")


@pytest.fixture
def second_namespace(plane: ControlPlane) -> Iterator[str]:
    name = plane.create_namespace()
    yield name
    plane.delete_namespace(name)


def test_a_standby_takes_over_when_the_leader_stops(
    plane: ControlPlane,
    namespace: str,
    second_namespace: str,
    operators: list[OperatorProcess],
    tmp_path: Path,
) -> None:
    """Two replicas watching two namespaces each (`--namespace a,b`): one leads; on its SIGTERM the other
    takes over at once and serves both namespaces."""
    watched = f"--namespace={namespace},{second_namespace}"
    flags = (watched, f"--leader-election-namespace={namespace}", "--enable=tfjob")
    leader = _start(plane, operators, tmp_path, *flags)
    leader.wait_ready()
    wait_until(
        "a leader",
        lambda: bool(_lease(plane, namespace, "kubetrain-operator").get("holderIdentity")),
        timeout=30,
    )
    standby = _start(plane, operators, tmp_path, *flags)
    standby.wait_ready()  # a standby is ready too: its caches are warm
    held_by = _lease(plane, namespace, "kubetrain-operator")["holderIdentity"]

    assert leader.terminate() == 0
    started = time.monotonic()
    wait_until(
        "the standby holds the Lease",
        lambda: (
            _lease(plane, namespace, "kubetrain-operator").get("holderIdentity") not in (None, "", held_by)
        ),
        timeout=30,
    )
    handover = time.monotonic() - started
    for ns in (namespace, second_namespace):
        plane.kubectl("apply", "-f", "-", namespace=ns, input=json.dumps(JOBS["tfjobs"]))
    wait_until(
        "the new leader creates pods in both namespaces",
        lambda: all("tf-worker-1" in _pods(plane, ns) for ns in (namespace, second_namespace)),
        timeout=60,
    )
    assert handover < 15, "a released Lease is taken at the standby's next retry, not after lease expiry"
    assert standby.terminate() == 0
    print(f"\nleader hand-over after SIGTERM: {handover:.2f} s")


def test_start_up_failures_exit_non_zero_with_a_clear_message(
    plane: ControlPlane, namespace: str, operators: list[OperatorProcess], tmp_path: Path
) -> None:
    nobody = plane.kubeconfig_for_service_account(namespace, "nobody")
    op = OperatorProcess(
        nobody, [f"--namespace={namespace}", "--no-leader-elect"], workdir=tmp_path, name="nobody"
    )
    operators.append(op.start())
    assert op.wait_exit() == 4
    (record,) = [r for r in op.log_records() if r["level"] == "error"]
    assert "not allowed to read" in record["msg"] and "overlays/namespaced" in record["msg"], record

    volcano = _start(plane, operators, tmp_path, f"--namespace={namespace}", "--no-leader-elect",
                     "--gang-scheduler=volcano")  # fmt: skip
    assert volcano.wait_exit() == 1
    (record,) = [r for r in volcano.log_records() if r["level"] == "error"]
    assert "podgroups" in record["msg"] and "install the scheduler first" in record["msg"], record

    unreachable = tmp_path / "unreachable.kubeconfig"
    config = json.loads(plane.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    unreachable.write_text(json.dumps(config))
    down = OperatorProcess(unreachable, ["--no-leader-elect"], workdir=tmp_path, name="down")
    operators.append(down.start())
    assert down.wait_exit() == 4
    assert "cannot reach the API server" in down.log_text()


def test_sigterm_during_start_up_exits_0_at_once(tmp_path: Path) -> None:
    """An API server that accepts connections and never answers: the operator is stuck in its preflight,
    its informers' first requests (up to the request timeout), and SIGTERM still stops it right away (a
    pod being deleted)."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "silent",
            "clusters": [{"name": "silent", "cluster": {
                "server": f"https://127.0.0.1:{silent.getsockname()[1]}", "insecure-skip-tls-verify": True}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "u"}}],
        }  # fmt: skip
        kubeconfig = tmp_path / "silent.kubeconfig"
        kubeconfig.write_text(json.dumps(config))
        op = OperatorProcess(kubeconfig, ["--no-leader-elect"], workdir=tmp_path, name="silent").start()
        try:
            wait_until(
                "the preflight", lambda: "preflight" in op.log_text(), timeout=60, processes=[op.process]
            )
            stopped = time.monotonic()
            assert op.terminate(timeout=10) == 0
            assert time.monotonic() - stopped < 10
        finally:
            op.stop()
    messages = [r["msg"] for r in op.log_records()]
    said = ["received SIGTERM: stopping", "stopped during start-up", "operator stopped"]
    assert [m for m in messages if m in said] == said, messages
