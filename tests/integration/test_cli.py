"""`kubetrain` as a user runs it (a real process) against a real kube-apiserver.

What is pinned here is what scripts and people rely on: all-or-nothing `submit`, the tables and formats
of `get`, `describe`, the exit codes of `wait` (the tests play the operator by patching `/status`),
`delete`, and one clear line (never a traceback) for every failure. Logs: only the clear failure for a pod
whose log cannot be served is checked here; real logs, prefixed and followed, in test_logs_live.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kubetrain.api import load_jobs
from kubetrain.cli import main
from kubetrain.testing.controlplane import ControlPlane

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DDP = EXAMPLES / "pytorch" / "pytorch-ddp.yaml"
TF = EXAMPLES / "tensorflow" / "tf-ps-workers.yaml"
MPI = EXAMPLES / "mpi" / "mpi-mpich.yaml"

Run = Callable[..., "Result"]


@dataclass(frozen=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def kubetrain(
    crds: ControlPlane, namespace: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Run:
    """`kubetrain ARGS... -n <the test's namespace>` with the admin kubeconfig in $KUBECONFIG.

    In-process (`kubetrain.cli.main`, what the console script calls): a process per command would spend
    most of the test importing the kubernetes client; one test runs the real console command.
    """
    monkeypatch.setenv("KUBECONFIG", str(crds.kubeconfig))

    def run(*args: str, namespace_flag: bool = True) -> Result:
        capsys.readouterr()
        try:
            code = main([*args, *(["-n", namespace] if namespace_flag else [])])
        except SystemExit as exit_:
            code = int(exit_.code or 0)
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


def _status(plane: ControlPlane, namespace: str, kind: str, name: str, ctype: str, message: str = "") -> None:
    condition = {"type": ctype, "status": "True", "reason": f"{kind}{ctype}", "message": message}
    plane.kubectl(
        "patch",
        f"{kind.lower()}s.kubeflow.org",
        name,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"conditions": [condition]}}),
        namespace=namespace,
    )


def test_submit_is_all_or_nothing_then_get_shows_every_kind(kubetrain: Run, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.yaml"  # a job that names another namespace than -n
    job = yaml.safe_load(MPI.read_text())
    elsewhere.write_text(yaml.safe_dump({**job, "metadata": {**job["metadata"], "namespace": "ml-team"}}))
    refused = kubetrain("submit", str(DDP), str(TF), str(elsewhere))
    assert refused.returncode == 2, refused.stderr
    assert "metadata.namespace" in refused.stderr and "ml-team" in refused.stderr
    assert kubetrain("get").stdout == ""  # nothing was created

    created = kubetrain("submit", str(DDP), str(TF), str(MPI))
    assert created.returncode == 0, created.stderr
    assert created.stdout.splitlines() == [
        "pytorchjob.kubeflow.org/pytorch-ddp created",
        "tfjob.kubeflow.org/tf-ps-workers created",
        "mpijob.kubeflow.org/mpi-mpich created",
    ]
    table = kubetrain("get").stdout.splitlines()
    assert table[0].split() == ["NAME", "KIND", "STATE", "PROGRESS", "ETA", "METRIC", "AGE"]
    assert sorted(line.split()[:3] for line in table[1:]) == [
        ["mpi-mpich", "MPIJob", "<none>"],
        ["pytorch-ddp", "PyTorchJob", "<none>"],
        ["tf-ps-workers", "TFJob", "<none>"],
    ]
    assert kubetrain("get", "tfjobs", "-o", "name").stdout.split() == ["tfjob.kubeflow.org/tf-ps-workers"]
    (job,) = load_jobs(kubetrain("get", "pytorch-ddp", "-o", "yaml").stdout)
    assert job.kind == "PyTorchJob" and job.metadata.uid


def test_get_all_namespaces_shows_the_namespace(kubetrain: Run, namespace: str) -> None:
    kubetrain("submit", str(MPI))
    rows = [line.split() for line in kubetrain("get", "-A", namespace_flag=False).stdout.splitlines()]
    assert rows[0][:2] == ["NAMESPACE", "NAME"]
    assert [namespace, "mpi-mpich", "MPIJob"] in [row[:3] for row in rows]


def test_submitting_a_taken_name_creates_none_of_the_files(kubetrain: Run) -> None:
    kubetrain("submit", str(DDP))
    result = kubetrain("submit", str(MPI), str(DDP))
    assert result.returncode == 1 and "already exists" in result.stderr
    assert kubetrain("get", "mpi-mpich").returncode == 1


def test_describe_shows_the_job_and_its_status(kubetrain: Run, crds: ControlPlane, namespace: str) -> None:
    kubetrain("submit", str(TF))
    _status(crds, namespace, "TFJob", "tf-ps-workers", "Running", "TFJob tf-ps-workers is running.")
    result = kubetrain("describe", "tf-ps-workers")
    assert result.returncode == 0, result.stderr
    assert f"Namespace:  {namespace}" in result.stdout
    assert "State:      Running" in result.stdout
    assert "TFJob tf-ps-workers is running." in result.stdout
    assert "Pods: <none>" in result.stdout


def test_wait_exit_codes(kubetrain: Run, crds: ControlPlane, namespace: str) -> None:
    kubetrain("submit", str(DDP), str(MPI))
    timed_out = kubetrain("wait", "pytorch-ddp", "--timeout", "2s")
    assert timed_out.returncode == 3 and "within 2s" in timed_out.stderr
    _status(crds, namespace, "PyTorchJob", "pytorch-ddp", "Succeeded", "done")
    done = kubetrain("wait", "pytorchjob/pytorch-ddp", "--timeout", "30s")
    assert (
        done.returncode == 0
        and done.stdout.strip() == "pytorchjob.kubeflow.org/pytorch-ddp condition met: Succeeded"
    )
    _status(crds, namespace, "MPIJob", "mpi-mpich", "Failed", "launcher exited with code 1")
    failed = kubetrain("wait", "mpi-mpich", "--timeout", "30s")
    assert failed.returncode == 1 and "launcher exited with code 1" in failed.stderr
    expected = kubetrain("wait", "mpi-mpich", "--for", "Succeeded,Failed", "--timeout", "30s")
    assert expected.returncode == 0 and "condition met: Failed" in expected.stdout


def test_delete_and_missing_jobs(kubetrain: Run) -> None:
    kubetrain("submit", str(TF))
    deleted = kubetrain("delete", "tf-ps-workers")
    assert deleted.returncode == 0 and deleted.stdout.strip() == 'tfjob.kubeflow.org "tf-ps-workers" deleted'
    missing = kubetrain("get", "tf-ps-workers")
    assert missing.returncode == 1
    assert missing.stderr.strip().startswith("kubetrain get: no training job")


def test_logs_that_kwok_cannot_serve_fail_in_one_line(
    kubetrain: Run, crds: ControlPlane, namespace: str
) -> None:
    kubetrain("submit", str(DDP))
    no_pods = kubetrain("logs", "pytorch-ddp")
    assert no_pods.returncode == 1 and "has no pods yet" in no_pods.stderr
    labels = {
        "training.kubeflow.org/job-name": "pytorch-ddp",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pytorch-ddp-master-0", "labels": labels},
        "spec": {"containers": [{"name": "pytorch", "image": "busybox:1.36"}]},
    }
    crds.kubectl("apply", "-f", "-", input=json.dumps(pod), namespace=namespace)
    crds.wait_for_pod_phase(namespace, "pytorch-ddp-master-0", "Running")
    result = kubetrain("logs", "pytorch-ddp")
    assert result.returncode == 1
    assert result.stderr.startswith("kubetrain logs: cannot read the logs of pod pytorch-ddp-master-0")


def test_bad_input_exits_2_and_a_missing_kubeconfig_exits_4(kubetrain: Run, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    job = yaml.safe_load(MPI.read_text())
    job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = -2
    bad.write_text(yaml.safe_dump(job))
    invalid = kubetrain("submit", str(bad))
    assert invalid.returncode == 2 and "spec.mpiReplicaSpecs.Worker.replicas" in invalid.stderr
    typo = kubetrain("get", "mpijbo", "x")
    assert typo.returncode == 2 and "did you mean 'mpijob'" in typo.stderr
    nowhere = kubetrain("get", "--kubeconfig", str(tmp_path / "none"))
    assert nowhere.returncode == 4 and "no kubeconfig found" in nowhere.stderr


def test_the_console_command_runs_as_a_process(crds: ControlPlane, namespace: str) -> None:
    env = {**os.environ, "KUBECONFIG": str(crds.kubeconfig)}
    argv = [sys.executable, "-m", "kubetrain.cli", "get", "nothing-here", "-n", namespace]
    result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"kubetrain get: no training job (TFJob, PyTorchJob or MPIJob) named 'nothing-here' in namespace "
        f"'{namespace}'; check the name with `kubetrain get`, or pass the job's namespace with -n"
    )


def test_converted_v1_mpijobs_are_accepted_by_the_api_server(
    crds: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """`kubetrain convert` output applies as it is; its v1 input does not (MPIJob v1 is not served)."""
    v1_dir = ROOT / "tests" / "unit" / "api" / "mpijob_v1"
    out_dir = tmp_path / "v2"
    done = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli", "convert", str(v1_dir), "--output-dir", str(out_dir)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    for path in sorted(out_dir.glob("*.yaml")):
        text = path.read_text()
        for document in yaml.safe_load_all(text):
            document["metadata"]["namespace"] = namespace
            target = tmp_path / "one.yaml"
            target.write_text(yaml.safe_dump(document))
            crds.kubectl("apply", "--dry-run=server", "-f", str(target))
    with pytest.raises(Exception, match=r"(?i)no matches for kind|could not find the requested resource"):
        v1_file = str(v1_dir / "horovod-tensorflow.yaml")
        crds.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", v1_file)
