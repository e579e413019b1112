"""`kubetrain run --local` gives every replica Kubeflow Trainer's env and serves its endpoint, so Kubeflow's
own clients report with no change and no kubetrain import: a Transformers `Trainer` (`report_to` left at its
default) and the Kubeflow SDK's `update_trainjob_status`, whose answer must be 200 for it to count."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from kubetrain.testing.kubeflow_sdk import kubeflow_sdk_python

from .test_local_examples import finish, kubetrain_run

pytestmark = pytest.mark.runtime

CLIENTS = Path(__file__).resolve().parents[1] / "progress_clients"


def _job(tmp_path: Path, name: str, command: list[str]) -> Path:
    container = {"name": "pytorch", "image": "unused-locally", "command": command}
    spec = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": spec}},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(job))
    return path


def _final(output: str, name: str) -> str:
    lines = output.rstrip().splitlines()
    assert lines[-1].startswith(f"PyTorchJob default/{name} Succeeded"), output[-4000:]
    reports = [line for line in lines if line.startswith("[kubetrain] final report: ")]
    assert reports, f"no progress reached the job's status:\n{output[-4000:]}"
    return reports[-1]


def test_a_transformers_trainer_reports_through_its_own_kubeflow_callback(tmp_path: Path) -> None:
    shutil.copy(CLIENTS / "hf_trainer.py", tmp_path / "train.py")
    path = _job(tmp_path, "hf", ["python", "train.py", str(tmp_path / "out")])
    output = finish(kubetrain_run(path, tmp_path, timeout=300), 300)
    assert "hf-trainer: report_to=['kubeflow']" in output, "Transformers saw Kubeflow Trainer's env"
    assert "hf-trainer: done" in output
    final = _final(output, "hf")
    assert final.startswith("[kubetrain] final report: progress 100%"), final
    assert "train_loss=" in final, final


def test_the_kubeflow_sdk_reports_and_counts_the_answer_a_success(tmp_path: Path) -> None:
    shutil.copy(CLIENTS / "kubeflow_sdk.py", tmp_path / "report.py")
    path = _job(tmp_path, "sdk", [str(kubeflow_sdk_python()), "report.py"])
    output = finish(kubetrain_run(path, tmp_path, timeout=120), 120)
    assert "kubeflow-sdk: sent=True" in output, output[-4000:]
    final = _final(output, "sdk")
    assert final == "[kubetrain] final report: progress 100%, loss=0.125, accuracy=0.97, epoch=3", final
