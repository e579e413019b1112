"""Kubeflow's own progress clients, unmodified, in real containers on the real node: a Transformers `Trainer`
(`report_to` left at its default, a tiny GPT-2 built from a config: nothing downloaded) and the Kubeflow SDK's
`update_trainjob_status`, each the only process of a PyTorchJob's pod, from the trainer-pytorch image. The
scripts (tests/progress_clients, mounted from a ConfigMap) import nothing of kubetrain: their reports reach
the operator (installed by `kubectl apply -k manifests/base`) only through the env and the projected token
it injected, over its Service's DNS name, TLS verified with the CA it published. `kubectl get pytorchjobs`
shows their Progress while they run, and the job ends Succeeded with the final 100."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubetrain.testing.node_plane import NodePlane

from .examples import IMAGE, apply, job_state, wait_finished
from .progress import Row, distinct, parse_table, printer_columns

pytestmark = pytest.mark.node

CLIENTS = Path(__file__).resolve().parents[1] / "progress_clients"
MOUNT = "/clients"
STEPS, STEP_SECONDS = 300, 0.08
"""At least 24 s of training on any machine (the script sleeps out each step to 0.08 s): past two of the
operator's status writes (one per job per 10 s), so that `kubectl get` shows progress while it trains."""
MIDWAY = 15.0
"""Seconds the SDK's script waits after its 50 % report: past the operator's next status write."""
Obj = dict[str, Any]


def clients() -> Obj:
    data = {name: (CLIENTS / name).read_text() for name in ("hf_trainer.py", "kubeflow_sdk.py")}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "progress-clients"}, "data": data}


def client_job(name: str, argv: list[str], env: dict[str, str]) -> Obj:
    """A PyTorchJob of one Master running `python <argv>` (a script from the ConfigMap) in the trainer image,
    with `env` and nothing else of ours: the operator adds the reporting env and volume, as to every pod."""
    container = {
        "name": "pytorch", "image": IMAGE, "imagePullPolicy": "IfNotPresent",
        "command": ["python", *argv],
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "volumeMounts": [
            {"name": "clients", "mountPath": MOUNT, "readOnly": True}, {"name": "out", "mountPath": "/out"},
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "2Gi"}},
    }  # fmt: skip
    volumes = [
        {"name": "clients", "configMap": {"name": "progress-clients"}},
        {"name": "out", "emptyDir": {}},
    ]
    master = {
        "replicas": 1,
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [container], "volumes": volumes}},
    }
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name},
        "spec": {"runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": {"Master": master}},
    }  # fmt: skip


def run(plane: NodePlane, namespace: str, job: Obj) -> tuple[list[Row], str, Obj]:
    """Applies `job`, samples `kubectl get pytorchjobs` until it finished; the rows seen, the pod's log and
    `status.trainerStatus`. The job must have Succeeded."""
    apply(plane, namespace, [clients(), job])
    with printer_columns(plane, namespace, job) as rows:
        verdict = wait_finished(plane, namespace, job, 600.0)
    log = plane.kubectl(
        "logs", f"{job['metadata']['name']}-master-0", namespace=namespace, check=False
    ).stdout
    assert verdict == "Succeeded", log[-4000:]
    shown = distinct(rows)
    print(f"kubectl get, {len(rows)} samples: {shown}")
    return shown, log, job_state(plane, namespace, job)["status"].get("trainerStatus") or {}


def assert_shown(plane: NodePlane, namespace: str, job: Obj, shown: list[Row]) -> None:
    """`kubectl get` showed a Progress between 0 and 100 while the job ran, never a finished job without its
    final 100, and shows Succeeded, 100 and an ETA of 0 now."""
    midway = [r for r in shown if r.progress is not None and 0 < r.progress < 100]
    assert midway, f"no sample showed a Progress between 0 and 100 while the job ran: {shown}"
    assert all(r.state == "Running" for r in midway), shown
    assert all(r.progress == 100 for r in shown if r.state == "Succeeded"), shown
    table = plane.kubectl("get", "pytorchjobs", namespace=namespace).stdout
    assert parse_table(table, job["metadata"]["name"]) == Row("Succeeded", 100, 0), table


def test_a_transformers_trainer_fills_the_trainer_status(
    node_plane: NodePlane, namespace_on_node: str, trainer_images: Callable[..., None]
) -> None:
    trainer_images("pytorch")
    job = client_job(
        "hf",
        [f"{MOUNT}/hf_trainer.py", "/out"],
        {"STEPS": str(STEPS), "STEP_SECONDS": str(STEP_SECONDS), "LOGGING_STEPS": "10"},
    )
    shown, log, trainer = run(node_plane, namespace_on_node, job)
    assert "hf-trainer: report_to=['kubeflow']" in log, log[-4000:]
    assert any(r.eta is not None and r.eta > 0 for r in shown), f"no ETA shown while it ran: {shown}"
    assert_shown(node_plane, namespace_on_node, job, shown)
    assert trainer.get("progressPercentage") == 100, trainer
    assert {"train_loss", "train_runtime"} <= {m["name"] for m in trainer.get("metrics", [])}, trainer


def test_the_kubeflow_sdk_fills_the_trainer_status(
    node_plane: NodePlane, namespace_on_node: str, trainer_images: Callable[..., None]
) -> None:
    trainer_images("pytorch")
    job = client_job("sdk", [f"{MOUNT}/kubeflow_sdk.py"], {"MIDWAY_SECONDS": f"{MIDWAY:g}"})
    shown, log, trainer = run(node_plane, namespace_on_node, job)
    assert log.count("kubeflow-sdk: sent=True") == 2, log[-4000:]  # True: the SDK saw 200 both times
    assert_shown(node_plane, namespace_on_node, job, shown)
    assert trainer.get("estimatedRemainingSeconds") == 0, trainer
    assert trainer.get("metrics") == [
        {"name": "loss", "value": "0.125"},
        {"name": "accuracy", "value": "0.97"},
        {"name": "epoch", "value": "3"},
    ], trainer
