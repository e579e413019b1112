"""The TrainingClient SDK against a real kube-apiserver: create, read, wait, pods, logs, delete, errors.

No operator runs here: the tests play its part by patching `/status` with kubectl, so what is tested is
the SDK's side of the contract (validation before sending, all-or-nothing submission, kind lookup,
watch-based waiting, RBAC answers, label-based pod lookup). Pods run on kwok's fake nodes, which serve a
pod's container log only when the test gives them a file for it (test_logs_live.py reads real logs): here
a pod without one checks that an unreadable log reaches the user as one clear `LogsUnavailableError`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api import InvalidJobError, load_jobs
from kubetrain.client import (
    AmbiguousJobError,
    ClusterAccessError,
    InvalidArgumentError,
    JobExistsError,
    JobFailedError,
    JobNotFoundError,
    LogsUnavailableError,
    TrainingClient,
    WaitTimeoutError,
    job_state,
)
from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
LABELS = "training.kubeflow.org"


@pytest.fixture
def client(crds: ControlPlane, namespace: str) -> Iterator[TrainingClient]:
    with TrainingClient(kubeconfig=crds.kubeconfig, namespace=namespace) as sdk:
        yield sdk


def example_files() -> list[Path]:
    """Every example (a file may carry objects its job needs, e.g. a PVC: the SDK creates the job only)."""
    return sorted(p for p in EXAMPLES.rglob("*.yaml") if "operators" not in p.parts)  # built-in kinds


def _declares_namespace(path: Path) -> bool:
    return any(
        (doc.get("metadata") or {}).get("namespace") for doc in yaml.safe_load_all(path.read_text()) if doc
    )


def patch_status(
    plane: ControlPlane, namespace: str, plural: str, name: str, *conditions: tuple[str, str, str]
) -> None:
    """Play the operator: set `status.conditions` (type, reason, message; all True)."""
    status = {
        "conditions": [
            {
                "type": t,
                "status": "True",
                "reason": r,
                "message": m,
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            for t, r, m in conditions
        ]
    }
    plane.kubectl(
        "patch",
        f"{plural}.kubeflow.org",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
        namespace=namespace,
    )


def later(seconds: float, action: Any, *args: Any) -> threading.Timer:
    timer = threading.Timer(seconds, action, args)
    timer.start()
    return timer


def test_every_example_is_created_listed_and_read_back_typed(client: TrainingClient, namespace: str) -> None:
    examples = example_files()
    assert examples and not [p for p in examples if _declares_namespace(p)], "examples go where applied"
    created = {}
    for path in examples:
        for job in client.create_jobs([path]):
            assert job.namespace == namespace and job.metadata.uid
            created[job.name] = job.kind
    listed = {job.name: job.kind for job in client.list_jobs()}
    assert listed == created
    for name, kind in created.items():
        assert client.get_job(name).kind == kind  # found without saying the kind
    only = {job.kind for job in client.list_jobs("pytorchjobs")}
    assert only <= {"PyTorchJob"}


def test_a_job_naming_another_namespace_is_refused_before_sending(client: TrainingClient) -> None:
    job = yaml.safe_load((EXAMPLES / "mpi" / "mpi-mpich.yaml").read_text())
    elsewhere = {**job, "metadata": {**job["metadata"], "namespace": "ml-team"}}
    with pytest.raises(InvalidJobError, match=r"metadata\.namespace"):
        client.create_job(elsewhere, namespace=client.namespace)
    assert client.list_jobs() == []


def test_an_invalid_job_is_refused_with_its_fields_and_nothing_is_created(client: TrainingClient) -> None:
    bad = "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: Bad}\n"
    bad += "spec: {pytorchReplicaSpecs: {}}\n"
    with pytest.raises(InvalidJobError) as info:
        client.create_job(bad)
    assert "metadata.name" in {e.path for e in info.value.errors}
    assert client.list_jobs() == []


def test_an_unknown_pod_field_is_refused_by_name_before_anything_is_sent(client: TrainingClient) -> None:
    job = load_jobs((EXAMPLES / "pytorch" / "pytorch-ddp.yaml").read_text())[0].to_wire()
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = (
        "Always"
    )
    with pytest.raises(InvalidJobError) as info:
        client.create_job(job)
    (error,) = info.value.errors  # local validation checks the CRD's own schema, as the API server would
    assert error.path == "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].imagePullPolcy"
    assert error.message == "unknown field `imagePullPolcy`"
    assert error.fix.startswith("did you mean `imagePullPolicy`?")
    assert client.list_jobs() == []


def test_a_submission_with_a_taken_name_creates_nothing(client: TrainingClient) -> None:
    ddp, mpi = EXAMPLES / "pytorch" / "pytorch-ddp.yaml", EXAMPLES / "mpi" / "mpi-mpich.yaml"
    client.create_job(ddp)
    with pytest.raises(JobExistsError, match="already exists"):
        client.create_jobs([mpi, ddp])
    assert [job.name for job in client.list_jobs()] == ["pytorch-ddp"]  # mpi-mpich was only dry-run
    assert client.create_jobs([mpi], dry_run=True)[0].name == "mpi-mpich"
    assert [job.name for job in client.list_jobs()] == ["pytorch-ddp"]


def test_a_name_shared_by_two_kinds_needs_the_kind(client: TrainingClient) -> None:
    for path in (EXAMPLES / "pytorch" / "pytorch-ddp.yaml", EXAMPLES / "tensorflow" / "tf-ps-workers.yaml"):
        job = load_jobs(path.read_text())[0].to_wire()
        job["metadata"]["name"] = "same"
        client.create_job(job)
    with pytest.raises(AmbiguousJobError, match="TFJob and PyTorchJob"):
        client.get_job("same")
    assert client.get_job("same", kind="pytorchjobs").kind == "PyTorchJob"


def test_delete_then_the_job_is_gone(client: TrainingClient) -> None:
    client.create_job(EXAMPLES / "tensorflow" / "tf-ps-workers.yaml")
    deleted = client.delete_job("tf-ps-workers")
    assert deleted.kind == "TFJob"
    with pytest.raises(JobNotFoundError):
        client.get_job("tf-ps-workers")
    with pytest.raises(JobNotFoundError):
        client.delete_job("tf-ps-workers")


def test_wait_follows_the_status_to_success(
    client: TrainingClient, crds: ControlPlane, namespace: str
) -> None:
    client.create_job(EXAMPLES / "tensorflow" / "tf-ps-workers.yaml")
    later(
        1.0, patch_status, crds, namespace, "tfjobs", "tf-ps-workers", ("Running", "TFJobRunning", "running")
    )
    later(
        2.5,
        patch_status,
        crds,
        namespace,
        "tfjobs",
        "tf-ps-workers",
        ("Running", "TFJobRunning", "running"),
        ("Succeeded", "TFJobSucceeded", "done"),
    )
    seen: list[str] = []
    started = time.monotonic()
    job = client.wait_for_job_conditions(
        "tf-ps-workers", timeout=30, polling_interval=20, callback=lambda j: seen.append(job_state(j))
    )
    assert job_state(job) == "Succeeded"
    assert time.monotonic() - started < 15, "the watch, not the 20 s poll, must have woken the wait"
    assert seen[0] == "" and "Running" in seen and seen[-1] == "Succeeded"


def test_wait_raises_on_failure_unless_failure_is_expected(
    client: TrainingClient, crds: ControlPlane, namespace: str
) -> None:
    client.create_job(EXAMPLES / "mpi" / "mpi-mpich.yaml")
    patch_status(
        crds, namespace, "mpijobs", "mpi-mpich", ("Failed", "MPIJobFailed", "launcher exited with 1")
    )
    with pytest.raises(JobFailedError) as info:
        client.wait_for_job_conditions("mpi-mpich", timeout=10)
    assert (info.value.reason, info.value.message) == ("MPIJobFailed", "launcher exited with 1")
    job = client.wait_for_job_conditions("mpi-mpich", expected=["Succeeded", "Failed"], timeout=10)
    assert job_state(job) == "Failed"


def test_wait_times_out_and_notices_a_deletion(client: TrainingClient) -> None:
    client.create_job(EXAMPLES / "pytorch" / "pytorch-ddp.yaml")
    started = time.monotonic()
    with pytest.raises(WaitTimeoutError, match="within 2s"):
        client.wait_for_job_conditions("pytorch-ddp", timeout=2, polling_interval=1)
    assert time.monotonic() - started < 8
    later(1.0, client.delete_job, "pytorch-ddp")
    with pytest.raises(JobNotFoundError, match="deleted while waiting"):
        client.wait_for_job_conditions("pytorch-ddp", timeout=30, polling_interval=20)


def _grant(plane: ControlPlane, namespace: str, account: str, verbs: str) -> None:
    role = f"{account}-jobs"
    plane.kubectl(
        "create", "role", role, f"--verb={verbs}", "--resource=tfjobs.kubeflow.org", namespace=namespace
    )
    plane.kubectl(
        "create",
        "rolebinding",
        role,
        f"--role={role}",
        f"--serviceaccount={namespace}:{account}",
        namespace=namespace,
    )


def test_a_reader_without_watch_rights_still_waits_by_polling(
    client: TrainingClient, crds: ControlPlane, namespace: str
) -> None:
    client.create_job(EXAMPLES / "tensorflow" / "tf-ps-workers.yaml")
    _grant(crds, namespace, "reader", "get,list")
    kubeconfig = crds.kubeconfig_for_service_account(namespace, "reader")
    with TrainingClient(kubeconfig=kubeconfig, namespace=namespace) as reader:
        later(
            1.0,
            patch_status,
            crds,
            namespace,
            "tfjobs",
            "tf-ps-workers",
            ("Succeeded", "TFJobSucceeded", "ok"),
        )
        job = reader.wait_for_job_conditions("tf-ps-workers", kind="tfjob", timeout=20, polling_interval=1)
    assert job_state(job) == "Succeeded"


def test_no_rights_is_a_clear_access_error(crds: ControlPlane, namespace: str) -> None:
    kubeconfig = crds.kubeconfig_for_service_account(namespace, "nobody")
    with (
        TrainingClient(kubeconfig=kubeconfig, namespace=namespace) as nobody,
        pytest.raises(ClusterAccessError, match="not allowed") as info,
    ):
        nobody.list_jobs()
    assert info.value.status == 403


def test_an_unreachable_server_is_a_clear_access_error(crds: ControlPlane, tmp_path: Path) -> None:
    config = yaml.safe_load(crds.kubeconfig.read_text())
    config["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:1"
    path = tmp_path / "dead.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    with (
        TrainingClient(kubeconfig=path, request_timeout=5) as dead,
        pytest.raises(ClusterAccessError) as info,
    ):
        dead.list_jobs()
    assert "cannot reach the Kubernetes API server at https://127.0.0.1:1" in str(info.value)


def _pod(plane: ControlPlane, namespace: str, job: str, rtype: str, index: int, **spec: Any) -> None:
    labels = {
        f"{LABELS}/job-name": job,
        f"{LABELS}/operator-name": "pytorchjob-controller",
        f"{LABELS}/replica-type": rtype,
        f"{LABELS}/replica-index": str(index),
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{job}-{rtype}-{index}", "labels": labels},
        "spec": {"containers": [{"name": "pytorch", "image": "busybox:1.36"}], **spec},
    }
    plane.kubectl("apply", "-f", "-", input=json.dumps(pod), namespace=namespace)


def test_pods_are_found_by_labels_in_replica_order(
    client: TrainingClient, crds: ControlPlane, namespace: str
) -> None:
    client.create_job(EXAMPLES / "pytorch" / "pytorch-ddp.yaml")
    for rtype, index in (("worker", 1), ("master", 0), ("worker", 0)):
        _pod(crds, namespace, "pytorch-ddp", rtype, index)
    _pod(crds, namespace, "other-job", "worker", 0)
    names = [pod.metadata.name for pod in client.get_job_pods("pytorch-ddp") if pod.metadata]
    assert names == ["pytorch-ddp-master-0", "pytorch-ddp-worker-0", "pytorch-ddp-worker-1"]
    one = client.get_job_pods("pytorch-ddp", replica_type="Worker", replica_index=1)
    assert [pod.metadata.name for pod in one if pod.metadata] == ["pytorch-ddp-worker-1"]
    with pytest.raises(InvalidArgumentError, match="no replica type 'Chief'"):
        client.get_job_pods("pytorch-ddp", replica_type="Chief")


def test_logs_that_cannot_be_served_are_one_clear_error(
    client: TrainingClient, crds: ControlPlane, namespace: str
) -> None:
    client.create_job(EXAMPLES / "pytorch" / "pytorch-ddp.yaml")
    with pytest.raises(LogsUnavailableError, match="has no pods yet"):
        client.get_job_logs("pytorch-ddp")
    _pod(crds, namespace, "pytorch-ddp", "worker", 0, nodeSelector={"no-such-node": "true"})
    with pytest.raises(LogsUnavailableError, match="has started yet"):
        client.get_job_logs("pytorch-ddp")
    _pod(crds, namespace, "pytorch-ddp", "master", 0)
    crds.wait_for_pod_phase(namespace, "pytorch-ddp-master-0", "Running")
    with pytest.raises(LogsUnavailableError, match="cannot read the logs of pod pytorch-ddp-master-0"):
        client.get_job_logs("pytorch-ddp")  # kwok has no log file for this pod
    followed = client.get_job_logs("pytorch-ddp", replica_type="master", follow=True)
    first = next(followed)
    assert first.error and first.replica == "master-0" and "cannot read the logs" in first.text


def test_events_about_the_job_are_listed(client: TrainingClient, crds: ControlPlane, namespace: str) -> None:
    job = client.create_job(EXAMPLES / "mpi" / "mpi-mpich.yaml")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "mpi-mpich.1"},
        "involvedObject": {
            "apiVersion": job.api_version,
            "kind": "MPIJob",
            "name": "mpi-mpich",
            "namespace": namespace,
            "uid": job.metadata.uid,
        },
        "reason": "MPIJobCreated",
        "message": "MPIJob mpi-mpich is created.",
        "type": "Normal",
        "lastTimestamp": "2026-01-01T00:00:00Z",
    }
    crds.kubectl("create", "-f", "-", input=json.dumps(event), namespace=namespace)
    events = client.get_job_events("mpi-mpich")
    assert [e.reason for e in events] == ["MPIJobCreated"]


def test_the_trainers_report_is_read_back_and_its_bounds_are_the_servers(
    client: TrainingClient, crds: ControlPlane, namespace: str
) -> None:
    """`get_job_progress` returns status.trainerStatus as stored; the API server itself refuses a report
    out of bounds (any writer, not only the operator), naming the field."""
    client.create_job(EXAMPLES / "tensorflow" / "tf-ps-workers.yaml")
    assert client.get_job_progress("tf-ps-workers") is None
    report = {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 310,
        "metrics": [{"name": "loss", "value": "0.0412"}],
        "lastUpdatedTime": "2026-01-01T00:00:00Z",
    }
    patch = ["patch", "tfjobs.kubeflow.org", "tf-ps-workers", "--subresource=status", "--type=merge", "-p"]
    crds.kubectl(*patch, json.dumps({"status": {"trainerStatus": report}}), namespace=namespace)
    progress = client.get_job_progress("tf-ps-workers", "tfjob")
    assert progress is not None and progress.to_wire() == report
    columns = crds.kubectl("get", "tfjobs", namespace=namespace).stdout.splitlines()[1].split()
    assert columns[1:3] == ["42", "310"]
    over = json.dumps({"status": {"trainerStatus": {"progressPercentage": 101}}})
    refused = crds.kubectl(*patch, over, namespace=namespace, check=False)
    assert refused.returncode != 0 and "trainerStatus.progressPercentage" in refused.stderr
