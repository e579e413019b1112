"""The Kubeflow Training SDK (kubeflow-training 1.9.x, from PyPI) as a real client of kubetrain.

Users of the Kubeflow training-operator drive their jobs from notebooks with `kubeflow.training.
TrainingClient`; moving to kubetrain must not change a line of that code. Here the SDK, in a venv of its
own (it needs kubernetes<36; hack/kubeflow-sdk.sh installs it), drives TFJobs, PyTorchJobs, XGBoostJobs,
JAXJobs and PaddleJobs through create, get, wait, logs (served by kwok from files the test writes) and
delete, with the kubetrain operator process running on the real plane; and its managedBy flow: an unknown
`runPolicy.managedBy` is rejected at admission, a job managed by MultiKueue is accepted and left alone. The
SDK knows MPIJob v1 only, which kubetrain does not serve (docs/differences.md). It builds XGBoostJobs,
JAXJobs and PaddleJobs only from their models, not from an image.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing import ControlPlane, Outcome
from kubetrain.testing.kubeflow_sdk import kubeflow_sdk_python
from kubetrain.testing.operator import install_crds
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import wait_until
from kubetrain.testing.streams import LineStream

pytestmark = pytest.mark.integration

DRIVER = Path(__file__).with_name("kubeflow_sdk_driver.py")
SKIPPED = "kubetrain_jobs_skipped_total"


@dataclass(frozen=True)
class Answer:
    code: int
    out: Any
    err: str


Sdk = Callable[..., Answer]


@pytest.fixture
def operator(control_plane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[OperatorProcess]:
    """The kubetrain operator process, serving the kinds the SDK knows in `namespace`."""
    install_crds(control_plane)
    kinds = "tfjob,pytorchjob,xgboostjob,jaxjob,paddlejob"
    args = [f"--namespace={namespace}", "--no-leader-elect", f"--enable={kinds}"]
    with OperatorProcess(control_plane.kubeconfig, args, workdir=tmp_path) as op:
        op.wait_ready()
        yield op
        op.process.ensure_running()  # the SDK never crashed the operator


@pytest.fixture
def sdk(control_plane: ControlPlane, namespace: str, operator: OperatorProcess) -> Sdk:
    """`sdk(step, kind, name[, arg])`: one SDK step in its own python, with the operator running."""
    python = kubeflow_sdk_python()  # fails (not skips) with the install command when missing

    def run(step: str, kind: str, name: str, *arg: str) -> Answer:
        argv = [str(python), str(DRIVER), str(control_plane.kubeconfig), namespace, step, kind, name, *arg]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
        out = _result(done.stdout) if done.returncode == 0 else done.stdout
        return Answer(done.returncode, out, done.stderr)

    return run


def _result(stdout: str) -> Any:
    """The driver's JSON answer: its last line of output."""
    lines = stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else None


@dataclass(frozen=True)
class Flow:
    kind: str
    name: str
    pods: tuple[str, ...]  # what the SDK's create(num_workers=2) makes
    master: str  # the pod with job-role=master: the SDK's default for logs
    deciders: tuple[str, ...]  # the pods whose success makes the job succeed


FLOWS = [
    Flow("TFJob", "tf-sdk", ("tf-sdk-worker-0", "tf-sdk-worker-1"), "tf-sdk-worker-0",
         ("tf-sdk-worker-0", "tf-sdk-worker-1")),
    Flow("PyTorchJob", "torch-sdk", ("torch-sdk-master-0", "torch-sdk-worker-0"), "torch-sdk-master-0",
         ("torch-sdk-master-0",)),
    Flow("XGBoostJob", "xgb-sdk", ("xgb-sdk-master-0", "xgb-sdk-worker-0"), "xgb-sdk-master-0",
         ("xgb-sdk-master-0",)),
    Flow("JAXJob", "jax-sdk", ("jax-sdk-worker-0", "jax-sdk-worker-1"), "jax-sdk-worker-0",
         ("jax-sdk-worker-0", "jax-sdk-worker-1")),
    Flow("PaddleJob", "paddle-sdk", ("paddle-sdk-master-0", "paddle-sdk-worker-0"), "paddle-sdk-master-0",
         ("paddle-sdk-master-0",)),
]  # fmt: skip


@pytest.mark.parametrize("flow", FLOWS, ids=[f.kind for f in FLOWS])
def test_the_sdk_drives_a_job_through_create_get_wait_logs_and_delete(
    sdk: Sdk, control_plane: ControlPlane, namespace: str, flow: Flow
) -> None:
    for pod in flow.pods:
        control_plane.pod_log(namespace, pod).write(f"{pod} starting", f"{pod} step 1")
    created = sdk("create", flow.kind, flow.name)
    assert created.code == 0, created.err

    running = sdk("wait", flow.kind, flow.name, "Running")
    assert running.code == 0 and "Running" in running.out["conditions"], running
    got = sdk("get", flow.kind, flow.name)
    assert got.code == 0, got.err
    assert (got.out["kind"], got.out["name"], got.out["created"], got.out["running"]) == (
        flow.kind, flow.name, True, True,
    )  # fmt: skip
    assert got.out["pods"] == sorted(flow.pods)
    for pod in flow.pods:
        control_plane.wait_for_pod_phase(namespace, pod, "Running")

    logs = sdk("logs", flow.kind, flow.name)
    assert logs.code == 0, logs.err
    assert logs.out["master"] == {flow.master: f"{flow.master} starting\n{flow.master} step 1\n"}
    assert logs.out["all"] == {pod: f"{pod} starting\n{pod} step 1\n" for pod in flow.pods}

    waiting = _start_sdk_wait(control_plane, namespace, flow, "Succeeded")
    for pod in flow.deciders:
        control_plane.finish_pod(namespace, pod, Outcome.SUCCEEDED)
    out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert "Succeeded" in _result(out)["conditions"]
    assert sdk("get", flow.kind, flow.name).out["succeeded"] is True

    deleted = sdk("delete", flow.kind, flow.name)
    assert deleted.code == 0, deleted.err
    gone = sdk("get", flow.kind, flow.name)
    assert gone.code == 1 and "Failed to get" in gone.err, gone


def _start_sdk_wait(plane: ControlPlane, namespace: str, flow: Flow, condition: str) -> subprocess.Popen[str]:
    """`wait_for_job_conditions` running in the background while the test finishes the pods."""
    argv = [
        str(kubeflow_sdk_python()), str(DRIVER), str(plane.kubeconfig), namespace,
        "wait", flow.kind, flow.name, condition,
    ]  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_the_sdk_follows_the_master_log(sdk: Sdk, control_plane: ControlPlane, namespace: str) -> None:
    """`get_job_logs(follow=True)` prints each line of the master as the container writes it."""
    log = control_plane.pod_log(namespace, "follow-master-0")
    log.write("epoch 1")
    created = sdk("create", "PyTorchJob", "follow")
    assert created.code == 0, created.err
    control_plane.wait_for_pod_phase(namespace, "follow-master-0", "Running")
    argv = [
        str(kubeflow_sdk_python()), str(DRIVER), str(control_plane.kubeconfig), namespace,
        "follow", "PyTorchJob", "follow",
    ]  # fmt: skip
    with LineStream(argv) as follow:
        assert follow.next_line() == "[Pod follow-master-0]: epoch 1"
        log.write("epoch 2")
        assert follow.next_line() == "[Pod follow-master-0]: epoch 2"


def test_managed_by_an_unknown_controller_is_rejected_at_admission(sdk: Sdk) -> None:
    rejected = sdk("create-managed-by", "PyTorchJob", "stray", "example.com/not-a-controller")
    assert rejected.code == 1, rejected
    assert "runPolicy.managedBy" in rejected.err and "kueue.x-k8s.io/multikueue" in rejected.err, rejected.err


def test_a_job_managed_by_multikueue_is_accepted_and_left_alone(
    sdk: Sdk, operator: OperatorProcess, namespace: str
) -> None:
    mine = sdk("create-managed-by", "PyTorchJob", "remote", "kueue.x-k8s.io/multikueue")
    assert mine.code == 0, mine.err
    wait_until(
        "the operator looked at MultiKueue's job and left it alone (kubetrain_jobs_skipped_total)",
        lambda: (
            operator.sample(SKIPPED, job_namespace=namespace, framework="pytorch", reason="managed_by") > 0
        ),
        timeout=60,
    )
    remote = sdk("get", "PyTorchJob", "remote").out
    assert remote["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert (remote["conditions"], remote["pods"]) == ([], []), "MultiKueue's job is not ours to run"
    ours = sdk("create-managed-by", "PyTorchJob", "local", "kubeflow.org/training-operator")
    assert ours.code == 0, ours.err
    wait_until(
        "the operator runs a job that names it",
        lambda: sdk("get", "PyTorchJob", "local").out["running"] is True,
        timeout=60,
    )
