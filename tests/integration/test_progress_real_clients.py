"""Kubeflow's own clients, unmodified, report to `kubetrain operator`'s progress endpoint on the real control
plane: a Transformers `Trainer` (`report_to` left at its default) and the Kubeflow SDK's
`update_trainjob_status`, each run as the job's pod would run it: a process given the env the operator
injected into the pod, the CA bundle it published, and a TokenRequest token bound to the pod for the audience
of its projected volume. Their reports land in `status.trainerStatus`, and `kubectl get` shows the
Progress. The real-node tier runs the same in containers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing import ControlPlane
from kubetrain.testing.kubeflow_sdk import kubeflow_sdk_python
from kubetrain.testing.operator_process import OperatorProcess
from kubetrain.testing.process import free_port, wait_until

pytestmark = pytest.mark.integration

CLIENTS = Path(__file__).resolve().parents[1] / "progress_clients"


def _job(name: str) -> dict[str, Any]:
    spec = {"containers": [{"name": "pytorch", "image": "trainer:1"}]}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": spec}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }


def _get(plane: ControlPlane, namespace: str, *what: str) -> Any:
    done = plane.kubectl("get", *what, "-o", "json", namespace=namespace, check=False)
    return json.loads(done.stdout) if done.returncode == 0 else None


class Pods:
    """Processes that stand for the pods of jobs on `plane`, with what the operator gave each pod."""

    def __init__(self, plane: ControlPlane, namespace: str, op: OperatorProcess, workdir: Path) -> None:
        self.plane, self.namespace, self.op, self.workdir = plane, namespace, op, workdir

    def env(self, job: str) -> dict[str, str]:
        """The pod's injected env, its CA file and its token file as the kubelet would mount them."""
        pod_name = f"{job}-master-0"
        pod = self._eventually(f"{pod_name}", lambda: _get(self.plane, self.namespace, "pod", pod_name))
        env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}
        (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == "kubetrain-progress"]
        audience = volume["projected"]["sources"][0]["serviceAccountToken"]["audience"]
        mount = self.workdir / job
        mount.mkdir()
        config_map = self._eventually(
            "the CA", lambda: _get(self.plane, self.namespace, "configmap", "kubetrain-progress-ca")
        )
        (mount / "ca.crt").write_text(config_map["data"]["ca.crt"])
        token = self.plane.kubectl(
            "create", "token", "default", "--bound-object-kind=Pod", f"--bound-object-name={pod_name}",
            f"--audience={audience}", "--duration=10m", namespace=self.namespace,
        ).stdout.strip()  # fmt: skip
        (mount / "token").write_text(token)
        url = env["KUBEFLOW_TRAINER_SERVER_URL"]
        return {
            "KUBEFLOW_TRAINER_SERVER_URL": url,
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(mount / "ca.crt"),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(mount / "token"),
        }

    def run(self, argv: list[str], env: dict[str, str], timeout: float) -> str:
        done = subprocess.run(
            argv, env={**os.environ, **env, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
            timeout=timeout, cwd=self.workdir, check=False,
        )  # fmt: skip
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-4000:]
        return output

    def progress(self, job: str, percent: int) -> dict[str, Any]:
        def read() -> Any:
            status = (_get(self.plane, self.namespace, "pytorchjob", job) or {}).get("status") or {}
            trainer = status.get("trainerStatus") or {}
            return trainer if trainer.get("progressPercentage") == percent else None

        return dict(self._eventually(f"{job}'s progress at {percent}%", read))

    def _eventually(self, what: str, read: Any) -> Any:
        got: list[Any] = []
        wait_until(what, lambda: bool(got.append(read()) or got[-1]), timeout=60, processes=[self.op.process])
        return got[-1]


def test_a_transformers_trainer_and_the_kubeflow_sdk_fill_the_trainer_status(
    crds: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    port = free_port()
    flags = [f"--namespace={namespace}", "--no-leader-elect", "--enable=pytorchjob", "--progress-interval=1"]
    progress = [f"--progress-bind-address=127.0.0.1:{port}", f"--progress-url=https://127.0.0.1:{port}"]
    op = OperatorProcess(crds.kubeconfig, [*flags, *progress], workdir=tmp_path)
    with op:
        op.wait_ready()
        for name in ("hf", "sdk"):
            crds.kubectl("apply", "-f", "-", namespace=namespace, input=json.dumps(_job(name)))
        pods = Pods(crds, namespace, op, tmp_path)

        hf = pods.run(
            [sys.executable, str(CLIENTS / "hf_trainer.py"), str(tmp_path / "out")], pods.env("hf"), 300
        )
        assert "hf-trainer: report_to=['kubeflow']" in hf and "hf-trainer: done" in hf
        trainer = pods.progress("hf", 100)  # the final report: written once the 1 s interval is over
        names = {m["name"] for m in trainer["metrics"]}
        assert {"train_loss", "train_runtime"} <= names, trainer

        sdk = pods.run([str(kubeflow_sdk_python()), str(CLIENTS / "kubeflow_sdk.py")], pods.env("sdk"), 120)
        assert "kubeflow-sdk: sent=True" in sdk, sdk[-4000:]
        trainer = pods.progress("sdk", 100)
        assert trainer["estimatedRemainingSeconds"] == 0
        assert trainer["metrics"] == [
            {"name": "loss", "value": "0.125"},
            {"name": "accuracy", "value": "0.97"},
            {"name": "epoch", "value": "3"},
        ]

        table = crds.kubectl("get", "pytorchjobs", namespace=namespace).stdout.splitlines()
        header = table[0].split()
        assert "PROGRESS" in header, table
        rows = {line.split()[0]: line.split() for line in table[1:]}
        assert rows["hf"][header.index("PROGRESS")] == rows["sdk"][header.index("PROGRESS")] == "100", table
        metrics = op.metrics()
        assert 'kubetrain_progress_requests_total{result="unauthenticated"}' not in metrics, metrics
        assert op.terminate() == 0, op.process.log_tail()
